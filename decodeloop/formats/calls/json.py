"""The JSON tool-call syntax of the Hermes / Qwen / SmolLM convention.

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}
    </tool_call>

`JsonSyntax` is a `CallSyntax` (base.py), as compact.py's `CompactSyntax` is: it parses a
model-written call into a `Call`, renders a `Call` back, describes tools in the
wording these models' chat templates use, spots where a call ends while the
model is still writing it (`JsonCallScanner`), and gives the body of the tool
message that answers it.

The rule, exactly:

    call      = "<tool_call>" ws* OBJECT ws* "</tool_call>" ws*
    OBJECT    = one strict JSON object (RFC 8259: no NaN, Infinity, comments,
                single quotes, trailing commas or raw control characters in
                strings; no key twice in any object) with the keys
        "name"       required: a string of one or more of A-Z a-z 0-9 _ . - /
        "arguments"  optional: a JSON object, or a string that holds one
                     (some models encode it twice); missing means no arguments
    ws        = whitespace (str.isspace); inside the JSON only JSON's own
                whitespace (space, tab, line break, carriage return)

Argument values keep their JSON types (numbers stay numbers); schema/arguments.py checks
them against the tool's inputSchema. A ParseError names a column: the position
in the call's text counting the "<" of "<tool_call>" as 1. Objects and arrays
may nest at most MAX_DEPTH deep (the call's own object counts as one).

Where a call ends: "</tool_call>" closes the call unless it is inside a JSON
string. A string opens at a '"' outside strings and ends at the next '"' not
escaped by a backslash, or, since JSON forbids a raw line break in a string, at
a line break: a stray quote then cannot keep the call open past its line, and
the parser reports the line break.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from decodeloop.formats.calls.base import TOOL_NAME, Call, CallShape, ParseError, read_one, render_result, tool_schema
from decodeloop.formats.calls.shapes import ALTERNATES, CANONICAL
from decodeloop.schema import did_you_mean

OPENER = "<tool_call>"
CLOSER = "</tool_call>"
MAX_DEPTH = 100

_JSON_WS = " \t\n\r"
_PUNCTUATION = "{}[],:"
_STRING_STOP = re.compile(r'["\\\x00-\x1f]')  # inside a string only these matter
_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_NUMBERISH_RE = re.compile(r"[-+.0-9A-Za-z_]+")  # what the model meant as one number
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEX4_RE = re.compile(r"[0-9a-fA-F]{4}")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS = {"true": True, "false": False, "null": None}
_TOP_KEYS = ("name", "arguments")
_KEY_ALIASES = {
    "parameters": "arguments",
    "params": "arguments",
    "args": "arguments",
    "input": "arguments",
    "tool": "name",
    "tool_name": "name",
    "function_name": "name",
}

PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
POSTAMBLE = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def _show(text: str, limit: int = 40) -> str:
    """A string as JSON writes it, shortened, for a message."""
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return json.dumps(text, ensure_ascii=False)


def _kind(value: Any) -> str:
    """What a JSON value is, in words, for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"a number ({json.dumps(value)})" if len(json.dumps(value)) <= 24 else "a number"
    if isinstance(value, str):
        return f"a string ({_show(value, 24)})"
    if isinstance(value, list):
        return "an array"
    return "an object"


