"""Turning next-token logits into one token id.

Owns the sampling settings (temperature, top-k, top-p) and the random number
generator that draws from them. It never sees the model: it gets a list of
logits and returns a token id, so the same seed and the same logits always give
the same token.

The order of operations is the usual one: softmax(logits / temperature), keep
the top-k tokens, keep the smallest top-p nucleus of what is left, renormalise,
draw. Temperature 0 means greedy (argmax, ties to the lowest id).

`distribution` reports exactly what `sample` draws from (the trace shows it),
and the module functions `softmax` and `top_tokens` serve the trace's view of
the raw model output.

Everything here runs once per token on a vocabulary of a few hundred, so the
code stays in C-level builtins (sum, max, sorted, map, accumulate, bisect) and
avoids per-token Python loops over the whole vocabulary where it can.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from itertools import accumulate
from math import exp, inf, isfinite
from typing import Sequence

# A set whose mass is this close (relatively) to top_p counts as reaching it, so
# float rounding in the cumulative sum never adds a token at an exact boundary.
_TOP_P_SLACK = 1e-12

# Exponentiating logits without first subtracting their max saves a pass; it is
# trusted only when the total lands in this range (else we redo it shifted).
_SAFE_TOTAL_LOW = 1e-150


class Sampler:
    """Temperature / top-k / top-p sampling with its own seeded generator."""

    def __init__(
        self,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> None:
        if not (temperature >= 0.0 and temperature < inf):
            raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature!r}")
        if temperature > 0.0 and not isfinite(1.0 / temperature):
            raise ValueError(f"temperature {temperature!r} is too small to divide by; use 0 for greedy")
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise ValueError(f"top_k must be an int >= 0 (0 = off), got {top_k!r}")
        if top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {top_k!r}")
        if not (0.0 < top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1] (1 = off), got {top_p!r}")
        self.temperature = float(temperature)
        self.top_k = top_k
        self.top_p = float(top_p)
        self.seed = seed
        self.rng = random.Random(seed)
        self._greedy = temperature == 0.0
        self._inv_t = 0.0 if self._greedy else 1.0 / temperature

    def __repr__(self) -> str:
        return (
            f"Sampler(temperature={self.temperature}, top_k={self.top_k}, "
            f"top_p={self.top_p}, seed={self.seed!r})"
        )

    def sample(self, logits: Sequence[float]) -> int:
        """Draw one token id from the logits."""
        if type(logits) is not list:
            logits = list(logits)
        if self._greedy:
            return _argmax(logits)
        if self._unfiltered(len(logits)):
            # Fast path: no sort, just cumulative weights and one bisect.
            return _draw(_cumulative_weights(logits, self._inv_t), self.rng.random())
        ids, _, cum = self._kept(logits)
        return ids[_draw(cum, self.rng.random())]

    def distribution(self, logits: Sequence[float]) -> list[tuple[int, float]]:
        """The exact distribution `sample` draws from: (token, prob), most probable first.

        Tokens with zero probability are left out; ties are listed lowest id first.
        """
        if type(logits) is not list:
            logits = list(logits)
        if self._greedy:
            return [(_argmax(logits), 1.0)]
        if self._unfiltered(len(logits)):
            weights, total = _weights(logits, self._inv_t)
            ids = range(len(weights))
        else:
            ids, weights, cum = self._kept(logits)
            total = cum[-1]
        pairs = [(i, w / total) for i, w in zip(ids, weights) if w > 0.0]
        pairs.sort(key=lambda pair: (-pair[1], pair[0]))
        return pairs

    def _unfiltered(self, vocab: int) -> bool:
        return (self.top_k == 0 or self.top_k >= vocab) and self.top_p >= 1.0

    def _kept(self, logits: list[float]) -> tuple[list[int], list[float], list[float]]:
        """Ids, weights and cumulative weights of the tokens top-k and top-p keep."""
        vocab = len(logits)
        if self.top_k and self.top_k < vocab:
            ids = _top_ids(logits, self.top_k)
            # The first id is the max, so these weights never overflow.
            top, inv_t = logits[ids[0]], self._inv_t
            weights = [exp((logits[i] - top) * inv_t) for i in ids]
            if self.top_p >= 1.0:
                return ids, weights, list(accumulate(weights))
            # Logit order is weight order, which is what the nucleus cut needs.
            return _nucleus(ids, weights, sum(weights), self.top_p)
        weights, total = _weights(logits, self._inv_t)
        # Only tokens at least (1 - p) * total / vocab heavy can be in the nucleus:
        # all lighter ones together weigh less than (1 - p) * total.
        floor = (1.0 - self.top_p) * total / vocab
        ids = [i for i, w in enumerate(weights) if w >= floor]
        ids.sort(key=weights.__getitem__, reverse=True)  # stable: ties stay lowest id first
        return _nucleus(ids, [weights[i] for i in ids], total, self.top_p)


def _nucleus(
    ids: list[int], weights: list[float], total: float, top_p: float
) -> tuple[list[int], list[float], list[float]]:
    """Cut `ids` (sorted by weight, heaviest first) to the smallest prefix with mass >= top_p."""
    cum = list(accumulate(weights))
    keep = bisect_left(cum, top_p * total * (1.0 - _TOP_P_SLACK)) + 1
    return ids[:keep], weights[:keep], cum[:keep]


def _draw(cum: list[float], u: float) -> int:
    """Index into the cumulative weights for a uniform u in [0, 1)."""
    j = bisect_right(cum, u * cum[-1])
    if j == len(cum):
        # u * total rounded up to total: take the last token that has weight.
        j -= 1
        while j and cum[j] == cum[j - 1]:
            j -= 1
    return j


def _cumulative_weights(logits: list[float], inv_t: float) -> list[float]:
    """Running totals of exp(logit / T): what `_draw` needs, built without a separate weights list."""
    try:
        if inv_t == 1.0:
            cum = list(accumulate(map(exp, logits)))
        else:
            cum = list(accumulate([exp(x * inv_t) for x in logits]))
        if cum and _SAFE_TOTAL_LOW < cum[-1] < inf:
            return cum
    except OverflowError:
        pass
    weights, _ = _weights(logits, inv_t)
    return list(accumulate(weights))


def _weights(logits: list[float], inv_t: float) -> tuple[list[float], float]:
    """Unnormalised softmax weights exp(logit / T) and their total."""
    try:
        if inv_t == 1.0:
            weights = list(map(exp, logits))
        else:
            weights = [exp(x * inv_t) for x in logits]
        total = sum(weights)
        # NaN, +inf and all -inf all land outside this range, as does under/overflow.
        if _SAFE_TOTAL_LOW < total < inf:
            return weights, total
    except OverflowError:
        pass
    top = _checked_max(logits)
    weights = [exp((x - top) * inv_t) for x in logits]
    return weights, sum(weights)


def _argmax(logits: list[float]) -> int:
    """Greedy choice: the highest logit, ties to the lowest id."""
    return logits.index(_checked_max(logits))


def _checked_max(logits: list[float]) -> float:
    """max(logits), raising ValueError if no token could ever be chosen."""
    # One C pass: NaN or inf anywhere makes the sum non-finite.
    total = sum(logits)
    if total - total == 0.0:
        return max(logits)
    if not logits:
        raise ValueError("logits are empty")
    if any(x != x for x in logits):
        raise ValueError(f"logits contain NaN (first at token {next(i for i, x in enumerate(logits) if x != x)})")
    top = max(logits)
    if top == inf:
        raise ValueError(f"logits contain +inf (token {logits.index(top)}); use a large finite value to force a token")
    if top == -inf:
        raise ValueError("all logits are -inf: every token is masked, nothing can be sampled")
    return top  # finite values whose sum overflowed, or some -inf: fine


def _top_ids(logits: list[float], k: int) -> list[int]:
    """Ids of the k highest logits, highest first, ties lowest id first."""
    total = sum(logits)
    if total - total != 0.0:
        _checked_max(logits)  # raises on NaN, which would silently scramble the sort
    # One C-level sort beats heapq.nlargest's Python loop at this vocabulary size,
    # and being stable it keeps tied ids in increasing order.
    return sorted(range(len(logits)), key=logits.__getitem__, reverse=True)[:k]


def softmax(logits: Sequence[float]) -> list[float]:
    """Probabilities at temperature 1, computed stably (max subtracted first)."""
    if type(logits) is not list:
        logits = list(logits)
    top = _checked_max(logits)
    weights = [exp(x - top) for x in logits]
    total = sum(weights)
    return [w / total for w in weights]


def top_tokens(logits: Sequence[float], n: int) -> list[tuple[int, float]]:
    """The n most probable tokens at temperature 1 with their probabilities, most probable first."""
    if type(logits) is not list:
        logits = list(logits)
    if n <= 0:
        return []
    shift, total = _exp_total(logits)
    return [(i, exp(logits[i] - shift) / total) for i in _top_ids(logits, n)]


def explain(logits: Sequence[float], token: int, n: int = 3) -> tuple[float, list[tuple[int, float]]]:
    """`token`'s probability at temperature 1 and the n most probable tokens: what a trace shows."""
    if type(logits) is not list:
        logits = list(logits)
    shift, total = _exp_total(logits)
    top = [(i, exp(logits[i] - shift) / total) for i in _top_ids(logits, n)]
    return exp(logits[token] - shift) / total, top


def _exp_total(logits: list[float]) -> tuple[float, float]:
    """(shift, sum of exp(x - shift)): the softmax denominator in one pass when safe."""
    try:
        total = sum(map(exp, logits))
        if _SAFE_TOTAL_LOW < total < inf:
            return 0.0, total
    except OverflowError:
        pass
    shift = _checked_max(logits)
    return shift, sum([exp(x - shift) for x in logits])
