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

    return JsonSyntax(reasoning=THINK, name="hermes")


def _llama3() -> Any:
    from decodeloop.formats.calls.families.llama import Llama3Json

    return Llama3Json()


def _llama4() -> Any:
    from decodeloop.formats.calls.families.llama import Llama4Pythonic

    return Llama4Pythonic()


def _mistral(name: str, array: bool = False, reasoning: tuple[tuple[str, str], ...] = ()) -> Callable[[], Any]:
    def make() -> Any:
        from decodeloop.formats.calls.families.mistral import MistralSyntax

        return MistralSyntax(name, array, reasoning)

    return make


def _qwen3_xml() -> Any:
    from decodeloop.formats.calls.families.qwen3_xml import QwenXmlSyntax

    return QwenXmlSyntax(reasoning=THINK)


def _glm45() -> Any:
    from decodeloop.formats.calls.families.glm import GlmSyntax

    return GlmSyntax(newlines=True, reasoning=THINK)


def _glm47() -> Any:
    from decodeloop.formats.calls.families.glm import GlmSyntax

    return GlmSyntax(newlines=False, reasoning=THINK)


def _harmony() -> Any:
    from decodeloop.formats.calls.families.gpt_oss import HarmonySyntax

    return HarmonySyntax()


def _gemma4() -> Any:
    from decodeloop.formats.calls.families.gemma4 import Gemma4Syntax

    return Gemma4Syntax()


def _family(module: str, factory: str) -> Callable[[], Any]:
    """A family's syntax, its module imported when first asked for (formats/calls/families/)."""

    def make() -> Any:
        return getattr(importlib.import_module(f"decodeloop.formats.calls.families.{module}"), factory)()

    return make


# name -> (what it is, how to make one)
FORMATS: dict[str, tuple[str, Callable[[], Any]]] = {
    "hermes": ("Hermes JSON in <tool_call> tags (Qwen2.5, Qwen3, SmolLM, Hermes), <think> reasoning", _hermes),
    "llama3-json": ('Llama 3.1-3.3 JSON {"name": ..., "parameters": {...}}, bare or after <|python_tag|>', _llama3),
    "llama4-pythonic": ("Llama 4 pythonic call lists [f(a=1), g()], bare or in <|python_start|>", _llama4),
    "mistral": (
        "Mistral [TOOL_CALLS]NAME[ARGS]{...} (tokenizer v11+: Mistral Small 3.2, Devstral, Ministral 3, Magistral), "
        "[THINK] reasoning",
        _mistral("mistral", reasoning=(("[THINK]", "[/THINK]"),)),
    ),
    "mistral-v3": (
        "Mistral [TOOL_CALLS] and a JSON array of calls (tokenizer v3: Mistral-7B-Instruct-v0.3, Mixtral)",
        _mistral("mistral-v3", array=True),
    ),
    "mistral-think-text": (
        "Mistral [TOOL_CALLS]NAME[ARGS]{...}, reasoning in plain-text <think> tags (Magistral-Small-2506)",
        _mistral("mistral-think-text", reasoning=THINK),
    ),
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
    "harmony": ("gpt-oss's Harmony messages: calls to functions.NAME, analysis reasoning, final answers", _harmony),
    "gemma4": ('Gemma 4: <|tool_call>call:NAME{key:<|"|>text<|"|>}<tool_call|>, thought-channel reasoning', _gemma4),
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
    names none it knows. The more specific markers are looked for first, and the formats that share Hermes'
    <tool_call> tag are told apart by what the template writes inside it."""

    def names(marker: str) -> bool:
        return marker in template or marker in vocabulary

    found = _family_format(template, vocabulary)  # DeepSeek's and Kimi's markers
    if found is not None:
        return found
    if all(m in template for m in ("<|channel|>", "<|message|>")) or "<|channel|>" in vocabulary:
        return "harmony", "the chat template writes Harmony messages (<|channel|>, <|message|>: gpt-oss)"
    if "<|tool_call>" in template or "<|tool_call>" in vocabulary:
        return "gemma4", "the chat template writes calls as <|tool_call>call:NAME{...}<tool_call|> (Gemma 4)"
    if names("[TOOL_CALLS]"):
        if names("[THINK]"):
            return "mistral", "the tokenizer has Mistral's [TOOL_CALLS] and [THINK] control tokens (v13 reasoning)"
        if names("[ARGS]"):
            if "<think>" in template:
                return (
                    "mistral-think-text",
                    "Mistral's [TOOL_CALLS] and [ARGS], and a chat template that reasons in plain-text <think> tags",
                )
            return "mistral", "Mistral's [TOOL_CALLS] and [ARGS] control tokens: calls by name (tokenizer v11+)"
        return "mistral-v3", "Mistral's [TOOL_CALLS] without [ARGS]: calls as a JSON array (tokenizer v3)"
    if names("<|python_start|>") or names("<|header_start|>"):
        return "llama4-pythonic", "Llama 4's <|python_start|> and <|header_start|> special tokens"
    if names("<|python_tag|>"):
        return "llama3-json", "Llama 3.1-3.3's <|python_tag|>: JSON calls, after it or opening the message"
    if "<arg_key>" in template or "<arg_key>" in vocabulary:
        if "\n<arg_key>" in template:
            return "glm45", "the chat template writes <arg_key>/<arg_value> pairs in <tool_call>, a line each"
        return "glm47", "the chat template (or the vocabulary) writes <arg_key>/<arg_value> pairs in <tool_call>"
    if "<function=" in template and "<parameter=" in template:
        return "qwen3-xml", "the chat template writes <function=NAME> and <parameter=KEY> tags in <tool_call>"
    if "<tool_call>" in template:
        return "hermes", "the chat template writes calls in <tool_call> tags"
    if "<tool_call>" in vocabulary:
        return "hermes", "the vocabulary has a <tool_call> token"
    return None


def choose(name: str | None, template: str, vocabulary: Collection[str]) -> tuple[Any, str]:
    """The syntax for a model with this chat template and vocabulary, and why it was chosen: `name` (a
    format, "compact", "json" for hermes) when given, else what the template names, else hermes. Reasoning
    markers the template and the vocabulary never mention are dropped, so a model that does not reason
    never has its text read as reasoning."""
    if name == "compact":
        from decodeloop.formats.calls.compact import CompactSyntax

        return CompactSyntax(), "--call-format compact"
    if name is not None and name not in ("auto",):
        syntax, why = get_format("hermes" if name == "json" else name), f"--call-format {name}"
    else:
        found = detect(template, vocabulary)
        if found is None:
            syntax = get_format("hermes")
            why = (
                "the chat template names no call format decodeloop knows; Hermes JSON by default, "
                "--call-format names another"
            )
        else:
            syntax, why = get_format(found[0]), found[1]
    kept = tuple(
        pair for pair in getattr(syntax, "reasoning", ()) if any(m in template or m in vocabulary for m in pair)
    )
    if kept != getattr(syntax, "reasoning", ()):
        syntax.reasoning = kept
    return syntax, why


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