class _Reader:
    """A strict JSON reader over text[..limit] that knows where everything is.

    Every problem is a ParseError whose message says what was expected, where,
    and what was found. `where` words a position: in the call text ("at column
    N"), or in the string that "arguments" was given as ("at character N of
    the string"), whose messages the call parser then wraps.
    """

    def __init__(self, text: str, limit: int, closed: bool, in_string: bool = False) -> None:
        self.text = text
        self.limit = limit  # where the JSON must end: the closer, or the end of the text
        self.closed = closed  # whether a closer follows the limit
        self.in_string = in_string  # reading the string "arguments" was given as
        self.name: str | None = None  # the tool name, once read, for the shape in messages
        self.depth = 0

    # --- words for messages ---------------------------------------------------------

    def shape(self) -> str:
        name = json.dumps(self.name or "NAME", ensure_ascii=False)
        return f'a call looks like {OPENER}{{"name": {name}, "arguments": {{"key": "value"}}}}{CLOSER}'

    def suffix(self) -> str:
        return "" if self.in_string else "; " + self.shape()

    def where(self, pos: int) -> str:
        return f"at character {pos + 1} of the string" if self.in_string else f"at column {pos + 1}"

    def fail(self, message: str, pos: int) -> ParseError:
        # A lone surrogate (written raw, or decoded from \ud800) is shown escaped, so
        # the message always encodes as UTF-8 for the tokenizer and the logs.
        message = _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", message)
        return ParseError(message, pos + 1)

    def found(self, pos: int, limit: int | None = None) -> str:
        """What the model wrote at `pos`, named so it can be recognised."""
        text = self.text
        limit = self.limit if limit is None else limit
        if pos >= limit:
            if self.in_string:
                return "the end of the string"
            return f"'{CLOSER}'" if self.closed else "the end of the text"
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
        if ch == "'":
            return "a single quote (')"
        if ch == "\\":
            return "a backslash (\\)"
        if ch < " " or ch == "\x7f":
            return f"the control character U+{ord(ch):04X}"
        if ch in _PUNCTUATION:
            return f"'{ch}'"
        end = pos
        while (
            end < limit
            and not text[end].isspace()
            and text[end] not in _PUNCTUATION
            and text[end] not in "\"'\\"
            and text[end] >= " "
        ):
            end += 1
        word = text[pos:end]
        return f"'{word[:24]}...'" if len(word) > 24 else f"'{word}'"

    def hint(self, pos: int) -> str:
        """A word on a common slip at `pos`, or ""."""
        if pos >= self.limit:
            return ""
        if self.text[pos] == "'":
            return '; JSON writes strings and keys in double quotes (")'
        word = _WORD_RE.match(self.text, pos, self.limit)
        if word and word.group() in ("True", "False", "None"):
            return "; JSON writes true, false and null in lower case"
        if word and word.group() in ("NaN", "Infinity"):
            return "; JSON has no NaN or Infinity"
        return ""

    def expected(self, pos: int, what: str, hint: str = "") -> ParseError:
        """A syntax error: `what` was expected at `pos`."""
        if pos >= self.limit and not self.closed:
            return self.fail(
                f"unclosed call: the text ends at column {pos + 1} in the middle of the JSON, "
                f"where {what} was expected; finish the JSON object and end the call with "
                f"{CLOSER}{self.suffix()}",
                pos,
            )
        hint = hint or self.hint(pos)
        place = self.where(pos) if self.in_string else f"in the call {self.where(pos)}"
        return self.fail(f"invalid JSON {place}: expected {what}, found {self.found(pos)}{hint}{self.suffix()}", pos)

    # --- the reader ------------------------------------------------------------------

    def skip_ws(self, pos: int) -> int:
        text, limit = self.text, self.limit
        while pos < limit and text[pos] in _JSON_WS:
            pos += 1
        return pos

    def value(self, pos: int, what: str = "a value") -> tuple[Any, int]:
        text = self.text
        if pos >= self.limit:
            raise self.expected(pos, what)
        ch = text[pos]
        if ch == "{":
            return self.object(pos)
        if ch == "[":
            return self.array(pos)
        if ch == '"':
            return self.string(pos)
        if ch in "-+.0123456789":
            return self.number(pos)
        word = _WORD_RE.match(text, pos, self.limit)
        if word and word.end() >= self.limit and not self.closed:
            raise self.expected(self.limit, what)  # the text ends inside the word
        if word and word.group() in _LITERALS:
            return _LITERALS[word.group()], word.end()
        if word and not self.hint(pos):
            raise self.expected(pos, what, f'; put text in double quotes: "{word.group()[:24]}"')
        raise self.expected(pos, what)

    def enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(
                f"the JSON nests too deeply {self.where(pos)}: at most {MAX_DEPTH} levels of "
                f"objects and arrays{self.suffix()}",
                pos,
            )

    def object(self, pos: int, record: list | None = None) -> tuple[dict, int]:
        """An object at `pos`; `record` collects (key, key_pos, value_pos, value_end, value)."""
        text = self.text
        self.enter(pos)
        pos = self.skip_ws(pos + 1)
        result: dict[str, Any] = {}
        if pos < self.limit and text[pos] == "}":
            self.depth -= 1
            return result, pos + 1
        after_comma = False
        while True:
            if pos >= self.limit or text[pos] != '"':
                if after_comma and pos < self.limit and text[pos] == "}":
                    raise self.expected(pos, "a key in double quotes", "; remove the comma before '}'")
                word = _WORD_RE.match(text, pos, self.limit)
                hint = f'; put the key in double quotes: "{word.group()[:24]}"' if word else ""
                raise self.expected(
                    pos, "a key in double quotes" if after_comma else "a key in double quotes or '}'", hint
                )
            key_pos = pos
            key, pos = self.string(pos)
            if key in result:
                raise self.fail(
                    f"duplicate key {_show(key)} {self.where(key_pos)}; give each key once{self.suffix()}", key_pos
                )
            pos = self.skip_ws(pos)
            if pos >= self.limit or text[pos] != ":":
                raise self.expected(pos, f"':' after the key {_show(key)}")
            pos = self.skip_ws(pos + 1)
            value_pos = pos
            value, pos = self.value(pos, f"the value of {_show(key)}")
            result[key] = value
            if record is not None:
                record.append((key, key_pos, value_pos, pos, value))
                if key == "name" and isinstance(value, str) and TOOL_NAME.match(value):
                    self.name = value
            pos = self.skip_ws(pos)
            if pos < self.limit and text[pos] == ",":
                pos = self.skip_ws(pos + 1)
                after_comma = True
                continue
            if pos < self.limit and text[pos] == "}":
                self.depth -= 1
                return result, pos + 1
            raise self.expected(pos, f"',' or '}}' after the value of {_show(key)}")

    def array(self, pos: int) -> tuple[list, int]:
        text = self.text
        self.enter(pos)
        pos = self.skip_ws(pos + 1)
        result: list[Any] = []
        if pos < self.limit and text[pos] == "]":
            self.depth -= 1
            return result, pos + 1
        while True:
            if result and pos < self.limit and text[pos] == "]":
                raise self.expected(pos, "an array item", "; remove the comma before ']'")
            item, pos = self.value(pos, "an array item")
            result.append(item)
            pos = self.skip_ws(pos)
            if pos < self.limit and text[pos] == ",":
                pos = self.skip_ws(pos + 1)
                continue
            if pos < self.limit and text[pos] == "]":
                self.depth -= 1
                return result, pos + 1
            raise self.expected(pos, "',' or ']' after an array item")

    def unterminated(self, opened: int) -> ParseError:
        if not self.closed:
            return self.fail(
                f"unclosed call: the text ends at column {len(self.text) + 1} inside the string "
                f"opened at column {opened + 1}; "
                f'end the string with " and the call with {CLOSER}{self.suffix()}',
                len(self.text),
            )
        return self.fail(
            f'unterminated string {self.where(opened)}: it has no closing quote ("){self.suffix()}', opened
        )

    def string(self, pos: int) -> tuple[str, int]:
        text, limit = self.text, self.limit
        opened = pos
        pos += 1
        parts: list[str] = []
        while True:
            match = _STRING_STOP.search(text, pos, limit)
            if match is None:
                raise self.unterminated(opened)
            at = match.start()
            parts.append(text[pos:at])
            ch = match.group()
            if ch == '"':
                return "".join(parts), at + 1
            if ch != "\\":
                what = (
                    "a line break"
                    if ch in "\r\n"
                    else ("a tab" if ch == "\t" else f"the control character U+{ord(ch):04X}")
                )
                raise self.fail(
                    f"{what} inside a string {self.where(at)}; inside a JSON string write \\n for a "
                    f"line break, \\t for a tab and \\u0000 (four hex digits) for other control "
                    f"characters{self.suffix()}",
                    at,
                )
            if at + 1 >= limit:
                raise self.unterminated(opened)
            escape = text[at + 1]
            if escape in _ESCAPES:
                parts.append(_ESCAPES[escape])
                pos = at + 2
                continue
            if escape != "u":
                raise self.fail(
                    f'unknown escape "\\{escape}" {self.where(at)}; inside a JSON string write \\" for '
                    f"a quote, \\\\ for a backslash, \\n for a line break and \\t for a tab"
                    f"{self.suffix()}",
                    at,
                )
            digits = text[at + 2 : min(at + 6, limit)]
            if not _HEX4_RE.fullmatch(digits):
                if at + 6 > limit and not self.closed:
                    raise self.unterminated(opened)
                hex_digits = re.match(r"[0-9a-fA-F]*", digits)  # always matches, maybe empty
                written = hex_digits.group() if hex_digits else ""
                raise self.fail(
                    f'invalid escape "\\u{written}" {self.where(at)}: \\u takes four hex '
                    f"digits, as in \\u00e9{self.suffix()}",
                    at,
                )
            code = int(digits, 16)
            pos = at + 6
            if 0xD800 <= code < 0xDC00 and text.startswith("\\u", pos) and pos + 6 <= limit:
                low = text[pos + 2 : pos + 6]
                if _HEX4_RE.fullmatch(low) and 0xDC00 <= int(low, 16) < 0xE000:
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
                    pos += 6
            parts.append(chr(code))  # a lone surrogate stays one, as in the json module

    def number(self, pos: int) -> tuple[int | float, int]:
        text = self.text
        match = _NUMBER_RE.match(text, pos, self.limit)
        loose = _NUMBERISH_RE.match(text, pos, self.limit)
        written = loose.group() if loose else text[pos]
        loose_end = loose.end() if loose else pos
        if match is None or match.end() != loose_end:
            if loose_end >= self.limit and not self.closed:
                raise self.expected(self.limit, "the rest of the number")
            raise self.fail(
                f"invalid number '{written[:24]}' {self.where(pos)}; a JSON number looks like "
                f"3, -2, 0.5 or 1e3 (no leading +, . or zeros){self.suffix()}",
                pos,
            )
        if match.group(1) or match.group(2):
            value: int | float = float(match.group())
            if math.isinf(value):
                raise self.fail(f"the number {self.where(pos)} is too large{self.suffix()}", pos)
            return value, match.end()
        try:
            return int(match.group()), match.end()
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            raise self.fail(f"the number {self.where(pos)} has too many digits{self.suffix()}", pos) from None


