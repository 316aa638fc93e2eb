"""The sampler, and the pure-Python path it takes for a list of logits.

`Sampler` owns the sampling settings (temperature, top-k, top-p, min-p) and the
random number generators that draw from them. It never sees the model: it gets
the logits and returns a token id, so the same seed and the same logits always
give the same token.

The order of operations is the usual one: softmax(logits / temperature), keep
the top-k tokens, keep the smallest top-p nucleus of what is left, keep the
tokens whose probability is at least min-p times the top one, renormalise, draw.
Temperature 0 means greedy (argmax, ties to the lowest id). Ties are broken the
same way everywhere: among equal logits (or equal weights) the lowest id wins.

Three kinds of logits, told apart by `array_kind` (common.py) from the type's
module alone, so that this module imports nothing but the standard library:

- a Python list (or any sequence): the path in this module, for the lab models'
  vocabularies of a few hundred. It stays in C-level builtins (sum, max, sorted,
  map, accumulate, bisect). Its draws come from a `random.Random(seed)`, and a
  list and a seed give the same tokens they always have.
- a numpy array: numpy_backend.py, drawing from a numpy Generator seeded from
  `seed`.
- a torch tensor: torch_backend.py, drawing from a torch.Generator on the
  tensor's device seeded from `seed`.

The array paths never copy the logits to a Python list (a real vocabulary is
49,152 to 151,936 entries) and never sort the vocabulary; numpy and torch are
imported inside them, the first time an array of theirs arrives.

`distribution` reports exactly what `sample` draws from (the trace shows it),
and the module functions `softmax`, `top_tokens` and `explain` serve the trace's
view of the raw model output.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate
from math import exp, inf, isfinite
from typing import TYPE_CHECKING, Any, overload

from decodeloop.sampling import numpy_backend, torch_backend
from decodeloop.sampling.common import TOP_P_SLACK, SamplerParams, array_kind

if TYPE_CHECKING:
    import numpy
    import torch

# Exponentiating logits without first subtracting their max saves a pass; it is
# trusted only when the total lands in this range (else we redo it shifted).
_SAFE_TOTAL_LOW = 1e-150


class Sampler:
    """Temperature / top-k / top-p / min-p sampling with its own seeded generators."""

    def __init__(
        self,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
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
        if not (0.0 <= min_p <= 1.0):
            raise ValueError(f"min_p must be in [0, 1] (0 = off), got {min_p!r}")
        self.params = SamplerParams(float(temperature), top_k, float(top_p), float(min_p))
        self.seed = seed
        self.rng = random.Random(seed)  # lists
        self._np_rng: numpy.random.Generator | None = None  # numpy arrays: a numpy Generator, made on first use
        self._torch_rngs: dict[torch.device, torch.Generator] = {}  # torch tensors: one torch.Generator per device
        # what the last draw kept, for `explain` of the same logits (the trace asks right after the
        # draw): the logits object, and the kept tokens' weights as the kernel had them (no copy)
        self._drawn_from: Any = None
        self._drawn: Any = None

    @property
    def temperature(self) -> float:
        return self.params.temperature

    @property
    def top_k(self) -> int:
        return self.params.top_k

    @property
    def top_p(self) -> float:
        return self.params.top_p

    @property
    def min_p(self) -> float:
        return self.params.min_p

    def __repr__(self) -> str:
        return (
            f"Sampler(temperature={self.temperature}, top_k={self.top_k}, "
            f"top_p={self.top_p}, min_p={self.min_p}, seed={self.seed!r})"
        )

    def sample(self, logits: Sequence[float]) -> int:
        """Draw one token id from the logits (a list, a numpy array or a torch tensor)."""
        if type(logits) is not list:  # a list (the lab's models) skips the dispatch: it runs per token
            kind = array_kind(logits)
            if kind != "list":
                if kind == "numpy":
                    token, self._drawn = numpy_backend.sample(self.params, logits, self._numpy_random)
                else:
                    token, self._drawn = torch_backend.sample(self.params, logits, self._torch_generator)
                self._drawn_from = logits
                return token
            logits = list(logits)  # explain of the same sequence recomputes: it is another object
        if self.params.greedy:
            return _argmax(logits)
        self._drawn_from = logits
        if self.params.unfiltered(len(logits)):
            # Fast path: no sort, just cumulative weights and one bisect.
            cum = _cumulative_weights(logits, self.params.inv_t)
            self._drawn = (None, cum)
            return _draw(cum, self.rng.random())
        ids, _, cum = self._kept(logits)
        self._drawn = (ids, cum)
        return ids[_draw(cum, self.rng.random())]

    def distribution(self, logits: Sequence[float]) -> list[tuple[int, float]]:
        """The exact distribution `sample` draws from: (token, prob), most probable first.

        Tokens with zero probability are left out; ties are listed lowest id first.
        For arrays it is computed by the array kernels, so it is what `sample` draws
        from for that array (with the whole vocabulary when nothing filters it).
        """
        kind = array_kind(logits)
        if kind == "numpy":
            return numpy_backend.distribution(self.params, logits)
        if kind == "torch":
            return torch_backend.distribution(self.params, logits)
        if type(logits) is not list:
            logits = list(logits)
        if self.params.greedy:
            return [(_argmax(logits), 1.0)]
        if self.params.unfiltered(len(logits)):
            weights, total = _weights(logits, self.params.inv_t)
            ids: Sequence[int] = range(len(weights))
        else:
            ids, weights, cum = self._kept(logits)
            total = cum[-1]
        pairs = [(i, w / total) for i, w in zip(ids, weights) if w > 0.0]
        pairs.sort(key=lambda pair: (-pair[1], pair[0]))
        return pairs

    def settings(self) -> dict[str, float | int]:
        """What shapes the distribution `explain` reports, as the trace's token events carry it.

        Always the temperature (0: greedy); top-k, top-p and min-p only when they are on and
        the sampler samples (greedy takes the most likely token whatever they are).
        """
        out: dict[str, float | int] = {"temperature": self.temperature}
        if not self.params.greedy:
            if self.top_k:
                out["top_k"] = self.top_k
            if self.top_p < 1.0:
                out["top_p"] = self.top_p
            if self.min_p > 0.0:
                out["min_p"] = self.min_p
        return out

    def explain(self, logits: Sequence[float], token: int, n: int = 3) -> tuple[float, list[tuple[int, float]]]:
        """`token`'s probability and the n most probable tokens in the distribution `sample` draws from.

        That is softmax(logits / T), cut by top-k, top-p and min-p and renormalised over the
        tokens kept (a token cut has probability 0 and is not listed). Greedy sampling draws
        from no distribution (the most likely token has probability 1), so at T = 0 this is the
        model's own distribution, softmax(logits) at temperature 1, uncut. Same cost class as
        `sample`: arrays are never copied to Python nor sorted; without a filter it is one exp
        over the vocabulary and a partial selection.
        """
        if self.params.greedy:
            return explain(logits, token, n)
        # the logits just drawn from: what the draw kept serves again (taken once, then let go)
        drawn = self._drawn if logits is self._drawn_from else None
        self._drawn_from = self._drawn = None
        kind = array_kind(logits)
        if kind == "numpy":
            ids, probs, prob = numpy_backend.sampled_explain(
                self.params, numpy_backend.prepare(logits), token, n, drawn=drawn
            )
            return prob, list(zip(ids, probs))
        if kind == "torch":
            ids, probs, prob = torch_backend.sampled_explain(self.params, logits, token, n, drawn)
            return prob, list(zip(ids, probs))
        if type(logits) is not list:
            logits = list(logits)
        if drawn is None:
            if self.params.unfiltered(len(logits)):
                weights, total = _weights(logits, self.params.inv_t)
                top = [(i, weights[i] / total) for i in _top_ids(logits, n)] if n > 0 else []
                return weights[token] / total, top
            drawn = self._kept(logits)[::2]
        ids, cum = drawn  # cumulative weights: of every token in id order (ids None), or of the kept ones
        total = cum[-1]
        if ids is None:
            top = [(i, _weight(cum, i) / total) for i in _top_ids(logits, n)] if n > 0 else []
            return _weight(cum, token) / total, top
        top = [(i, _weight(cum, j) / total) for j, i in enumerate(ids[: max(n, 0)])]  # heaviest first
        try:
            prob = _weight(cum, ids.index(token)) / total
        except ValueError:  # a token the filters cut
            prob = 0.0
        return prob, [(i, p) for i, p in top if p > 0.0]

    def _kept(self, logits: list[float]) -> tuple[list[int], list[float], list[float]]:
        """Ids, weights and cumulative weights of the tokens top-k, top-p and min-p keep."""
        ids, weights, cum = self._kept_top(logits)
        if self.min_p > 0.0:
            # Heaviest first, so the tokens min-p keeps are a prefix (never empty: min_p <= 1).
            keep = bisect_right([-w for w in weights], -self.min_p * weights[0])
            ids, weights, cum = ids[:keep], weights[:keep], cum[:keep]
        return ids, weights, cum

    def _kept_top(self, logits: list[float]) -> tuple[list[int], list[float], list[float]]:
        """Ids, weights and cumulative weights of the tokens top-k and top-p keep, heaviest first."""
        vocab = len(logits)
        if self.top_k and self.top_k < vocab:
            ids = _top_ids(logits, self.top_k)
            # The first id is the max, so these weights never overflow.
            top, inv_t = logits[ids[0]], self.params.inv_t
            weights = [exp((logits[i] - top) * inv_t) for i in ids]
            if self.top_p >= 1.0:
                return ids, weights, list(accumulate(weights))
            # Logit order is weight order, which is what the nucleus cut needs.
            return _nucleus(ids, weights, sum(weights), self.top_p)
        weights, total = _weights(logits, self.params.inv_t)
        if self.top_p >= 1.0:
            # min-p alone: only tokens at least min_p times the heaviest can stay.
            floor = self.min_p * max(weights)
            ids = [i for i, w in enumerate(weights) if w >= floor]
            ids.sort(key=weights.__getitem__, reverse=True)
            kept = [weights[i] for i in ids]
            return ids, kept, list(accumulate(kept))
        # Only tokens at least (1 - p) * total / vocab heavy can be in the nucleus:
        # all lighter ones together weigh less than (1 - p) * total.
        floor = (1.0 - self.top_p) * total / vocab
        ids = [i for i, w in enumerate(weights) if w >= floor]
        ids.sort(key=weights.__getitem__, reverse=True)  # stable: ties stay lowest id first
        return _nucleus(ids, [weights[i] for i in ids], total, self.top_p)

    # --- the generators of the array paths ------------------------------------

    def _numpy_random(self) -> float:
        """A uniform draw in [0, 1) from this sampler's numpy Generator."""
        if self._np_rng is None:
            import numpy

            self._np_rng = numpy.random.default_rng(_seed_int(self.seed))
        return float(self._np_rng.random())

    def _torch_generator(self, device: torch.device) -> torch.Generator:
        """This sampler's torch.Generator on `device`, seeded from `seed` when first used."""
        generator = self._torch_rngs.get(device)
        if generator is None:
            import torch

            generator = torch.Generator(device=device)
            if self.seed is None:
                generator.seed()
            else:
                generator.manual_seed(_seed_int(self.seed))
            self._torch_rngs[device] = generator
        return generator


