"""The lab transformer: a decoder-only transformer in numpy, and its KV cache.

Owns the architecture (weights by checkpoint-style name, the forward pass), the
KV cache under the `PrefixCachedModel` contract, and the weight file format.
Training (the backward pass, Adam) lives in decodeloop/lab/train/.

    x = wte[tokens] + sum of wte_prev[j-1][tokens j back], j = 1..lookback   no position table
    for block in blocks:                             pre-LN residual blocks
        x = x + attn(ln_1(x))                        causal, windowed, rotary positions
        x = x + mlp(ln_2(x))                         GELU, 4x wide
    logits = ln_f(x) @ wte.T                         tied unembedding

Each position also embeds the `lookback` tokens before it (`wte_prev`), so a
key can say "I follow Z, Y, X": a head can find where the last tokens written
occurred before and copy what came next (an induction head) without first
needing layers that move earlier tokens over. Copying names and numbers out of
the context is the whole job here. Matching more than one token is what tells
apart the two e's of "Fayetteville"; three find "Tue 7" among the lines of a
forecast (the second digit of Tuesday's temperature, not Monday's); four tell
"rque" from "uque" in "Albuquerque", so a copy does not loop back to the first
"que". Having it from the first layer is what makes copying learnable in
minutes on a CPU.

Positions are rotary (RoPE): a query-key score depends only on the distance
between the two, never on where the pair sits in the context. Attention is
windowed: position p sees positions p-window+1 .. p. Together they mean a span
of tokens gets the same states wherever it occurs, so training can run the
shared system prompt once per batch, and a forward over position p needs only
the last window-1 cached keys and values of each layer.

The cache holds the rotated keys and the values of every position seen, per
layer; `_truncate(n)` forgets positions from n on, `_compute(start)` runs the
positions past `start` in chunks, each chunk attending to the cache.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

from decodeloop.decode.model import PrefixCachedModel
from decodeloop.errors import MissingDependency

# The matrices here are small: BLAS threads spin and contend more than they help.
# Training splits its batch between threads itself. Takes effect only if numpy is not yet imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

try:
    import numpy as np
except ImportError:  # the core is standard library only; numpy is the `lab` extra
    raise MissingDependency(
        "the transformer model needs numpy: pip install -e '.[lab]' in the clone (or pip install numpy)"
    ) from None

DEFAULT_WEIGHTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights", "transformer.npz")
CHUNK = 256  # positions per forward chunk: bounds the score matrices of a long prefill
NO_PREVIOUS = 0  # the "token before" the first position: <|eos|>, as if a turn had just ended


@dataclass(frozen=True)
class Config:
    vocab_size: int = 261  # CharTokenizer: 5 special tokens, then 256 bytes
    n_layer: int = 4
    n_head: int = 2  # two heads of 32: room in a query and a key to match several tokens
    d_model: int = 64
    window: int = 256  # attention sees this many positions, the query's own included
    lookback: int = 10  # earlier tokens each position embeds besides its own
    rope_base: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


def init_params(config: Config, rng, dtype=np.float32) -> dict:
    """Random weights, GPT-2 style: N(0, 0.02), residual projections scaled down by depth."""
    d, std = config.d_model, 0.02
    proj_std = std / np.sqrt(2 * config.n_layer)
    p = {
        "wte": rng.normal(0, std, (config.vocab_size, d)),
        "wte_prev": rng.normal(0, std, (config.lookback, config.vocab_size, d)),
    }
    for i in range(config.n_layer):
        pre = f"blocks.{i}."
        p[pre + "ln_1.g"], p[pre + "ln_1.b"] = np.ones(d), np.zeros(d)
        p[pre + "attn.c_attn.w"], p[pre + "attn.c_attn.b"] = rng.normal(0, std, (d, 3 * d)), np.zeros(3 * d)
        p[pre + "attn.c_proj.w"], p[pre + "attn.c_proj.b"] = rng.normal(0, proj_std, (d, d)), np.zeros(d)
        p[pre + "ln_2.g"], p[pre + "ln_2.b"] = np.ones(d), np.zeros(d)
        p[pre + "mlp.c_fc.w"], p[pre + "mlp.c_fc.b"] = rng.normal(0, std, (d, 4 * d)), np.zeros(4 * d)
        p[pre + "mlp.c_proj.w"], p[pre + "mlp.c_proj.b"] = rng.normal(0, proj_std, (4 * d, d)), np.zeros(d)
    p["ln_f.g"], p["ln_f.b"] = np.ones(d), np.zeros(d)
    return {name: value.astype(dtype) for name, value in p.items()}


# -- the pieces, shared with training ----------------------------------------------------

LN_EPS = 1e-5
GELU_C = float(np.sqrt(2 / np.pi))


def layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)  # [..., 1]
    var = ((x - mu) ** 2).mean(-1, keepdims=True)  # [..., 1]
    return (x - mu) / np.sqrt(var + LN_EPS) * g + b  # [..., d]


def gelu(x):
    return 0.5 * x * (1 + np.tanh(GELU_C * (x + 0.044715 * x * x * x)))  # tanh form, as GPT-2


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def rope_tables(pos0: int, n: int, config: Config, dtype):
    """cos and sin of the rotation angles for positions pos0 .. pos0+n-1."""
    half = config.head_dim // 2
    freqs = config.rope_base ** (-np.arange(half) / half)  # [hd/2]
    angles = np.arange(pos0, pos0 + n)[:, None] * freqs[None, :]  # [n, hd/2]
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def rope(x, cos, sin):
    """Rotate each (x1[i], x2[i]) pair of the head's halves by its position's angle."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # [..., n, hd/2]
    out = np.empty(x.shape, np.result_type(x, cos))  # written in place: no temporaries to join
    o1, o2 = out[..., :half], out[..., half:]
    np.multiply(x1, cos, out=o1)
    o1 -= x2 * sin
    np.multiply(x1, sin, out=o2)
    o2 += x2 * cos
    return out


