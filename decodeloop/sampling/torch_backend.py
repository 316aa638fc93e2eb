"""The torch path: sampling and the trace's numbers for a 1-D torch tensor of logits, on its device.

Any float dtype and any device are taken. Draws come from a torch.Generator on
the tensor's device seeded from the sampler's seed (one per device, made on
first use; the sampler hands `generator(device)` in), and only one scalar `.item()` comes back
to Python. On a GPU every step runs on the device with fixed shapes (top-k and
top-p through `torch.topk`, masks and cumulative sums over the vocabulary), so
the `.item()` is the only sync. On the CPU, where torch's comparisons, argmax
and topk are several times slower than numpy's, the tensor is read through a
zero-copy numpy view and sampled by the numpy kernels (with torch's exp, faster
than numpy's), still drawing from the tensor's torch.Generator.

torch is an optional extra: it is imported inside the functions, when a tensor
has arrived (so it is installed), and importing this module imports neither
torch nor numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from math import inf, isfinite
from typing import Any

from decodeloop.sampling import numpy_backend
from decodeloop.sampling.common import TOP_P_SLACK, SamplerParams

# CPU tensors are sampled by the numpy kernels on a zero-copy view (faster there);
# the tests switch this off to run the device kernels on the CPU.
_CPU_VIA_NUMPY = True


def _prepare(x):
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


def _numpy_view(x):
    """A numpy array sharing a CPU tensor's memory (no copy)."""
    try:
        return x.numpy()
    except RuntimeError:  # a lazily negated or conjugated view
        return x.resolve_neg().resolve_conj().numpy()


def sample(params: SamplerParams, logits, generator: Callable[[Any], Any]) -> tuple[int, Any]:
    """`Sampler.sample` for a tensor, drawing from `generator(device)`, the sampler's torch.Generator on the
    tensor's device. Returns the token and what the draw kept (on the CPU, the numpy kernels'), or None."""
    x = _prepare(logits)
    device = x.device
    if device.type == "cpu" and _CPU_VIA_NUMPY:
        if params.greedy:
            return numpy_backend.argmax(_numpy_view(x)), None
        on_cpu = generator(device)

        def random_draw() -> float:
            import torch

            return torch.rand((), generator=on_cpu, dtype=torch.float64).item()

        return numpy_backend.sample(params, _numpy_view(x), random_draw, _exp_scaled(x))
    return _sample_device(params, x, generator), None


def _exp_scaled(tensor):
    """numpy_backend._exp_scaled for a CPU tensor's numpy view: numpy's multiply, torch's (faster) exp."""

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


def _invalid(x) -> None:
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


def _argmax_on_device(x):
    """(token, ok) as 0-d tensors on x's device: the first maximum, and whether it is finite."""
    import torch

    i = torch.argmax(x)  # the first maximal value; NaN counts as the maximum
    return i, torch.isfinite(x[i])


