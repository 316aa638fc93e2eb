"""What the family formats build their spans from: where a span ends, a marker that is a span alone, where
JSON ends at a closer, JSON arguments, a tag's attributes, a call written back as JSON.

A family format (deepseek.py, kimi.py) reads each call as a span of its own, found while it is written by a
`CloserScanner` (scan.py) whose `complete` walks the span so far: `ends(suffix, end)` is that scanner for a
walk `end(text)` that says where the span ends (or None while it is open), tried wherever the text ends with
`suffix`, the tail every closer of the span shares. A structural marker that holds no call (a block's closing
tag) is a span that ends at once (`Alone`), read as nothing (`nothing`). `JsonEnd` finds the first closer
outside JSON strings in one pass, so a closer written inside a string is the string's text.

Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from decodeloop.formats.calls.base import TOOL_NAME, Call, ParsedCall, ParseError
from decodeloop.formats.calls.json import read_arguments_string
from decodeloop.formats.calls.scan import CloserScanner

_ATTRIBUTE = re.compile(r'\s*([A-Za-z_][\w.-]*)\s*=\s*"([^"]*)"')


def ends(suffix: str, end: Callable[[str], int | None]) -> Callable[[], CloserScanner]:
    """A scanner factory: the span ends where `end(span so far)` says it does, looked at where it ends in `suffix`."""
    return lambda: CloserScanner(suffix, lambda text: end(text) == len(text))


class Alone:
    """The scanner of a span that is its opener alone: it ends before the next piece's first character."""

    def feed(self, piece: str) -> int:
        return 0


def nothing(span: str, closed: bool, tools: Mapping[str, Any]) -> list:
    """`read` for a structural marker: it holds no call and no text."""
    return []


def parsed(shape: str, span: str, call: Callable[[], Call]) -> ParsedCall:
    """One call of a span, read once: `call()` makes it, or raises the ParseError the model is told."""
    try:
        return ParsedCall(span, shape, call())
    except ParseError as e:
        return ParsedCall(span, shape, None, e)


class JsonEnd:
    """Where JSON ends at a closer: just past the first of `closers` outside its strings, one pass over the text.
    A raw line break ends a string (JSON has none inside one), so a stray quote cannot hold a span open past its
    line; inside a string a backslash escapes the next character."""

    def __init__(self, *closers: str) -> None:
        self._stops = re.compile(r'\\.|["\n\r]|' + "|".join(map(re.escape, closers)), re.DOTALL)

    def __call__(self, text: str, pos: int) -> int | None:
        """Just past the first closer outside strings in `text` from `pos`; None while there is none."""
        quoted = False
        while (found := self._stops.search(text, pos)) is not None:
            stop, pos = found.group(), found.end()
            if stop[0] == "\\":
                if not quoted:  # outside strings a backslash escapes nothing
                    pos = found.start() + 1
            elif stop == '"':
                quoted = not quoted
            elif stop in ("\n", "\r"):
                quoted = False
            elif not quoted:
                return pos
        return None


def json_object(text: str, at: int, form: str) -> dict:
    """The JSON object `text` holds (strict: no NaN, no key twice), which begins at index `at` of the call's text;
    ParseError with the reader's words, then `form` (how the call is written)."""
    try:
        return read_arguments_string(text)
    except ParseError as e:
        raise ParseError(f"the arguments are not a JSON object ({e}); {form}", at + e.column) from None


def tool_name(text: str, at: int, form: str) -> str:
    """`text` (the name as written, at index `at`) as a tool's name; ParseError unless it is one."""
    name = text.strip()
    if not name:
        raise ParseError(f"the call names no tool; {form}", at + 1)
    if not TOOL_NAME.match(name):
        shown = json.dumps(name[:64], ensure_ascii=False)
        raise ParseError(f"{shown} is not a tool's name: a name uses only letters, digits, _ . - and /; {form}", at + 1)
    return name


def attributes(tag: str, at: int, form: str) -> dict[str, str]:
    """The `key="value"` pairs of a tag's text (what stands between its name and its end), which begins at index
    `at` of the call's text; ParseError for anything else in it, or a key given twice."""
    found: dict[str, str] = {}
    pos = 0
    while (match := _ATTRIBUTE.match(tag, pos)) is not None:
        if match.group(1) in found:
            raise ParseError(f"the attribute {match.group(1)} is given twice; {form}", at + match.start(1) + 1)
        found[match.group(1)] = match.group(2)
        pos = match.end()
    if tag[pos:].strip():
        rest = tag[pos:].strip()
        shown = json.dumps(rest[:40] + ("..." if len(rest) > 40 else ""), ensure_ascii=False)
        raise ParseError(f'unexpected {shown} in a tag: attributes are written key="value"; {form}', at + pos + 1)
    return found


def dumped(call: Call) -> str:
    """A call's arguments as JSON text, for `render`; ValueError for a call no model could have written."""
    if not isinstance(call.name, str) or not TOOL_NAME.match(call.name):
        raise ValueError(f"cannot write a call to {call.name!r}: not a valid tool name")
    if not isinstance(call.arguments, dict):
        raise ValueError(f"cannot write arguments {call.arguments!r}: they must be a dict")
    return json.dumps(call.arguments, ensure_ascii=False, allow_nan=False)
