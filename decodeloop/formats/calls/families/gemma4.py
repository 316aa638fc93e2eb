"""Gemma 4's call format: `<|tool_call>call:NAME{...}<tool_call|>`, its arguments in an object notation.

    <|channel>thought
    The user wants the weather in Paris.<channel|>
    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,unit:<|"|>c<|"|>}<tool_call|>

(the call follows the thought's `<channel|>` on the same line in the output)

The rule, exactly:

    call    = "<|tool_call>" "call:" NAME object "<tool_call|>"
    NAME    = one or more of  A-Z a-z 0-9 _ . - /
    object  = "{" ws [member ("," member)*] "}"
    member  = ws KEY ws ":" ws value ws
    KEY     = bare text up to the ":" (it may hold spaces: `key with space:1`), or a STRING
    value   = STRING | object | array | number | "true" | "false" | "null"
    array   = "[" ws [value ws ("," ws value ws)*] "]"
    STRING  = <|"|> any text <|"|>: nothing is escaped, so line breaks, quotes, braces and the text of any
              marker (`<tool_call|>`, `<channel|>`) stand for themselves
    number  = a JSON number (Python's str() of a float is one: 1e-05, 1e+21)
    ws      = whitespace (str.isspace)

No key twice in an object; objects and arrays nest at most MAX_DEPTH deep. Values keep their types:
`count:42` is the number 42, `<|"|>42<|"|>` the string. A ParseError names a column: the position in
the call's text counting the "<" of "<|tool_call>" as 1.

Variants the fixtures hold: several calls in a row (parallel calls), text before and after them (the
message's content; the official template writes an assistant's text after its calls), `, ` between
items. Reasoning is the thought channel, `<|channel>thought\\n...<channel|>` at the start of the
message; the generation prompt opens it when thinking is on and the model writes it, and writes it
opened and closed (`<|channel>thought\\n<channel|>`) when thinking is off.

Where a call ends: at `<tool_call|>` outside a string, that is where the `<|"|>` written so far are even
in number. Sources: the official chat template (google/gemma-4-31B-it), transformers' Gemma 4 response
parsing, vLLM's and SGLang's gemma4 parsers. Standard library only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from decodeloop.formats.calls.base import TOOL_NAME, Call, CallShape, ParseError, read_one, render_result, tool_schema
from decodeloop.formats.calls.scan import CloserScanner

OPENER = "<|tool_call>"
CLOSER = "<tool_call|>"
STRING = '<|"|>'  # opens and closes a string
CALL = "call:"
THOUGHT = ("<|channel>thought", "<channel|>")  # the reasoning block: its "\n" is stripped with the text
SHAPE = "gemma4"
MAX_DEPTH = 100

_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\Z")
_BARE_END = re.compile(r",|\}|\]|\{|\[|:|<\|\"\|>")  # where a bare value's text ends
_KEY_END = re.compile(r":|,|\{|\}|\[|\]|<\|\"\|>")
_LITERALS = {"true": True, "false": False, "null": None}
_PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}
_EXAMPLE = f"{OPENER}call:NAME{{key:{STRING}text{STRING},count:1}}{CLOSER}"


def _strings_even(text: str) -> bool:
    """The text leaves no string open: its string markers are even in number."""
    return text.count(STRING) % 2 == 0


def scanner() -> CloserScanner:
    """Where a call ends while it is written: the first <tool_call|> outside a string."""
    return CloserScanner(CLOSER, _strings_even)


class _Reader:
    """One pass over one call's text; every problem is a ParseError that says how to write the call."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.depth = 0

    def fail(self, message: str, pos: int) -> ParseError:
        return ParseError(f"{message}; a call looks like {_EXAMPLE}", pos + 1)

    def found(self, pos: int) -> str:
        """What the model wrote at `pos`, named so it can be recognised."""
        text = self.text
        if pos >= len(text):
            return "the end of the text"
        for marker in (STRING, CLOSER, OPENER):
            if text.startswith(marker, pos):
                return marker
        ch = text[pos]
        if ch in "\r\n":
            return "a line break"
        if ch.isspace():
            return "a space" if ch == " " else "whitespace"
        if ch in "{}[],:":
            return f"'{ch}'"
        word = re.match(r"[^\s{}\[\],:<]+", text[pos : pos + 40])
        shown = word.group() if word else ch
        return f"'{shown[:24]}...'" if len(shown) > 24 else f"'{shown}'"

    def unclosed(self, what: str) -> ParseError:
        end = len(self.text)
        return self.fail(
            f"unclosed call: the text ends at column {end + 1} {what}; end the arguments with }} and the call "
            f"with {CLOSER}",
            end,
        )

    def skip_space(self, pos: int) -> int:
        text = self.text
        while pos < len(text) and text[pos].isspace():
            pos += 1
        return pos

    def call(self) -> Call:
        text = self.text
        if not text.startswith(OPENER):
            raise self.fail(f"expected a call to start with {OPENER} at column 1, found {self.found(0)}", 0)
        pos = len(OPENER)
        if not text.startswith(CALL, pos):
            if CALL.startswith(text[pos:]):
                raise self.unclosed(f"before the tool's name (after {OPENER} comes call:NAME)")
            raise self.fail(f"expected {CALL} at column {pos + 1}, found {self.found(pos)}", pos)
        pos += len(CALL)
        start = pos
        brace = text.find("{", pos)
        end = brace if brace >= 0 else len(text)
        name = text[start:end]
        if not name:
            raise self.fail(f"expected the tool's name after {CALL} at column {pos + 1}, found {self.found(pos)}", pos)
        if not TOOL_NAME.match(name):
            bad = next(i for i, ch in enumerate(name) if not TOOL_NAME.match(ch))
            at = start + bad
            if bad:  # a name, then something other than its arguments
                raise self.fail(
                    f"expected {{ after the tool's name {json.dumps(name[:bad])} at column {at + 1}, found "
                    f"{self.found(at)}: a tool's name uses only letters, digits, _ . - and /",
                    at,
                )
            raise self.fail(f"expected the tool's name after {CALL} at column {at + 1}, found {self.found(at)}", at)
        if brace < 0:
            raise self.unclosed(f"after the tool's name {json.dumps(name)}, where {{ was expected")
        arguments, pos = self.object(brace, f"the arguments of {name}")
        rest = self.skip_space(pos)
        if rest >= len(text):
            raise self.unclosed(f"after the arguments, where {CLOSER} was expected")
        if not text.startswith(CLOSER, rest):
            raise self.fail(
                f"unexpected {self.found(rest)} at column {rest + 1} after the arguments' closing }}: "
                f"end the call with {CLOSER} right after them",
                rest,
            )
        after = self.skip_space(rest + len(CLOSER))
        if after < len(text):
            raise self.fail(f"unexpected {self.found(after)} at column {after + 1} after {CLOSER}", after)
        return Call(name, arguments)

    def enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"the arguments nest too deeply at column {pos + 1}: at most {MAX_DEPTH} levels", pos)

    def object(self, pos: int, what: str) -> tuple[dict, int]:
        """The object whose "{" is at `pos`, and the index past its "}"."""
        text = self.text
        self.enter(pos)
        result: dict[str, Any] = {}
        pos = self.skip_space(pos + 1)
        if pos < len(text) and text[pos] == "}":
            self.depth -= 1
            return result, pos + 1
        while True:
            key_pos = pos
            key, pos = self.key(pos, what)
            if key in result:
                raise self.fail(
                    f"the key {json.dumps(key)} at column {key_pos + 1} is given twice; give it once", key_pos
                )
            result[key], pos = self.value(self.skip_space(pos + 1), f"the value of {json.dumps(key)}")
            pos = self.skip_space(pos)
            if pos >= len(text):
                raise self.unclosed(f"inside {what}")
            if text[pos] == "}":
                self.depth -= 1
                return result, pos + 1
            if text[pos] != ",":
                raise self.fail(
                    f"expected ',' or '}}' after the value of {json.dumps(key)} at column {pos + 1}, found "
                    f"{self.found(pos)}",
                    pos,
                )
            pos = self.skip_space(pos + 1)

    def key(self, pos: int, what: str) -> tuple[str, int]:
        """A key and the index of the ":" after it."""
        text = self.text
        if text.startswith(STRING, pos):
            key, pos = self.string(pos)
            pos = self.skip_space(pos)
        else:
            stop = _KEY_END.search(text, pos)
            end = stop.start() if stop else len(text)
            key = text[pos:end].strip()
            if not key:
                if end >= len(text):
                    raise self.unclosed(f"inside {what}, where a key was expected")
                hint = ": remove the comma before '}'" if text[end] == "}" else ""
                raise self.fail(f"expected a key at column {pos + 1}, found {self.found(end)}{hint}", end)
            pos = end
        if pos >= len(text):
            raise self.unclosed(f"after the key {json.dumps(key)}, where ':' was expected")
        if text[pos] != ":":
            raise self.fail(
                f"expected ':' after the key {json.dumps(key)} at column {pos + 1}, found {self.found(pos)}", pos
            )
        return key, pos

    def value(self, pos: int, what: str) -> tuple[Any, int]:
        text = self.text
        if pos >= len(text):
            raise self.unclosed(f"where {what} was expected")
        if text.startswith(STRING, pos):
            return self.string(pos)
        if text[pos] == "{":
            return self.object(pos, what)
        if text[pos] == "[":
            return self.array(pos, what)
        stop = _BARE_END.search(text, pos)
        end = stop.start() if stop else len(text)
        word = text[pos:end].rstrip()
        if not word:
            raise self.fail(f"expected {what} at column {pos + 1}, found {self.found(pos)}", pos)
        if stop is None:
            raise self.unclosed(f"inside {what}")
        if word in _LITERALS:
            return _LITERALS[word], pos + len(word)
        if _NUMBER_RE.match(word):
            number: int | float = float(word) if any(c in word for c in ".eE") else int(word)
            if isinstance(number, float) and math.isinf(number):
                raise self.fail(f"the number at column {pos + 1} is too large", pos)
            return number, pos + len(word)
        if word in _PYTHON_LITERALS:
            hint = f"write {_PYTHON_LITERALS[word]} in lower case"
        else:
            hint = f"write text between {STRING} markers: {STRING}{word[:24]}{STRING}"
        raise self.fail(f"expected {what} at column {pos + 1}, found {json.dumps(word[:40])}: {hint}", pos)

    def array(self, pos: int, what: str) -> tuple[list, int]:
        text = self.text
        self.enter(pos)
        items: list[Any] = []
        pos = self.skip_space(pos + 1)
        if pos < len(text) and text[pos] == "]":
            self.depth -= 1
            return items, pos + 1
        while True:
            item, pos = self.value(pos, f"an item of {what}")
            items.append(item)
            pos = self.skip_space(pos)
            if pos >= len(text):
                raise self.unclosed(f"inside {what}")
            if text[pos] == "]":
                self.depth -= 1
                return items, pos + 1
            if text[pos] != ",":
                raise self.fail(
                    f"expected ',' or ']' after an item of {what} at column {pos + 1}, found {self.found(pos)}", pos
                )
            pos = self.skip_space(pos + 1)
            if pos < len(text) and text[pos] == "]":
                raise self.fail(f"expected an item at column {pos + 1}, found ']': remove the comma before it", pos)

    def string(self, pos: int) -> tuple[str, int]:
        start = pos + len(STRING)
        end = self.text.find(STRING, start)
        if end < 0:
            raise self.unclosed(f"inside the string opened at column {pos + 1} (end it with {STRING})")
        return self.text[start:end], end + len(STRING)


