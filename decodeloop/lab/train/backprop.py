"""The transformer's training forward pass, with a tape, and its backward pass, by hand.

Owns the gradients of the architecture in models/transformer.py (the forward
math is the same functions; a test holds the logits here equal to the cached
model's). Nothing here knows about data or optimisers.

A batch is one shared prefix and B suffixes. Every lab transcript starts with
the same system prompt, and with rotary positions and windowed attention that
prompt's keys and values are the same in every transcript, so the prefix runs
once (batch 1) and each suffix attends to its last window-1 keys and values:
the training forward is the KV cache, batched. The backward pass sums what the
B suffixes send back into those keys and values and carries it down through
the prefix, so the gradients are exact, not an approximation. Only the keys
and values near the prefix's end are read, so its blocks shrink layer by layer
(`keep`, a pyramid) and its last block computes keys and values only.

    _, tape_p = segment_forward(params, config, prefix[None], 0, keep=pyramid)
    xs, tape_s = segment_forward(params, config, suffixes, P, tape_p.past(config), before=prefix[-lookback:])
    loss, dxs, head = head_loss(params, xs, targets, weights)            # xs: [B, T, d]
    grads, dpast = segment_backward(params, config, tape_s, dxs)
    grads_p, _ = segment_backward(params, config, tape_p, None, dpast)  # + head + grads = all of them
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from decodeloop.lab.transformer import (
    GELU_C,
    LN_EPS,
    NO_PREVIOUS,
    Config,
    embed,
    np,
    previous_tokens,
    rope,
    rope_tables,
    softmax,
    window_mask,
)


@dataclass
class Tape:
    """What one segment's forward keeps for its backward pass."""

    ids: np.ndarray  # [B, T]
    previous: np.ndarray  # [lookback, B, T]: the tokens 1, 2, ... back of each
    pos0: int
    n_past: int  # positions of keys and values that came from before
    past_batch: int  # 1 when the past is shared by every row, else B
    cos: np.ndarray  # [T, hd/2]
    sin: np.ndarray
    qcos: np.ndarray  # cos and sin times hd^-0.5: the queries' rotation and scale in one
    qsin: np.ndarray
    layers: list = field(default_factory=list)

    def past(self, config: Config) -> list:
        """The last window-1 keys and values of each layer, as the past of the segment after this one."""
        return [
            (layer["K"][:, :, -(config.window - 1) :], layer["V"][:, :, -(config.window - 1) :])
            if config.window > 1
            else (layer["K"][:, :, :0], layer["V"][:, :, :0])
            for layer in self.layers
        ]


# The elementwise passes below work in place where they can: on arrays of a few MB a
# temporary costs as much as the arithmetic.


def ln_forward(x, g, b):
    xhat = x - x.mean(-1, keepdims=True)  # [..., d], centred
    rstd = np.einsum("...i,...i->...", xhat, xhat)[..., None]  # [..., 1]
    rstd /= x.shape[-1]
    rstd += LN_EPS
    np.sqrt(rstd, out=rstd)
    np.reciprocal(rstd, out=rstd)
    xhat *= rstd
    y = xhat * g
    y += b
    return y, (xhat, rstd)


def ln_backward(dy, g, cache):
    xhat, rstd = cache
    dxhat = dy * g
    d = dy.shape[-1]
    along = np.einsum("...i,...i->...", dxhat, xhat)[..., None] / d  # mean(dxhat * xhat)
    dx = dxhat - dxhat.mean(-1, keepdims=True)
    dx -= xhat * along
    dx *= rstd
    axes = tuple(range(dy.ndim - 1))
    return dx, np.einsum("ni,ni->i", _flat(dy), _flat(xhat)), dy.sum(axes)


def gelu_forward(x):
    """GELU (tanh form, as models/transformer.py's gelu), keeping the tanh for the backward pass."""
    t = x * x
    t *= 0.044715 * GELU_C
    t += GELU_C
    t *= x  # z = C (x + 0.044715 x^3)
    np.tanh(t, out=t)
    out = t + 1
    out *= x
    out *= 0.5
    return out, t


