"""The compact tool-call syntax: [call NAME key=value ...].

Owns everything about this one way of writing a call: parsing a model-written
call into a `Call`, rendering a `Call` back to text, describing tools to the
model in this syntax, spotting where a call ends while the model is still
writing it (`CallScanner`), and the body of the tool message that answers it.

The rule, exactly:

    call    = "[call " ws* NAME (ws+ KEY "=" VALUE)* ws* "]"
    NAME    = one or more of  A-Z a-z 0-9 _ . - /
    KEY     = one of  A-Z a-z _  then any of  A-Z a-z 0-9 _ . -
    VALUE   = bare | quoted
    bare    = one or more characters, none of which is whitespace, '"', '[',
              ']', '=' or '\\'
    quoted  = '"' ... '"'. Inside, \\" is a quote, \\\\ a backslash, \\n a
              newline and \\t a tab; any other backslash escape is an error.
              Every other character stands for itself: spaces, '=', brackets,
              line breaks, anything. "" is the empty string.
    ws      = whitespace (str.isspace): spaces and tabs, line breaks too

Each key appears at most once, and nothing but whitespace may follow the "]".
Values are always strings here; schema/arguments.py converts them to the tool's types.
`render` quotes a value only when the bare form cannot carry it. A ParseError
names a column: the position in the call's text counting its "[" as 1.

Where a call ends: a "]" closes the call unless it is inside a quoted value.
A quoted value opens only with a '"' written straight after '=', as above, so
a stray quote elsewhere cannot keep a call open; the parser reports it.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterable
from typing import Any

from decodeloop.formats.calls.base import TOOL_NAME, Call, CallShape, ParseError, read_one, render_result, tool_schema
from decodeloop.schema import describe_type, numeric_bounds

_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_.-/")
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")
_NOT_BARE = frozenset('"[]=\\')  # besides whitespace
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}
_ESCAPED = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t"}
_QUOTED_STOP = re.compile(r'["\\]')  # inside quotes only these matter

INTRO = (
    "To use a tool, write a call on its own: [call NAME key=value ...]. "
    "Put a value that contains spaces, quotes, brackets or = in double quotes, "
    'writing \\" for a quote and \\\\ for a backslash. '
    "The result comes back in a tool message; then answer the user."
)


def _is_bare(ch: str) -> bool:
    return not ch.isspace() and ch not in _NOT_BARE


def render_value(value: Any) -> str:
    """One value as the compact syntax writes it: bare when possible, else quoted.

    Non-string values (from a JSON call, say) are written as JSON first, which
    is the form schema/arguments.py converts back.
    """
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    if value and all(_is_bare(ch) for ch in value):
        return value
    return '"' + "".join(_ESCAPED.get(ch, ch) for ch in value) + '"'


class _Parser:
    """One pass over one call's text; `pos` only moves forward."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.name = "NAME"

    def shape(self) -> str:
        return f"a call looks like [call {self.name} key=value ...]"

    def fail(self, message: str, pos: int) -> ParseError:
        return ParseError(message, pos + 1)

    def found(self, pos: int) -> str:
        """What the model wrote at `pos`, named so it can be recognised."""
        text = self.text
        if pos >= len(text):
            return "the end of the text"
        ch = text[pos]
        if ch in "\r\n":
            return "a line break"
        if ch == " ":
            return "a space"
        if ch == "\t":
            return "a tab"
        if ch.isspace():
            return "whitespace"
        if ch == '"':
            return 'a quote (")'
        if ch == "\\":
            return "a backslash (\\)"
        if ch in _NOT_BARE:
            return f'"{ch}"'
        end = pos
        while end < len(text) and _is_bare(text[end]):
            end += 1
        word = text[pos:end]
        return f'"{word[:24]}..."' if len(word) > 24 else f'"{word}"'

    def skip_space(self, pos: int) -> int:
        text = self.text
        while pos < len(text) and text[pos].isspace():
            pos += 1
        return pos

    def unclosed(self) -> ParseError:
        end = len(self.text)
        return self.fail(
            f'unclosed call: expected "]" at column {end + 1}, found the end of the text; {self.shape()}', end
        )

    def parse(self) -> Call:
        text = self.text
        if not text.startswith(CompactSyntax.opener):
            if text.startswith("[call"):
                raise self.fail(f'expected a space after "[call" at column 6, found {self.found(5)}; {self.shape()}', 5)
            raise self.fail(
                f'expected a call to start with "[call " at column 1, found {self.found(0)}; {self.shape()}', 0
            )
        pos = self.parse_name(self.skip_space(len(CompactSyntax.opener)))
        arguments: dict[str, str] = {}
        previous = self.name  # the item the next one follows, for messages
        while True:
            pos = self.skip_space(pos)
            if pos >= len(text):
                raise self.unclosed()
            if text[pos] == "]":
                self.check_end(pos + 1)
                return Call(self.name, arguments)
            start = pos
            key, pos = self.parse_key(pos, previous, arguments)
            value, pos = self.parse_value(pos, key)
            arguments[key] = value
            previous = text[start:pos] if pos - start <= 30 else text[start : start + 27] + "..."

    def check_end(self, pos: int) -> None:
        rest = self.skip_space(pos)
        if rest < len(self.text):
            raise self.fail(
                f'unexpected text after the closing "]" at column {rest + 1}: '
                f'{self.found(rest)}; a call ends at its "]"',
                rest,
            )

    def parse_name(self, pos: int) -> int:
        text = self.text
        start = pos
        while pos < len(text) and text[pos] in _NAME_CHARS:
            pos += 1
        name = text[start:pos]
        if not name:
            if pos >= len(text):
                raise self.unclosed()
            raise self.fail(
                f'expected a tool name after "[call " at column {pos + 1}, found {self.found(pos)}; {self.shape()}', pos
            )
        if pos < len(text) and text[pos] == "=":
            # an argument where the name should be: the name was left out
            raise self.fail(
                f'expected a tool name after "[call " at column {start + 1}, found the argument '
                f'"{name}="; {self.shape()}',
                start,
            )
        if pos < len(text) and not text[pos].isspace() and text[pos] != "]":
            end = pos
            while end < len(text) and not text[end].isspace() and text[end] != "]":
                end += 1
            bad = 'quote (")' if text[pos] == '"' else f'"{text[pos]}"'
            raise self.fail(
                f'unexpected {bad} at column {pos + 1} in the tool name "{text[start:end]}"; a tool name uses only '
                f"letters, digits, _ . - and /",
                pos,
            )
        self.name = name
        return pos

    def parse_key(self, pos: int, previous: str, seen: dict[str, str]) -> tuple[str, int]:
        text = self.text
        start = pos
        while pos < len(text) and _is_bare(text[pos]):
            pos += 1
        key = text[start:pos]
        if not key:
            if text[pos] == "=":
                raise self.fail(f'expected an argument name before "=" at column {pos + 1}; {self.shape()}', pos)
            raise self.fail(
                f'expected key=value after "{previous}" at column {pos + 1}, found {self.found(pos)}; {self.shape()}',
                pos,
            )
        if pos >= len(text) or text[pos] != "=":
            raise self.fail(
                f'expected key=value after "{previous}" at column {start + 1}, found '
                f"{self.found(start)}; {self.shape()}",
                start,
            )
        if not _KEY_RE.match(key):
            raise self.fail(
                f'argument name "{key}" at column {start + 1} is not valid: an argument name '
                f"starts with a letter or _ and uses only letters, digits, _ . and -",
                start,
            )
        if key in seen:
            raise self.fail(f'duplicate argument "{key}" at column {start + 1}; give each argument once', start)
        return key, pos + 1

    def parse_value(self, pos: int, key: str) -> tuple[str, int]:
        text = self.text
        if pos < len(text) and text[pos] == '"':
            value, pos = self.parse_quoted(pos, key)
            if pos < len(text) and not text[pos].isspace() and text[pos] != "]":
                raise self.fail(
                    f'expected a space or "]" after the value of "{key}" at column {pos + 1}, '
                    f"found {self.found(pos)}; {self.shape()}",
                    pos,
                )
            return value, pos
        start = pos
        while pos < len(text) and _is_bare(text[pos]):
            pos += 1
        if pos == start:
            if pos >= len(text):
                raise self.unclosed()
            raise self.fail(
                f'expected a value after "{key}=" at column {pos + 1}, found {self.found(pos)}; '
                f'write {key}="" for an empty value, and put a value that contains spaces, '
                f"quotes, brackets, = or \\ in double quotes",
                pos,
            )
        if pos < len(text) and text[pos] in _NOT_BARE and text[pos] != "]":
            raise self.fail(
                f'expected a space or "]" after the value of "{key}" at column {pos + 1}, '
                f"found {self.found(pos)}; put a value that contains spaces, quotes, brackets, "
                f'= or \\ in double quotes: {key}="..."',
                pos,
            )
        return text[start:pos], pos

    def parse_quoted(self, pos: int, key: str) -> tuple[str, int]:
        text = self.text
        opened = pos
        pos += 1
        parts: list[str] = []
        while True:
            match = _QUOTED_STOP.search(text, pos)
            if match is None or (match.group() == "\\" and match.end() >= len(text)):
                raise self.fail(
                    f'unterminated quote: the value of "{key}" opened at column {opened + 1} '
                    f'has no closing quote ("); end the value with " and the call with ]',
                    opened,
                )
            at = match.start()
            parts.append(text[pos:at])
            if match.group() == '"':
                return "".join(parts), at + 1
            escape = text[at + 1]
            if escape not in _ESCAPES:
                raise self.fail(
                    f'unknown escape "\\{escape}" at column {at + 1} in the value of "{key}"; '
                    f'inside quotes write \\" for a quote, \\\\ for a backslash, \\n for a line '
                    f"break and \\t for a tab",
                    at,
                )
            parts.append(_ESCAPES[escape])
            pos = at + 2


