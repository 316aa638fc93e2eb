"""`ModelBundle`: what belongs together to run a model through the harness.

The engine that produces tokens (for a local model, its `forward` with a KV
cache, decode/model.py), the model's own tokenizer, its chat format and its
call syntax. The registry (decodeloop/registry.py) maps a model spec to one;
`lab_bundle` wraps any model in the lab's tokenizer, chat format and compact
calls.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from decodeloop.decode.model import Model
from decodeloop.formats.calls.base import CallSyntax


@dataclass
class ModelBundle:
    name: str
    tokenizer: Any
    chat: Any
    syntax: CallSyntax
    model: Model | None = None  # a model the harness runs itself (forward + cache)
    make_engine: Callable[..., Any] | None = None  # an engine that samples for itself: (sampler, processors) -> Engine
    opener_id: int | None = None  # the call opener as one special token, if the vocabulary has it
    closer_id: int | None = None
    info: dict = field(default_factory=dict)  # what was loaded, for the trace (path, device, dtype, ...)
    context_length: int | None = None  # the most tokens the model attends to, when known
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)  # see `generating`

    def generating(self) -> AbstractContextManager:
        """What a turn holds while it generates. A model the harness runs has one cache, so the conversation's
        turn and a nested one (a server's sampling request) take its lock and never step it at once; an
        engine that samples for itself shares nothing between requests, so its turns run together."""
        return self.lock if self.model is not None else contextlib.nullcontext()

    def engine(self, sampler, processors: Sequence = ()):
        if self.make_engine is not None:
            return self.make_engine(sampler, processors)
        from decodeloop.decode.engine import LocalEngine

        return LocalEngine(self.model, sampler, processors)


def lab_bundle(model: Model, tokenizer=None, name: str | None = None) -> ModelBundle:
    """Any model over the lab tokenizer (a hand-written table, say) with the lab chat format and compact calls."""
    from decodeloop.formats.calls.compact import CompactSyntax
    from decodeloop.formats.lab import CharTokenizer, LabChat

    tokenizer = tokenizer or CharTokenizer()
    compact = CompactSyntax()
    own_name: str = model.name
    return ModelBundle(name or own_name, tokenizer, LabChat(tokenizer, compact), compact, model=model)


__all__ = ["ModelBundle", "lab_bundle"]