def previous_tokens(ids, before, lookback: int):
    """[lookback, *ids.shape]: entry j-1 holds the token j positions back of each token in the
    rows ids [..., T]; `before` are the `lookback` tokens preceding the rows, oldest first."""
    lead = np.broadcast_to(np.asarray(before, dtype=ids.dtype), (*ids.shape[:-1], lookback))
    full = np.concatenate([lead, ids], axis=-1)  # [..., lookback+T]
    T = ids.shape[-1]
    return np.stack([full[..., lookback - j : lookback - j + T] for j in range(1, lookback + 1)])


def embed(p: dict, ids, previous):
    """The token embeddings plus those of the tokens before each."""
    x = p["wte"][ids]  # [..., T, d]
    for j, back in enumerate(previous):
        x = x + p["wte_prev"][j][back]
    return x


def window_mask(q_pos0: int, n_q: int, k_pos0: int, n_k: int, window: int):
    """True where query i may attend to key j: causal, and fewer than `window` positions back."""
    distance = (q_pos0 + np.arange(n_q))[:, None] - (k_pos0 + np.arange(n_k))[None, :]  # [n_q, n_k]
    return (distance >= 0) & (distance < window)


# -- the model ---------------------------------------------------------------------------


class TransformerModel(PrefixCachedModel):
    name = "transformer"

    def __init__(self, params: dict, config: Config, dtype=np.float32, meta: dict | None = None) -> None:
        super().__init__()
        self.config = config
        self.vocab_size = config.vocab_size
        self.meta = meta or {}
        self.dtype = np.dtype(dtype)
        self.params = {name: np.asarray(value, dtype=self.dtype) for name, value in params.items()}
        self.record_attention = False  # when set, _compute keeps every attention map (attention_peek.py)
        self.attention: list[list[tuple[int, int, np.ndarray]]] = []
        self._length = 0  # positions the cache holds
        # per layer: [n_head, capacity, head_dim]; empty until the first forward
        self._k: list[np.ndarray] = []
        self._v: list[np.ndarray] = []

    @classmethod
    def load(cls, path: str = DEFAULT_WEIGHTS, dtype=np.float32) -> TransformerModel:
        params, config, meta = load_weights(path)
        return cls(params, config, dtype, meta)

    def _truncate(self, n: int) -> None:
        self._length = min(self._length, n)
        for maps in self.attention:
            maps[:] = [m for m in maps if m[0] < n]

    def _compute(self, start: int) -> np.ndarray:
        tokens = self.cached_tokens
        self._reserve(len(tokens))
        for pos0 in range(start, len(tokens), CHUNK):
            k = self.config.lookback
            before = [tokens[i] if i >= 0 else NO_PREVIOUS for i in range(pos0 - k, pos0)]
            x = self._forward_chunk(np.asarray(tokens[pos0 : pos0 + CHUNK]), before, pos0)
        p = self.params
        h = layer_norm(x[-1], p["ln_f.g"], p["ln_f.b"])  # [d]
        return h @ p["wte"].T  # [vocab]

    def _forward_chunk(self, ids, before, pos0: int) -> np.ndarray:
        """Run positions pos0 .. pos0+n-1 (tokens ids, after the tokens `before`) through every
        block, extending the cache."""
        c, p = self.config, self.params
        n, H, hd, d = len(ids), c.n_head, c.head_dim, c.d_model
        end = pos0 + n
        lo = max(0, pos0 - c.window + 1)  # oldest key any query here sees
        cos, sin = rope_tables(pos0, n, c, self.dtype)  # [n, hd/2]
        allowed = window_mask(pos0, n, lo, end - lo, c.window)  # [n, end-lo]
        x = embed(p, ids, previous_tokens(ids, before, c.lookback))  # [n, d]
        for i in range(c.n_layer):
            pre = f"blocks.{i}."
            h = layer_norm(x, p[pre + "ln_1.g"], p[pre + "ln_1.b"])  # [n, d]
            qkv = h @ p[pre + "attn.c_attn.w"] + p[pre + "attn.c_attn.b"]  # [n, 3d]
            q, k, v = qkv.reshape(n, 3, H, hd).transpose(1, 2, 0, 3)  # 3 x [H, n, hd]
            self._k[i][:, pos0:end] = rope(k, cos, sin)
            self._v[i][:, pos0:end] = v
            K, V = self._k[i][:, lo:end], self._v[i][:, lo:end]  # [H, end-lo, hd]
            scores = rope(q, cos, sin) @ K.transpose(0, 2, 1) * hd**-0.5  # [H, n, end-lo]
            att = softmax(np.where(allowed, scores, -np.inf))  # [H, n, end-lo]
            if self.record_attention:
                self.attention[i].append((pos0, lo, att))
            y = (att @ V).transpose(1, 0, 2).reshape(n, d)  # [n, d]
            x = x + y @ p[pre + "attn.c_proj.w"] + p[pre + "attn.c_proj.b"]
            h = layer_norm(x, p[pre + "ln_2.g"], p[pre + "ln_2.b"])  # [n, d]
            h = gelu(h @ p[pre + "mlp.c_fc.w"] + p[pre + "mlp.c_fc.b"])  # [n, 4d]
            x = x + h @ p[pre + "mlp.c_proj.w"] + p[pre + "mlp.c_proj.b"]  # [n, d]
        self._length = end
        return x

    def _reserve(self, n: int) -> None:
        """Make room in the cache for n positions, doubling so appends stay amortised O(1)."""
        c = self.config
        if self.record_attention and len(self.attention) != c.n_layer:
            self.attention = [[] for _ in range(c.n_layer)]
        capacity = self._k[0].shape[1] if self._k else 0
        if n <= capacity:
            return
        capacity = max(n, 2 * capacity, 1024)
        shape = (c.n_head, capacity, c.head_dim)
        k, v = (
            [np.zeros(shape, self.dtype) for _ in range(c.n_layer)],
            [np.zeros(shape, self.dtype) for _ in range(c.n_layer)],
        )
        for i in range(len(self._k)):
            k[i][:, : self._length], v[i][:, : self._length] = (
                self._k[i][:, : self._length],
                self._v[i][:, : self._length],
            )
        self._k, self._v = k, v