class CallScanner:
    """Finds the end of a call while it is being written, one piece at a time.

    Fed the text after the opener; `feed` returns the index in the piece just
    past the closing "]", or None while the call is still open. Each character
    is looked at once, so a long call costs no more than its length. `length`
    counts the characters of the call consumed so far (once closed, the call's
    length without the opener), for a caller that gives up on calls that never
    close.
    """

    _OUTSIDE_STOP = re.compile(r'\]|="')  # outside quotes: a close, or a quoted value opening

    def __init__(self) -> None:
        self.length = 0
        self.closed = False
        self._in_quote = False
        self._escaped = False  # inside quotes, the last character was a backslash
        self._after_equals = False  # outside quotes, the last character was "="

    def feed(self, piece: str) -> int | None:
        if self.closed:
            raise ValueError("this call has already closed; start a new scanner")
        pos, end = 0, len(piece)
        while pos < end:
            if self._in_quote:
                if self._escaped:  # the escaped character, whatever it is
                    self._escaped = False
                    pos += 1
                    continue
                match = _QUOTED_STOP.search(piece, pos)
                if match is None:
                    break
                pos = match.end()
                if match.group() == '"':
                    self._in_quote = False
                else:
                    self._escaped = True
                continue
            if self._after_equals and piece[pos] == '"':  # '=' ended the last piece
                self._after_equals = False
                self._in_quote = True
                pos += 1
                continue
            self._after_equals = False
            match = self._OUTSIDE_STOP.search(piece, pos)
            if match is None:
                self._after_equals = piece.endswith("=")
                break
            pos = match.end()
            if match.group() == "]":
                self.length += pos
                self.closed = True
                return pos
            self._in_quote = True
        self.length += end
        return None