def read_arguments_string(value: str) -> dict:
    """The object a string holds, for "arguments" written as a JSON-encoded string."""
    reader = _Reader(value, len(value), closed=True, in_string=True)
    pos = reader.skip_ws(0)
    if pos >= len(value) or value[pos] != "{":
        raise reader.expected(pos, "'{'")
    arguments, pos = reader.object(pos)
    pos = reader.skip_ws(pos)
    if pos < len(value):
        raise reader.fail(
            f"unexpected text after the object at character {pos + 1} of the string: {reader.found(pos)}", pos
        )
    return arguments


class _CallParser:
    """One call's text, checked in the order it was written."""

    def __init__(self, text: str) -> None:
        self.text = text

    def parse(self) -> Call:
        text = self.text
        if not text.startswith(OPENER):
            reader = _Reader(text, len(text), closed=False)
            raise reader.fail(
                f'expected a call to start with "{OPENER}" at column 1, found {reader.found(0)}{reader.suffix()}', 0
            )
        scanner = JsonCallScanner()
        close = scanner.feed(text[len(OPENER) :])
        closed = close is not None
        end = len(OPENER) + close if close is not None else len(text)  # just past the closer
        limit = end - len(CLOSER) if closed else len(text)  # where the JSON must end
        reader = _Reader(text, limit, closed)

        pos = self.skip_space(len(OPENER), limit)
        if pos >= limit or text[pos] != "{":
            raise reader.expected(pos, "a JSON object ('{')")
        start = pos
        record: list = []
        _, pos = reader.object(pos, record)
        rest = self.skip_space(pos, limit)
        if rest < limit:
            if text[rest] == "{":
                raise reader.fail(
                    f"unexpected second JSON object at column {rest + 1}; write each call in its "
                    f"own {OPENER}...{CLOSER}",
                    rest,
                )
            if closed:
                raise reader.fail(
                    f"unexpected text after the JSON object at column {rest + 1}: "
                    f"{reader.found(rest)}; end the call with {CLOSER} right after the object",
                    rest,
                )
            raise reader.fail(
                f'expected "{CLOSER}" after the JSON object at column {rest + 1}, found '
                f"{reader.found(rest)}; end the call with {CLOSER}",
                rest,
            )
        if not closed:
            raise reader.fail(
                f'unclosed call: expected "{CLOSER}" at column {len(text) + 1}, found the end of '
                f"the text; end the call with {CLOSER}",
                len(text),
            )

        call = self.check_shape(reader, record, start)

        after = self.skip_space(end, len(text))
        if after < len(text):
            raise reader.fail(
                f'unexpected text after the closing "{CLOSER}" at column {after + 1}: '
                f"{reader.found(after, len(text))}; a call ends at its {CLOSER}",
                after,
            )
        return call

    def skip_space(self, pos: int, limit: int) -> int:
        text = self.text
        while pos < limit and text[pos].isspace():
            pos += 1
        return pos

    def check_shape(self, reader: _Reader, record: list, start: int) -> Call:
        name: str | None = None
        arguments: dict = {}
        for key, key_pos, value_pos, value_end, value in record:
            where = f"at column {value_pos + 1}"
            if key == "name":
                name = self.check_name(reader, value, value_pos, value_end)
            elif key == "arguments":
                if isinstance(value, dict):
                    arguments = value
                elif isinstance(value, str):
                    try:
                        arguments = read_arguments_string(value)
                    except ParseError as e:
                        raise reader.fail(
                            f'"arguments" {where} is a string that does not hold a JSON object: '
                            f"{e}; write the arguments as a JSON object, not a string"
                            f"{reader.suffix()}",
                            value_pos,
                        ) from None
                else:
                    raise reader.fail(
                        f'"arguments" {where} must be a JSON object, found {_kind(value)}; write '
                        f'"arguments": {{}} for a call without arguments{reader.suffix()}',
                        value_pos,
                    )
            else:
                meant = _KEY_ALIASES.get(key) or next(iter(did_you_mean(key, _TOP_KEYS)), None)
                hint = f' (did you mean "{meant}"?)' if meant else ""
                raise reader.fail(
                    f'unknown key {_show(key)} at column {key_pos + 1}: a call has only "name" and '
                    f'"arguments"{hint}{reader.suffix()}',
                    key_pos,
                )
        if name is None:
            raise reader.fail(
                f'missing "name": the JSON object at column {start + 1} must name the tool to call{reader.suffix()}',
                start,
            )
        return Call(name, arguments)

    def check_name(self, reader: _Reader, value: Any, pos: int, end: int) -> str:
        if not isinstance(value, str):
            raise reader.fail(
                f'"name" at column {pos + 1} must be a string, found {_kind(value)}{reader.suffix()}', pos
            )
        if not value:
            raise reader.fail(
                f'"name" at column {pos + 1} is empty: it must name the tool to call{reader.suffix()}', pos
            )
        if TOOL_NAME.match(value):
            return value
        index, bad = next((i, ch) for i, ch in enumerate(value) if not TOOL_NAME.match(ch))
        column = pos + 2 + index if self.text[pos + 1 : end - 1] == value else pos + 1  # exact when unescaped
        shown = _Reader(value, len(value), closed=True, in_string=True).found(index)
        if shown.startswith("'"):
            shown = f"'{bad}'"
        raise reader.fail(
            f"{shown} at column {column} is not allowed in the tool name {_show(value)}: a tool "
            f"name uses only letters, digits, _ . - and /",
            column - 1,
        )


