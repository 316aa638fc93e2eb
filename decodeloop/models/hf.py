"""Hugging Face transformers models: `HFModel` (forward with a KV cache) and `load_hf` (the bundle).

`HFModel` is a `PrefixCachedModel` over a transformers causal LM: the cache is
transformers' own `DynamicCache`; `_truncate(n)` crops it to n positions,
`_compute(start)` runs positions start.. in one forward call (an injected tool
message is one prefill), under `torch.inference_mode`. `forward` returns the
next-token logits as a 1-D float32 tensor on the model's device, never a list:
the sampler and the logits processors take tensors.

`load_hf(path)` loads a local model directory, or a `.gguf` file (tokenizer and
weights from the file, through transformers' `gguf_file=`), with the hub
switched off (`HF_HUB_OFFLINE=1`, `local_files_only=True`): nothing is ever
downloaded. transformers de-quantizes a `.gguf` on every load, so the first
load keeps the result in the conversion cache (models/gguf_cache.py) and later
loads read that folder instead; the bundle's `info` says which happened. A
wrong path, a bad option and a missing package are reported before torch is
imported. The bundle's tokenizer is `HFTokenizer`, its chat format
`TemplateChat` over the model's own chat template, its call syntax JSON
(`<tool_call>{...}</tool_call>`, the default) or compact.

Needs the `hf` extra (see `hf_tokenizer.install_hint`).
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Sequence
from typing import Any

from decodeloop.decode.model import PrefixCachedModel
from decodeloop.formats.hf_tokenizer import HF_EXTRA, backend_of, require

DTYPES = ("float32", "bfloat16", "float16")


class HFModel(PrefixCachedModel):
    """A transformers causal LM behind the prefix-cache contract."""

    def __init__(self, model: Any, name: str = "hf", vocab_size: int | None = None) -> None:
        super().__init__()
        self.torch = require("torch")
        self.model = model.eval()
        self.name = name
        self.device = next(model.parameters()).device
        self.vocab_size = vocab_size or model.get_input_embeddings().num_embeddings
        self._cache = self._new_cache()
        self._held = 0  # positions the cache holds
        self._recomputed = 0  # positions recomputed because the cache could not be cropped
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"  # transformers 5 / 4
        self._keep_arg = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    def _new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def forward(self, context: Sequence[int]):
        self._recomputed = 0
        logits = super().forward(context)
        self.last_computed += self._recomputed
        return logits

    def _truncate(self, n: int) -> None:
        if n >= self._held:
            return
        if n > 0:
            try:
                self._cache.crop(n - self._held)  # transformers 5: a negative count of positions to drop
                self._held = n
                return
            except (RuntimeError, ValueError, NotImplementedError, AttributeError):
                pass  # a sliding-window or recurrent layer that cannot roll back: start over below
        self._cache = self._new_cache()
        self._held = 0

    def _compute(self, start: int):
        torch = self.torch
        self._recomputed = start - self._held  # > 0 only after a cache that could not be cropped
        ids = torch.tensor([self.cached_tokens[self._held :]], dtype=torch.long, device=self.device)
        try:
            with torch.inference_mode():
                out = self.model(input_ids=ids, use_cache=True, **{self._cache_arg: self._cache}, **self._keep_arg)
        except BaseException:
            self._cache, self._held = self._new_cache(), 0  # some layers may hold the new positions, some not
            raise
        self._held = len(self.cached_tokens)
        return out.logits[0, -1].float()


def _resolve_device(torch, device: str | None) -> str:
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch sees no CUDA device")
    return device


def _resolve_dtype(torch, dtype: str | None, device: str):
    if dtype in (None, "auto"):
        return torch.float32 if device == "cpu" else torch.bfloat16
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPES)}")
    return getattr(torch, dtype)


def _locate(path: str) -> tuple[str, str | None]:
    """(directory, gguf file name or None) for a model path; a clear error when it is not one."""
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"no model at {path!r}: hf:PATH takes a local model directory or a .gguf file (nothing is downloaded)"
        )
    if os.path.isfile(path):
        if not path.endswith(".gguf"):
            raise ValueError(f"{path!r} is a file but not a .gguf one; give a model directory or a .gguf file")
        return os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    if not os.path.exists(os.path.join(path, "config.json")):
        ggufs = sorted(f for f in os.listdir(path) if f.endswith(".gguf"))
        hint = f" (it holds {', '.join(ggufs)}: give the file)" if ggufs else ""
        raise ValueError(f"{path!r} has no config.json, so it is not a transformers model directory{hint}")
    if not any(os.path.exists(os.path.join(path, f)) for f in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        raise ValueError(f"{path!r} has no tokenizer (tokenizer.json, tokenizer.model or vocab.json)")
    return path, None


def check_call_format(name: str | None) -> None:
    """A call format name that is not one is refused before anything loads."""
    from decodeloop.formats.calls.formats import names

    if name not in (None, "auto", "json", "compact", *names()):
        choices = ", ".join(["auto", "compact", *names()])
        raise ValueError(f"unknown call format {name!r}; choose one of: {choices}")


def _call_format(name: str | None, facts: dict):
    """The model's call syntax, from --call-format or from its chat template and added tokens, and why."""
    from decodeloop.formats.calls.formats import choose

    return choose(name, facts["chat_template"], facts["added"])


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


