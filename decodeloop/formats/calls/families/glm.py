"""GLM's tool calls (GLM-4.5, 4.6, 4.7, 5.x): the tool's name, then a key tag and a value tag per argument.

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>

GLM-4.5 and 4.6 put a line break after the name and after each tag, as above (`glm45`); GLM-4.7 and
5.x write the same with none (`glm47`):

    <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>

Both variants are read alike, whitespace between the tags being markup; each is written as its model
writes it. A value is raw text up to its </arg_value>, whitespace and all: the templates write a string
as it is and anything else with tojson. Values are typed by the tool's inputSchema (schema/arguments.py
`text_value`): "3" is 3 for an integer and "3" for a string; a value the schema does not type is JSON
where it reads as JSON, else text, as vLLM's GLM parsers read it.

Every tag is a special token of GLM's tokenizer, and inside a value a tag is the value's text: a
`</tool_call>` closes a call only outside every <arg_value>. A message that ends right after a
`</tool_call>` that a value swallowed is read with that closer as the call's end (the model left out the
last </arg_value>).

Reasoning is <think>...</think>: GLM-4.5 and 4.6 open it themselves, the generation prompt of GLM-4.7
and 5.x opens it. Sources: the chat templates of zai-org/GLM-4.5 and zai-org/GLM-4.7, vLLM's glm4_moe
and glm47_moe tool parsers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from decodeloop.formats.calls.base import (
    TOOL_NAME,
    Call,
    CallShape,
    ParsedCall,
    ParseError,
    parameter_schema,
    render_result,
    tool_schema,
)
from decodeloop.formats.calls.scan import CloserScanner
from decodeloop.schema import text_value

OPENER = "<tool_call>"
CLOSER = "</tool_call>"
ARG_KEY = "<arg_key>"
END_ARG_KEY = "</arg_key>"
ARG_VALUE = "<arg_value>"
END_ARG_VALUE = "</arg_value>"
SHAPE = "glm"

_WS = " \t\r\n"
_MAX_NAME = 128
_HOW = f"a call looks like {OPENER}NAME{ARG_KEY}KEY{END_ARG_KEY}{ARG_VALUE}VALUE{END_ARG_VALUE}{CLOSER}"

PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
INSTRUCTION = (
    "\n</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n"
)
EXAMPLE_45 = (
    "<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n"
    "<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>"
)
EXAMPLE_47 = (
    "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>"
    "<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
)


def _inside_value(text: str, limit: int) -> bool:
    """Whether `limit` falls inside an <arg_value> of `text`."""
    pos = 0
    while True:
        start = text.find(ARG_VALUE, pos, limit)
        if start < 0:
            return False
        end = text.find(END_ARG_VALUE, start + len(ARG_VALUE), limit)
        if end < 0:
            return True
        pos = end + len(END_ARG_VALUE)


def _closes(span: str) -> bool:
    """The CloserScanner's test: the `</tool_call>` that ends `span` is outside every value."""
    return not _inside_value(span, len(span) - len(CLOSER))


def _skip(text: str, pos: int, limit: int) -> int:
    while pos < limit and text[pos] in _WS:
        pos += 1
    return pos


def _found(text: str, pos: int, limit: int) -> str:
    if pos >= limit:
        return f"'{CLOSER}'" if limit < len(text) else "the end of the text"
    for tag in (ARG_KEY, END_ARG_KEY, ARG_VALUE, END_ARG_VALUE, OPENER):
        if text.startswith(tag, pos):
            return f"'{tag}'"
    shown = text[pos : min(limit, pos + 24)]
    return json.dumps(shown + ("..." if limit > pos + 24 else ""), ensure_ascii=False)


