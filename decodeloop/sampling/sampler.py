"""Turning next-token logits into one token id.

Owns the sampling settings (temperature, top-k, top-p, min-p) and the random
number generators that draw from them. It never sees the model: it gets the
logits and returns a token id, so the same seed and the same logits always give
the same token.

The order of operations is the usual one: softmax(logits / temperature), keep
the top-k tokens, keep the smallest top-p nucleus of what is left, keep the
tokens whose probability is at least min-p times the top one, renormalise, draw.
Temperature 0 means greedy (argmax, ties to the lowest id). Ties are broken the
same way everywhere: among equal logits (or equal weights) the lowest id wins.

Three kinds of logits, told apart by `type(logits).__module__`, so that this
module imports nothing but the standard library (numpy and torch are imported
lazily, the first time an array of theirs arrives):

- a Python list (or any sequence): the pure-Python path, for the lab models'
  vocabularies of a few hundred. It stays in C-level builtins (sum, max, sorted,
  map, accumulate, bisect). Its draws come from a `random.Random(seed)`, and a
  list and a seed give the same tokens they always have.
- a numpy array (1-D, any float dtype): vectorised, drawing from a numpy
  Generator seeded from `seed`. float32/float16 are worked in float32, float64 in
  float64.
- a torch tensor (1-D, any float dtype, any device): drawn with a torch.Generator
  on the tensor's device seeded from `seed` (one per device, made on first use),
  and only one scalar `.item()` comes back to Python. On a GPU every step runs on
  the device with fixed shapes (top-k and top-p through `torch.topk`, masks and
  cumulative sums over the vocabulary), so the `.item()` is the only sync. On the
  CPU, where torch's comparisons, argmax and topk are several times slower than
  numpy's, the tensor is read through a zero-copy numpy view and sampled by the
  numpy kernels (with torch's exp, faster than numpy's), still drawing from the
  tensor's torch.Generator.

Real vocabularies are 49,152 to 151,936 entries, so no path copies the logits to
a Python list, and none sorts the vocabulary. Top-k and the trace's top tokens
use partial selection: the vocabulary is viewed as 64 rows, the maximum of each
column found in one vectorised pass, and only the columns that can hold the top
k are searched. Top-p prunes before sorting, as the list path does: only tokens
with weight >= (1 - p) * total / vocab can be in the nucleus (all lighter ones
together weigh less than (1 - p) * total); and when the heaviest column maxima
(the vocabulary viewed as 16 rows) already weigh p * total, nothing lighter than
them is needed either, which cuts the candidates to about the nucleus. Only the
candidates are sorted, and of those only as many as reach p (np.partition first).
The cost that stays is one exp over the vocabulary, for the softmax total.

`distribution` reports exactly what `sample` draws from (the trace shows it),
and the module functions `softmax`, `top_tokens` and `explain` serve the trace's
view of the raw model output.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate
from math import exp, inf, isfinite, log
from typing import Any

# A set whose mass is this close (relatively) to top_p counts as reaching it, so
# float rounding in the cumulative sum never adds a token at an exact boundary.
_TOP_P_SLACK = 1e-12

# Exponentiating logits without first subtracting their max saves a pass; it is
# trusted only when the total lands in this range (else we redo it shifted).
_SAFE_TOTAL_LOW = 1e-150

# The same for numpy arrays, per item size: float32 weights must stay normal
# numbers for every token that matters and their sum must not overflow.
_ARRAY_SAFE_TOTAL = {4: (1e-15, 1e30), 8: (1e-150, 1e300)}

# Rows the vocabulary is viewed as for partial selection (a column's maximum is
# one vectorised pass over the rows), and the vocabulary size from which it pays.
_ROWS = 64
_MIN_GROUPED = 8192
# Rows for the top-p candidate bound (more columns: a tighter bound, a longer sort).
_NUCLEUS_ROWS = 16

# torch tensors on the CPU are sampled by the numpy kernels on a zero-copy view
# (faster there); the tests switch this off to run the device kernels on the CPU.
_TORCH_CPU_VIA_NUMPY = True


def array_kind(logits: Any) -> str:
    """'numpy', 'torch' or 'list' (any other sequence), from the type's module alone."""
    module = type(logits).__module__
    if module.startswith("numpy"):
        return "numpy"
    if module.startswith("torch"):
        return "torch"
    return "list"


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
        self.temperature = float(temperature)
        self.top_k = top_k
        self.top_p = float(top_p)
        self.min_p = float(min_p)
        self.seed = seed
        self.rng = random.Random(seed)  # lists
        self._np_rng = None  # numpy arrays: a numpy Generator, made on first use
        self._torch_rngs: dict = {}  # torch tensors: one torch.Generator per device
        self._greedy = temperature == 0.0
        self._inv_t = 0.0 if self._greedy else 1.0 / temperature
        # what the last draw kept, for `explain` of the same logits (the trace asks right after the
        # draw): the logits object, and the kept tokens' weights as the kernel had them (no copy)
        self._drawn_from: Any = None
        self._drawn: Any = None

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
                self._drawn = None
                token = _np_sample(self, logits, self._numpy_random) if kind == "numpy" else _torch_sample(self, logits)
                self._drawn_from = logits
                return token
            logits = list(logits)  # explain of the same sequence recomputes: it is another object
        if self._greedy:
            return _argmax(logits)
        self._drawn_from = logits
        if self._unfiltered(len(logits)):
            # Fast path: no sort, just cumulative weights and one bisect.
            cum = _cumulative_weights(logits, self._inv_t)
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
            return _np_distribution(self, logits)
        if kind == "torch":
            return _torch_distribution(self, logits)
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

    def settings(self) -> dict[str, float | int]:
        """What shapes the distribution `explain` reports, as the trace's token events carry it.

        Always the temperature (0: greedy); top-k, top-p and min-p only when they are on and
        the sampler samples (greedy takes the most likely token whatever they are).
        """
        out: dict[str, float | int] = {"temperature": self.temperature}
        if not self._greedy:
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
        if self._greedy:
            return explain(logits, token, n)
        # the logits just drawn from: what the draw kept serves again (taken once, then let go)
        drawn = self._drawn if logits is self._drawn_from else None
        self._drawn_from = self._drawn = None
        kind = array_kind(logits)
        if kind == "numpy":
            ids, probs, prob = _np_sampled_explain(self, _np_prepare(logits), token, n, drawn=drawn)
            return prob, list(zip(ids, probs))
        if kind == "torch":
            ids, probs, prob = _torch_sampled_explain(self, logits, token, n, drawn)
            return prob, list(zip(ids, probs))
        if type(logits) is not list:
            logits = list(logits)
        if drawn is None:
            if self._unfiltered(len(logits)):
                weights, total = _weights(logits, self._inv_t)
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

    def _unfiltered(self, vocab: int) -> bool:
        return (self.top_k == 0 or self.top_k >= vocab) and self.top_p >= 1.0 and self.min_p <= 0.0

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
            top, inv_t = logits[ids[0]], self._inv_t
            weights = [exp((logits[i] - top) * inv_t) for i in ids]
            if self.top_p >= 1.0:
                return ids, weights, list(accumulate(weights))
            # Logit order is weight order, which is what the nucleus cut needs.
            return _nucleus(ids, weights, sum(weights), self.top_p)
        weights, total = _weights(logits, self._inv_t)
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

    def _torch_generator(self, device):
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
    """Probabilities at temperature 1, computed stably (max subtracted first).

    A list for a list; for a numpy array or a torch tensor, an array of the same
    kind (float32 or float64, on the tensor's device).
    """
    kind = array_kind(logits)
    if kind == "numpy":
        return _np_softmax(logits)
    if kind == "torch":
        return _torch_softmax(logits)
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