class JsonCallScanner:
    """Finds the end of a JSON call while it is being written, one piece at a time.

    Fed the text after "<tool_call>"; `feed` returns the index in the piece just
    past "</tool_call>", or None while the call is still open. Pieces may split
    anywhere, the closer and escape sequences included. Each character is looked
    at once. `length` counts the characters of the call consumed so far (once
    closed, the call's length without the opener).
    """

    _OUTSIDE_STOP = re.compile('"|' + re.escape(CLOSER))
    _INSIDE_STOP = re.compile(r'["\\\n\r]')  # a quote ends a string, and so does a raw line break

    def __init__(self) -> None:
        self.length = 0
        self.closed = False
        self._in_string = False
        self._escaped = False  # inside a string, the last character was a backslash
        self._matched = 0  # outside strings, how much of the closer ended the last piece

    def feed(self, piece: str) -> int | None:
        if self.closed:
            raise ValueError("this call has already closed; start a new scanner")
        pos, end = 0, len(piece)
        if self._matched:
            rest = CLOSER[self._matched :]
            if piece.startswith(rest):
                return self._close(len(rest))
            if rest.startswith(piece):
                self._matched += end
                self.length += end
                return None
            # The closer's "<" occurs nowhere else in it, so no closer starts inside
            # the part matched so far: scan this piece afresh.
            self._matched = 0
        while pos < end:
            if self._in_string:
                if self._escaped:  # the escaped character, whatever it is
                    self._escaped = False
                    pos += 1
                    continue
                match = self._INSIDE_STOP.search(piece, pos)
                if match is None:
                    break
                pos = match.end()
                if match.group() == "\\":
                    self._escaped = True
                else:
                    self._in_string = False
                continue
            match = self._OUTSIDE_STOP.search(piece, pos)
            if match is None:
                start = piece.rfind("<", pos)
                if start >= 0 and CLOSER.startswith(piece[start:]):
                    self._matched = end - start
                break
            pos = match.end()
            if match.group() == '"':
                self._in_string = True
                continue
            return self._close(pos)
        self.length += end
        return None

    def _close(self, pos: int) -> int:
        self.length += pos
        self.closed = True
        self._matched = 0
        return pos