def gelu_backward(dy, x, t):
    # d/dx 0.5 x (1 + t) = 0.5 (1 + t) + 0.5 x (1 - t^2) C (1 + 3 * 0.044715 x^2)
    u = x * x
    u *= 3 * 0.044715 * GELU_C
    u += GELU_C
    u *= x
    v = t * t
    np.subtract(1, v, out=v)
    u *= v
    u += t
    u += 1
    u *= 0.5
    u *= dy
    return u


QUERY_CHUNK = 64  # queries scored together; each chunk scores only the keys its window reaches


def attend(q, K, V, q_pos0: int, k_pos0: int, window: int):
    """Windowed causal attention of q [B, H, n, hd] (already scaled) over K, V [B, H, m, hd].

    Queries go in chunks, each scoring only the keys some query in the chunk may
    see, so a window shorter than the keys wastes little. Returns y [B, H, n, hd]
    and, per chunk, (first query, end, first key, end, e, 1/z): the softmax's
    numerators e and the reciprocal of their sums, weights = e / z. Dividing y
    [c, hd] by z instead of the weights [c, keys] saves a pass over the largest array.
    """
    n = q.shape[2]
    y = np.empty(q.shape, q.dtype)
    maps = []
    for c0 in range(0, n, QUERY_CHUNK):
        c1 = min(n, c0 + QUERY_CHUNK)
        lo = max(0, q_pos0 + c0 - window + 1 - k_pos0)  # keys [lo, hi) of K
        hi = q_pos0 + c1 - k_pos0
        s = q[:, :, c0:c1] @ K[:, :, lo:hi].transpose(0, 1, 3, 2)  # [B, H, c, hi-lo]
        s += _mask_bias(q_pos0 + c0 - k_pos0 - lo, c1 - c0, hi - lo, window, s.dtype)
        s -= s.max(-1, keepdims=True)
        np.exp(s, out=s)  # e: the softmax's numerators
        rz = s.sum(-1, keepdims=True)
        np.reciprocal(rz, out=rz)  # [B, H, c, 1]
        yc = y[:, :, c0:c1]
        np.matmul(s, V[:, :, lo:hi], out=yc)
        yc *= rz
        maps.append((c0, c1, lo, hi, s, rz))
    return y, maps


def attend_backward(dy, q, K, V, maps):
    """dq, dK, dV from dy [B, H, n, hd] through `attend` (dq with respect to the scaled q).

    With weights a = e / z: dV = a^T dy = e^T (dy / z), and through the softmax
    d(scores) = a * (da - sum(da * a)) = e * (da' - sum(da' * e) / z) with da' = da / z."""
    dq = np.empty(q.shape, q.dtype)
    dK, dV = np.zeros(K.shape, K.dtype), np.zeros(V.shape, V.dtype)
    for c0, c1, lo, hi, e, rz in maps:
        dyz = dy[:, :, c0:c1] * rz  # [B, H, c, hd]
        dV[:, :, lo:hi] += e.transpose(0, 1, 3, 2) @ dyz
        ds = dyz @ V[:, :, lo:hi].transpose(0, 1, 3, 2)  # [B, H, c, hi-lo]: da'
        along = np.einsum("...i,...i->...", ds, e)[..., None]
        along *= rz
        ds -= along
        ds *= e  # d(scores)
        np.matmul(ds, K[:, :, lo:hi], out=dq[:, :, c0:c1])
        dK[:, :, lo:hi] += ds.transpose(0, 1, 3, 2) @ q[:, :, c0:c1]
    return dq, dK, dV


@lru_cache(maxsize=64)
def _mask_bias(offset: int, n_q: int, n_k: int, window: int, dtype):
    """0 where query i (at key position offset + i) may attend to key j, -inf elsewhere; the same few
    shapes recur in every chunk, so each is built once."""
    bias = np.where(window_mask(offset, n_q, 0, n_k, window), 0, -np.inf).astype(dtype)
    bias.flags.writeable = False
    return bias