def _array_explain(kind: str, logits, token: int | None, n: int) -> tuple[list[int], list[float], float | None]:
    if kind == "numpy":
        return _np_explain(_np_prepare(logits), token, n)
    x = _torch_prepare(logits)
    if x.device.type == "cpu" and _TORCH_CPU_VIA_NUMPY:
        return _np_explain(_torch_numpy_view(x), token, n, _torch_exp_scaled(x))
    return _torch_explain(x, token, n)


# --- numpy kernels -------------------------------------------------------------
#
# Each takes a 1-D float32 or float64 array (see _np_prepare) and never writes to
# it; temporaries are fresh arrays, changed in place.


def _np_prepare(x):
    """The logits as a 1-D float32 or float64 array (a view when they already are)."""
    import numpy as np

    if x.ndim != 1:
        raise ValueError(f"logits must be 1-D (one row of the vocabulary), got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError("logits are empty")
    dtype = x.dtype
    if dtype == np.float32 or dtype == np.float64:
        return x
    if dtype.kind == "f":
        return x.astype(np.float32 if dtype.itemsize < 4 else np.float64)
    if dtype.kind in "iub":
        return x.astype(np.float64)
    raise ValueError(f"logits must be real numbers, got dtype {dtype}")


def _np_invalid(x) -> None:
    """Raise the ValueError that says why no token can be chosen (returns if nothing is wrong)."""
    import numpy as np

    nan = np.isnan(x)
    if nan.any():
        raise ValueError(f"logits contain NaN (first at token {int(nan.argmax())})")
    plus = x == np.inf
    if plus.any():
        raise ValueError(f"logits contain +inf (token {int(plus.argmax())}); use a large finite value to force a token")
    if not (x > -np.inf).any():
        raise ValueError("all logits are -inf: every token is masked, nothing can be sampled")


def _np_max(x) -> float:
    """max(x), raising ValueError on NaN, +inf or all -inf."""
    top = float(x.max())  # NaN propagates
    if not isfinite(top):
        _np_invalid(x)
    return top


def _np_argmax(x) -> int:
    """Greedy: the highest logit, ties to the lowest id (np.argmax returns the first)."""
    i = int(x.argmax())
    if not isfinite(x[i]):  # argmax stops at the first NaN, finds +inf, or everything is -inf
        _np_invalid(x)
    return i


def _np_exp_scaled(x, inv_t: float, shift: float):
    """exp((x - shift) / T) in a fresh array of x's dtype."""
    import numpy as np

    if shift:
        w = np.subtract(x, shift)
        if inv_t != 1.0:
            w *= inv_t
    elif inv_t != 1.0:
        w = np.multiply(x, inv_t)
    else:
        return np.exp(x)
    return np.exp(w, out=w)


def _np_sum(w) -> float:
    """sum(w): over column sums (the rows added elementwise) for long arrays, faster than w.sum()."""
    n = w.shape[0]
    if n < _MIN_GROUPED:
        return float(w.sum())
    cols = n // _ROWS
    total = float(w[: _ROWS * cols].reshape(_ROWS, cols).sum(axis=0).sum())
    return total + float(w[_ROWS * cols :].sum()) if n > _ROWS * cols else total


def _np_weights(x, inv_t: float, exp_scaled=_np_exp_scaled):
    """exp(x / T) in a fresh array of x's dtype and its total, shifted by the max only when needed."""
    w = exp_scaled(x, inv_t, 0.0)
    total = _np_sum(w)
    low, high = _ARRAY_SAFE_TOTAL[x.itemsize]
    if low < total < high:  # NaN, +inf and all -inf land outside, as does under/overflow
        return w, total
    w = exp_scaled(x, inv_t, _np_max(x))
    return w, _np_sum(w)


def _np_top(x, k: int):
    """The k highest logits, exactly: (ids, values), highest first, ties lowest id first.

    Partial selection: x is viewed as _ROWS rows, and column c holds tokens
    c, c + C, c + 2C, ... The k columns with the highest maxima hold at least k
    tokens at or above the lowest of those maxima, g, so the k-th highest logit
    is >= g. If it is > g, no other column (maximum <= g) can hold a token of the
    top k; if it equals g, every column whose maximum is g is searched too, for
    tied tokens with lower ids. Only those columns (and the few tokens past the
    last row) are searched. Raises ValueError on NaN, +inf or all -inf.
    """
    import numpy as np

    vocab = x.shape[0]
    k = min(k, vocab)
    cols = vocab // _ROWS
    if vocab < _MIN_GROUPED or 4 * k > cols:
        _np_max(x)
        return _np_select(np.arange(vocab), x, k)
    column_max = x[: _ROWS * cols].reshape(_ROWS, cols).max(axis=0)  # NaN propagates
    if k <= 16:  # a few argmax calls beat argpartition's set-up
        left = column_max.copy()
        chosen = []
        for _ in range(k):
            j = int(left.argmax())  # NaN counts as the highest
            chosen.append(j)
            g = left[j]
            left[j] = -inf
        chosen = np.array(sorted(chosen))
    else:
        chosen = np.sort(np.argpartition(column_max, cols - k)[cols - k :])
        g = column_max[chosen].min()
    ids, vals = _np_columns(x, cols, chosen)
    top = float(vals.max())  # every column's maximum is in or below vals: the max, NaN included
    if not isfinite(top):
        _np_invalid(x)
    ids, vals = _np_select(ids, vals, k)
    if not vals[-1] > g and np.count_nonzero(column_max == g) > 1:
        # the k-th logit is g, and a column left out whose maximum is also g may hold
        # a tied token with a lower id: search every column whose maximum is >= g
        ids, vals = _np_select(*_np_columns(x, cols, np.flatnonzero(column_max >= g)), k)
    return ids, vals


def _np_columns(x, cols: int, chosen):
    """Ids (increasing) and logits of the tokens in the chosen columns and past the last row."""
    import numpy as np

    ids = (_row_starts(cols) + chosen).ravel()
    if x.shape[0] > _ROWS * cols:
        ids = np.concatenate((ids, np.arange(_ROWS * cols, x.shape[0])))
    return ids, x[ids]


_ROW_STARTS: dict = {}


def _row_starts(cols: int):
    starts = _ROW_STARTS.get(cols)
    if starts is None:
        import numpy as np

        starts = _ROW_STARTS[cols] = np.arange(0, _ROWS * cols, cols)[:, None]
    return starts


def _np_select(ids, vals, k: int):
    """The k highest of vals with their ids (increasing), highest first, ties lowest id first."""
    import numpy as np

    size = ids.shape[0]
    if size > max(4 * k, 256):
        kth = np.partition(vals, size - k)[size - k]
        sel = np.flatnonzero(vals >= kth)  # every tie at the k-th value, ids still increasing
        ids, vals = ids[sel], vals[sel]
    order = np.argsort(-vals, kind="stable")[:k]  # stable: equal values stay lowest id first
    return ids[order], vals[order]


def _np_crossing(values, target: float, side: str = "left") -> int:
    """The first i at which values[0] + ... + values[i] reaches target (side "left": >=, "right": >).

    What np.searchsorted(np.cumsum(values), target, side) gives, values.shape[0] if the
    total falls short, but without a cumulative sum over all of values (numpy's costs
    about 10 ns an element): the sums of blocks of about sqrt(n) first, then one block.
    """
    import numpy as np

    n = values.shape[0]
    if n <= 8192:
        return int(np.searchsorted(np.cumsum(values, dtype=np.float64), target, side=side))
    block = _block_size(n)
    block_cum = np.cumsum(np.add.reduceat(values, np.arange(0, n, block), dtype=np.float64))
    b = int(np.searchsorted(block_cum, target, side=side))
    if b >= block_cum.shape[0]:
        return n
    before = float(block_cum[b - 1]) if b else 0.0
    inner = values[b * block : (b + 1) * block]
    j = int(np.searchsorted(np.cumsum(inner, dtype=np.float64), target - before, side=side))
    return b * block + min(j, inner.shape[0] - 1)  # the block holds the crossing; rounding cannot move it out


def _block_size(n: int) -> int:
    block = 64
    while block * block < n:
        block *= 2
    return block


def _np_total(values) -> float:
    """The total `_np_crossing` sees: the same block sums, in the same order."""
    import numpy as np

    n = values.shape[0]
    if n <= 8192:
        return float(np.cumsum(values, dtype=np.float64)[-1])
    return float(np.add.reduceat(values, np.arange(0, n, _block_size(n)), dtype=np.float64).cumsum()[-1])


def _np_draw(w, u: float, total: float | None = None) -> int:
    """Index drawn with probability w[i] / sum(w) for a uniform u in [0, 1) (`total`: `_np_total(w)`, if known)."""
    import numpy as np

    j = _np_crossing(w, u * (_np_total(w) if total is None else total), "right")
    if j >= w.shape[0]:
        # u * total rounded up to the total: the last token with weight
        j = w.shape[0] - 1 - int(np.argmax(w[::-1] > 0.0))
    return j


def _np_kept(sampler: Sampler, x, exp_scaled=_np_exp_scaled):
    """(ids, weights) of the tokens the filters keep; ids None means every token, in id order.

    Weights are unnormalised; `sample` draws index i with probability
    weights[i] / weights.sum().
    """
    import numpy as np

    vocab = x.shape[0]
    inv_t, top_p, min_p = sampler._inv_t, sampler.top_p, sampler.min_p
    if sampler.top_k and sampler.top_k < vocab:
        ids, vals = _np_top(x, sampler.top_k)
        w = np.subtract(vals, vals[0])  # vals[0] is the max: no overflow
        if inv_t != 1.0:
            w *= inv_t
        np.exp(w, out=w)
        keep = w.shape[0]
        if top_p < 1.0:
            # Logit order is weight order, which is what the nucleus cut needs.
            need = top_p * _np_total(w) * (1.0 - _TOP_P_SLACK)
            keep = min(_np_crossing(w, need) + 1, keep)
        if min_p > 0.0:
            keep = max(int(np.count_nonzero(w[:keep] >= min_p * w[0])), 1)
        return ids[:keep], w[:keep]
    if top_p < 1.0:
        return _np_nucleus_kept(*_np_nucleus(x, inv_t, top_p, min_p, exp_scaled))
    if min_p > 0.0:
        top = _np_max(x)
        # exp((x - top) / T) >= min_p  <=>  x >= top + T * log(min_p); a little below
        # that as a pre-filter, then the exact test on the weights.
        margin = 1e-3 / inv_t + 1e-6 * (abs(top) + 1.0)
        ids = np.flatnonzero(x >= top + log(min_p) / inv_t - margin)
        w = np.subtract(x[ids], top)
        if inv_t != 1.0:
            w *= inv_t
        np.exp(w, out=w)
        keep = w >= min_p  # the heaviest weight is exp(0) = 1
        return ids[keep], w[keep]
    w, _ = _np_weights(x, inv_t, exp_scaled)
    return None, w


def _np_nucleus(x, inv_t: float, top_p: float, min_p: float, exp_scaled=_np_exp_scaled):
    """Top-p (then min-p) over the whole vocabulary, sorting only the candidates.

    Returns (ids, weights, heaviest, size, cum): the candidates' ids (increasing)
    and weights, the heaviest of their weights sorted heaviest first (at least
    the nucleus), how many of those are kept, and their cumulative sum (None when
    there are many). Ties at the cut keep the lowest ids, as the list path's
    stable sort does.
    """
    import numpy as np

    w, total = _np_weights(x, inv_t, exp_scaled)
    ids = np.flatnonzero(w >= _np_nucleus_floor(w, total, top_p))
    cand = w[ids]
    need = top_p * total * (1.0 - _TOP_P_SLACK)
    heaviest = _np_heaviest(cand, need)
    # a few thousand at most, usually: one cumulative sum serves the cut and the draw
    cum = np.cumsum(heaviest, dtype=np.float64) if heaviest.shape[0] <= 8192 else None
    crossing = int(np.searchsorted(cum, need)) if cum is not None else _np_crossing(heaviest, need)
    size = min(crossing + 1, heaviest.shape[0])
    if min_p > 0.0:
        size = max(min(size, int(np.count_nonzero(heaviest[:size] >= min_p * heaviest[0]))), 1)
    return ids, cand, heaviest, size, cum


def _np_nucleus_kept(ids, cand, heaviest, size, cum=None):
    """The kept tokens' ids and weights, in id order."""
    import numpy as np

    edge = heaviest[size - 1]
    keep = cand >= edge
    surplus = int(np.count_nonzero(keep)) - size
    if surplus > 0:  # more tokens tie at the cut than it keeps: keep the lowest ids
        keep[np.flatnonzero(cand == edge)[-surplus:]] = False
    return ids[keep], cand[keep]


def _np_nucleus_draw(ids, cand, heaviest, size, cum, u: float) -> int:
    """Draw from the kept tokens in heaviest-first order: no kept arrays, no id-order sum."""
    import numpy as np

    if cum is None:
        j = _np_draw(heaviest[:size], u)
    else:  # every candidate weighs at least the floor > 0, so the last kept one has weight
        j = min(int(np.searchsorted(cum[:size], u * cum[size - 1], side="right")), size - 1)
    value = heaviest[j]
    # heaviest is the reverse of an ascending sort: where value's first copy sits in it
    first = heaviest.shape[0] - int(np.searchsorted(heaviest[::-1], value, side="right"))
    return int(ids[np.flatnonzero(cand == value)[j - first]])  # tied tokens: the (j - first)-th lowest id


def _np_nucleus_floor(w, total: float, top_p: float) -> float:
    """A weight that every token of the nucleus has: the candidates are the tokens at or above it.

    Two bounds, the tighter one that holds. (1) The tokens lighter than
    (1 - p) * total / vocab weigh less than (1 - p) * total together, so none is
    needed. (2) The column maxima of w viewed as _NUCLEUS_ROWS rows are tokens
    too: if the heaviest of them reach p * total by themselves, the tokens at or
    above the lightest of those reach it as well, so nothing lighter is needed.
    (2) is close to the nucleus itself when the nucleus is well below the number
    of columns; (1) is what is left for flat distributions. The floor is halved
    and the target raised by 1e-6, so float32 rounding of the total cannot matter.
    """
    import numpy as np

    vocab = w.shape[0]
    floor = 0.5 * (1.0 - top_p) * total / vocab
    if vocab < _MIN_GROUPED:
        return floor
    cols = vocab // _NUCLEUS_ROWS
    column_max = w[: _NUCLEUS_ROWS * cols].reshape(_NUCLEUS_ROWS, cols).max(axis=0)
    if vocab > _NUCLEUS_ROWS * cols:
        column_max = np.concatenate((column_max, w[_NUCLEUS_ROWS * cols :]))
    target = top_p * total * (1.0 + 1e-6)
    heaviest = _np_heaviest(column_max, target)
    j = _np_crossing(heaviest, target)
    if j >= heaviest.shape[0]:
        return floor
    return max(float(heaviest[j]), floor)


def _np_heaviest(values, need: float):
    """The heaviest of values, sorted heaviest first, as many as it takes to weigh `need`.

    Partial selection: np.partition finds the q heaviest (q = 2048, 8192, ...);
    once they weigh enough, only they are sorted. They are the start of the full
    sort, value for value. All of values, sorted, if even that falls short.
    """
    import numpy as np

    n = values.shape[0]
    q = 2048
    while 2 * q < n:
        top = np.partition(values, n - q)[n - q :]
        if float(top.sum(dtype=np.float64)) >= need * (1.0 + 1e-6):
            return np.sort(top)[::-1]
        q *= 4
    return np.sort(values)[::-1]


def _np_sample(sampler: Sampler, logits, random_draw, exp_scaled=_np_exp_scaled) -> int:
    import numpy as np

    x = _np_prepare(logits)
    if sampler._greedy:
        return _np_argmax(x)
    with np.errstate(all="ignore"):
        if sampler.top_p < 1.0 and not (sampler.top_k and sampler.top_k < x.shape[0]):
            nucleus = _np_nucleus(x, sampler._inv_t, sampler.top_p, sampler.min_p, exp_scaled)
            sampler._drawn = ("nucleus", nucleus)  # for explain: no copy, the arrays as they are
            return _np_nucleus_draw(*nucleus, random_draw())
        ids, w = _np_kept(sampler, x, exp_scaled)
        total = _np_total(w)
        sampler._drawn = ("kept", ids, w, total)
        j = _np_draw(w, random_draw(), total)
    return j if ids is None else int(ids[j])


def _np_distribution(sampler: Sampler, logits, exp_scaled=_np_exp_scaled) -> list[tuple[int, float]]:
    import numpy as np

    x = _np_prepare(logits)
    if sampler._greedy:
        return [(_np_argmax(x), 1.0)]
    with np.errstate(all="ignore"):
        ids, w = _np_kept(sampler, x, exp_scaled)
    w = w.astype(np.float64)
    if ids is None:
        ids = np.arange(w.shape[0])
    positive = w > 0.0
    ids, w = ids[positive], w[positive]
    probs = w / w.sum()
    order = np.lexsort((ids, -probs))
    return list(zip(ids[order].tolist(), probs[order].tolist()))


def _np_explain(
    x, token: int | None, n: int, exp_scaled=_np_exp_scaled, inv_t: float = 1.0
) -> tuple[list[int], list[float], float | None]:
    """(top ids, their probabilities, token's probability) in softmax(x / T), for the trace (T = 1 / inv_t)."""
    ids, vals = _np_top(x, max(n, 1))  # validates; vals[0] is the max
    top = float(vals[0])
    # Unshifted exp when the max is moderate saves a pass (and cannot overflow); float32 has less room.
    low, high = (-40.0, 60.0) if x.itemsize == 4 else (-600.0, 600.0)
    shift = 0.0 if low < top * inv_t < high else top
    total = _np_sum(exp_scaled(x, inv_t, shift))
    probs = [exp((float(v) - shift) * inv_t) / total for v in vals[:n]]
    prob = None if token is None else exp((float(x[token]) - shift) * inv_t) / total
    return ids[:n].tolist(), probs, prob


def _np_sampled_explain(
    sampler: Sampler, x, token: int, n: int, exp_scaled=_np_exp_scaled, drawn=None
) -> tuple[list[int], list[float], float]:
    """`Sampler.explain` for an array at T > 0: the kept tokens' weights, from the draw of these
    logits (`drawn`, what `_np_sample` kept) or from the sampling kernels again."""
    import numpy as np

    if drawn is None:
        if sampler._unfiltered(x.shape[0]):
            return _np_explain(x, token, n, exp_scaled, sampler._inv_t)
        with np.errstate(all="ignore"):
            if sampler.top_p < 1.0 and not (sampler.top_k and sampler.top_k < x.shape[0]):
                drawn = ("nucleus", _np_nucleus(x, sampler._inv_t, sampler.top_p, sampler.min_p, exp_scaled))
            else:
                drawn = ("kept", *_np_kept(sampler, x, exp_scaled), None)
    if drawn[0] == "nucleus":
        ids, w = _np_nucleus_kept(*drawn[1])
        total = float(w.sum(dtype=np.float64))  # the kept tokens: about the nucleus, few
    else:
        _, ids, w, total = drawn
        if total is None:
            total = _np_total(w)
    if ids is None:  # every token, in id order: the top by logit is the top by weight
        top_ids = _np_top(x, max(n, 1))[0][: max(n, 0)]
        return (top_ids.tolist(), (w[top_ids].astype(np.float64) / total).tolist(), float(w[token]) / total)
    hit = np.flatnonzero(ids == token)
    prob = float(w[hit[0]]) / total if hit.shape[0] else 0.0  # a token the filters cut: 0
    if n <= 0:
        return [], [], prob
    # ids are in id order or heaviest first with ties in id order: _np_select keeps ties lowest id first
    top_ids, top_w = _np_select(ids, w, min(n, ids.shape[0]))
    keep = top_w > 0.0
    return top_ids[keep].tolist(), (top_w[keep].astype(np.float64) / total).tolist(), prob


def _np_softmax(logits):
    import numpy as np

    x = _np_prepare(logits)
    top = _np_max(x)
    with np.errstate(all="ignore"):
        w = np.subtract(x, top)
        np.exp(w, out=w)
        w /= w.sum()
    return w


# --- torch kernels ---------------------------------------------------------------


def _torch_prepare(x):
    """The logits detached, as a 1-D float32 or float64 tensor on their device."""
    import torch

    if x.dim() != 1:
        raise ValueError(f"logits must be 1-D (one row of the vocabulary), got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError("logits are empty")
    x = x.detach()
    if x.dtype == torch.float32 or x.dtype == torch.float64:
        return x
    if x.is_complex():
        raise ValueError(f"logits must be real numbers, got dtype {x.dtype}")
    if x.is_floating_point() or x.device.type == "mps":
        return x.float()  # float16, bfloat16 and the like (mps has no float64)
    return x.double()


def _torch_numpy_view(x):
    """A numpy array sharing a CPU tensor's memory (no copy)."""
    try:
        return x.numpy()
    except RuntimeError:  # a lazily negated or conjugated view
        return x.resolve_neg().resolve_conj().numpy()


def _torch_sample(sampler: Sampler, logits) -> int:
    x = _torch_prepare(logits)
    device = x.device
    if device.type == "cpu" and _TORCH_CPU_VIA_NUMPY:
        if sampler._greedy:
            return _np_argmax(_torch_numpy_view(x))
        generator = sampler._torch_generator(device)

        def random_draw() -> float:
            import torch

            return torch.rand((), generator=generator, dtype=torch.float64).item()

        return _np_sample(sampler, _torch_numpy_view(x), random_draw, _torch_exp_scaled(x))
    return _torch_sample_device(sampler, x)


def _torch_exp_scaled(tensor):
    """`_np_exp_scaled` for a CPU tensor's numpy view: numpy's multiply, torch's (faster) exp."""

    def exp_scaled(x, inv_t: float, shift: float):
        import numpy as np
        import torch

        if shift:
            w = np.subtract(x, shift)
            if inv_t != 1.0:
                w *= inv_t
        elif inv_t != 1.0:
            w = np.multiply(x, inv_t)
        else:
            return torch.exp(tensor).numpy()
        torch.from_numpy(w).exp_()
        return w

    return exp_scaled


def _torch_invalid(x) -> None:
    """Raise the ValueError that says why no token can be chosen (extra syncs: errors only)."""
    import torch

    nan = torch.isnan(x)
    if bool(nan.any()):
        raise ValueError(f"logits contain NaN (first at token {int(nan.nonzero()[0, 0])})")
    plus = x == inf
    if bool(plus.any()):
        raise ValueError(
            f"logits contain +inf (token {int(plus.nonzero()[0, 0])}); use a large finite value to force a token"
        )
    if not bool((x > -inf).any()):
        raise ValueError("all logits are -inf: every token is masked, nothing can be sampled")


def _float64_ok(device) -> bool:
    return device.type in ("cpu", "cuda")


def _torch_greedy(x):
    """(token, ok) as 0-d tensors on x's device: the first maximum, and whether it is finite."""
    import torch

    i = torch.argmax(x)  # the first maximal value; NaN counts as the maximum
    return i, torch.isfinite(x[i])


def _torch_keep(sampler: Sampler, x, candidates: int | None = None):
    """Weights and keep-mask over the whole vocabulary, with fixed shapes (no sync).

    Returns (weights, keep or None for all, ok, covered): `ok` is a 0-d bool that is
    false for NaN / +inf / all -inf logits; `covered` (0-d bool or True) is false
    when the nucleus did not fit in the `candidates` heaviest tokens looked at,
    and the caller must ask again with more (the count `_torch_nucleus_size` gives).
    """
    import torch

    vocab = x.shape[0]
    inv_t, top_p, min_p = sampler._inv_t, sampler.top_p, sampler.min_p
    top = x.max()
    ok = torch.isfinite(top)
    w = torch.sub(x, top)  # NaN everywhere if top is NaN, +inf or -inf
    if inv_t != 1.0:
        w.mul_(inv_t)
    w.exp_()
    keep = None
    covered = True
    if sampler.top_k and sampler.top_k < vocab:
        vals, _ = torch.topk(x, sampler.top_k)
        keep = _torch_cut(x, vals[-1], sampler.top_k - (vals > vals[-1]).sum(), None)
        if top_p < 1.0:
            kept = torch.exp((vals - vals[0]) * inv_t)  # logit order is weight order
            cum = kept.cumsum(0, dtype=torch.float64 if _float64_ok(x.device) else torch.float32)
            size = (torch.searchsorted(cum, (top_p * (1.0 - _TOP_P_SLACK)) * cum[-1:]) + 1).clamp_(max=vals.shape[0])
            edge = vals[size - 1][0]
            keep = _torch_cut(x, edge, size[0] - (vals > edge).sum(), keep)
    elif top_p < 1.0:
        total = w.sum()
        heaviest = min(vocab, candidates or 1024)
        vals, _ = torch.topk(w, heaviest)
        cum = vals.cumsum(0, dtype=torch.float64 if _float64_ok(x.device) else torch.float32)
        need = (top_p * (1.0 - _TOP_P_SLACK)) * total.reshape(1).to(cum.dtype)
        if heaviest < vocab:
            covered = cum[-1] >= need[0]
        size = (torch.searchsorted(cum, need) + 1).clamp_(max=heaviest)
        edge = vals[size - 1][0]
        keep = _torch_cut(w, edge, size[0] - (vals > edge).sum(), None)
    if min_p > 0.0:
        heavy = w >= min_p  # the heaviest weight is exp(0) = 1
        keep = heavy if keep is None else keep & heavy
    return w, keep, ok, covered


def _torch_cut(values, edge, short, within):
    """Mask of values > edge, plus the `short` lowest ids with values == edge (within `within`)."""
    above = values > edge
    at = values == edge
    if within is not None:
        above &= within
        at &= within
    return above | (at & (at.cumsum(0) <= short))


def _torch_nucleus_size(sampler: Sampler, w) -> int:
    """How many tokens can be in the nucleus: those at least half of (1 - p) * total / vocab heavy."""
    floor = 0.5 * (1.0 - sampler.top_p) / w.shape[0]
    return int((w >= floor * w.sum()).sum().item())


def _torch_sample_device(sampler: Sampler, x) -> int:
    import torch

    if sampler._greedy:
        i, ok = _torch_greedy(x)
        token = int(torch.where(ok, i, -1).item())
        if token < 0:
            _torch_invalid(x)
        return token
    device = x.device
    u = torch.rand(
        (),
        generator=sampler._torch_generator(device),
        device=device,
        dtype=torch.float64 if _float64_ok(device) else torch.float32,
    )
    candidates = None
    while True:
        w, keep, ok, covered = _torch_keep(sampler, x, candidates)
        kept = w if keep is None else torch.where(keep, w, 0.0)
        cum = kept.cumsum(0, dtype=u.dtype)
        j = torch.searchsorted(cum, (u * cum[-1]).reshape(1), right=True)[0]
        # u * total can round up to the total: the first index reaching it is the last token with weight
        j = torch.minimum(j, torch.argmax(cum))
        packed = torch.where(ok, j, -1)
        if covered is not True:
            packed = torch.where(covered | ~ok, packed, -2)
        token = int(packed.item())  # the one sync
        if token == -1:
            _torch_invalid(x)
        if token != -2:
            return token
        # (a second shortfall can only be rounding: then look at every token)
        candidates = x.shape[0] if candidates else _torch_nucleus_size(sampler, w)


def _torch_distribution(sampler: Sampler, logits) -> list[tuple[int, float]]:
    import torch

    x = _torch_prepare(logits)
    if x.device.type == "cpu" and _TORCH_CPU_VIA_NUMPY:
        return _np_distribution(sampler, _torch_numpy_view(x), _torch_exp_scaled(x))
    if sampler._greedy:
        i, ok = _torch_greedy(x)
        if not bool(ok):
            _torch_invalid(x)
        return [(int(i), 1.0)]
    candidates = None
    while True:
        w, keep, ok, covered = _torch_keep(sampler, x, candidates)
        if not bool(ok):
            _torch_invalid(x)
        if covered is True or bool(covered):
            break
        candidates = x.shape[0] if candidates else _torch_nucleus_size(sampler, w)
    w = w.double() if _float64_ok(x.device) else w
    if keep is not None:
        w = torch.where(keep, w, 0.0)
    ids = torch.nonzero(w > 0.0)[:, 0]
    probs = w[ids] / w[ids].sum()
    pairs = list(zip(ids.tolist(), probs.tolist()))
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return pairs


def _torch_explain(x, token: int | None, n: int) -> tuple[list[int], list[float], float | None]:
    """explain on the tensor's device: torch.topk, one transfer of n + 2 numbers and n ids."""
    import torch

    top = x.max()
    total = torch.sub(x, top).exp_().sum()
    k = min(max(n, 1), x.shape[0])
    vals, ids = torch.topk(x, k)
    if k < x.shape[0]:
        # topk may pick any of the tokens tied at the k-th value: take the lowest ids
        kth = vals[-1]
        mask = _torch_cut(x, kth, k - (vals > kth).sum(), None)
        ids = torch.topk(mask.to(vals.dtype), k).indices
        vals = x[ids]
    dtype = torch.float64 if _float64_ok(x.device) else torch.float32
    parts = [top.reshape(1), torch.exp(vals - top) / total, vals, ids]
    if token is not None:
        parts.append((torch.exp(x[token] - top) / total).reshape(1))
    numbers = torch.cat([p.to(dtype) for p in parts]).tolist()  # the one transfer
    if not isfinite(numbers[0]):
        _torch_invalid(x)
    probs, values = numbers[1 : 1 + k], numbers[1 + k : 1 + 2 * k]
    ids_out = [int(i) for i in numbers[1 + 2 * k : 1 + 3 * k]]
    prob = numbers[-1] if token is not None else None
    # topk's order among equal logits is unspecified: lowest id first, as everywhere else
    order = sorted(range(k), key=lambda j: (-values[j], ids_out[j]))[:n]
    return [ids_out[j] for j in order], [probs[j] for j in order], prob


def _torch_sampled_explain(
    sampler: Sampler, logits, token: int, n: int, drawn=None
) -> tuple[list[int], list[float], float]:
    """`Sampler.explain` for a tensor at T > 0: on its device, with one transfer (CPU: the numpy kernels,
    with what their draw kept)."""
    import torch

    x = _torch_prepare(logits)
    if x.device.type == "cpu" and _TORCH_CPU_VIA_NUMPY:
        return _np_sampled_explain(sampler, _torch_numpy_view(x), token, n, _torch_exp_scaled(x), drawn)
    dtype = torch.float64 if _float64_ok(x.device) else torch.float32
    k = min(max(n, 1), x.shape[0])
    candidates = None
    while True:
        w, keep, ok, covered = _torch_keep(sampler, x, candidates)
        kept = w if keep is None else torch.where(keep, w, 0.0)
        total = kept.sum(dtype=dtype)
        # every filter keeps the heaviest tokens, so the top of what is kept is the top by logit, cut to it
        vals, ids = torch.topk(x, k)
        if k < x.shape[0]:  # topk may pick any of the tokens tied at the k-th value: take the lowest ids
            kth = vals[-1]
            ids = torch.topk(_torch_cut(x, kth, k - (vals > kth).sum(), None).to(vals.dtype), k).indices
        flags = torch.stack([ok, torch.as_tensor(covered, device=x.device)]).to(dtype)
        parts = [
            flags,
            total.reshape(1).to(dtype),
            kept[ids].to(dtype),
            ids.to(dtype),
            x[ids].to(dtype),
            kept[token].reshape(1).to(dtype),
        ]
        numbers = torch.cat(parts).tolist()  # the one transfer
        if not numbers[0]:
            _torch_invalid(x)
        if numbers[1]:
            break
        candidates = x.shape[0] if candidates else _torch_nucleus_size(sampler, w)
    total_w = numbers[2]
    weights, ids_out, values = (
        numbers[3 : 3 + k],
        [int(i) for i in numbers[3 + k : 3 + 2 * k]],
        numbers[3 + 2 * k : 3 + 3 * k],
    )
    order = sorted(range(k), key=lambda j: (-values[j], ids_out[j]))[: max(n, 0)]
    top = [(ids_out[j], weights[j] / total_w) for j in order if weights[j] > 0.0]
    return [t for t, _ in top], [p for _, p in top], numbers[-1] / total_w


def _torch_softmax(logits):
    import torch

    x = _torch_prepare(logits)
    top = x.max()
    if not bool(torch.isfinite(top)):
        _torch_invalid(x)
    w = torch.sub(x, top).exp_()
    return w.div_(w.sum())