class CompactSyntax:
    """[call NAME key=value ...]: the syntax the lab models are trained on."""

    name = "compact"
    grammar = "compact"  # the call grammar --constrain writes these calls with
    shape = "compact"  # its one shape: the lab models write no other
    alternates = ()
    opener = "[call "
    closer = "]"
    collect_calls = False  # the turn stops at the first closed call (the lab models write one at a time)
    template_tools = False  # a chat template's own tool list teaches JSON calls, not these

    def parse(self, text: str) -> Call:
        """The call in `text`, which begins with the opener; raises ParseError."""
        return _Parser(text).parse()

    def render(self, call: Call) -> str:
        if not TOOL_NAME.match(call.name):
            raise ValueError(f"cannot write a call to {call.name!r}: not a valid tool name")
        parts = [self.opener + call.name]
        for key, value in call.arguments.items():
            if not _KEY_RE.match(key):
                raise ValueError(f"cannot write argument {key!r}: not a valid argument name")
            parts.append(f"{key}={render_value(value)}")
        return " ".join(parts) + self.closer

    def scanner(self) -> CallScanner:
        return CallScanner()

    # its one shape, as the stop check reads it: the span parsed once it closes
    shapes = (
        CallShape("compact", "[call ", CallScanner, read_one(lambda text: _Parser(text).parse(), "compact"), "]"),
    )

    render_result = staticmethod(render_result)

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        """The tools as OpenAI-style function dicts (a template's tool list is not used with this syntax)."""
        return [tool_schema(tool) for tool in tools]

    def describe(self, tools: Iterable[Any]) -> str:
        """System-prompt paragraphs: how to write a call, then one paragraph per tool.

        Tools are objects with .name, .description and .input_schema; the output
        keeps their order and the order of each schema's properties.
        """
        paragraphs = [describe_tool(tool) for tool in tools]
        return "\n\n".join([INTRO, *paragraphs]) if paragraphs else ""