def segment_forward(
    p: dict, config: Config, ids, pos0: int, past: list | None = None, keep: list | None = None, before=None
):
    """Run token rows ids [B, T] at positions pos0.. through every block; past: per layer (K, V);
    before: the `lookback` tokens preceding the segment in every row, oldest first.

    keep[i], when given, is how many of the last positions block i's output is
    needed for: the shared prefix needs its keys and values only near its end,
    so each block runs queries, attention and MLP over fewer positions than the
    one before (a pyramid), and the last block only computes keys and values.
    """
    B, T = ids.shape
    H, hd, d = config.n_head, config.head_dim, config.d_model
    n_past = 0 if past is None else past[0][0].shape[2]
    dtype = p["wte"].dtype
    cos, sin = rope_tables(pos0, T, config, dtype)  # [T, hd/2]
    scale = dtype.type(hd**-0.5)
    if before is None:
        before = [NO_PREVIOUS] * config.lookback
    previous = previous_tokens(ids, before, config.lookback)  # [lookback, B, T]
    tape = Tape(
        ids, previous, pos0, n_past, 1 if past is None else past[0][0].shape[0], cos, sin, cos * scale, sin * scale
    )
    x = embed(p, ids, previous)  # [B, T, d]
    for i in range(config.n_layer):
        pre, L = f"blocks.{i}.", {"x": x}
        R = x.shape[1]  # rows in: the last R positions
        n = R if keep is None else min(R, keep[i])  # rows out
        L["n"] = n
        h, L["ln_1"] = ln_forward(x, p[pre + "ln_1.g"], p[pre + "ln_1.b"])
        L["h1"] = h  # [B, R, d]
        qkv = h @ p[pre + "attn.c_attn.w"]  # [B, R, 3d]
        qkv += p[pre + "attn.c_attn.b"]
        q, k, v = qkv.reshape(B, R, 3, H, hd).transpose(2, 0, 3, 1, 4)  # 3 x [B, H, R, hd]
        k = rope(k, cos[T - R :], sin[T - R :])
        if past is not None:
            pk, pv = past[i]  # [1 or B, H, n_past, hd]
            k = np.concatenate([np.broadcast_to(pk, (B, *pk.shape[1:])), k], axis=2)
            v = np.concatenate([np.broadcast_to(pv, (B, *pv.shape[1:])), v], axis=2)
        L["K"], L["V"] = k, v  # [B, H, n_past+R, hd]
        if n == 0:  # nothing downstream reads this block's output, only its keys and values
            x = x[:, R:]
            tape.layers.append(L)
            continue
        q = rope(q[:, :, R - n :], tape.qcos[T - n :], tape.qsin[T - n :])  # [B, H, n, hd], scaled
        y, L["att"] = attend(q, k, v, pos0 + T - n, pos0 + T - R - n_past, config.window)
        L["q"] = q
        y = y.transpose(0, 2, 1, 3).reshape(B, n, d)  # [B, n, d]
        L["y"] = y
        out = y @ p[pre + "attn.c_proj.w"]
        out += p[pre + "attn.c_proj.b"]
        x = x[:, R - n :] + out
        h, L["ln_2"] = ln_forward(x, p[pre + "ln_2.g"], p[pre + "ln_2.b"])
        L["h2"] = h  # [B, n, d]
        f = h @ p[pre + "mlp.c_fc.w"]  # [B, n, 4d]
        f += p[pre + "mlp.c_fc.b"]
        L["f"] = f
        L["g"], L["t"] = gelu_forward(f)
        out = L["g"] @ p[pre + "mlp.c_proj.w"]
        out += p[pre + "mlp.c_proj.b"]
        x = x + out
        tape.layers.append(L)
    return x, tape


