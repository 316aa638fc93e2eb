"""The numpy path: sampling and the trace's numbers for a 1-D numpy array of logits.

Any float dtype is taken; float32 and float16 are worked in float32, float64 in
float64 (`prepare`). Draws come from the uniform the caller passes in: the
sampler's numpy Generator, or the torch Generator when the torch path lends a
CPU tensor to these kernels.

Real vocabularies are 49,152 to 151,936 entries, so nothing here copies the
logits to a Python list, and nothing sorts the vocabulary. Top-k and the trace's
top tokens use partial selection: the vocabulary is viewed as 64 rows, the
maximum of each column found in one vectorised pass, and only the columns that
can hold the top k are searched. Top-p prunes before sorting, as the list path
does: only tokens with weight >= (1 - p) * total / vocab can be in the nucleus
(all lighter ones together weigh less than (1 - p) * total); and when the
heaviest column maxima (the vocabulary viewed as 16 rows) already weigh
p * total, nothing lighter than them is needed either, which cuts the candidates
to about the nucleus. Only the candidates are sorted, and of those only as many
as reach p (np.partition first). The cost that stays is one exp over the
vocabulary, for the softmax total.

numpy itself is imported inside the functions, so importing this module (which
`sampler.py` does) costs nothing on the standard-library path. Every kernel
takes a 1-D float32 or float64 array and never writes to it; temporaries are
fresh arrays, changed in place.
"""

from __future__ import annotations

from collections.abc import Callable
from math import exp, inf, isfinite, log
from typing import Any, overload

from decodeloop.sampling.common import TOP_P_SLACK, SamplerParams

# numpy is imported inside the functions, so its arrays are named here without its types
Array = Any
# exp((x - shift) / T) for (x, inv_t, shift): numpy's, or the torch path's with torch's exp
ExpScaled = Callable[[Array, float, float], Array]

# Exponentiating logits without first subtracting their max saves a pass; it is
# trusted only when the total lands in this range (else it is redone shifted), per
# item size: float32 weights must stay normal numbers for every token that matters
# and their sum must not overflow.
_ARRAY_SAFE_TOTAL = {4: (1e-15, 1e30), 8: (1e-150, 1e300)}

# Rows the vocabulary is viewed as for partial selection (a column's maximum is
# one vectorised pass over the rows), and the vocabulary size from which it pays.
_ROWS = 64
_MIN_GROUPED = 8192
# Rows for the top-p candidate bound (more columns: a tighter bound, a longer sort).
_NUCLEUS_ROWS = 16


def prepare(x):
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


def _invalid(x) -> None:
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


def _max(x) -> float:
    """max(x), raising ValueError on NaN, +inf or all -inf."""
    top = float(x.max())  # NaN propagates
    if not isfinite(top):
        _invalid(x)
    return top


def argmax(x) -> int:
    """Greedy: the highest logit, ties to the lowest id (np.argmax returns the first)."""
    i = int(x.argmax())
    if not isfinite(x[i]):  # argmax stops at the first NaN, finds +inf, or everything is -inf
        _invalid(x)
    return i


def _exp_scaled(x, inv_t: float, shift: float):
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


def _sum(w) -> float:
    """sum(w): over column sums (the rows added elementwise) for long arrays, faster than w.sum()."""
    n = w.shape[0]
    if n < _MIN_GROUPED:
        return float(w.sum())
    cols = n // _ROWS
    total = float(w[: _ROWS * cols].reshape(_ROWS, cols).sum(axis=0).sum())
    return total + float(w[_ROWS * cols :].sum()) if n > _ROWS * cols else total


def _weights(x, inv_t: float, exp_scaled=_exp_scaled):
    """exp(x / T) in a fresh array of x's dtype and its total, shifted by the max only when needed."""
    w = exp_scaled(x, inv_t, 0.0)
    total = _sum(w)
    low, high = _ARRAY_SAFE_TOTAL[x.itemsize]
    if low < total < high:  # NaN, +inf and all -inf land outside, as does under/overflow
        return w, total
    w = exp_scaled(x, inv_t, _max(x))
    return w, _sum(w)


