"""A model's tokenizer and its facts, kept in the conversion cache and read back without transformers.

`gguf:` and `openai:` need a GGUF's tokenizer and chat template, not its weights.
transformers reads them from the file in seconds per 100 MB, and importing
transformers takes seconds more (it imports torch). The first load (models/hf.py,
through transformers) keeps what it read in the conversion cache: transformers'
own files in `SHA-tokenizer/` (tokenizer.json, tokenizer_config.json,
config.json), and in that folder or in the `hf:` conversion `SHA/`,
`decodeloop-tokenizer.json`: the few facts the harness takes from them, and the
tokenizer.json as `HFTokenizer` runs it (`prepared`), so that a later load
builds it in one parse:

    {"version": 2, "name": "...", "chat_template": "...", "eos_id": 151645,
     "stops": [151645], "vocab_size": 151936,
     "variables": {"eos_token": "<|im_end|>", ...}, "added": ["<tool_call>", ...],
     "prepared": "{...}"}

A later load reads that one file with the `tokenizers` package alone
(models/hf.py `load_tokenizer`). A file that is missing or does not read as
written is ignored: the load goes through transformers and writes it again. The
cache is only speed: a failure to write is ignored.

Standard library only; `facts_of` reads a transformers tokenizer it is given.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

TOKENIZER_ONLY = "-tokenizer"  # the conversion cache's folder of a GGUF's tokenizer and config alone
FACTS = "decodeloop-tokenizer.json"
VERSION = 2


def default_template(hf_tok: Any) -> str:
    """A transformers tokenizer's chat template ("" when it has none); of several named ones, the default."""
    template = getattr(hf_tok, "chat_template", None)
    if isinstance(template, dict):
        template = template.get("default")
    return template if isinstance(template, str) else ""


def facts_of(hf_tok: Any, name: str, stops: list[int], vocab_size: int | None) -> dict[str, Any]:
    """What the harness takes from a transformers tokenizer: its default chat template, end-of-sequence id,
    stop ids, vocabulary size, special tokens by role (the template's variables) and added tokens' texts;
    `name`, the model's path, names the tokenizer."""
    eos = hf_tok.eos_token_id if hf_tok.eos_token_id is not None else (stops[0] if stops else None)
    return {
        "version": VERSION,
        "name": name,
        "chat_template": default_template(hf_tok),
        "eos_id": eos,
        "stops": list(stops),
        "vocab_size": vocab_size,
        "variables": {k: v for k, v in hf_tok.special_tokens_map.items() if isinstance(v, str)},
        "added": [str(t) for t in getattr(hf_tok, "added_tokens_encoder", {})],
    }


def _valid(facts: Any) -> bool:
    def ints(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(i, int) for i in value)

    def strings(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(s, str) for s in value)

    return (
        isinstance(facts, dict)
        and facts.get("version") == VERSION
        and isinstance(facts.get("name"), str)
        and isinstance(facts.get("chat_template"), str)
        and (facts.get("eos_id") is None or isinstance(facts.get("eos_id"), int))
        and ints(facts.get("stops"))
        and (facts.get("vocab_size") is None or isinstance(facts.get("vocab_size"), int))
        and isinstance(facts.get("variables"), dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in facts["variables"].items())
        and strings(facts.get("added"))
    )


def read(folder: str) -> tuple[dict[str, Any], str] | None:
    """(the facts, the prepared tokenizer's text) kept in `folder`, or None when nothing there reads as
    written."""
    try:
        with open(os.path.join(folder, FACTS), encoding="utf-8") as f:
            kept = json.load(f)
    except (OSError, ValueError):
        return None
    if not (_valid(kept) and isinstance(kept.get("prepared"), str)):
        return None
    prepared = kept.pop("prepared")
    return kept, prepared


def write(folder: str, facts: dict[str, Any], prepared: str) -> None:
    """Keep `facts` and `prepared` in `folder` (written whole, then renamed into place); a failure is
    ignored."""
    try:
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".facts-", suffix=".json")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({**facts, "prepared": prepared}, f, ensure_ascii=False)
        os.replace(temporary, os.path.join(folder, FACTS))
    except (OSError, ValueError):
        try:
            os.remove(temporary)
        except OSError:
            pass


def store(sha: str, hf_tok: Any, config: Any, facts: dict[str, Any], prepared: str, source: str) -> None:
    """A GGUF's tokenizer and config as read by transformers, with the facts and the prepared tokenizer,
    as `SHA-tokenizer`."""
    from decodeloop.models import gguf_cache

    def write(folder: str) -> None:
        hf_tok.save_pretrained(folder)
        config.save_pretrained(folder)
        with open(os.path.join(folder, FACTS), "w", encoding="utf-8") as f:
            json.dump({**facts, "prepared": prepared}, f, ensure_ascii=False)

    try:
        gguf_cache.store(sha + TOKENIZER_ONLY, write, {"source": source, "tokenizer only": True})
    except (OSError, ValueError, RuntimeError):
        pass


__all__ = ["FACTS", "TOKENIZER_ONLY", "default_template", "facts_of", "read", "store", "write"]
