"""What a call syntax is: the `CallSyntax` protocol the harness drives, and what every syntax shares.

A syntax says how a model writes a call and how the harness reads, writes and
describes one: compact.py (`[call NAME key=value]`, the lab models'), json.py
(`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, Hermes, Qwen,
SmolLM); shapes.py reads the other shapes real models write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class Call:
    name: str
    arguments: dict[str, Any]


class ParseError(ValueError):
    """A call that does not follow the syntax; the message tells the model how to fix it."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column  # 1-based position in the call's text


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

    def scanner(self) -> Any: ...  # where a call being written ends: .feed(text) -> end or None


def tool_schema(tool: Any) -> dict:
    """One tool as {"type": "function", "function": {"name", "description", "parameters"}}."""
    schema = tool.input_schema
    if not isinstance(schema, dict) or not schema:
        schema = {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description or "", "parameters": schema},
    }
