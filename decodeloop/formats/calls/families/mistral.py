"""Mistral's tool calls: the [TOOL_CALLS] control token, then the call, as the tokenizer's version writes it.

Tokenizer v11 and later (Mistral Small 3.2, Devstral, Ministral 3, Magistral) write each call behind its own
[TOOL_CALLS], the name, then [ARGS] and the arguments as a JSON object, with a [CALL_ID] between them where
the model gives the call an id:

    Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}
    [TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"}

Tokenizer v3 (Mistral-7B-Instruct-v0.3, Mixtral) writes one [TOOL_CALLS] and a JSON array of the calls:

    [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}]

Each call's "arguments" is a JSON object (or a string holding one); an "id" may stand beside it. A span is
read by what follows [TOOL_CALLS], so every format reads both; the formats differ in what they write back
and teach, and in their reasoning: `mistral` (v11+, the calls by name; reasoning between the [THINK] and
[/THINK] control tokens of Magistral 2509 and Ministral 3 Reasoning), `mistral-v3` (the JSON array; no
reasoning), `mistral-think-text` (v11+ calls; reasoning in plain-text <think>...</think>, Magistral-Small-2506).
A [TOOL_CALLS] written inside reasoning is reasoning text. Sources: mistral-common's tokenizer versions and
their generation grammars; vLLM's mistral tool parser and mistral reasoning parser; llama.cpp's Mistral and
Magistral parsers. Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from decodeloop.formats.calls.base import (
    TOOL_NAME,
    Call,
    CallShape,
    ParsedCall,
    ParseError,
    SpanText,
    render_result,
    tool_schema,
)
from decodeloop.formats.calls.families.jsonvalue import WHITESPACE, object_in, read_value, skip_space
from decodeloop.formats.calls.form import Arguments, CallForm, CallList, Maybe, Name, Run, Space, Template, Token
from decodeloop.formats.calls.scan import ValueScanner

TOOL_CALLS = "[TOOL_CALLS]"
ARGS = "[ARGS]"
CALL_ID = "[CALL_ID]"

NAMED_EXAMPLE = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
ARRAY_EXAMPLE = '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]'
NAMED_SHAPE = f"a call looks like {NAMED_EXAMPLE}"
ARRAY_SHAPE = f"calls look like {ARRAY_EXAMPLE}"

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/")
_HEAD = re.compile(r"([A-Za-z0-9_./-]+)(?:\[CALL_ID\]([A-Za-z0-9]*))?\[ARGS\]")
_ARRAY_KEYS = ("name", "arguments", "id")


class ToolCallsScanner:
    """The text after [TOOL_CALLS]: `NAME[ARGS]{...}` (a [CALL_ID] and an id may come before [ARGS]), ending
    where the object closes, or a JSON array of calls, ending where it closes; strings are followed, so a
    bracket or a marker inside one does not count. Where the text cannot go on as either, the span ends at that
    character, which is not part of it, and reading the span says what is wrong."""

    def __init__(self) -> None:
        self._state = "lead"  # lead, name, marker, id, args
        self._marker = ""  # a marker being written: [ARGS] or [CALL_ID]
        self._markers: tuple[str, ...] = (ARGS, CALL_ID)
        self._value: ValueScanner | None = None

    def feed(self, piece: str) -> int | None:
        i = 0
        while i < len(piece):
            if self._value is not None:
                end = self._value.feed(piece[i:])
                return None if end is None else i + end
            ch, state = piece[i], self._state
            if state == "lead" and ch in WHITESPACE:
                pass
            elif state == "lead" and ch == "[":
                self._value = ValueScanner()  # v3's array, this "[" its first character
                continue
            elif state in ("lead", "name") and ch in _NAME_CHARS:
                self._state = "name"
            elif state == "id" and ch.isascii() and ch.isalnum():
                pass
            elif state in ("name", "id") and ch == "[":
                self._state, self._marker = "marker", ch
            elif state == "marker":
                self._marker += ch
                if self._marker == ARGS:
                    self._state = "args"
                elif self._marker == CALL_ID and CALL_ID in self._markers:
                    self._state, self._markers = "id", (ARGS,)
                elif not any(m.startswith(self._marker) for m in self._markers):
                    return i
            elif state == "args" and ch in WHITESPACE:
                pass
            elif state == "args" and ch in "{[":
                self._value = ValueScanner()  # an array is read, to say the arguments are an object
                continue
            else:
                return i
            i += 1
        return None


def _named_call(span: str, pos: int) -> list[ParsedCall | SpanText]:
    """`NAME[ARGS]{...}` at `pos` of the span. Text that does not begin a call at all is kept as the answer's
    text too (vLLM keeps it so), and the model is told how a call is written."""
    head = _HEAD.match(span, pos)
    if head is None:
        if pos >= len(span):
            return [_failed(span, f"{TOOL_CALLS} is not followed by a call; {NAMED_SHAPE}", pos)]
        found = json.dumps(span[pos : pos + 24], ensure_ascii=False)
        message = f"expected a tool's name and {ARGS} after {TOOL_CALLS} at column {pos + 1}, found {found}"
        return [SpanText("content", span[len(TOOL_CALLS) :]), _failed(span, f"{message}; {NAMED_SHAPE}", pos)]
    name = head.group(1)
    start = skip_space(span, head.end())
    if start >= len(span):
        return [_failed(span, f"expected the arguments of {name} after {ARGS}, a JSON object; {NAMED_SHAPE}", start)]
    try:
        arguments, end = read_value(span, start, NAMED_SHAPE)
    except ParseError as e:
        return [ParsedCall(span, "tool_calls", None, e)]
    if not isinstance(arguments, dict):
        message = f"the arguments of {name} after {ARGS} (column {start + 1}) must be a JSON object ({{}} for none)"
        return [_failed(span, f"{message}; {NAMED_SHAPE}", start)]
    rest = skip_space(span, end)
    if rest < len(span):
        return [_failed(span, f"text after the arguments of {name} at column {rest + 1}; {NAMED_SHAPE}", rest)]
    return [ParsedCall(span, "tool_calls", Call(name, arguments))]


def _failed(text: str, message: str, pos: int) -> ParsedCall:
    return ParsedCall(text, "tool_calls", None, ParseError(message, pos + 1))


def _array_call(item: Any, column: int) -> Call:
    """One element of v3's array as a Call."""
    where = f"at column {column}"
    if not isinstance(item, dict):
        raise ParseError(f"each call in the array is a JSON object; the item {where} is not; {ARRAY_SHAPE}", column)
    for key in item:
        if key not in _ARRAY_KEYS:
            shown = json.dumps(key, ensure_ascii=False)[:40]
            raise ParseError(
                f'the call {where} has the key {shown}: a call has "name" and "arguments" (and may have "id"); '
                f'put the arguments inside "arguments"; {ARRAY_SHAPE}',
                column,
            )
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ParseError(f'the call {where} needs "name", a string that names the tool; {ARRAY_SHAPE}', column)
    if not TOOL_NAME.match(name):
        shown = json.dumps(name, ensure_ascii=False)[:70]
        raise ParseError(f"the tool name {shown} {where} may use only letters, digits, _ . - and /", column)
    arguments = item.get("arguments", {})
    if isinstance(arguments, str):
        arguments = object_in(arguments)
    if not isinstance(arguments, dict):
        raise ParseError(
            f'"arguments" of the call {where} must be a JSON object ({{}} for none); {ARRAY_SHAPE}', column
        )
    return Call(name, arguments)