def _keep(params: SamplerParams, x, candidates: int | None = None):
    """Weights and keep-mask over the whole vocabulary, with fixed shapes (no sync).

    Returns (weights, keep or None for all, ok, covered): `ok` is a 0-d bool that is
    false for NaN / +inf / all -inf logits; `covered` (0-d bool or True) is false
    when the nucleus did not fit in the `candidates` heaviest tokens looked at,
    and the caller must ask again with more (the count `_nucleus_size` gives).
    """
    import torch

    vocab = x.shape[0]
    inv_t, top_p, min_p = params.inv_t, params.top_p, params.min_p
    top = x.max()
    ok = torch.isfinite(top)
    w = torch.sub(x, top)  # NaN everywhere if top is NaN, +inf or -inf
    if inv_t != 1.0:
        w.mul_(inv_t)
    w.exp_()
    keep = None
    covered = True
    if params.top_k and params.top_k < vocab:
        vals, _ = torch.topk(x, params.top_k)
        keep = _cut(x, vals[-1], params.top_k - (vals > vals[-1]).sum(), None)
        if top_p < 1.0:
            kept = torch.exp((vals - vals[0]) * inv_t)  # logit order is weight order
            cum = kept.cumsum(0, dtype=torch.float64 if _float64_ok(x.device) else torch.float32)
            size = (torch.searchsorted(cum, (top_p * (1.0 - TOP_P_SLACK)) * cum[-1:]) + 1).clamp_(max=vals.shape[0])
            edge = vals[size - 1][0]
            keep = _cut(x, edge, size[0] - (vals > edge).sum(), keep)
    elif top_p < 1.0:
        total = w.sum()
        heaviest = min(vocab, candidates or 1024)
        vals, _ = torch.topk(w, heaviest)
        cum = vals.cumsum(0, dtype=torch.float64 if _float64_ok(x.device) else torch.float32)
        need = (top_p * (1.0 - TOP_P_SLACK)) * total.reshape(1).to(cum.dtype)
        if heaviest < vocab:
            covered = cum[-1] >= need[0]
        size = (torch.searchsorted(cum, need) + 1).clamp_(max=heaviest)
        edge = vals[size - 1][0]
        keep = _cut(w, edge, size[0] - (vals > edge).sum(), None)
    if min_p > 0.0:
        heavy = w >= min_p  # the heaviest weight is exp(0) = 1
        keep = heavy if keep is None else keep & heavy
    return w, keep, ok, covered


def _cut(values, edge, short, within):
    """Mask of values > edge, plus the `short` lowest ids with values == edge (within `within`)."""
    above = values > edge
    at = values == edge
    if within is not None:
        above &= within
        at &= within
    return above | (at & (at.cumsum(0) <= short))


def _nucleus_size(params: SamplerParams, w) -> int:
    """How many tokens can be in the nucleus: those at least half of (1 - p) * total / vocab heavy."""
    floor = 0.5 * (1.0 - params.top_p) / w.shape[0]
    return int((w >= floor * w.sum()).sum().item())


def _sample_device(params: SamplerParams, x, generator: Callable[[Any], Any]) -> int:
    import torch

    if params.greedy:
        i, ok = _argmax_on_device(x)
        token = int(torch.where(ok, i, -1).item())
        if token < 0:
            _invalid(x)
        return token
    device = x.device
    u = torch.rand(
        (),
        generator=generator(device),
        device=device,
        dtype=torch.float64 if _float64_ok(device) else torch.float32,
    )
    candidates = None
    while True:
        w, keep, ok, covered = _keep(params, x, candidates)
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
            _invalid(x)
        if token != -2:
            return token
        # (a second shortfall can only be rounding: then look at every token)
        candidates = x.shape[0] if candidates else _nucleus_size(params, w)


def distribution(params: SamplerParams, logits) -> list[tuple[int, float]]:
    """`Sampler.distribution` for a tensor: what `sample` draws from, most probable first."""
    import torch

    x = _prepare(logits)
    if x.device.type == "cpu" and _CPU_VIA_NUMPY:
        return numpy_backend.distribution(params, _numpy_view(x), _exp_scaled(x))
    if params.greedy:
        i, ok = _argmax_on_device(x)
        if not bool(ok):
            _invalid(x)
        return [(int(i), 1.0)]
    candidates = None
    while True:
        w, keep, ok, covered = _keep(params, x, candidates)
        if not bool(ok):
            _invalid(x)
        if covered is True or bool(covered):
            break
        candidates = x.shape[0] if candidates else _nucleus_size(params, w)
    w = w.double() if _float64_ok(x.device) else w
    if keep is not None:
        w = torch.where(keep, w, 0.0)
    ids = torch.nonzero(w > 0.0)[:, 0]
    probs = w[ids] / w[ids].sum()
    pairs = list(zip(ids.tolist(), probs.tolist()))
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return pairs


def explain(logits, token: int | None, n: int) -> tuple[list[int], list[float], float | None]:
    """(top ids, their probabilities, token's probability) in softmax(logits), for the trace."""
    x = _prepare(logits)
    if x.device.type == "cpu" and _CPU_VIA_NUMPY:
        return numpy_backend.explain(_numpy_view(x), token, n, _exp_scaled(x))
    return _explain_on_device(x, token, n)