def _weight(cum: list[float], i: int) -> float:
    """The i-th weight of a cumulative sum."""
    return cum[i] - cum[i - 1] if i else cum[0]


def _seed_int(seed) -> int | None:
    """The seed as an int numpy and torch accept (0 <= seed < 2**64); other seeds are hashed by random.Random."""
    if seed is None:
        return None
    if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**64:
        return seed
    return random.Random(seed).getrandbits(64)


def _nucleus(
    ids: list[int], weights: list[float], total: float, top_p: float
) -> tuple[list[int], list[float], list[float]]:
    """Cut `ids` (sorted by weight, heaviest first) to the smallest prefix with mass >= top_p."""
    cum = list(accumulate(weights))
    keep = bisect_left(cum, top_p * total * (1.0 - TOP_P_SLACK)) + 1
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
    """Probabilities at temperature 1, computed stably (max subtracted first).

    A list for a list; for a numpy array or a torch tensor, an array of the same
    kind (float32 or float64, on the tensor's device).
    """
    kind = array_kind(logits)
    if kind == "numpy":
        return numpy_backend.softmax(logits)
    if kind == "torch":
        return torch_backend.softmax(logits)
    if type(logits) is not list:
        logits = list(logits)
    top = _checked_max(logits)
    weights = [exp(x - top) for x in logits]
    total = sum(weights)
    return [w / total for w in weights]