def segment_backward(p: dict, config: Config, tape: Tape, dx, dkv: list | None = None):
    """Gradients of a segment's weights from dx [B, n, d] (the loss's pull on its output, or None)
    and dkv (per layer, the pull on the last keys and values, from a segment that attended to them).

    Returns the gradients by weight name and, per layer, the pull on the past keys and values.
    """
    B, T = tape.ids.shape
    H, hd, d = config.n_head, config.head_dim, config.d_model
    n_past = tape.n_past
    grads: dict = {}
    dpast: list[tuple[np.ndarray, np.ndarray] | None] = [None] * config.n_layer
    dtype = p["wte"].dtype
    if dx is None:
        dx = np.zeros((B, tape.layers[-1]["n"], d), dtype)
    for i in reversed(range(config.n_layer)):
        pre, L = f"blocks.{i}.", tape.layers[i]
        R, n = L["x"].shape[1], L["n"]
        K, V = L["K"], L["V"]
        if n:
            # x_out = x_mid + gelu(ln_2(x_mid) @ c_fc) @ c_proj
            grads[pre + "mlp.c_proj.w"] = _flat(L["g"]).T @ _flat(dx)
            grads[pre + "mlp.c_proj.b"] = dx.sum((0, 1))
            df = gelu_backward(dx @ p[pre + "mlp.c_proj.w"].T, L["f"], L["t"])  # [B, n, 4d]
            grads[pre + "mlp.c_fc.w"] = _flat(L["h2"]).T @ _flat(df)
            grads[pre + "mlp.c_fc.b"] = df.sum((0, 1))
            dh, grads[pre + "ln_2.g"], grads[pre + "ln_2.b"] = ln_backward(
                df @ p[pre + "mlp.c_fc.w"].T, p[pre + "ln_2.g"], L["ln_2"]
            )
            dx = dx + dh
            # x_mid = x + attn(ln_1(x)) @ c_proj
            grads[pre + "attn.c_proj.w"] = _flat(L["y"]).T @ _flat(dx)
            grads[pre + "attn.c_proj.b"] = dx.sum((0, 1))
            dy = (dx @ p[pre + "attn.c_proj.w"].T).reshape(B, n, H, hd).transpose(0, 2, 1, 3)  # [B, H, n, hd]
            dq, dK, dV = attend_backward(dy, L["q"], K, V, L["att"])  # dq: of the rotated, scaled q
        else:
            for name in (
                "mlp.c_proj.w",
                "mlp.c_proj.b",
                "mlp.c_fc.w",
                "mlp.c_fc.b",
                "ln_2.g",
                "ln_2.b",
                "attn.c_proj.w",
                "attn.c_proj.b",
            ):
                grads[pre + name] = np.zeros_like(p[pre + name])
            dq = np.zeros((B, H, 0, hd), dtype)
            dK, dV = np.zeros(K.shape, dtype), np.zeros(V.shape, dtype)
        if dkv is not None and dkv[i] is not None:
            ek, ev = dkv[i]  # [B, H, m, hd], the last m positions
            m = ek.shape[2]
            if m:
                dK[:, :, n_past + R - m :] += ek
                dV[:, :, n_past + R - m :] += ev
        if n_past:
            axes = (0,) if tape.past_batch == 1 else ()
            dpast[i] = (dK[:, :, :n_past].sum(axes, keepdims=True), dV[:, :, :n_past].sum(axes, keepdims=True))
        # rotation back: the inverse of rope is rope by the negative angle (and the queries' scale again)
        dqkv = np.empty((B, R, 3, H, hd), dtype)  # laid out as qkv: [B, R, 3d] at the end
        dqkv[:, : R - n, 0] = 0
        dqkv[:, R - n :, 0] = rope(dq, tape.qcos[T - n :], -tape.qsin[T - n :]).transpose(0, 2, 1, 3)
        dqkv[:, :, 1] = rope(dK[:, :, n_past:], tape.cos[T - R :], -tape.sin[T - R :]).transpose(0, 2, 1, 3)
        dqkv[:, :, 2] = dV[:, :, n_past:].transpose(0, 2, 1, 3)
        dqkv = dqkv.reshape(B, R, 3 * d)  # [B, R, 3d]
        grads[pre + "attn.c_attn.w"] = _flat(L["h1"]).T @ _flat(dqkv)
        grads[pre + "attn.c_attn.b"] = dqkv.sum((0, 1))
        dh, grads[pre + "ln_1.g"], grads[pre + "ln_1.b"] = ln_backward(
            dqkv @ p[pre + "attn.c_attn.w"].T, p[pre + "ln_1.g"], L["ln_1"]
        )
        dh[:, R - n :] += dx  # the residual path of the kept rows
        dx = dh
    tables = embedding_grads(np.concatenate([tape.ids[None], tape.previous]), dx, p["wte"].shape[0])
    grads["wte"], grads["wte_prev"] = tables[0], tables[1:]
    return grads, dpast


