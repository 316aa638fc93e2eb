"""The call formats of open-weight model families, by name, and which one a model's template names.

A format is a call syntax (formats/calls/base.py `CallSyntax`): the shapes its calls are written in,
each with its markers, how the end of a span is found while it is written and how a whole span is
read, and the model's reasoning markers. `get_format(NAME)` gives one (`--call-format NAME`);
`detect(template, vocabulary)` says which one a chat template and its special tokens name, and why.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection
from typing import Any

THINK = (("<think>", "</think>"),)


def _hermes() -> Any:
    from decodeloop.formats.calls.json import JsonSyntax

    return JsonSyntax(reasoning=THINK)


def _family(module: str, factory: str) -> Callable[[], Any]:
    """A family's syntax, its module imported when first asked for (formats/calls/families/)."""

    def make() -> Any:
        return getattr(importlib.import_module(f"decodeloop.formats.calls.families.{module}"), factory)()

    return make


# name -> (what it is, how to make one)
FORMATS: dict[str, tuple[str, Callable[[], Any]]] = {
    "hermes": ("Hermes JSON in <tool_call> tags (Qwen2.5, Qwen3, SmolLM, Hermes), <think> reasoning", _hermes),
    "deepseek-v3": (
        "DeepSeek V3 / R1: a section of special tokens, each call function<｜tool▁sep｜>NAME and a ```json block",
        _family("deepseek", "v3"),
    ),
    "deepseek-v31": (
        "DeepSeek V3.1: a section of special tokens, each call NAME<｜tool▁sep｜>JSON",
        _family("deepseek", "v31"),
    ),
    "deepseek-v32": (
        "DeepSeek V3.2 DSML: <｜DSML｜function_calls>, invoke and parameter tags, <think> reasoning",
        _family("deepseek", "v32"),
    ),
    "deepseek-v4": ("DeepSeek V4 DSML: <｜DSML｜tool_calls>, invoke and parameter tags", _family("deepseek", "v4")),
    "deepseek-v41": ("DeepSeek V4.1 DSML: <｜DSML｜ calls>, invoke and parameter tags", _family("deepseek", "v41")),
    "kimi-k2": (
        "Kimi K2.x: <|tool_calls_section_begin|>, each call functions.NAME:IDX and JSON, <think> reasoning",
        _family("kimi", "k2"),
    ),
    "kimi-k3": (
        "Kimi K3 XTML: <|open|>tools<|sep|> of call and typed argument elements, think and response elements",
        _family("kimi", "k3"),
    ),
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
    names none it knows. The families' own markers are looked for first: they are more specific than
    Hermes' <tool_call>."""
    found = _family_format(template, vocabulary)
    if found is not None:
        return found
    if "<tool_call>" in template or "<tool_call>" in vocabulary:
        return "hermes", "the chat template writes calls in <tool_call> tags"
    return None


def _family_format(template: str, vocabulary: Collection[str]) -> tuple[str, str] | None:
    """A family's format, named by the markers of its template or its special tokens."""

    def names(marker: str) -> bool:
        return marker in template or marker in vocabulary

    if "｜DSML｜" in template or "｜DSML｜" in vocabulary:
        if "<｜DSML｜ calls>" in template:
            return "deepseek-v41", "the chat template writes DSML calls in a <｜DSML｜ calls> block (DeepSeek V4.1)"
        if "<｜DSML｜tool_calls>" in template:
            return "deepseek-v4", "the chat template writes DSML calls in a <｜DSML｜tool_calls> block (DeepSeek V4)"
        return "deepseek-v32", (
            "the special token ｜DSML｜ names DeepSeek's DSML calls, in V3.2's <｜DSML｜function_calls> block "
            "(V4 writes <｜DSML｜tool_calls>: deepseek-v4; V4.1 <｜DSML｜ calls>: deepseek-v41)"
        )
    if names("<｜tool▁calls▁begin｜>"):
        if "```json" in template:
            return "deepseek-v3", "the chat template writes DeepSeek V3's calls: a ```json block after the name"
        return (
            "deepseek-v31",
            "the special token <｜tool▁calls▁begin｜> names DeepSeek V3.1's calls: JSON after the name",
        )
    if all(names(marker) for marker in ("<|open|>", "<|close|>", "<|sep|>")):
        return "kimi-k3", "the special tokens <|open|>, <|close|> and <|sep|> name Kimi K3's XTML"
    if names("<|tool_calls_section_begin|>"):
        return "kimi-k2", "the special token <|tool_calls_section_begin|> names Kimi K2's calls"
    return None
