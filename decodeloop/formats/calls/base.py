"""What a call syntax is: the `CallSyntax` protocol the harness drives, and what every syntax shares.

A syntax says how a model writes a call and how the harness reads, writes and
describes one: compact.py (`[call NAME key=value]`, the lab models'), json.py
(`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, Hermes, Qwen,
SmolLM); shapes.py reads the other shapes real models write; families/ holds
the formats of model families that write calls their own way (Qwen's XML, GLM's).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# the names a call may give a tool, in every syntax: what MCP allows, and what the grammar writes
TOOL_NAME = re.compile(r"[A-Za-z0-9_./-]+\Z")


@dataclass
class Call:
    name: str
    arguments: dict[str, Any]


class ParseError(ValueError):
    """A call that does not follow the syntax; the message tells the model how to fix it."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column  # 1-based position in the call's text


@dataclass(frozen=True)
class ParsedCall:
    """One call as the stop check read it, once: the text the model wrote, the shape it was written in, and
    either the call or the error that tells the model how to fix it. Everything after the stop check (dispatch,
    the harness, sampling, BFCL, the views) reads this and never the text again."""

    text: str
    shape: str
    call: Call | None = None
    error: ParseError | None = None
    format: str = ""  # the call format the shape belongs to (formats/calls/formats.py), "" for a syntax's own


@dataclass(frozen=True)
class SpanText:
    """Text a span holds besides its calls, for a format whose calls share a span with the message's text
    (Harmony's channels): `kind` is "content" (the answer's) or "reasoning"."""

    kind: str
    text: str


class CallScanner(Protocol):
    """Finds where a call being written ends, fed one piece of text at a time (after the opener)."""

    def feed(self, piece: str) -> int | None: ...  # the index in `piece` just past the end, or None


@dataclass(frozen=True)
class CallShape:
    """One way a format's calls are written: what opens the span, what may close it, how its end is found
    while it is written (`scanner`: `.feed(piece)` returns the index just past the end, or None), and how a
    whole span is read (`read(span, closed, tools)`: the span's calls, each a call or an error; `closed` is
    False when the message ended inside it; `tools` maps each tool's name to its inputSchema, for a format
    whose values are typed by the schema). `closer` is "" where the scanner alone finds the end, or the message's end
    does (`to_end`). `message_start`: the opener counts only at the start of the model's message. `holds_text`: read
    with `closed` False at the token cap, and whatever calls it gives then are not run."""

    name: str
    opener: str
    scanner: Callable[[], CallScanner]
    read: Callable[[str, bool, Mapping[str, Any]], Sequence[ParsedCall | SpanText]]
    closer: str = ""
    message_start: bool = False
    to_end: bool = False  # the span runs to the end of the message (or to the next opener of a new span)
    markers: tuple[str, ...] = field(default=())  # the other special texts the span holds (never shown as text)
    # the span holds a message's text besides its calls (SpanText: Harmony's channels), so the token cap
    # bounds it rather than max_call_chars, and one the cap cuts keeps its text (its call is not run)
    holds_text: bool = False


def read_one(
    parse: Callable[[str], Call], shape: str, format: str = ""
) -> Callable[[str, bool, Mapping[str, Any]], list[ParsedCall]]:
    """`read` for a shape whose span holds one call, from a parser that raises ParseError."""

    def read(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
        try:
            return [ParsedCall(span, shape, parse(span), None, format)]
        except ParseError as e:
            return [ParsedCall(span, shape, None, e, format)]

    return read


def parameter_schema(tools: Mapping[str, Any], name: str, key: str) -> tuple[Any, Any]:
    """The schema of the parameter `key` of the tool `name`, and the tool's whole inputSchema (the root its
    $refs name), for a format whose values are typed by the schema; (None, None) where either is unknown."""
    root = tools.get(name)
    properties = root.get("properties") if isinstance(root, dict) else None
    schema = properties.get(key) if isinstance(properties, dict) else None
    return (schema, root) if schema is not None else (None, None)


def render_result(text: str, is_error: bool) -> str:
    """The body of the tool message that answers a call (the chat format wraps it): an error says so."""
    return "error: " + text if is_error else text


class CallSyntax(Protocol):
    """A call syntax, as the harness, the stop check and the grammar use it."""

    name: str  # "compact" or "json"
    shape: str  # its own shape's name (shapes.py)
    alternates: tuple  # the other shapes `--call-shapes lenient` reads
    opener: str  # the text that opens a call
    closer: str  # the text that closes one
    collect_calls: bool  # whether the message goes on after a call (all its calls run together)
    template_tools: bool  # a chat template's own tool list teaches this syntax's calls (JSON ones)

    def parse(self, text: str) -> Call: ...  # raises ParseError

    def render(self, call: Call) -> str: ...

    def render_result(self, text: str, is_error: bool) -> str: ...

    def describe(self, tools: Iterable[Any]) -> str: ...  # the system prompt's paragraphs

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]: ...  # the `tools=` a chat template takes

    def scanner(self) -> CallScanner: ...  # where a call being written ends


def tool_schema(tool: Any) -> dict:
    """One tool as {"type": "function", "function": {"name", "description", "parameters"}}."""
    schema = tool.input_schema
    if not isinstance(schema, dict) or not schema:
        schema = {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description or "", "parameters": schema},
    }