def _top(x, k: int):
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
        _max(x)
        return _select(np.arange(vocab), x, k)
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
    ids, vals = _columns(x, cols, chosen)
    top = float(vals.max())  # every column's maximum is in or below vals: the max, NaN included
    if not isfinite(top):
        _invalid(x)
    ids, vals = _select(ids, vals, k)
    if not vals[-1] > g and np.count_nonzero(column_max == g) > 1:
        # the k-th logit is g, and a column left out whose maximum is also g may hold
        # a tied token with a lower id: search every column whose maximum is >= g
        ids, vals = _select(*_columns(x, cols, np.flatnonzero(column_max >= g)), k)
    return ids, vals


def _columns(x: Array, cols: int, chosen: Array) -> tuple[Array, Array]:
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


def _select(ids: Array, vals: Array, k: int) -> tuple[Array, Array]:
    """The k highest of vals with their ids (increasing), highest first, ties lowest id first."""
    import numpy as np

    size = ids.shape[0]
    if size > max(4 * k, 256):
        kth = np.partition(vals, size - k)[size - k]
        sel = np.flatnonzero(vals >= kth)  # every tie at the k-th value, ids still increasing
        ids, vals = ids[sel], vals[sel]
    order = np.argsort(-vals, kind="stable")[:k]  # stable: equal values stay lowest id first
    return ids[order], vals[order]


def _crossing(values, target: float, side: str = "left") -> int:
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


def _total(values) -> float:
    """The total `_crossing` sees: the same block sums, in the same order."""
    import numpy as np

    n = values.shape[0]
    if n <= 8192:
        return float(np.cumsum(values, dtype=np.float64)[-1])
    return float(np.add.reduceat(values, np.arange(0, n, _block_size(n)), dtype=np.float64).cumsum()[-1])


def _draw(w, u: float, total: float | None = None) -> int:
    """Index drawn with probability w[i] / sum(w) for a uniform u in [0, 1) (`total`: `_total(w)`, if known)."""
    import numpy as np

    j = _crossing(w, u * (_total(w) if total is None else total), "right")
    if j >= w.shape[0]:
        # u * total rounded up to the total: the last token with weight
        j = w.shape[0] - 1 - int(np.argmax(w[::-1] > 0.0))
    return j


def _kept(params: SamplerParams, x, exp_scaled=_exp_scaled):
    """(ids, weights) of the tokens the filters keep; ids None means every token, in id order.

    Weights are unnormalised; `sample` draws index i with probability
    weights[i] / weights.sum().
    """
    import numpy as np

    vocab = x.shape[0]
    inv_t, top_p, min_p = params.inv_t, params.top_p, params.min_p
    if params.top_k and params.top_k < vocab:
        ids, vals = _top(x, params.top_k)
        w = np.subtract(vals, vals[0])  # vals[0] is the max: no overflow
        if inv_t != 1.0:
            w *= inv_t
        np.exp(w, out=w)
        keep = w.shape[0]
        if top_p < 1.0:
            # Logit order is weight order, which is what the nucleus cut needs.
            need = top_p * _total(w) * (1.0 - TOP_P_SLACK)
            keep = min(_crossing(w, need) + 1, keep)
        if min_p > 0.0:
            keep = max(int(np.count_nonzero(w[:keep] >= min_p * w[0])), 1)
        return ids[:keep], w[:keep]
    if top_p < 1.0:
        return _nucleus_kept(*_nucleus(x, inv_t, top_p, min_p, exp_scaled))
    if min_p > 0.0:
        top = _max(x)
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
    w, _ = _weights(x, inv_t, exp_scaled)
    return None, w


