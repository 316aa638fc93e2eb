"""Moonshot's Kimi call formats: K2.x's section of special tokens, and K3's XTML.

K2 (`kimi-k2`: Kimi-K2-Instruct, K2-Thinking, K2.5, K2.6): a section of calls, each named by its id
`functions.NAME:IDX` (IDX counts the conversation's calls), its arguments one strict JSON object

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>
    {"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

(on one line). Every marker is one special token; one written inside a JSON string is the string's text. An id
without `functions.` names the tool all the same, and text in the section outside a call is not read. The
thinking models reason in `<think>` ... `</think>` (their prompt opens it, or pre-fills it empty).

K3 (`kimi-k3`): XTML, elements `<|open|>NAME attributes<|sep|>` ... `<|close|>NAME<|sep|>`, where only
`<|open|>`, `<|close|>` and `<|sep|>` are special tokens. A message is its reasoning, its answer and its calls:

    <|open|>think<|sep|>Paris, in Celsius.<|close|>think<|sep|>
    <|open|>response<|sep|>Let me look.<|close|>response<|sep|>
    <|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>
    <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
    <|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>
    <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>

(without the line breaks). Attribute values are XML-escaped (`&amp;`, `&quot;`); an argument's value is raw
text, JSON when its type is not "string" (number, integer, boolean, null, array, object); one without a type
is text, typed later by the tool's schema. The answer is the response element's text; the think element is
reasoning, and ends where the response begins when the model skips its close. The prompt opens the think
element (thinking) or the response (not). A value ends at the first `<|close|>argument<|sep|>` followed by
the next argument or the call's end: the marker's text written inside a value otherwise reads as the value's.

Each call is a span of its own, so a message cut off in its second call keeps the first: the section's (the
tools element's) opener begins the first call's span, `<|tool_call_begin|>` (`<|open|>call`) each later one.
K2's section end is a special token and is not shown; K3's structural tags are spans that hold no call.

Sources: the Kimi-K2 and Kimi-K2.6 chat templates and vLLM's kimi_k2 tool parser; Kimi-K3's encoder
(encoding_k3) as CanIToolCall's fixtures render it. Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any
from xml.sax.saxutils import escape, unescape

from decodeloop.formats.calls.base import Call, CallShape, ParsedCall, ParseError, render_result, tool_schema
from decodeloop.formats.calls.families.spans import (
    Alone,
    JsonEnd,
    attributes,
    dumped,
    ends,
    json_object,
    nothing,
    parsed,
    tool_name,
)
from decodeloop.formats.calls.form import Arguments, CallForm, Name, Run, Space, Template, Text, Token
from decodeloop.formats.calls.shapes import NotACall, strict_json


@cache
def _any_of(markers: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, markers)))


def _first(text: str, pos: int, *markers: str) -> tuple[int, str]:
    """The earliest of `markers` in `text` from `pos`: (where, which), or (-1, "")."""
    found = _any_of(markers).search(text, pos)
    return (found.start(), found.group()) if found is not None else (-1, "")


# --- K2: the calls section -----------------------------------------------------------------------------------

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
CALL_END = "<|tool_call_end|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
K2_FORM = f'a call is {CALL_BEGIN}functions.NAME:0{ARGUMENT_BEGIN}{{"key": "value"}}{CALL_END}'
_K2_ENDS = re.compile(f"{re.escape(CALL_END)}|{re.escape(SECTION_END)}")
_K2_ENDS_OUTSIDE_STRINGS = JsonEnd(CALL_END, SECTION_END)
THINK = (("<think>", "</think>"),)


# how --constrain writes a call (formats/calls/form.py): its id functions.NAME:IDX, the arguments, its end
_K2_CALL = (
    Text("functions."),
    Name(),
    Text(":"),
    Run("0123456789", 1, 6),
    Space(),
    Token(ARGUMENT_BEGIN),
    Space(),
    Arguments(),
    Space(),
    Token(CALL_END),
)
K2_GRAMMAR = CallForm(
    {SECTION_BEGIN: Template((Space(), Token(CALL_BEGIN), *_K2_CALL)), CALL_BEGIN: Template(_K2_CALL)},
    required=(Token(SECTION_BEGIN),),
)


def _k2_call_end(text: str, pos: int) -> int | None:
    """Just past the end of the call whose id begins at `pos`: the first <|tool_call_end|> outside the strings of
    its JSON (or the section's end, for a call never closed); None while it is open."""
    arguments = text.find(ARGUMENT_BEGIN, pos)
    before = _K2_ENDS.search(text, pos, arguments if arguments >= 0 else len(text))
    if before is not None:
        return before.end()  # before the arguments: nothing can be quoted yet
    return _K2_ENDS_OUTSIDE_STRINGS(text, arguments + len(ARGUMENT_BEGIN)) if arguments >= 0 else None


def _k2_section_end(text: str) -> int | None:
    """Where a section's first span ends (`text` follows its opener): after its first call, or at the section's
    end when it holds none."""
    at, marker = _first(text, 0, CALL_BEGIN, SECTION_END)
    if marker == CALL_BEGIN:
        return _k2_call_end(text, at + len(CALL_BEGIN))
    return at + len(SECTION_END) if marker else None


def _k2_call(span: str, at: int) -> Call:
    """The call whose <|tool_call_begin|> stands at `at` in the span."""
    start = at + len(CALL_BEGIN)
    end = _k2_call_end(span, start)
    if end is None:
        raise ParseError(f"the call was cut off before its {CALL_END}; {K2_FORM}", len(span) + 1)
    if span.endswith(SECTION_END, 0, end):
        raise ParseError(f"the call is not closed: end it with {CALL_END} before {SECTION_END}", end + 1)
    ident, sep, arguments = span[start : end - len(CALL_END)].partition(ARGUMENT_BEGIN)
    if not sep:
        raise ParseError(f"no {ARGUMENT_BEGIN} after the call's id; {K2_FORM}", start + len(ident) + 1)
    # the id is functions.NAME:IDX; the name is what stands between
    name = ident.strip()
    name = name[len("functions.") :] if name.startswith("functions.") else name
    head, colon, index = name.rpartition(":")
    name = head if colon and index.isdigit() else name
    return Call(tool_name(name, start, K2_FORM), json_object(arguments, start + len(ident) + len(sep), K2_FORM))


def _k2_section(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
    """The span that opens a section: its first call (text before it is not read), or nothing for an empty one."""
    at, marker = _first(span, len(SECTION_BEGIN), CALL_BEGIN, SECTION_END)
    if marker == CALL_BEGIN:
        return [parsed("kimi_section", span, lambda: _k2_call(span, at))]
    if not span[len(SECTION_BEGIN) : at if marker else len(span)].strip():
        return []
    error = ParseError(f"the calls section holds no call: {K2_FORM}", len(SECTION_BEGIN) + 1)
    return [ParsedCall(span, "kimi_section", None, error)]


# --- K3: XTML -------------------------------------------------------------------------------------------------

OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"
TOOLS_OPEN, TOOLS_CLOSE = f"{OPEN}tools{SEP}", f"{CLOSE}tools{SEP}"
CALL_OPEN, CALL_CLOSE = f"{OPEN}call", f"{CLOSE}call{SEP}"
ARGUMENT_OPEN, ARGUMENT_CLOSE = f"{OPEN}argument", f"{CLOSE}argument{SEP}"
RESPONSE_OPEN, RESPONSE_CLOSE = f"{OPEN}response{SEP}", f"{CLOSE}response{SEP}"
MESSAGE_CLOSE = f"{CLOSE}message{SEP}"
# the think element; a model that skips its close ends it by opening the response
K3_THINK = ((f"{OPEN}think{SEP}", f"{CLOSE}think{SEP}"), (f"{OPEN}think{SEP}", RESPONSE_OPEN))
K3_FORM = (
    f'a call is {CALL_OPEN} tool="NAME" index="1"{SEP}, then each argument as {ARGUMENT_OPEN} key="KEY" '
    f'type="string"{SEP}VALUE{ARGUMENT_CLOSE} (type "number", "boolean", "null", "array" or "object" for '
    f"a JSON value), then {CALL_CLOSE}"
)
_JSON_TYPES = {
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}
_AFTER_VALUE = (ARGUMENT_OPEN, CALL_CLOSE, TOOLS_CLOSE)  # what may follow an argument's close
_LONGEST_AFTER = max(map(len, _AFTER_VALUE))
_ATTRIBUTE_ENTITIES = {"&quot;": '"', "&apos;": "'"}  # with &amp; &lt; &gt;, which unescape knows


def _value_end(text: str, pos: int) -> tuple[int, int] | None:
    """The argument value that begins at `pos`: (where it ends, just past its close), None while it is open. Its
    close is the first <|close|>argument<|sep|> followed by the next argument or the end of the call."""
    at = text.find(ARGUMENT_CLOSE, pos)
    while at >= 0:
        after = at + len(ARGUMENT_CLOSE)
        follows = after
        while follows < len(text) and text[follows].isspace():
            follows += 1
        if text.startswith(_AFTER_VALUE, follows):
            return at, after
        rest = text[follows : follows + _LONGEST_AFTER]
        if len(rest) < _LONGEST_AFTER and any(m.startswith(rest) for m in _AFTER_VALUE):
            return None  # what follows is not written yet
        at = text.find(ARGUMENT_CLOSE, at + 1)  # the marker's text inside the value
    return None


def _k3_call_end(text: str, pos: int) -> int | None:
    """Just past the end of the call whose tag's attributes begin at `pos`: its close outside every value (or the
    tools element's, for a call never closed); None while it is open."""
    tag = text.find(SEP, pos)
    if tag < 0:
        return None
    pos = tag + len(SEP)
    while True:
        at, marker = _first(text, pos, ARGUMENT_OPEN, CALL_CLOSE, TOOLS_CLOSE)
        if marker != ARGUMENT_OPEN:
            return at + len(marker) if marker else None
        tag = text.find(SEP, at + len(ARGUMENT_OPEN))
        value = _value_end(text, tag + len(SEP)) if tag >= 0 else None
        if value is None:
            return None
        pos = value[1]


def _k3_tools_end(text: str) -> int | None:
    """Where the tools element's first span ends (`text` follows its opener): after its first call, or at the
    element's close when it holds none."""
    at, marker = _first(text, 0, CALL_OPEN, TOOLS_CLOSE)
    if marker == CALL_OPEN:
        return _k3_call_end(text, at + len(CALL_OPEN))
    return at + len(TOOLS_CLOSE) if marker else None


def _k3_attributes(span: str, pos: int, element: str) -> tuple[dict[str, str], int]:
    """The unescaped attributes of the tag whose text begins at `pos`, and where its <|sep|> ends."""
    tag = span.find(SEP, pos)
    if tag < 0:
        raise ParseError(f"the call was cut off in {element}'s tag; {K3_FORM}", len(span) + 1)
    found = attributes(span[pos:tag], pos, K3_FORM)
    return {key: unescape(value, _ATTRIBUTE_ENTITIES) for key, value in found.items()}, tag + len(SEP)


def _k3_value(raw: str, kind: str | None, key: str, at: int) -> Any:
    """An argument's value as its type attribute says: raw text for "string" (or no type), else JSON."""
    if kind is None or kind == "string":
        return raw
    shown = json.dumps(key, ensure_ascii=False)
    if kind not in _JSON_TYPES:
        raise ParseError(
            f"the argument {shown} has the type {json.dumps(kind, ensure_ascii=False)}; a type is string, number, "
            "integer, boolean, null, array or object",
            at,
        )
    try:
        value = strict_json(raw)
    except NotACall as e:
        raise ParseError(f"the value of {shown} is not JSON ({e}); write a {kind} as JSON does", at) from None
    # true is not a number, though Python's bool is an int
    if not isinstance(value, _JSON_TYPES[kind]) or (isinstance(value, bool) and kind != "boolean"):
        raise ParseError(f'the value of {shown} is not of the type {kind}: write one, or give it type="string"', at)
    return value


def _k3_call(span: str, at: int) -> Call:
    """The call whose <|open|>call stands at `at` in the span."""
    found, pos = _k3_attributes(span, at + len(CALL_OPEN), "the call")
    if "tool" not in found:
        raise ParseError(f'the call names no tool: tool="NAME" in its tag; {K3_FORM}', at + len(CALL_OPEN) + 1)
    name = tool_name(found["tool"], at + len(CALL_OPEN), K3_FORM)
    arguments: dict[str, Any] = {}
    while True:
        next_at, marker = _first(span, pos, ARGUMENT_OPEN, CALL_CLOSE, TOOLS_CLOSE)
        gap = span[pos : next_at if marker else len(span)]
        if gap.strip():
            shown = json.dumps(gap.strip()[:40], ensure_ascii=False)
            raise ParseError(f"unexpected text {shown} in the call to {name}; {K3_FORM}", pos + 1)
        if not marker:
            raise ParseError(f"the call to {name} was cut off before its {CALL_CLOSE}", len(span) + 1)
        if marker == CALL_CLOSE:
            return Call(name, arguments)
        if marker == TOOLS_CLOSE:
            raise ParseError(f"the call to {name} is not closed: end it with {CALL_CLOSE}", next_at + 1)
        found, value_at = _k3_attributes(span, next_at + len(ARGUMENT_OPEN), "an argument")
        key = found.get("key")
        if key is None:
            raise ParseError(f'an argument of {name} has no key="KEY"; {K3_FORM}', next_at + 1)
        if key in arguments:
            shown = json.dumps(key, ensure_ascii=False)
            raise ParseError(f"the argument {shown} is given twice in the call to {name}; give each once", next_at + 1)
        value = _value_end(span, value_at)
        if value is None:  # the span ended: the value runs to its last close, if it has one
            last = span.rfind(ARGUMENT_CLOSE, value_at)
            if last < 0:
                raise ParseError(f"the call to {name} was cut off inside an argument", len(span) + 1)
            value = last, last + len(ARGUMENT_CLOSE)
        arguments[key] = _k3_value(span[value_at : value[0]], found.get("type"), key, value_at + 1)
        pos = value[1]


def _k3_tools(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
    """The span that opens the tools element: its first call, or nothing for an empty one."""
    at, marker = _first(span, len(TOOLS_OPEN), CALL_OPEN, TOOLS_CLOSE)
    if marker == CALL_OPEN:
        return [parsed("xtml_tools", span, lambda: _k3_call(span, at))]
    if not span[len(TOOLS_OPEN) : at if marker else len(span)].strip():
        return []
    error = ParseError(f"the tools element holds no call: {K3_FORM}", len(TOOLS_OPEN) + 1)
    return [ParsedCall(span, "xtml_tools", None, error)]


# --- the syntaxes ---------------------------------------------------------------------------------------------


class _KimiSyntax:
    """What both Kimi syntaxes share."""

    name: str
    shapes: tuple[CallShape, ...]
    form: str
    alternates = ()
    collect_calls = True  # the calls of one message run together
    template_tools = True  # the chat template lists the tools itself
    render_result = staticmethod(render_result)

    def parse(self, text: str) -> Call:
        """The one call of a span as the stop check cuts them (the opener and the first call, or a later call);
        raises ParseError."""
        shape = next((s for s in self.shapes if text.startswith(s.opener)), None)
        read = shape.read(text, True, {}) if shape is not None else []
        if not read or not isinstance(read[0], ParsedCall):
            raise ParseError(f"no call: {self.form}", 1)
        if read[0].error is not None:
            raise read[0].error
        assert read[0].call is not None  # a call or its error
        return read[0].call

    def scanner(self) -> Any:
        return self.shapes[0].scanner()

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        return [tool_schema(tool) for tool in tools]


class K2Syntax(_KimiSyntax):
    """Kimi K2.x: calls in a section of special tokens, each named by its id, arguments in JSON."""

    name = "kimi-k2"
    shape = "kimi_section"
    opener, closer = SECTION_BEGIN, SECTION_END
    reasoning = THINK
    form = K2_FORM
    grammar = K2_GRAMMAR
    shapes = (
        CallShape(
            "kimi_section",
            SECTION_BEGIN,
            ends("_end|>", _k2_section_end),
            _k2_section,
            SECTION_END,
            markers=(ARGUMENT_BEGIN,),
        ),
        CallShape(
            "kimi_call",
            CALL_BEGIN,
            ends("_end|>", lambda t: _k2_call_end(t, 0)),
            lambda span, closed, tools: [parsed("kimi_call", span, lambda: _k2_call(span, 0))],
            CALL_END,
        ),
    )

    def render(self, call: Call) -> str:
        arguments = dumped(call)
        return f"{SECTION_BEGIN}{CALL_BEGIN}functions.{call.name}:0{ARGUMENT_BEGIN}{arguments}{CALL_END}{SECTION_END}"

    def describe(self, tools: Iterable[Any]) -> str:
        schemas = self.tool_schemas(tools)
        if not schemas:
            return ""
        return (
            "# Tools\n\nYou may call these tools, given as JSON Schema:\n"
            + json.dumps(schemas, ensure_ascii=False)
            + f"\n\nTo call tools, write {SECTION_BEGIN}, then each call as {CALL_BEGIN}functions.NAME:IDX"
            f"{ARGUMENT_BEGIN}ARGUMENTS{CALL_END} (IDX counts the calls from 0, ARGUMENTS is a JSON object), "
            f"then {SECTION_END}."
        )


def _marker(name: str, opener: str) -> CallShape:
    """A structural tag of K3's message that holds no call: read as nothing."""
    return CallShape(name, opener, Alone, nothing)


class K3Syntax(_KimiSyntax):
    """Kimi K3: XTML elements of control tokens, calls in the tools element, typed arguments."""

    name = "kimi-k3"
    shape = "xtml_tools"
    opener, closer = TOOLS_OPEN, TOOLS_CLOSE
    reasoning = K3_THINK
    form = K3_FORM
    shapes = (
        CallShape("xtml_tools", TOOLS_OPEN, ends(SEP, _k3_tools_end), _k3_tools, markers=(OPEN, CLOSE, SEP)),
        CallShape(
            "xtml_call",
            CALL_OPEN,
            ends(SEP, lambda t: _k3_call_end(t, 0)),
            lambda span, closed, tools: [parsed("xtml_call", span, lambda: _k3_call(span, 0))],
        ),
        _marker("xtml_response", RESPONSE_OPEN),  # the answer's text follows
        _marker("xtml_response_end", RESPONSE_CLOSE),
        _marker("xtml_tools_end", TOOLS_CLOSE),
        _marker("xtml_message_end", MESSAGE_CLOSE),
    )

    def render(self, call: Call) -> str:
        dumped(call)  # the same checks as every format's
        arguments = "".join(
            f'{ARGUMENT_OPEN} key="{escape(key, _QUOTE)}" type="{_type_of(value)}"{SEP}'
            + (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
            + ARGUMENT_CLOSE
            for key, value in call.arguments.items()
        )
        call_tag = f'{CALL_OPEN} tool="{escape(call.name, _QUOTE)}" index="1"{SEP}'
        return f"{TOOLS_OPEN}{call_tag}{arguments}{CALL_CLOSE}{TOOLS_CLOSE}"

    def describe(self, tools: Iterable[Any]) -> str:
        schemas = self.tool_schemas(tools)
        if not schemas:
            return ""
        return (
            "# Tools\n\nYou may call these tools, given as JSON Schema:\n"
            + json.dumps(schemas, ensure_ascii=False)
            + f"\n\nTo call tools, write {TOOLS_OPEN}, then each call: {K3_FORM}; then {TOOLS_CLOSE}."
        )


_QUOTE = {'"': "&quot;"}


def _type_of(value: Any) -> str:
    """The XTML type attribute of a JSON value."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"


def k2() -> K2Syntax:
    return K2Syntax()


def k3() -> K3Syntax:
    return K3Syntax()
