"""The call formats of open-weight model families, by name, and which one a model's template names.

A format is a call syntax (formats/calls/base.py `CallSyntax`): the shapes its calls are written in,
each with its markers, how the end of a span is found while it is written and how a whole span is
read, and the model's reasoning markers. `get_format(NAME)` gives one (`--call-format NAME`);
`detect(template, vocabulary)` says which one a chat template and its special tokens name, and why.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

THINK = (("<think>", "</think>"),)


def _hermes() -> Any:
    from decodeloop.formats.calls.json import JsonSyntax

    return JsonSyntax(reasoning=THINK)


def _harmony() -> Any:
    from decodeloop.formats.calls.families.gpt_oss import HarmonySyntax

    return HarmonySyntax()


def _gemma4() -> Any:
    from decodeloop.formats.calls.families.gemma4 import Gemma4Syntax

    return Gemma4Syntax()


# name -> (what it is, how to make one)
FORMATS: dict[str, tuple[str, Callable[[], Any]]] = {
    "hermes": ("Hermes JSON in <tool_call> tags (Qwen2.5, Qwen3, SmolLM, Hermes), <think> reasoning", _hermes),
    "harmony": ("gpt-oss's Harmony messages: calls to functions.NAME, analysis reasoning, final answers", _harmony),
    "gemma4": ('Gemma 4: <|tool_call>call:NAME{key:<|"|>text<|"|>}<tool_call|>, thought-channel reasoning', _gemma4),
}


def names() -> list[str]:
    return list(FORMATS)


def get_format(name: str) -> Any:
    """A fresh syntax for the format `name`; ValueError naming the formats for an unknown one."""
    try:
        _, make = FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown call format {name!r}; choose one of: {', '.join(FORMATS)}") from None
    return make()


def detect(template: str, vocabulary: Collection[str] = ()) -> tuple[str, str] | None:
    """The format a chat template (and the special tokens of its vocabulary) names, and why; None when it
    names none it knows."""
    if all(m in template for m in ("<|channel|>", "<|message|>")) or "<|channel|>" in vocabulary:
        return "harmony", "the chat template writes Harmony messages (<|channel|>, <|message|>: gpt-oss)"
    if "<|tool_call>" in template or "<|tool_call>" in vocabulary:
        return "gemma4", "the chat template writes calls as <|tool_call>call:NAME{...}<tool_call|> (Gemma 4)"
    if "<tool_call>" in template or "<tool_call>" in vocabulary:
        return "hermes", "the chat template writes calls in <tool_call> tags"
    return None