# -- weight files ------------------------------------------------------------------------


def save_weights(path: str, params: dict, config: Config, meta: dict, dtype=np.float16) -> None:
    """An .npz of the weights by name, with the config and `meta` (training run) as JSON."""
    arrays = {name: np.asarray(value, dtype=dtype) for name, value in params.items()}
    arrays["config"] = np.array(json.dumps(asdict(config)))
    arrays["meta"] = np.array(json.dumps(meta))
    with open(path, "wb") as f:  # a file object, so numpy does not append ".npz" to the name
        np.savez_compressed(f, **arrays)


class WeightsError(ValueError):
    """A file that is not lab transformer weights; the message is one line that says why."""


def load_weights(path: str) -> tuple[dict, Config, dict]:
    """The weights, config and training record of an .npz from `save_weights`; WeightsError for anything else
    (not an .npz, no config, names or shapes that are not the config's)."""
    import zipfile

    try:
        data = np.load(path, allow_pickle=False)
        if not hasattr(data, "files"):
            raise WeightsError("an .npy array, not an .npz of named weights")
        with data:
            missing = [key for key in ("config", "meta") if key not in data.files]
            if missing:
                raise WeightsError(f"no {' or '.join(missing)} record in it")
            config = Config(**json.loads(str(data["config"])))
            meta = json.loads(str(data["meta"]))
            params = {name: data[name] for name in data.files if name not in ("config", "meta")}
    except WeightsError as e:
        raise WeightsError(f"{path} is not a lab transformer weight file: {e}") from None
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        raise WeightsError(f"cannot read {path}: {e.strerror}") from None
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        if "pickled" in why:
            why = "not an .npz file"
        raise WeightsError(f"{path} is not a lab transformer weight file ({why})") from None
    expected = {name: value.shape for name, value in init_params(config, np.random.default_rng(0)).items()}
    wrong = sorted(set(expected) ^ set(params)) or [n for n in expected if params[n].shape != expected[n]]
    if wrong:
        raise WeightsError(
            f"{path} is not a lab transformer weight file: its weights do not fit its config "
            f"({', '.join(wrong[:3])}{', ...' if len(wrong) > 3 else ''})"
        )
    return params, config, meta