def top_tokens(logits: Sequence[float], n: int) -> list[tuple[int, float]]:
    """The n most probable tokens at temperature 1 with their probabilities, most probable first."""
    if n <= 0:
        return []
    kind = array_kind(logits)
    if kind != "list":
        ids, probs, _ = _array_explain(kind, logits, None, n)
        return list(zip(ids, probs))
    if type(logits) is not list:
        logits = list(logits)
    shift, total = _exp_total(logits)
    return [(i, exp(logits[i] - shift) / total) for i in _top_ids(logits, n)]


def explain(logits: Sequence[float], token: int, n: int = 3) -> tuple[float, list[tuple[int, float]]]:
    """`token`'s probability at temperature 1 and the n most probable tokens: what a trace shows.

    Python ints and floats out for every kind of logits; arrays are searched by
    partial selection, never sorted.
    """
    if type(logits) is not list:
        kind = array_kind(logits)
        if kind != "list":
            ids, probs, prob = _array_explain(kind, logits, token, n)
            return prob, list(zip(ids, probs))
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


@overload
def _array_explain(kind: str, logits: Any, token: int, n: int) -> tuple[list[int], list[float], float]: ...
@overload
def _array_explain(kind: str, logits: Any, token: None, n: int) -> tuple[list[int], list[float], None]: ...
def _array_explain(kind: str, logits: Any, token: int | None, n: int) -> tuple[list[int], list[float], float | None]:
    if kind == "numpy":
        return numpy_backend.explain(numpy_backend.prepare(logits), token, n)
    return torch_backend.explain(logits, token, n)
