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


def _qwen3_xml() -> Any:
    from decodeloop.formats.calls.families.qwen3_xml import QwenXmlSyntax

    return QwenXmlSyntax(reasoning=THINK)


def _glm45() -> Any:
    from decodeloop.formats.calls.families.glm import GlmSyntax

    return GlmSyntax(newlines=True, reasoning=THINK)


def _glm47() -> Any:
    from decodeloop.formats.calls.families.glm import GlmSyntax

    return GlmSyntax(newlines=False, reasoning=THINK)


# name -> (what it is, how to make one)
FORMATS: dict[str, tuple[str, Callable[[], Any]]] = {
    "hermes": ("Hermes JSON in <tool_call> tags (Qwen2.5, Qwen3, SmolLM, Hermes), <think> reasoning", _hermes),
    "qwen3-xml": (
        "<function=NAME> and a <parameter=KEY> tag per argument in <tool_call> tags (Qwen3-Coder, Qwen3.5 "
        "onward), <think> reasoning",
        _qwen3_xml,
    ),
    "glm45": (
        "the tool's name and <arg_key>/<arg_value> pairs in <tool_call> tags, a line each (GLM-4.5, 4.6), "
        "<think> reasoning",
        _glm45,
    ),
    "glm47": (
        "the tool's name and <arg_key>/<arg_value> pairs in <tool_call> tags, on one line (GLM-4.7, 5.x), "
        "<think> reasoning",
        _glm47,
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
    names none it knows. The formats that share Hermes' <tool_call> tag are told apart first, by what the
    template writes inside it."""
    if "<arg_key>" in template or "<arg_key>" in vocabulary:
        if "\n<arg_key>" in template:
            return "glm45", "the chat template writes <arg_key>/<arg_value> pairs in <tool_call>, a line each"
        return "glm47", "the chat template (or the vocabulary) writes <arg_key>/<arg_value> pairs in <tool_call>"
    if "<function=" in template and "<parameter=" in template:
        return "qwen3-xml", "the chat template writes <function=NAME> and <parameter=KEY> tags in <tool_call>"
    if "<tool_call>" in template or "<tool_call>" in vocabulary:
        return "hermes", "the chat template writes calls in <tool_call> tags"
    return None
