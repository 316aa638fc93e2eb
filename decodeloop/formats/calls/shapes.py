"""The call shapes real models write besides their chat format's own, and how each is read.

A chat format's call syntax has one canonical shape (Hermes `<tool_call>{...}</tool_call>`,
formats/calls/json.py). Models trained on it still write their calls in other shapes, and a harness
that only knows the canonical one prints those calls as the answer. These are the declared
alternates of the JSON syntax:

    fenced_json        ```json\\n{"name": ..., "arguments": {...}}\\n```   (also an array of calls)
    fenced_tool_call   ```tool_call\\n{...}\\n```
    fenced             ```\\n{...}\\n```
    bare_json          a message whose first non-space character opens {...} or [{...}, ...]
    function_tag       <function=NAME>{"key": value}</function>          (Llama 3.x, Functionary)
    tools_tag          <tools>{...}</tools>                               (the prompt's own tag, echoed)
    tool_calls_tag     [TOOL_CALLS][{...}]                                (Mistral)

An alternate is recognised only where a call can begin: a fence or a tag at the start of the
model's message or right after the model's own text ended a line, bare JSON only at the start of
the message. Stops (stops.py) holds the span back while it is written and asks `read` once it
closes: it is a call only when every object in it has a string "name" that is a tool that exists
and arguments that are a JSON object ("arguments", or Llama's "parameters"; a string holding a
JSON object is read too; "type": "function" may stand beside them). Anything else is text again,
released as written, with a note when it looked like a near miss (a tool's name, or JSON that did
not parse).

Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from decodeloop.formats.calls.base import TOOL_NAME
from decodeloop.formats.calls.compact import Call, ParseError

CANONICAL = "tool_call"  # the JSON syntax's own shape, for the events
_ARGUMENT_KEYS = ("arguments", "parameters")
_ALLOWED_KEYS = frozenset({"name", "type", *_ARGUMENT_KEYS})
_WHITESPACE = " \t\n\r"
# how a call's object begins, up to its whole name: where --constrain's lazy grammar may start
_CALL_HEAD = re.compile(r'[ \t\n\r]*\{[ \t\n\r]*"name"[ \t\n\r]*:[ \t\n\r]*"([^"\\\n]{1,128})"')
_HEAD_CHARS = 200  # a body that has not named a tool by then is not read for a name


@dataclass(frozen=True)
class Shape:
    """One alternate: where it opens, where it closes, and what its body holds."""

    name: str
    opener: str
    closer: str | None  # None: the JSON value itself closes the shape (bare JSON)
    message_start: bool = False  # only at the start of the message, not after any line break
    named: bool = False  # the tool's name is in the opener (`<function=NAME>`), the body is the arguments

    def scanner(self) -> SpanScanner:
        return SpanScanner(self)

    @property
    def grammar_closer(self) -> str | None:
        """What follows the call's object to end this shape, for the --constrain grammar ("" when the object
        ends it); None where the grammar does not follow the shape (arrays, a name in the opener)."""
        if self.named or self.opener in ("[", "[TOOL_CALLS]"):
            return None
        return self.closer or ""


ALTERNATES: tuple[Shape, ...] = (
    Shape("fenced_json", "```json\n", "```"),
    Shape("fenced_tool_call", "```tool_call\n", "```"),
    Shape("fenced", "```\n", "```"),
    Shape("bare_json", "{", None, message_start=True),
    Shape("bare_json", "[", None, message_start=True),
    Shape("function_tag", "<function=", "</function>", named=True),
    Shape("tools_tag", "<tools>", "</tools>"),
    Shape("tool_calls_tag", "[TOOL_CALLS]", None),
)
BY_NAME = {shape.name: shape for shape in ALTERNATES}
NAMES = (CANONICAL, *dict.fromkeys(shape.name for shape in ALTERNATES))
DESCRIBED = {
    "fenced_json": "a ```json block",
    "fenced_tool_call": "a ```tool_call block",
    "fenced": "a ``` block",
    "bare_json": "JSON at the start of the message",
    "function_tag": "<function=NAME>...</function>",
    "tools_tag": "<tools>...</tools>",
    "tool_calls_tag": "[TOOL_CALLS] and JSON",
}


class SpanScanner:
    """Finds where an alternate ends while it is written, one piece at a time.

    Fed the text after the opener; `feed` returns the index in the piece just past the end
    (the closer, or the JSON value's last bracket when the shape has no closer), or None. JSON
    strings are followed, so a closer or a bracket inside a string does not end the span. A span
    whose first character after the opener cannot begin a call (a code block, prose) is
    `abandoned` there: `feed` returns that character's index, and it is not part of the span.
    For `<function=NAME>` the name runs up to the first ">".
    """

    def __init__(self, shape: Shape) -> None:
        self.closer = shape.closer
        self.abandoned = False
        self._naming = shape.named  # still inside `<function=NAME`
        self._depth = 1 if shape.opener in "{[" else 0
        # what the body's first character may be: a call's object or array; in bare JSON, the first key
        # or the first object (so prose that starts with a bracket is let go at once)
        self._expect = {"{": '"}', "[": "{"}.get(shape.opener, "{[")
        self._in_string = self._escaped = False
        self._tail = ""  # the end of the text outside strings, as long as the closer
        self._head: str | None = "{" if shape.opener == "{" else ""  # the body's first characters, while they may name
        self._named: str | None = None

    @property
    def named(self) -> str | None:
        """The name the body gives once it has begun as a call's does, `{"name": "NAME"` with the name's
        closing quote written (JSON data such as `{"result": 3}` never has one), else None."""
        return None if self.abandoned else self._named

    def _read_head(self, head: str, ch: str) -> None:
        """`head`: the body's first characters so far, `ch` the next."""
        self._head = head = head + ch
        if ch == '"':
            found = _CALL_HEAD.match(head)
            if found:
                self._named, self._head = found.group(1), None
                return
        if len(head) > _HEAD_CHARS:
            self._head = None

    def feed(self, piece: str) -> int | None:
        closer = self.closer
        for i, ch in enumerate(piece):
            if self._head is not None and not self._naming:
                self._read_head(self._head, ch)
            if self._naming:
                if ch == ">":
                    self._naming = False
                elif not (ch.isalnum() or ch in "_.-/"):
                    return self._abandon(i)
                continue
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif ch == "\\":
                    self._escaped = True
                elif ch == '"' or ch == "\n":
                    self._in_string = False
                continue
            if self._expect:
                if ch in _WHITESPACE:
                    continue
                if ch not in self._expect:
                    return self._abandon(i)
                self._expect = ""
            if ch == '"':
                self._in_string, self._tail = True, ""
                continue
            if ch in "{[":
                self._depth += 1
            elif ch in "}]":
                self._depth -= 1
                if self._depth <= 0 and closer is None:
                    return i + 1  # the value is whole (or more closed than opened: not JSON)
            if closer is not None:
                self._tail = (self._tail + ch)[-len(closer) :]
                if self._tail == closer:
                    return i + 1
        return None

    def _abandon(self, i: int) -> int:
        self.abandoned = True
        return i


class NotACall(ValueError):
    """A span that is not a call after all: `near_miss` names the tool it looked like a call to (or is
    ""), `broken` says its JSON did not parse, `unknown` is the name of a whole call to no tool."""

    def __init__(self, message: str, near_miss: str = "", broken: bool = False, unknown: str = "") -> None:
        super().__init__(message)
        self.near_miss = near_miss
        self.broken = broken
        self.unknown = unknown


def read(shape: Shape, span: str, known: Callable[[str], bool], closed: bool = True) -> list[tuple[str, Call]]:
    """The calls in an alternate's span (opener through closer): each call's text and the call, read once.

    An array of calls gives one text per element (each as the model wrote it); raises NotACall.
    `closed=False`: the message ended before the closer (a fence left open), which is allowed.
    """
    body = _body(shape, span, closed)
    if shape.named:
        name, _, arguments = body.partition(">")
        return [
            (
                span,
                _call(shape, {"name": name, "arguments": strict_json(arguments, name if known(name) else "")}, known),
            )
        ]
    value = strict_json(body)
    items = value if isinstance(value, list) else [value]
    if not items:
        raise NotACall("an empty array")
    calls = [_call(shape, item, known) for item in items]
    if isinstance(value, list) and len(items) > 1:
        return list(zip(_elements(body), calls))
    return [(span, calls[0])]


def parse(shape_name: str, text: str) -> Call:
    """One call written in an alternate shape (a text `read` gave); raises ParseError."""
    shape = BY_NAME.get(shape_name)
    try:
        if shape is None:
            raise NotACall(f"unknown call shape {shape_name!r}")
        if text.startswith(shape.opener):
            return read_call(shape, text)
        return _call(shape, strict_json(text), lambda name: True)  # an element of an array
    except NotACall as e:
        raise ParseError(f"not a call written as {DESCRIBED.get(shape_name, shape_name)}: {e}", 0) from None


def read_call(shape: Shape, span: str) -> Call:
    """The one call in a whole span (an array of one is read too)."""
    body = _body(shape, span)
    if shape.named:
        name, _, arguments = body.partition(">")
        return _call(shape, {"name": name, "arguments": strict_json(arguments)}, lambda name: True)
    value = strict_json(body)
    if isinstance(value, list):
        if len(value) != 1:
            raise NotACall(f"{len(value)} calls where one was expected")
        value = value[0]
    return _call(shape, value, lambda name: True)


def _body(shape: Shape, span: str, closed: bool = True) -> str:
    body = span[len(shape.opener) :] if shape.opener not in "{[" else span
    if shape.closer is not None and closed:
        if not body.endswith(shape.closer):
            raise NotACall(f"no closing {shape.closer}")
        body = body[: -len(shape.closer)]
    return body


def strict_json(text: str, name: str = "") -> Any:
    """Strict JSON (no NaN, no key twice) with nothing after it but whitespace."""

    def pairs(items):
        seen = {}
        for key, value in items:
            if key in seen:
                raise ValueError(f"the key {key!r} twice")
            seen[key] = value
        return seen

    def constant(word):
        raise ValueError(f"{word} is not JSON")

    decoder = json.JSONDecoder(object_pairs_hook=pairs, parse_constant=constant)
    text = text.strip(_WHITESPACE)
    try:
        value, end = decoder.raw_decode(text)
    except (ValueError, RecursionError) as e:
        raise NotACall(f"JSON that does not parse ({e})", name, broken=True) from None
    if end != len(text):
        raise NotACall(f"text after the JSON: {text[end : end + 20]!r}", name)
    return value


def _call(shape: Shape, item: Any, known: Callable[[str], bool]) -> Call:
    if not isinstance(item, dict):
        raise NotACall("not a JSON object")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise NotACall('no "name"')
    near = name if known(name) else ""
    extra = set(item) - _ALLOWED_KEYS
    if extra:
        raise NotACall(f"keys a call does not have: {', '.join(sorted(extra))}", near)
    if item.get("type", "function") != "function":
        raise NotACall(f'"type" is {item["type"]!r}, not "function"', near)
    given = [key for key in _ARGUMENT_KEYS if key in item]
    if len(given) > 1:
        raise NotACall('both "arguments" and "parameters"', near)
    arguments = item[given[0]] if given else {}
    if isinstance(arguments, str):
        try:
            arguments = strict_json(arguments)
        except NotACall:
            raise NotACall("arguments are a string that does not hold a JSON object", near) from None
    if not isinstance(arguments, dict):
        raise NotACall("arguments are not a JSON object", near)
    if not TOOL_NAME.match(name) or not known(name):
        raise NotACall(f"{name[:64]!r} is not a tool", "", unknown=name[:64])
    return Call(name, arguments)


def _elements(array_text: str) -> list[str]:
    """The source text of each element of a JSON array (already known to parse)."""
    text = array_text.strip(_WHITESPACE)
    out, depth, start, in_string, escaped = [], 0, 1, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                out.append(text[start:i].strip(_WHITESPACE))
        elif ch == "," and depth == 1:
            out.append(text[start:i].strip(_WHITESPACE))
            start = i + 1
    return out


def mentions_tool(text: str, known: Callable[[str], bool]) -> str:
    """The first word of `text` that is a tool's name ("" if none): what makes broken JSON a near miss."""
    for word in re.findall(r"[A-Za-z0-9_.\-/]+", text[:2000]):
        if known(word):
            return word
    return ""