def _template_chat(source, facts: dict, path: str, call_syntax):
    """The tokenizer and the chat format over the model's own template. `source`: a `tokenizers.Tokenizer`,
    or the text of a prepared tokenizer kept from an earlier load (`HFTokenizer.prepared`)."""
    from decodeloop.formats.chat_template import TemplateChat
    from decodeloop.formats.hf_tokenizer import HFTokenizer

    if not facts["chat_template"]:
        raise ValueError(f"{path!r} has no chat template: decodeloop renders prompts with the model's own")
    if facts["eos_id"] is None:
        raise ValueError(f"{path!r}: the tokenizer names no end-of-sequence token")
    build = HFTokenizer.from_prepared if isinstance(source, str) else HFTokenizer
    tokenizer = build(source, eos_id=facts["eos_id"], vocab_size=facts["vocab_size"], name=facts["name"])
    chat = TemplateChat(
        tokenizer, call_syntax, facts["chat_template"], variables=facts["variables"], stop_ids=facts["stops"]
    )
    return tokenizer, chat


def _installed(gguf: str | None, torch: bool = True) -> None:
    """MissingDependency, naming what to install, for an `hf` package that is not there, found without
    importing torch (seconds): a missing extra is reported at once."""
    import importlib.util

    needed = (("torch",) if torch else ()) + ("transformers", "tokenizers", "jinja2") + (("gguf",) if gguf else ())
    for module in needed:
        if importlib.util.find_spec(module) is None:
            require(module)  # raises MissingDependency with the install command


def _quiet(transformers) -> None:
    """transformers' warnings and info lines never reach a run's output (errors still raise)."""
    transformers.utils.logging.set_verbosity_error()


def _converted_source(directory: str, gguf: str | None) -> tuple[str, str | None, str | None, str | None]:
    """Where to load `_locate`'s (directory, gguf) from: (directory, gguf file name or None, the GGUF's
    SHA-256 or None, the conversion cache's folder when the GGUF was converted before)."""
    if not gguf:
        return directory, None, None, None
    from decodeloop.models import gguf_cache

    sha = gguf_cache.file_sha256(os.path.join(directory, gguf))
    folder = gguf_cache.lookup(sha)
    return (folder, None, sha, folder) if folder else (directory, gguf, sha, None)


def _auto_tokenizer(transformers, directory: str, gguf: str | None, shown: str):
    """transformers' tokenizer of a model directory (or a .gguf in it); a ValueError naming `shown` if none."""
    try:
        return transformers.AutoTokenizer.from_pretrained(directory, gguf_file=gguf, local_files_only=True)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot load a tokenizer from {shown!r}: {e}") from e