def parse(text: str) -> Call:
    """The call in `text`, which begins with <|tool_call>; raises ParseError."""
    return _Reader(text).call()


def _key(key: str) -> str:
    """A key bare where the notation reads it back as itself, else as a string."""
    if key and key == key.strip() and not _KEY_END.search(key):
        return key
    return _string(key)


def _string(value: str) -> str:
    if STRING in value:
        raise ValueError(f"cannot write {value[:40]!r}: Gemma 4's strings cannot hold {STRING}")
    return STRING + value + STRING


def render_value(value: Any, depth: int = 1) -> str:
    """One value as the notation writes it (the official template's spelling)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"cannot write arguments nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        return _string(value)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return json.dumps(value, allow_nan=False)  # ValueError for NaN and infinities
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(render_value(item, depth + 1) for item in value) + "]"
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise ValueError(f"cannot write the key {key!r}: keys are strings")
        return "{" + ",".join(f"{_key(k)}:{render_value(v, depth + 1)}" for k, v in value.items()) + "}"
    raise ValueError(f"cannot write {type(value).__name__} {value!r} in Gemma 4's notation")


INTRO = (
    f"To use a tool, write {OPENER}call:NAME{{...}}{CLOSER} with its arguments inside the braces: "
    f"key:value pairs separated by commas, keys bare, text between {STRING} markers "
    f"({STRING}Paris{STRING}), numbers, true, false and null as they are, objects in {{}} and lists in []. "
    f"For example {OPENER}call:get_weather{{city:{STRING}Paris{STRING}}}{CLOSER}. Several calls may follow "
    "one another; their results come back as tool responses."
)


class Gemma4Syntax:
    """<|tool_call>call:NAME{key:<|"|>text<|"|>}<tool_call|>: Gemma 4's calls, thought-channel reasoning."""

    name = "gemma4"
    shape = SHAPE
    alternates = ()
    opener = OPENER
    closer = CLOSER
    collect_calls = True  # parallel calls are written one after another
    template_tools = True  # the chat template's tool list teaches these calls
    reasoning = (THOUGHT,)

    # `<|channel>` is a marker of its own: the thought channel's opener is it and the word "thought"
    shapes = (CallShape(SHAPE, OPENER, scanner, read_one(parse, SHAPE), CLOSER, markers=("<|channel>",)),)

    def parse(self, text: str) -> Call:
        return parse(text)

    def render(self, call: Call) -> str:
        if not isinstance(call.name, str) or not TOOL_NAME.match(call.name):
            raise ValueError(f"cannot write a call to {call.name!r}: not a valid tool name")
        if not isinstance(call.arguments, dict):
            raise ValueError(f"cannot write arguments {call.arguments!r}: they must be a dict")
        return f"{OPENER}{CALL}{call.name}{render_value(call.arguments)}{CLOSER}"

    def scanner(self) -> CloserScanner:
        return scanner()

    render_result = staticmethod(render_result)

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        return [tool_schema(tool) for tool in tools]

    def describe(self, tools: Iterable[Any]) -> str:
        """How to call, then one JSON line per tool (the chat template's own list is used where it has one)."""
        lines = [json.dumps(schema, ensure_ascii=False) for schema in self.tool_schemas(tools)]
        return INTRO + "\n\nThe tools:\n" + "\n".join(lines) if lines else ""
