"""Qwen's XML tool calls (Qwen3-Coder, Qwen3.5, 3.6 and 3.8): a function tag with a tag per parameter.

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

A value is raw text: the one line break after `<parameter=KEY>` and the one before `</parameter>` are
markup, everything else (indentation, blank lines, quotes, backslashes, tags) is the value. Values are
typed by the tool's inputSchema (schema/arguments.py `text_value`): "3" is 3 for an integer, "true" (or
Python's "True") true for a boolean, JSON for an array or an object, "null" null where null is allowed,
and text wherever a string is, so "02139" stays "02139". A parameter the schema does not name is text.

Where a value ends: a tag inside a value is its text unless what follows it says it is markup. A value
ends at the first of

    </parameter>        followed (after whitespace) by <parameter=, </function>, </tool_call> or the end
    </function>         followed by </tool_call> or the end (the model left out </parameter>)
    <parameter=KEY>     at the start of a line (the model left out </parameter>)

so `Close with </function> then </tool_call>` inside a value is text, and `</tool_call>` closes a call
only outside every value. Where the model left markup out, the call is still read when it is whole: a
`</tool_call>` without `</function>` closes it, and so does a message that ends after `</function>`, or
right after a `</tool_call>` that a value swallowed.

Variants, all read alike: Qwen3-Coder answers without reasoning and writes Python's literals (`True`);
Qwen3.5 onward reason in <think>...</think>, opened by the generation prompt, and write JSON's. Some
generations leave out the opening <tool_call> and begin at <function=NAME> (llama.cpp's "bare
function"): that shape is read too, with a `</tool_call>` after it taken in, where it goes on as a call
(a tool's name, '>', then <parameter= or </function>); a <function= that does not is the message's text.

Sources: the chat templates of Qwen/Qwen3-Coder-30B-A3B-Instruct and Qwen/Qwen3.8-27B, vLLM's
qwen3coder_tool_parser.py, llama.cpp's Qwen3-Coder parser.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from decodeloop.formats.calls.base import (
    TOOL_NAME,
    Call,
    CallShape,
    ParsedCall,
    ParseError,
    SpanText,
    parameter_schema,
    render_result,
    tool_schema,
)
from decodeloop.formats.calls.scan import CloserScanner
from decodeloop.schema import text_value

OPENER = "<tool_call>"
CLOSER = "</tool_call>"
FUNCTION = "<function="
END_FUNCTION = "</function>"
PARAMETER = "<parameter="
END_PARAMETER = "</parameter>"
SHAPE = "qwen3_xml"  # the canonical shape, in <tool_call>
BARE = "qwen3_xml_bare"  # a call begun at <function= without <tool_call>

_WS = " \t\r\n"
_MAX_NAME = 128
_VALUE_END = re.compile(r"</parameter>|</function>|\n<parameter=[^<>\n]*>")
_MARKUP = re.compile(r"<parameter=[^<>\n]*>|</function>")  # outside values, where the walk stops
_HOW = (
    "a call is <tool_call>, <function=NAME>, a <parameter=KEY> line, the value and a </parameter> line for "
    "each argument, then </function> and </tool_call>, each tag on a line of its own"
)

PREAMBLE = "# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
POSTAMBLE = (
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: an inner <function=...></function> block must be "
    "nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE the function "
    "call, but NOT after\n"
    "- If there is no function call available, answer the question like normal with your current knowledge "
    "and do not tell the user about function calls\n</IMPORTANT>"
)


def _skip(text: str, pos: int, limit: int) -> int:
    while pos < limit and text[pos] in _WS:
        pos += 1
    return pos


def _next_is(text: str, pos: int, tags: tuple[str, ...], final: bool) -> bool:
    """Whether, after whitespace, `text` goes on at `pos` with one of `tags` (or ends, when `final`)."""
    pos = _skip(text, pos, len(text))
    return final if pos == len(text) else text.startswith(tags, pos)


def _value_end(text: str, start: int, limit: int, final: bool) -> tuple[int, int] | None:
    """Where the value that begins at `start` ends: (the end of its text, where the markup goes on), or
    None while it is open before `limit`. `final`: the text ends at its end, which counts as what follows."""
    for m in _VALUE_END.finditer(text, start):
        at = m.start()
        if at >= limit:
            return None
        tag = m.group()
        if tag == END_PARAMETER:
            if _next_is(text, m.end(), (PARAMETER, END_FUNCTION, CLOSER), final):
                return at, m.end()
        elif tag == END_FUNCTION:
            if _next_is(text, m.end(), (CLOSER,), final):
                return at, at
        else:  # a new parameter at a line's start: its line break is the markup before it
            return at + 1, at + 1
    return None


def _walk(text: str, limit: int, final: bool = False) -> tuple[bool, int | None]:
    """Follow the markup of `text` up to `limit`, values skipped whole: (whether `limit` falls inside a value,
    the index just past the function's </function> if it closes first)."""
    pos = 0
    while True:
        m = _MARKUP.search(text, pos, limit)
        if m is None:
            return False, None
        if m.group() == END_FUNCTION:
            return False, m.end()
        end = _value_end(text, m.end(), limit, final)
        if end is None:
            return True, None
        pos = end[1]


def _closes(span: str) -> bool:
    """The CloserScanner's test: the `</tool_call>` that ends `span` is outside every value."""
    return not _walk(span, len(span) - len(CLOSER))[0]


def _found(text: str, pos: int, limit: int) -> str:
    if pos >= limit:
        return f"'{CLOSER}'" if limit < len(text) else "the end of the text"
    line = text[pos:limit].split("\n", 1)[0]
    return "a line break" if not line else json.dumps(line[:24] + ("..." if len(line) > 24 else ""))


def _fail(message: str, pos: int) -> ParseError:
    return ParseError(f"{message}; {_HOW}", pos + 1)


def _tag_name(text: str, pos: int, limit: int, tag: str, what: str) -> tuple[str, int]:
    """The name a `<function=` or `<parameter=` tag at `pos` gives, and the index past its `>`."""
    start = pos + len(tag)
    close = start
    while close < limit and text[close] not in "<>\n":
        close += 1
    if close >= limit or text[close] != ">":
        raise _fail(f"the {tag} tag at column {pos + 1} has no closing '>' on its line", pos)
    name = text[start:close].strip()
    if not name:
        raise _fail(f"the {tag} tag at column {pos + 1} names no {what}", pos)
    return name, close + 1


def _strip_one(value: str) -> str:
    """The value without the one line break of markup on each side."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _parse(span: str, start: int, closed: bool, tools: Mapping[str, Any]) -> tuple[Call, int]:
    """The call whose <function= tag is at or after `start` in `span`, and where its markup ends. `closed`:
    a `</tool_call>` ends the span. Raises ParseError."""
    limit, final = len(span), True
    if closed:
        limit, final = len(span) - len(CLOSER), False
    elif span.rstrip(_WS).endswith(CLOSER):
        # the message ended right after a </tool_call> that a value swallowed: it closes the call
        closer_at = span.rstrip(_WS).rfind(CLOSER)
        if _walk(span[:closer_at], closer_at, final=True)[0]:
            limit = closer_at
    pos = _skip(span, start, limit)
    if not span.startswith(FUNCTION, pos):
        raise _fail(f"expected {FUNCTION}NAME> at column {pos + 1}, found {_found(span, pos, limit)}", pos)
    name_at = _skip(span, pos + len(FUNCTION), limit)
    name, pos = _tag_name(span, pos, limit, FUNCTION, "tool")
    if len(name) > _MAX_NAME or not TOOL_NAME.match(name):
        raise _fail(
            f"{json.dumps(name[:40], ensure_ascii=False)} is not a tool name: a tool name uses only letters, "
            "digits, _ . - and /",
            name_at,
        )
    arguments: dict[str, Any] = {}
    while True:
        pos = _skip(span, pos, limit)
        if pos >= limit:
            if limit < len(span):  # </tool_call> closes the call, </function> left out
                return Call(name, arguments), limit
            raise _fail(
                f"unclosed call: the text ends at column {pos + 1} before {END_FUNCTION}; end the call with "
                f"{END_FUNCTION} and {CLOSER}",
                pos,
            )
        if span.startswith(END_FUNCTION, pos):
            return Call(name, arguments), pos + len(END_FUNCTION)
        if not span.startswith(PARAMETER, pos):
            raise _fail(
                f"expected {PARAMETER}KEY> or {END_FUNCTION} at column {pos + 1}, found {_found(span, pos, limit)}",
                pos,
            )
        key_at = pos
        key, value_at = _tag_name(span, pos, limit, PARAMETER, "argument")
        if key in arguments:
            raise _fail(f"the argument {json.dumps(key)} at column {key_at + 1} is given twice; give it once", key_at)
        end = _value_end(span, value_at, limit, final)
        if end is None:
            if limit == len(span):
                raise _fail(
                    f"unclosed call: the text ends at column {limit + 1} inside the value of {json.dumps(key)}; "
                    f"end it with {END_PARAMETER}",
                    limit,
                )
            end = (limit, limit)  # a value that runs into the message's last </tool_call>
        text_end, pos = end
        schema, root = parameter_schema(tools, name, key)
        raw = _strip_one(span[value_at:text_end])
        arguments[key] = raw if schema is None else text_value(raw, schema, root)


def _read_tool_call(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
    """A <tool_call> span: one call, or the error that says how to write it."""
    body_end = len(span.rstrip(_WS) if not closed else span)
    if span.startswith(CLOSER, body_end - len(CLOSER)):
        body_end -= len(CLOSER)
    try:
        call, end = _parse(span, len(OPENER), closed, tools)
        rest = _skip(span, end, body_end)
        if rest < body_end:
            raise _fail(
                f"unexpected text after {END_FUNCTION} at column {rest + 1}: {_found(span, rest, len(span))}; "
                f"end the call with {CLOSER} right after {END_FUNCTION}",
                rest,
            )
        return [ParsedCall(span, SHAPE, call)]
    except ParseError as e:
        return [ParsedCall(span, SHAPE, None, e)]


def _head(text: str, strict: bool = False) -> int | bool | None:
    """Whether a span begun at <function= goes on as a call: True once it does, the index where it stops
    doing so, or None while it may still. It does while it writes a tool's name and '>', then a tag ("<");
    `strict`: the tag is <parameter= or </function>. Each answer comes at the character that decides it,
    so where the span ends does not depend on how the text was cut."""
    pos = len(FUNCTION)
    while pos < len(text) and text[pos] not in "<>\n":
        if pos - len(FUNCTION) >= _MAX_NAME:
            return pos  # too long for a tool's name
        pos += 1
    if pos == len(text):
        return None
    if text[pos] != ">" or not TOOL_NAME.match(text[len(FUNCTION) : pos].strip()):
        return pos
    pos = _skip(text, pos + 1, len(text))
    if pos == len(text):
        return None
    if not strict:
        return True if text[pos] == "<" else pos
    return True if text.startswith((PARAMETER, END_FUNCTION), pos) else pos


class BareScanner:
    """Where a call begun at <function= (no <tool_call>) ends: after its </function>, and a </tool_call> that
    follows it; at once where it does not go on as a call (`abandoned`)."""

    def __init__(self) -> None:
        self.abandoned = False
        self._text = FUNCTION  # the opener, so indices match the span's
        self._begun = False
        self._closing = False  # a </function> has been written
        self._end: int | None = None  # just past the function's </function>, once known

    def feed(self, piece: str) -> int | None:
        before = len(self._text)
        text = self._text = self._text + piece
        if not self._begun:
            head = _head(text)
            if head is None:
                return None
            if head is not True:
                self.abandoned = True
                return int(head) - before
            self._begun = True
        if self._end is None:
            recent = text[max(before - len(CLOSER), 0) :]
            self._closing = self._closing or END_FUNCTION in recent
            # the walk's answer changes only with a tag's '>' or the start of one ('<') near the new text
            if not self._closing or not (">" in piece or "<" in recent):
                return None
            self._end = _walk(text, len(text))[1]
            if self._end is None:
                return None
        pos = _skip(text, self._end, len(text))
        if text.startswith(CLOSER, pos):
            return pos + len(CLOSER) - before
        if pos == len(text) or CLOSER.startswith(text[pos:]):
            return None  # it may still be the </tool_call> that ends the call
        return max(pos - before, 0)


def _read_bare(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall | SpanText]:
    """A span begun at <function=: the call (and any text after it), or the text it was."""
    if _head(span, strict=True) is not True:
        return [SpanText("content", span)]
    try:
        call, end = _parse(span, 0, False, tools)
    except ParseError as e:
        return [ParsedCall(span, BARE, None, e)]
    pos = _skip(span, end, len(span))
    if span.startswith(CLOSER, pos):
        pos += len(CLOSER)
    out: list[ParsedCall | SpanText] = [ParsedCall(span[:pos], BARE, call)]
    if span[pos:]:
        out.append(SpanText("content", span[pos:]))
    return out


def _check_value(key: str, value: str) -> None:
    """A string value must read back as itself: no markup inside it that would end it early."""
    written = f"\n{value}\n{END_PARAMETER}\n{END_FUNCTION}\n{CLOSER}"
    end = len(value) + 2  # where its </parameter> stands
    if _value_end(written, 0, len(written) - len(CLOSER), False) != (end, end + len(END_PARAMETER)):
        raise ValueError(f"cannot write the value of {key!r}: the markup inside it would end it early")


class QwenXmlSyntax:
    """<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function></tool_call>, a tag a line."""

    name = "qwen3-xml"
    shape = SHAPE
    alternates = ()
    opener = OPENER
    closer = CLOSER
    collect_calls = True  # parallel calls are consecutive <tool_call> blocks
    template_tools = True  # the chat template's tool list teaches these calls
    # Qwen3.5 and later may go from the prefilled <think> straight to a call without </think>; llama.cpp ends
    # the reasoning there, and so does this format by default (--calls-in-reasoning ignore keeps it reasoning)
    calls_in_reasoning = "run"

    shapes = (
        CallShape(SHAPE, OPENER, lambda: CloserScanner(CLOSER, _closes), _read_tool_call, CLOSER),
        CallShape(BARE, FUNCTION, BareScanner, _read_bare),
    )

    def __init__(self, reasoning: tuple[tuple[str, str], ...] = ()) -> None:
        self.reasoning = reasoning

    def parse(self, text: str) -> Call:
        """One call's text (from <tool_call>, or from <function=); raises ParseError."""
        items: Sequence[ParsedCall | SpanText]
        if text.startswith(FUNCTION):
            items = _read_bare(text, True, {})
        elif text.startswith(OPENER):
            items = _read_tool_call(text, text.rstrip(_WS).endswith(CLOSER), {})
        else:
            raise _fail(f"a call begins with {OPENER}", 0)
        first = items[0]
        if isinstance(first, SpanText):
            raise _fail(f"the text after {FUNCTION} is not a call", 0)
        if first.error is not None:
            raise first.error
        assert first.call is not None  # a parsed call has one or the other
        return first.call

    def render(self, call: Call) -> str:
        if not isinstance(call.name, str) or not TOOL_NAME.match(call.name):
            raise ValueError(f"cannot write a call to {call.name!r}: not a valid tool name")
        if not isinstance(call.arguments, dict):
            raise ValueError(f"cannot write arguments {call.arguments!r}: they must be a dict")
        lines = [OPENER, f"{FUNCTION}{call.name}>"]
        for key, value in call.arguments.items():
            if not isinstance(key, str) or not key.strip() or any(c in key for c in "<>\n"):
                raise ValueError(f"cannot write the argument name {key!r} in a {PARAMETER} tag")
            if isinstance(value, str):
                _check_value(key, value)
                text = value
            else:
                text = json.dumps(value, ensure_ascii=False, allow_nan=False)
            lines += [f"{PARAMETER}{key}>", text, END_PARAMETER]
        lines += [END_FUNCTION, CLOSER]
        return "\n".join(lines)

    def scanner(self) -> CloserScanner:
        return CloserScanner(CLOSER, _closes)

    render_result = staticmethod(render_result)

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        """The tools as OpenAI-style function dicts, the `tools=` a chat template takes."""
        return [tool_schema(tool) for tool in tools]

    def describe(self, tools: Iterable[Any]) -> str:
        """The Qwen3.5 template's tool block: one JSON line per tool, then how to call."""
        lines = [json.dumps(schema, ensure_ascii=False) for schema in self.tool_schemas(tools)]
        return PREAMBLE + "\n".join(lines) + POSTAMBLE if lines else ""