def _nucleus(
    x: Array, inv_t: float, top_p: float, min_p: float, exp_scaled: ExpScaled = _exp_scaled
) -> tuple[Array, Array, Array, int, Array | None]:
    """Top-p (then min-p) over the whole vocabulary, sorting only the candidates.

    Returns (ids, weights, heaviest, size, cum): the candidates' ids (increasing)
    and weights, the heaviest of their weights sorted heaviest first (at least
    the nucleus), how many of those are kept, and their cumulative sum (None when
    there are many). Ties at the cut keep the lowest ids, as the list path's
    stable sort does.
    """
    import numpy as np

    w, total = _weights(x, inv_t, exp_scaled)
    ids = np.flatnonzero(w >= _nucleus_floor(w, total, top_p))
    cand = w[ids]
    need = top_p * total * (1.0 - TOP_P_SLACK)
    heaviest = _heaviest(cand, need)
    # a few thousand at most, usually: one cumulative sum serves the cut and the draw
    cum = np.cumsum(heaviest, dtype=np.float64) if heaviest.shape[0] <= 8192 else None
    crossing = int(np.searchsorted(cum, need)) if cum is not None else _crossing(heaviest, need)
    size = min(crossing + 1, heaviest.shape[0])
    if min_p > 0.0:
        size = max(min(size, int(np.count_nonzero(heaviest[:size] >= min_p * heaviest[0]))), 1)
    return ids, cand, heaviest, size, cum


def _nucleus_kept(ids, cand, heaviest, size, cum=None):
    """The kept tokens' ids and weights, in id order."""
    import numpy as np

    edge = heaviest[size - 1]
    keep = cand >= edge
    surplus = int(np.count_nonzero(keep)) - size
    if surplus > 0:  # more tokens tie at the cut than it keeps: keep the lowest ids
        keep[np.flatnonzero(cand == edge)[-surplus:]] = False
    return ids[keep], cand[keep]


def _nucleus_draw(ids, cand, heaviest, size, cum, u: float) -> int:
    """Draw from the kept tokens in heaviest-first order: no kept arrays, no id-order sum."""
    import numpy as np

    if cum is None:
        j = _draw(heaviest[:size], u)
    else:  # every candidate weighs at least the floor > 0, so the last kept one has weight
        j = min(int(np.searchsorted(cum[:size], u * cum[size - 1], side="right")), size - 1)
    value = heaviest[j]
    # heaviest is the reverse of an ascending sort: where value's first copy sits in it
    first = heaviest.shape[0] - int(np.searchsorted(heaviest[::-1], value, side="right"))
    return int(ids[np.flatnonzero(cand == value)[j - first]])  # tied tokens: the (j - first)-th lowest id


def _nucleus_floor(w, total: float, top_p: float) -> float:
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
    heaviest = _heaviest(column_max, target)
    j = _crossing(heaviest, target)
    if j >= heaviest.shape[0]:
        return floor
    return max(float(heaviest[j]), floor)


def _heaviest(values, need: float):
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


def sample(params: SamplerParams, logits, random_draw, exp_scaled=_exp_scaled) -> tuple[int, Any]:
    """`Sampler.sample` for an array; `random_draw()` gives the uniform in [0, 1) (the sampler's generator).
    Returns the token and what the draw kept, for `sampled_explain` of the same logits (no copy: the arrays
    as they are), or None."""
    import numpy as np

    x = prepare(logits)
    if params.greedy:
        return argmax(x), None
    with np.errstate(all="ignore"):
        if params.top_p < 1.0 and not (params.top_k and params.top_k < x.shape[0]):
            nucleus = _nucleus(x, params.inv_t, params.top_p, params.min_p, exp_scaled)
            return _nucleus_draw(*nucleus, random_draw()), ("nucleus", nucleus)
        ids, w = _kept(params, x, exp_scaled)
        total = _total(w)
        j = _draw(w, random_draw(), total)
    return (j if ids is None else int(ids[j])), ("kept", ids, w, total)


