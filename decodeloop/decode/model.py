"""The model interface, and the prefix cache every cached model shares.

A model is anything with `forward(context) -> logits` for the next token after
`context`, and `last_computed`, the number of positions that call computed. The
loop knows nothing else about models. `PrefixCachedModel` implements the cache
contract once: it finds the longest common prefix between the new context and
the one it saw last, drops what diverged, and asks the subclass to compute only
the positions past that prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable


class Model(Protocol):
    name: str
    vocab_size: int
    last_computed: int  # positions computed by the last forward; the rest came from the cache

    def forward(self, context: Sequence[int]) -> Sequence[float]: ...


@runtime_checkable
class RecordsAttention(Protocol):
    """A model that can keep its attention maps (the numpy transformer), for the viewer and attention_peek.py:
    per layer, (query position, first key position, weights) for every position it computed."""

    record_attention: bool
    cached_tokens: list[int]
    attention: list[list[tuple[int, int, Any]]]


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences.

    The common case (b extends a) is one C-speed list comparison; a divergence is
    found by bisection over slices, never by a Python-level loop per token.
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class PrefixCachedModel:
    """Base class: serve the common prefix from the cache, compute the rest.

    Subclasses implement `_truncate(n)` (keep the state of the first n positions)
    and `_compute(start)` (extend the state over positions start.. of
    `self.cached_tokens`, which already holds the whole context; return the
    logits after the last position).
    """

    name = "model"
    vocab_size = 0

    def __init__(self) -> None:
        self.cached_tokens: list[int] = []  # the tokens whose state the cache holds
        self.last_computed = 0
        self._last_logits: Sequence[float] | None = None

    def forward(self, context: Sequence[int]) -> Sequence[float]:
        if not context:
            raise ValueError("forward needs at least one token of context")
        keep = common_prefix_len(self.cached_tokens, context)
        if keep == len(context) == len(self.cached_tokens) and self._last_logits is not None:
            self.last_computed = 0
            return self._last_logits
        if keep == len(context):
            keep -= 1  # the logits after the last token were not kept: recompute that one position
        if keep < len(self.cached_tokens):
            self._truncate(keep)
            del self.cached_tokens[keep:]
        self.cached_tokens.extend(context[keep:])
        try:
            logits = self._compute(keep)
        except BaseException:
            # interrupted (Ctrl-C) or failed mid-computation: forget what may be half computed
            self._truncate(keep)
            del self.cached_tokens[keep:]
            self._last_logits = None
            raise
        self.last_computed = len(context) - keep
        self._last_logits = logits
        return logits

    def reset(self) -> None:
        self._truncate(0)
        self.cached_tokens.clear()
        self._last_logits = None

    def _truncate(self, n: int) -> None:
        raise NotImplementedError

    def _compute(self, start: int) -> Sequence[float]:
        raise NotImplementedError
