"""Models: loading a model bundle from a spec, the one place that maps a name to code.

A `ModelBundle` is what belongs together: the engine that produces tokens (for a
local model, its `forward` with a KV cache), the model's own tokenizer, its chat
format and its call syntax. `load_model(spec)` returns one:

    table, ngram, transformer    the lab models (char tokenizer, lab chat format, compact calls)
    hf:PATH                      Hugging Face transformers from a local directory or a .gguf file
                                 (extra `hf`; never touches the network)
    gguf:PATH                    llama.cpp in this process over a .gguf file; the harness samples
                                 (extras `llamacpp` and `hf`)
    openai:URL                   an OpenAI-compatible /v1/completions server samples; the chat format
                                 and tokenizer come from local files (`tokenizer=PATH`, extra `hf`)

Every bundle's tokenizer is checked when it is loaded (`check_tokenizer`): a
tokenizer whose `encode` can yield a special id is refused. Backends with heavy
dependencies are imported only when asked for. `default_servers(spec)` says
which bundled MCP servers a model expects when none is given.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from decodeloop.formats.calls.base import CallSyntax
from decodeloop.models.base import Model, PrefixCachedModel, common_prefix_len

LAB_MODELS = ("table", "ngram", "transformer")


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


def load_model(
    spec: str,
    *,
    order: int | None = None,
    weights: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    syntax: str | None = None,
    **remote,
) -> ModelBundle:
    """The bundle for a model spec (see the module docstring); raises ValueError for an unknown spec."""
    from decodeloop.formats.tokenizer import check_tokenizer

    if spec in LAB_MODELS:
        bundle = _lab_bundle(spec, order, weights, syntax)
    elif spec.startswith("hf:"):
        from decodeloop.models.hf import load_hf  # needs the `hf` extra: MissingDependency names it

        bundle = load_hf(spec[3:], device=device, dtype=dtype, syntax=syntax)
    elif spec.startswith("gguf:"):
        from decodeloop.models.llamacpp import load_gguf  # needs the `llamacpp` extra: MissingDependency names it

        bundle = load_gguf(spec[len("gguf:") :], syntax=syntax)
    elif spec.startswith("openai:"):
        from decodeloop.models.openai import load_openai  # the tokenizer needs the `hf` extra

        bundle = load_openai(spec[len("openai:") :], syntax=syntax, **remote)
    else:
        raise ValueError(
            f"unknown model {spec!r}; choose one of: {', '.join(LAB_MODELS)}, or hf:PATH "
            "(a local Hugging Face model directory or .gguf file)"
        )
    check_tokenizer(bundle.tokenizer)
    return bundle


def lab_bundle(model: Model, tokenizer=None, name: str | None = None) -> ModelBundle:
    """Any model over the lab tokenizer (a hand-written table, say) with the lab chat format and compact calls."""
    from decodeloop.formats.calls.compact import CompactSyntax
    from decodeloop.formats.lab import CharTokenizer, LabChat

    tokenizer = tokenizer or CharTokenizer()
    compact = CompactSyntax()
    own_name: str = model.name
    return ModelBundle(name or own_name, tokenizer, LabChat(tokenizer, compact), compact, model=model)


def _lab_bundle(name: str, order: int | None, weights: str | None, syntax: str | None) -> ModelBundle:
    from decodeloop.formats.lab import CharTokenizer

    if syntax not in (None, "compact"):
        raise ValueError(f"the lab models write compact calls only, not {syntax!r} ones")
    tokenizer = CharTokenizer()
    if name == "table":
        from decodeloop.lab.table import TableModel

        model: Model = TableModel(tokenizer)
    elif name == "ngram":
        from decodeloop.lab.ngram import DEFAULT_ORDER, NgramModel

        model = NgramModel.trained(tokenizer, DEFAULT_ORDER if order is None else order)  # 0 is refused, not 8
    else:  # needs numpy: raises MissingDependency, naming the extra, without it
        from decodeloop.lab.transformer import DEFAULT_WEIGHTS, TransformerModel

        model = TransformerModel.load(weights or DEFAULT_WEIGHTS)
    return lab_bundle(model, tokenizer, name)


def default_servers(spec: str, ood: bool = False) -> list[list[str]]:
    """The stdio commands of the bundled servers a model expects when no server is given (`ood`: started
    with --ood, answering with values no training transcript holds)."""
    from decodeloop.servers import command

    if spec == "table":  # the table knows one conversation, about the weather
        return [command("weather") + (["--ood"] if ood else [])]
    from decodeloop.lab.corpus import lab_server_commands  # the lab corpus's tools: weather, time zones, units

    return lab_server_commands(ood)


__all__ = [
    "LAB_MODELS",
    "Model",
    "ModelBundle",
    "PrefixCachedModel",
    "common_prefix_len",
    "default_servers",
    "lab_bundle",
    "load_model",
]