def load_tokenizer(path: str, syntax: str | None = None):
    """A bundle without a model: the tokenizer, chat format and call syntax of a local model directory or
    .gguf file, for an engine that samples elsewhere (models/openai/engine.py) or llama.cpp (`gguf:`). The
    weights are not loaded. A .gguf whose tokenizer was read before is read back from the conversion cache
    with the `tokenizers` package alone (models/tokenizer_cache.py); else transformers reads it, from the
    `hf:` conversion when there is one, and it is kept for the next load."""
    from decodeloop.models import tokenizer_cache

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    located = _locate(path)
    check_call_format(syntax)
    directory, gguf, sha, cached = _converted_source(*located)
    kept = None
    if sha is not None:
        from decodeloop.models import gguf_cache

        kept = cached or gguf_cache.lookup(sha + tokenizer_cache.TOKENIZER_ONLY)
        found = tokenizer_cache.read(kept) if kept else None
        if found is not None:
            require("tokenizers")
            require("jinja2")
            facts, prepared = found
            try:
                return _tokenizer_bundle(path, syntax, prepared, facts, cached)
            except ValueError:
                pass  # what was kept does not build: read again below, and kept again
    _installed(located[1], torch=False)  # a tokenizer needs no torch
    transformers = require("transformers")
    require("jinja2")
    transformers.utils.logging.disable_progress_bar()
    _quiet(transformers)
    if kept and not cached:  # the tokenizer alone, kept before the facts were
        directory, gguf = kept, None
    source = kept or path
    hf_tok = _auto_tokenizer(transformers, directory, gguf, source)
    try:
        config = transformers.AutoConfig.from_pretrained(directory, gguf_file=gguf, local_files_only=True)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot load a tokenizer from {source!r}: {e}") from e
    stops: list[int] = []
    if not gguf:
        try:
            generation = transformers.GenerationConfig.from_pretrained(directory, local_files_only=True)
            stops = _ids(generation.eos_token_id)
        except (OSError, ValueError):
            pass  # no generation_config.json: the model's config says
    stops = stops or _ids(getattr(config, "eos_token_id", None))
    whole = os.path.abspath(os.path.expanduser(path))
    facts = tokenizer_cache.facts_of(hf_tok, whole, stops, getattr(config, "vocab_size", None))
    bundle = _tokenizer_bundle(path, syntax, backend_of(hf_tok), facts, cached)
    if sha is not None:  # kept for the next load: the facts beside what was read, or the GGUF's tokenizer
        prepared = bundle.tokenizer.prepared()
        if kept:
            tokenizer_cache.write(kept, facts, prepared)
        else:
            tokenizer_cache.store(sha, hf_tok, config, facts, prepared, whole)
    return bundle


def _tokenizer_bundle(path: str, syntax: str | None, source, facts: dict, cached: str | None):
    from decodeloop.decode.bundle import ModelBundle

    call_syntax, why = _call_format(syntax, facts)
    tokenizer, chat = _template_chat(source, facts, path, call_syntax)
    specials = tokenizer.special_tokens
    info = {"path": os.path.abspath(os.path.expanduser(path)), "call format": f"{call_syntax.name} ({why})"}
    if cached:
        info["tokenizer"] = f"loaded from the conversion cache {cached}"
    return ModelBundle(
        name=f"tokenizer:{os.path.basename(os.path.normpath(path))}",
        tokenizer=tokenizer,
        chat=chat,
        syntax=call_syntax,
        opener_id=specials.get(call_syntax.opener),
        closer_id=specials.get(call_syntax.closer),
        info={**info, "vocab": tokenizer.vocab_size, "template tools": chat.uses_template_tools},
    )


def _load_weights(transformers, path: str, directory: str, gguf: str | None, torch_dtype, device):
    """The model, from a directory (a cached conversion too) or, de-quantized, from a .gguf file."""
    try:
        return transformers.AutoModelForCausalLM.from_pretrained(
            directory, gguf_file=gguf, local_files_only=True, dtype=torch_dtype, device_map=device
        )
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot load the model from {path!r}: {e}") from e


def _save_conversion(model, hf_tok, folder: str) -> None:
    """A model de-quantized from a GGUF as a model directory: safetensors, config, generation config,
    tokenizer files and chat template. transformers refuses to save a model that still has its GGUF
    quantizer, though every weight is a plain float32 tensor, so the quantizer is set aside meanwhile."""
    quantizer = getattr(model, "hf_quantizer", None)
    if getattr(quantizer, "packed_modules", None):
        raise ValueError("the weights were kept in GGUF blocks, not de-quantized")
    config = model.config
    quantization = config.__dict__.pop("quantization_config", None)  # would make the folder a GGUF again
    model.hf_quantizer = None
    try:
        model.save_pretrained(folder)
        hf_tok.save_pretrained(folder)
    finally:
        model.hf_quantizer = quantizer
        if quantization is not None:
            config.quantization_config = quantization