def _array_calls(span: str, pos: int) -> list[ParsedCall]:
    """v3's JSON array of calls at `pos` of the span: one ParsedCall an element, its text as written."""
    try:
        value, end = read_value(span, pos, ARRAY_SHAPE)
    except ParseError as e:
        return [ParsedCall(span, "tool_calls", None, e)]
    if not isinstance(value, list) or not value or skip_space(span, end) < len(span):
        error = ParseError(f"expected a JSON array of one or more calls at column {pos + 1}; {ARRAY_SHAPE}", pos + 1)
        return [ParsedCall(span, "tool_calls", None, error)]
    calls: list[ParsedCall] = []
    at = skip_space(span, pos + 1)
    for item in value:  # the array parsed: walk it again for each element's text
        _, after = read_value(span, at)
        try:
            calls.append(ParsedCall(span[at:after], "tool_calls", _array_call(item, at + 1)))
        except ParseError as e:
            calls.append(ParsedCall(span[at:after], "tool_calls", None, e))
        at = skip_space(span, skip_space(span, after) + 1)  # past the comma
    return calls


def read_tool_calls(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall | SpanText]:
    """A [TOOL_CALLS] span's calls, named (v11+) or in an array (v3), by what follows the marker."""
    pos = skip_space(span, len(TOOL_CALLS))
    if span.startswith("[", pos) and not span.startswith((ARGS, CALL_ID), pos):
        return list(_array_calls(span, pos))
    return _named_call(span, pos)