def distribution(params: SamplerParams, logits, exp_scaled=_exp_scaled) -> list[tuple[int, float]]:
    """`Sampler.distribution` for an array: what `sample` draws from, most probable first."""
    import numpy as np

    x = prepare(logits)
    if params.greedy:
        return [(argmax(x), 1.0)]
    with np.errstate(all="ignore"):
        ids, w = _kept(params, x, exp_scaled)
    w = w.astype(np.float64)
    if ids is None:
        ids = np.arange(w.shape[0])
    positive = w > 0.0
    ids, w = ids[positive], w[positive]
    probs = w / w.sum()
    order = np.lexsort((ids, -probs))
    return list(zip(ids[order].tolist(), probs[order].tolist()))


@overload
def explain(
    x: Array, token: int, n: int, exp_scaled: ExpScaled = ..., inv_t: float = ...
) -> tuple[list[int], list[float], float]: ...
@overload
def explain(
    x: Array, token: None, n: int, exp_scaled: ExpScaled = ..., inv_t: float = ...
) -> tuple[list[int], list[float], None]: ...
def explain(
    x: Array, token: int | None, n: int, exp_scaled: ExpScaled = _exp_scaled, inv_t: float = 1.0
) -> tuple[list[int], list[float], float | None]:
    """(top ids, their probabilities, token's probability) in softmax(x / T), for the trace (T = 1 / inv_t)."""
    ids, vals = _top(x, max(n, 1))  # validates; vals[0] is the max
    top = float(vals[0])
    # Unshifted exp when the max is moderate saves a pass (and cannot overflow); float32 has less room.
    low, high = (-40.0, 60.0) if x.itemsize == 4 else (-600.0, 600.0)
    shift = 0.0 if low < top * inv_t < high else top
    total = _sum(exp_scaled(x, inv_t, shift))
    probs = [exp((float(v) - shift) * inv_t) / total for v in vals[:n]]
    prob = None if token is None else exp((float(x[token]) - shift) * inv_t) / total
    return ids[:n].tolist(), probs, prob


def sampled_explain(
    params: SamplerParams, x, token: int, n: int, exp_scaled=_exp_scaled, drawn=None
) -> tuple[list[int], list[float], float]:
    """`Sampler.explain` for an array at T > 0: the kept tokens' weights, from the draw of these
    logits (`drawn`, what `sample` kept) or from the sampling kernels again."""
    import numpy as np

    if drawn is None:
        if params.unfiltered(x.shape[0]):
            return explain(x, token, n, exp_scaled, params.inv_t)
        with np.errstate(all="ignore"):
            if params.top_p < 1.0 and not (params.top_k and params.top_k < x.shape[0]):
                drawn = ("nucleus", _nucleus(x, params.inv_t, params.top_p, params.min_p, exp_scaled))
            else:
                drawn = ("kept", *_kept(params, x, exp_scaled), None)
    if drawn[0] == "nucleus":
        ids, w = _nucleus_kept(*drawn[1])
        total = float(w.sum(dtype=np.float64))  # the kept tokens: about the nucleus, few
    else:
        _, ids, w, total = drawn
        if total is None:
            total = _total(w)
    if ids is None:  # every token, in id order: the top by logit is the top by weight
        top_ids = _top(x, max(n, 1))[0][: max(n, 0)]
        return (top_ids.tolist(), (w[top_ids].astype(np.float64) / total).tolist(), float(w[token]) / total)
    hit = np.flatnonzero(ids == token)
    prob = float(w[hit[0]]) / total if hit.shape[0] else 0.0  # a token the filters cut: 0
    if n <= 0:
        return [], [], prob
    # ids are in id order or heaviest first with ties in id order: _select keeps ties lowest id first
    top_ids, top_w = _select(ids, w, min(n, ids.shape[0]))
    keep = top_w > 0.0
    return top_ids[keep].tolist(), (top_w[keep].astype(np.float64) / total).tolist(), prob


def softmax(logits):
    """Probabilities at temperature 1, in a fresh array of the logits' (prepared) dtype."""
    import numpy as np

    x = prepare(logits)
    top = _max(x)
    with np.errstate(all="ignore"):
        w = np.subtract(x, top)
        np.exp(w, out=w)
        w /= w.sum()
    return w