def _fail(message: str, pos: int) -> ParseError:
    return ParseError(f"{message}; {_HOW}", pos + 1)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _untyped(text: str) -> Any:
    """A value whose schema names no type: JSON where it reads as JSON (NaN and Infinity do not), else the
    text."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text


def _value(tools: Mapping[str, Any], name: str, key: str, text: str) -> Any:
    schema, root = parameter_schema(tools, name, key)
    return _untyped(text) if schema is None else text_value(text, schema, root, _untyped)


def _parse(span: str, closed: bool, tools: Mapping[str, Any]) -> Call:
    """The call `span` holds, from its <tool_call>; `closed`: a `</tool_call>` ends it. Raises ParseError."""
    limit, recovered = len(span), False
    if closed:
        limit = len(span) - len(CLOSER)
    else:
        at = span.rstrip(_WS).rfind(CLOSER)
        # the message ended right after a </tool_call> that a value swallowed: it closes the call
        if at >= 0 and at + len(CLOSER) == len(span.rstrip(_WS)) and _inside_value(span, at):
            limit, recovered = at, True
    pos = len(OPENER)
    tag_at = span.find("<", pos, limit)  # the name runs to the first tag
    name_end = tag_at if tag_at >= 0 else limit
    name = span[pos:name_end].strip(_WS)
    if not name:
        raise _fail(f"the call names no tool: write the tool's name right after {OPENER}", pos)
    if len(name) > _MAX_NAME or not TOOL_NAME.match(name):
        raise _fail(
            f"{json.dumps(name[:40], ensure_ascii=False)} after {OPENER} is not a tool name: a tool name uses "
            "only letters, digits, _ . - and /",
            _skip(span, pos, limit),
        )
    arguments: dict[str, Any] = {}
    pos = name_end
    while True:
        pos = _skip(span, pos, limit)
        if pos >= limit:
            break
        if not span.startswith(ARG_KEY, pos):
            raise _fail(f"expected {ARG_KEY} or {CLOSER} at column {pos + 1}, found {_found(span, pos, limit)}", pos)
        key_end = span.find(END_ARG_KEY, pos, limit)
        if key_end < 0:
            raise _fail(f"the {ARG_KEY} at column {pos + 1} has no {END_ARG_KEY}", pos)
        key = span[pos + len(ARG_KEY) : key_end].strip(_WS)
        if not key or "<" in key:
            raise _fail(f"the {ARG_KEY} at column {pos + 1} does not hold an argument's name", pos)
        if key in arguments:
            raise _fail(f"the argument {json.dumps(key)} at column {pos + 1} is given twice; give it once", pos)
        pos = _skip(span, key_end + len(END_ARG_KEY), limit)
        if not span.startswith(ARG_VALUE, pos):
            raise _fail(
                f"expected {ARG_VALUE} after the key {json.dumps(key)} at column {pos + 1}, found "
                f"{_found(span, pos, limit)}",
                pos,
            )
        value_at = pos + len(ARG_VALUE)
        value_end = span.find(END_ARG_VALUE, value_at, limit)
        if value_end < 0 and not recovered:
            raise _fail(
                f"unclosed call: the text ends at column {limit + 1} inside the value of {json.dumps(key)}; end "
                f"it with {END_ARG_VALUE} and the call with {CLOSER}",
                limit,
            )
        if value_end < 0:
            value_end = limit
        arguments[key] = _value(tools, name, key, span[value_at:value_end])
        pos = value_end + len(END_ARG_VALUE)
    if not (closed or recovered):
        raise _fail(f"unclosed call: the text ends at column {limit + 1}; end the call with {CLOSER}", limit)
    return Call(name, arguments)


def _read(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
    try:
        return [ParsedCall(span, SHAPE, _parse(span, closed, tools))]
    except ParseError as e:
        return [ParsedCall(span, SHAPE, None, e)]


class GlmSyntax:
    """<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...</tool_call>; `newlines`: written
    with a line break after the name and after each tag (GLM-4.5, 4.6), else without (GLM-4.7, 5.x)."""

    shape = SHAPE
    alternates = ()
    opener = OPENER
    closer = CLOSER
    collect_calls = True  # parallel calls are consecutive <tool_call> blocks
    template_tools = True  # the chat template's tool list teaches these calls

    shapes = (
        CallShape(
            SHAPE,
            OPENER,
            lambda: CloserScanner(CLOSER, _closes),
            _read,
            CLOSER,
            markers=(ARG_KEY, END_ARG_KEY, ARG_VALUE, END_ARG_VALUE),
        ),
    )

    def __init__(self, newlines: bool, reasoning: tuple[tuple[str, str], ...] = ()) -> None:
        self.newlines = newlines
        self.name = "glm45" if newlines else "glm47"
        self.reasoning = reasoning

    def parse(self, text: str) -> Call:
        """One call's text, from its <tool_call>; raises ParseError."""
        if not text.startswith(OPENER):
            raise _fail(f"a call begins with {OPENER}", 0)
        return _parse(text, text.rstrip(_WS).endswith(CLOSER), {})

    def render(self, call: Call) -> str:
        if not isinstance(call.name, str) or not TOOL_NAME.match(call.name):
            raise ValueError(f"cannot write a call to {call.name!r}: not a valid tool name")
        if not isinstance(call.arguments, dict):
            raise ValueError(f"cannot write arguments {call.arguments!r}: they must be a dict")
        sep = "\n" if self.newlines else ""
        parts = [OPENER + call.name]
        for key, value in call.arguments.items():
            if not isinstance(key, str) or not key or key.strip(_WS) != key or "<" in key:
                raise ValueError(f"cannot write the argument name {key!r} in an {ARG_KEY} tag")
            if isinstance(value, str):
                if END_ARG_VALUE in value:
                    raise ValueError(f"cannot write the value of {key!r}: it holds {END_ARG_VALUE}")
                text = value
            else:
                text = json.dumps(value, ensure_ascii=False, allow_nan=False)
            parts.append(f"{ARG_KEY}{key}{END_ARG_KEY}{sep}{ARG_VALUE}{text}{END_ARG_VALUE}")
        parts.append(CLOSER)
        return sep.join(parts)

    def scanner(self) -> CloserScanner:
        return CloserScanner(CLOSER, _closes)

    render_result = staticmethod(render_result)

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        """The tools as OpenAI-style function dicts, the `tools=` a chat template takes."""
        return [tool_schema(tool) for tool in tools]

    def describe(self, tools: Iterable[Any]) -> str:
        """The GLM templates' tool block: one JSON line per tool, then how to call."""
        lines = [json.dumps(schema, ensure_ascii=False) for schema in self.tool_schemas(tools)]
        if not lines:
            return ""
        return PREAMBLE + "\n".join(lines) + INSTRUCTION + (EXAMPLE_45 if self.newlines else EXAMPLE_47)