def load_hf(path: str, device: str | None = None, dtype: str | None = None, syntax: str | None = None):
    """The `ModelBundle` for a local Hugging Face model directory or .gguf file (see the module docstring).
    A .gguf is converted once into the conversion cache (models/gguf_cache.py) and loaded from there later."""
    import sys

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers / huggingface_hub read it
    on_terminal = sys.stderr.isatty()
    if not on_terminal:  # no progress bars in logs and pipes: tqdm reads this when it is first imported
        os.environ.setdefault("TQDM_DISABLE", "1")  # (the GGUF loader draws its own bar)
    located = _locate(path)  # a wrong path, a bad format or dtype name, a missing
    check_call_format(syntax)  # package: all reported before torch is imported
    if dtype not in (None, "auto") + DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPES)}")
    _installed(located[1])
    torch = require("torch")
    transformers = require("transformers")
    require("jinja2")
    from decodeloop.decode.bundle import ModelBundle
    from decodeloop.models import gguf_cache, tokenizer_cache

    _quiet(transformers)
    device = _resolve_device(torch, device)
    torch_dtype = _resolve_dtype(torch, dtype, device)
    directory, gguf, sha, cached = _converted_source(*located)
    if not on_terminal or not gguf:  # a bar only for the minutes of a conversion, at a terminal
        transformers.utils.logging.disable_progress_bar()
    weights = None
    if cached:
        try:
            hf_tok = transformers.AutoTokenizer.from_pretrained(cached, local_files_only=True)
            model = _load_weights(transformers, cached, cached, None, torch_dtype, device)
            weights = f"loaded from the conversion cache {cached}"
        except (OSError, ValueError):  # a damaged conversion: converted again below
            with contextlib.suppress(OSError):
                gguf_cache.discard(cached)
            directory, gguf = located
    if weights is None:
        hf_tok = _auto_tokenizer(transformers, directory, gguf, path)
        # a GGUF is de-quantized to float32 on the CPU, as cached; then moved to the device and dtype asked for
        model = _load_weights(
            transformers, path, directory, gguf, torch.float32 if gguf else torch_dtype, "cpu" if gguf else device
        )
    if not tokenizer_cache.default_template(hf_tok):  # refused before a conversion is kept
        raise ValueError(f"{path!r} has no chat template: decodeloop renders prompts with the model's own")
    if weights is None and gguf:
        assert sha is not None, "a GGUF source has its hash"
        about = {"source": os.path.abspath(os.path.expanduser(path)), "transformers": transformers.__version__}
        try:
            folder = gguf_cache.store(sha, lambda folder: _save_conversion(model, hf_tok, folder), about)
            weights = f"converted from GGUF and cached at {folder}"
        except (OSError, ValueError, RuntimeError) as e:  # the cache is only speed: run without it
            weights = f"converted from GGUF (not cached: {e})"
        model = model.to(device=device, dtype=torch_dtype)
    embedding = model.get_input_embeddings().num_embeddings
    generation = getattr(model, "generation_config", None)
    stops = _ids(getattr(generation, "eos_token_id", None)) or _ids(model.config.eos_token_id)
    facts = tokenizer_cache.facts_of(hf_tok, os.path.abspath(os.path.expanduser(path)), stops, embedding)
    call_syntax, why = _call_format(syntax, facts)
    tokenizer, chat = _template_chat(backend_of(hf_tok), facts, path, call_syntax)
    name = os.path.basename(os.path.normpath(path))
    specials = tokenizer.special_tokens
    info = {"path": os.path.abspath(os.path.expanduser(path)), "call format": f"{call_syntax.name} ({why})"}
    if weights:
        info["weights"] = weights
    return ModelBundle(
        name=f"hf:{name}",
        tokenizer=tokenizer,
        chat=chat,
        syntax=call_syntax,
        model=HFModel(model, name=name, vocab_size=tokenizer.vocab_size),
        opener_id=specials.get(call_syntax.opener),
        closer_id=specials.get(call_syntax.closer),
        context_length=getattr(model.config, "max_position_embeddings", None),
        info={
            **info,
            "device": device,
            "dtype": str(torch_dtype).removeprefix("torch."),
            "vocab": tokenizer.vocab_size,
            "template tools": chat.uses_template_tools,
        },
    )


__all__ = ["HF_EXTRA", "HFModel", "check_call_format", "load_hf", "load_tokenizer"]