def _check_value(value: Any) -> None:
    """Raise ValueError unless `value` is JSON that parse reads back as itself."""
    stack = [(value, 2)]  # the call's object and "arguments" are the first two levels
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > MAX_DEPTH:
                raise ValueError(f"cannot write arguments nested more than {MAX_DEPTH} levels deep")
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise ValueError(f"cannot write the key {key!r}: JSON keys are strings")
                stack.append((sub, depth + 1))
        elif isinstance(item, list):
            if depth > MAX_DEPTH:
                raise ValueError(f"cannot write arguments nested more than {MAX_DEPTH} levels deep")
            stack.extend((sub, depth + 1) for sub in item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"cannot write {item!r}: JSON has no NaN or Infinity")
        elif not (item is None or isinstance(item, (str, int, bool))):
            raise ValueError(f"cannot write {type(item).__name__} {item!r} as JSON")


class JsonSyntax:
    """<tool_call>{"name": ..., "arguments": {...}}</tool_call>: the Hermes / Qwen / SmolLM convention."""

    name = "json"
    grammar = "json"  # the call grammar --constrain writes these calls with (constrain/grammar/compile.py)
    shape = CANONICAL
    alternates = ALTERNATES  # what real models write instead (formats/calls/shapes.py), read with --call-shapes lenient
    opener = OPENER
    closer = CLOSER
    collect_calls = True  # these models write parallel calls as consecutive <tool_call> blocks
    template_tools = True  # a chat template's tool list teaches these calls

    def __init__(self, reasoning: tuple[tuple[str, str], ...] = (), name: str = "json") -> None:
        self.reasoning = reasoning  # the model's reasoning markers (Qwen3's <think>, </think>), if it reasons
        self.name = name  # "hermes" as a model family's format (formats/calls/formats.py)

    def parse(self, text: str) -> Call:
        """The call in `text`, which begins with the opener; raises ParseError."""
        return _CallParser(text).parse()

    def render(self, call: Call) -> str:
        if not isinstance(call.name, str) or not TOOL_NAME.match(call.name):
            raise ValueError(f"cannot write a call to {call.name!r}: not a valid tool name")
        if not isinstance(call.arguments, dict):
            raise ValueError(f"cannot write arguments {call.arguments!r}: they must be a dict")
        _check_value(call.arguments)
        body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False, allow_nan=False)
        return f"{OPENER}\n{body}\n{CLOSER}"

    def scanner(self) -> JsonCallScanner:
        return JsonCallScanner()

    # its own shape, as the stop check reads it: the span parsed once it closes
    shapes = (
        CallShape(
            CANONICAL, OPENER, JsonCallScanner, read_one(lambda text: _CallParser(text).parse(), CANONICAL), CLOSER
        ),
    )

    render_result = staticmethod(render_result)

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        """The tools as OpenAI-style function dicts, the `tools=` a chat template takes."""
        return [tool_schema(tool) for tool in tools]

    def describe(self, tools: Iterable[Any]) -> str:
        """The Hermes / Qwen system-prompt block: one JSON line per tool, then how to call.

        Tools are objects with .name, .description and .input_schema; the output
        keeps their order and each schema's key order.
        """
        lines = [json.dumps(schema, ensure_ascii=False) for schema in self.tool_schemas(tools)]
        return PREAMBLE + "\n".join(lines) + POSTAMBLE if lines else ""