TOOL_CALLS_SHAPE = CallShape("tool_calls", TOOL_CALLS, ToolCallsScanner, read_tool_calls, markers=(ARGS, CALL_ID))

_ID_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
# what --constrain writes after [TOOL_CALLS] (formats/calls/form.py): v11+ the name, an id if the model gives one,
# [ARGS] and the arguments, the call ending with their "}"; v3 the array of call objects, ending with its "]"
_NAMED = (Space(), Name(), Maybe(Token(CALL_ID), Run(_ID_CHARS, 0, 32)), Token(ARGS), Space(), Arguments())
NAMED_FORM = CallForm({TOOL_CALLS: Template(_NAMED)}, required=(Token(TOOL_CALLS),))
ARRAY_FORM = CallForm({TOOL_CALLS: Template((Space(), CallList()))}, required=(Token(TOOL_CALLS),))


def _checked(call: Call) -> str:
    """The call's arguments as JSON, once the call can be written."""
    if not isinstance(call.name, str) or not TOOL_NAME.match(call.name):
        raise ValueError(f"cannot write a call to {call.name!r}: not a valid tool name")
    if not isinstance(call.arguments, dict):
        raise ValueError(f"cannot write arguments {call.arguments!r}: they must be a dict")
    return json.dumps(call.arguments, ensure_ascii=False, allow_nan=False)


class MistralSyntax:
    """[TOOL_CALLS] calls: `array` (v3) writes them as a JSON array, else by name with [ARGS] (v11+)."""

    shape = "tool_calls"
    shapes = (TOOL_CALLS_SHAPE,)
    alternates: tuple = ()
    opener = TOOL_CALLS
    closer = ""  # the arguments' object (or the array) closing ends a call
    collect_calls = True  # one [TOOL_CALLS] a call, one after another (v3: several in the array)
    template_tools = True  # Mistral's chat templates list the tools in [AVAILABLE_TOOLS]
    render_result = staticmethod(render_result)

    def __init__(self, name: str, array: bool = False, reasoning: tuple[tuple[str, str], ...] = ()) -> None:
        self.name = name
        self.array = array
        self.reasoning = reasoning
        self.grammar = ARRAY_FORM if array else NAMED_FORM  # how --constrain writes its calls

    def scanner(self) -> ToolCallsScanner:
        return ToolCallsScanner()

    def parse(self, text: str) -> Call:
        """The one call in `text`, which begins with [TOOL_CALLS]; raises ParseError."""
        if not text.startswith(TOOL_CALLS):
            raise ParseError(f"a call starts with {TOOL_CALLS}; {ARRAY_SHAPE if self.array else NAMED_SHAPE}", 1)
        calls = [item for item in read_tool_calls(text, True, {}) if isinstance(item, ParsedCall)]
        if len(calls) != 1:
            raise ParseError(f"expected one call, found {len(calls)}", 1)
        if calls[0].error is not None:
            raise calls[0].error
        assert calls[0].call is not None  # a ParsedCall holds a call or its error
        return calls[0].call

    def render(self, call: Call) -> str:
        arguments = _checked(call)
        if self.array:
            return f'{TOOL_CALLS} [{{"name": {json.dumps(call.name)}, "arguments": {arguments}}}]'
        return f"{TOOL_CALLS}{call.name}{ARGS}{arguments}"

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        return [tool_schema(tool) for tool in tools]

    def describe(self, tools: Iterable[Any]) -> str:
        """The system prompt's paragraphs where a chat template does not list the tools: each tool's JSON
        schema on a line, then how to call."""
        lines = [json.dumps(schema, ensure_ascii=False) for schema in self.tool_schemas(tools)]
        if not lines:
            return ""
        if self.array:
            how = f"To call tools, write {TOOL_CALLS} and a JSON array of the calls, as in {ARRAY_EXAMPLE}."
        else:
            how = (
                f"To call a tool, write {TOOL_CALLS}, the tool's name, {ARGS} and the arguments as a JSON object, "
                f"as in {NAMED_EXAMPLE}; write each call so, one after another."
            )
        return "You can call these tools:\n" + "\n".join(lines) + "\n\n" + how