def embedding_grads(ids, dx, vocab: int):
    """[K, vocab, d]: row t of table k sums dx over the positions whose token in ids[k] is t.

    ids [K, B, T] (the token itself, then those 1, 2, ... back), dx [B, T, d]. The positions of
    every table are sorted by the row they add to, once, and each run of equal rows is summed
    with one reduceat over dx laid out [d, positions], so every sum runs along contiguous
    memory."""
    K, d = len(ids), dx.shape[-1]
    columns = np.ascontiguousarray(_flat(dx).T)  # [d, N]
    N = columns.shape[1]
    rows = (np.arange(K)[:, None] * vocab + ids.reshape(K, -1)).ravel()  # [K*N]: table k's row of each position
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # where each row's run begins
    sums = np.add.reduceat(np.take(columns, order % N, axis=1), starts, axis=1)  # [d, runs]
    out = np.zeros((K * vocab, d), dx.dtype)
    out[ordered[starts]] = sums.T
    return out.reshape(K, vocab, d)


def head_loss(p: dict, x, targets, weights, total: float | None = None):
    """Weighted cross-entropy of the next token where weights > 0, divided by `total`
    (default: the sum of the weights, a weighted mean).

    x [B, T, d], targets and weights [B, T]. Only the weighted positions go
    through ln_f and the tied unembedding. Returns (loss, dx, grads of wte and ln_f).
    """
    rows, cols = np.nonzero(weights)
    w = weights[rows, cols] / (weights.sum() if total is None else total)  # [N]
    h, cache = ln_forward(x[rows, cols], p["ln_f.g"], p["ln_f.b"])  # [N, d]
    logits = h @ p["wte"].T  # [N, vocab]
    probs = softmax(logits)
    t = targets[rows, cols]
    loss = float(-(w * np.log(probs[np.arange(len(t)), t])).sum())
    dlogits = probs
    dlogits[np.arange(len(t)), t] -= 1
    dlogits *= w[:, None]
    grads = {"wte": dlogits.T @ h}
    dh, grads["ln_f.g"], grads["ln_f.b"] = ln_backward(dlogits @ p["wte"], p["ln_f.g"], cache)
    dx = np.zeros_like(x)
    dx[rows, cols] = dh
    return loss, dx, grads


def head_logits(p: dict, x):
    """Logits at every position of x [B, T, d] (for tests and evaluation)."""
    h, _ = ln_forward(x, p["ln_f.g"], p["ln_f.b"])
    return h @ p["wte"].T  # [B, T, vocab]


def loss_and_grads(p: dict, config: Config, prefix, suffixes, targets, weights, parts: int = 1, run=map, before=None):
    """The loss of one batch and the gradient of every weight.

    prefix [P] is the shared start of every row (before: the tokens preceding it, if it
    was cut from a longer one); suffixes, targets, weights [B, T].
    The rows can be split into `parts` run by `run` (a thread pool's map: numpy
    releases the GIL in its loops); the parts are summed in a fixed order, so the
    result does not depend on which thread finishes first.
    """
    P, L, W = len(prefix), config.n_layer, config.window
    keep = [(L - 1 - i) * (W - 1) for i in range(L)]  # see segment_forward
    _xp, tape_p = segment_forward(p, config, prefix[None, :], 0, keep=keep, before=before)
    past, total = tape_p.past(config), float(weights.sum())
    # the tokens before the suffixes: the prefix's last ones, and those before it if it is shorter
    lead = [*(before if before is not None else [NO_PREVIOUS] * config.lookback), *prefix]
    suffix_before = lead[-config.lookback :]

    def rows(part: slice):
        xs, tape_s = segment_forward(p, config, suffixes[part], P, past, before=suffix_before)
        loss, dxs, grads = head_loss(p, xs, targets[part], weights[part], total)
        g, dpast = segment_backward(p, config, tape_s, dxs)
        for name, value in g.items():
            grads[name] = grads[name] + value if name in grads else value
        return loss, grads, dpast

    bounds = np.linspace(0, len(suffixes), min(parts, len(suffixes)) + 1).astype(int)
    results = list(run(rows, [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]))
    loss, grads, dpast = results[0]
    for other_loss, other_grads, other_dpast in results[1:]:
        loss += other_loss
        for name, value in other_grads.items():
            grads[name] = grads[name] + value
        dpast = [(k + ok, v + ov) for (k, v), (ok, ov) in zip(dpast, other_dpast)]
    g_p, _ = segment_backward(p, config, tape_p, None, dpast)
    for name, value in g_p.items():
        grads[name] = grads[name] + value
    return loss, grads


def _flat(a):
    return a.reshape(-1, a.shape[-1])