def _explain_on_device(x, token: int | None, n: int) -> tuple[list[int], list[float], float | None]:
    """explain on the tensor's device: torch.topk, one transfer of n + 2 numbers and n ids."""
    import torch

    top = x.max()
    total = torch.sub(x, top).exp_().sum()
    k = min(max(n, 1), x.shape[0])
    vals, ids = torch.topk(x, k)
    if k < x.shape[0]:
        # topk may pick any of the tokens tied at the k-th value: take the lowest ids
        kth = vals[-1]
        mask = _cut(x, kth, k - (vals > kth).sum(), None)
        ids = torch.topk(mask.to(vals.dtype), k).indices
        vals = x[ids]
    dtype = torch.float64 if _float64_ok(x.device) else torch.float32
    parts = [top.reshape(1), torch.exp(vals - top) / total, vals, ids]
    if token is not None:
        parts.append((torch.exp(x[token] - top) / total).reshape(1))
    numbers = torch.cat([p.to(dtype) for p in parts]).tolist()  # the one transfer
    if not isfinite(numbers[0]):
        _invalid(x)
    probs, values = numbers[1 : 1 + k], numbers[1 + k : 1 + 2 * k]
    ids_out = [int(i) for i in numbers[1 + 2 * k : 1 + 3 * k]]
    prob = numbers[-1] if token is not None else None
    # topk's order among equal logits is unspecified: lowest id first, as everywhere else
    order = sorted(range(k), key=lambda j: (-values[j], ids_out[j]))[:n]
    return [ids_out[j] for j in order], [probs[j] for j in order], prob


def sampled_explain(
    params: SamplerParams, logits, token: int, n: int, drawn=None
) -> tuple[list[int], list[float], float]:
    """`Sampler.explain` for a tensor at T > 0: on its device, with one transfer (CPU: the numpy kernels,
    with what their draw kept)."""
    import torch

    x = _prepare(logits)
    if x.device.type == "cpu" and _CPU_VIA_NUMPY:
        return numpy_backend.sampled_explain(params, _numpy_view(x), token, n, _exp_scaled(x), drawn)
    dtype = torch.float64 if _float64_ok(x.device) else torch.float32
    k = min(max(n, 1), x.shape[0])
    candidates = None
    while True:
        w, keep, ok, covered = _keep(params, x, candidates)
        kept = w if keep is None else torch.where(keep, w, 0.0)
        total = kept.sum(dtype=dtype)
        # every filter keeps the heaviest tokens, so the top of what is kept is the top by logit, cut to it
        vals, ids = torch.topk(x, k)
        if k < x.shape[0]:  # topk may pick any of the tokens tied at the k-th value: take the lowest ids
            kth = vals[-1]
            ids = torch.topk(_cut(x, kth, k - (vals > kth).sum(), None).to(vals.dtype), k).indices
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
            _invalid(x)
        if numbers[1]:
            break
        candidates = x.shape[0] if candidates else _nucleus_size(params, w)
    total_w = numbers[2]
    weights, ids_out, values = (
        numbers[3 : 3 + k],
        [int(i) for i in numbers[3 + k : 3 + 2 * k]],
        numbers[3 + 2 * k : 3 + 3 * k],
    )
    order = sorted(range(k), key=lambda j: (-values[j], ids_out[j]))[: max(n, 0)]
    top = [(ids_out[j], weights[j] / total_w) for j in order if weights[j] > 0.0]
    return [t for t, _ in top], [p for _, p in top], numbers[-1] / total_w


def softmax(logits):
    """Probabilities at temperature 1, as a float32 or float64 tensor on the logits' device."""
    import torch

    x = _prepare(logits)
    top = x.max()
    if not bool(torch.isfinite(top)):
        _invalid(x)
    w = torch.sub(x, top).exp_()
    return w.div_(w.sum())