def describe_tool(tool: Any) -> str:
    """One tool as a paragraph: "name: description. Arguments: ..."."""
    schema = tool.input_schema or {}
    head = f"{tool.name}:"
    description = _sentence(tool.description or "")
    if description:
        head += " " + description
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return head + " Takes no arguments."
    required = schema.get("required") or []
    arguments = [_describe_argument(key, sub, key in required) for key, sub in properties.items()]
    return head + " Arguments: " + " ".join(arguments)


def _describe_argument(key: str, schema: Any, required: bool) -> str:
    schema = schema if isinstance(schema, dict) else {}
    details = [describe_type(schema)] if describe_type(schema) else []
    details.append("required" if required else "optional")
    if isinstance(schema.get("enum"), list):
        details.append("one of " + ", ".join(_show(v) for v in schema["enum"]))
    if "const" in schema:
        details.append("always " + _show(schema["const"]))
    bounds = _describe_bounds(schema)
    if bounds:
        details.append(bounds)
    if "default" in schema:
        details.append("default " + _show(schema["default"]))
    text = f"{key} ({', '.join(details)})"
    description = _sentence(schema.get("description") or "")
    return f"{text}: {description}" if description else text + "."


def _describe_bounds(schema: dict) -> str:
    low, high, low_open, high_open = numeric_bounds(schema)
    words = []
    if _is_number(low) and _is_number(high):
        words.append(f"{_show(low)} to {_show(high)}")
    elif _is_number(low):
        words.append(f"at least {_show(low)}")
    elif _is_number(high):
        words.append(f"at most {_show(high)}")
    if _is_number(low_open):
        words.append(f"greater than {_show(low_open)}")
    if _is_number(high_open):
        words.append(f"less than {_show(high_open)}")
    return ", ".join(words)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value: Any) -> str:
    """A schema value as the model would write it; quoted if a comma would make a list ambiguous."""
    written = render_value(value)
    if "," in written and not written.startswith('"'):
        return '"' + written + '"'  # a bare value has nothing to escape
    return written


def _sentence(text: str) -> str:
    """Whitespace folded to single spaces (one paragraph per tool), ending in punctuation."""
    text = " ".join(text.split())
    if text and text[-1] not in ".!?":
        text += "."
    return text
