"""Llama's tool calls: Llama 3.x's JSON objects and Llama 4's pythonic call lists.

Llama 3.1, 3.2 and 3.3 write a call as a JSON object at the start of the message, or after <|python_tag|>
anywhere in it:

    {"name": "get_weather", "parameters": {"city": "Paris"}}
    Let me check. <|python_tag|>{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}

"arguments" may stand for "parameters", and "type": "function" beside them; Llama 3.2 writes several calls
separated by ";". At the start of the message the object is a call only when it names a tool that is
offered: other JSON there (`{"a": 1} is a dict`, `{"capital": "Paris"}`) is the answer's text, as vLLM's
and SGLang's parsers read it. After <|python_tag|> it is always a call, and a call to a tool that is not
offered is for dispatch to refuse.

Llama 4 (and Llama 3.2's small models, prompted so) write a Python list of calls at the start of the
message, or inside <|python_start|>...<|python_end|>:

    [get_weather(city='San Francisco', metric="celsius"), get_time()]

Every argument is `name=value`; values are Python literals (strings in single or double quotes with their
escapes, numbers, True, False, None, lists, tuples and dicts; JSON's true, false and null are read too) and
become JSON values. A list that does not begin as a call (`[1, 2]`, `[Note] ...`) is the answer's text.

Two formats, `llama3-json` and `llama4-pythonic`, each reading all four shapes; they differ in what they
write. `render` writes a call as the model's chat template writes it back (Llama 3's object, Llama 4's list,
neither behind a special token), and `describe` teaches that; the canonical shape is the one the family's
special token opens (<|python_tag|>, <|python_start|>), the marker the harness escapes in data. Sources:
Meta's prompt-format pages for Llama 3.1-3.3 and Llama 4; vLLM's llama3_json, pythonic and llama4_pythonic
parsers; SGLang's llama3 and pythonic detectors.
Standard library only.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
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
    render_result,
    tool_schema,
)
from decodeloop.formats.calls.families.jsonvalue import WHITESPACE, object_in, read_value, skip_space
from decodeloop.formats.calls.form import CallForm, CallObject, Template, Token
from decodeloop.formats.calls.scan import CloserScanner, ValueScanner, outside_strings

PYTHON_TAG = "<|python_tag|>"
PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"

JSON_SHAPE = 'a call looks like {"name": "get_weather", "parameters": {"city": "Paris"}}'
LIST_SHAPE = "calls look like [get_weather(city='Paris'), get_time()]"

_CALL_KEYS = ("name", "parameters", "arguments", "type")
_NAMED = re.compile(r'"name"\s*:\s*"([^"\\]{1,128})"')  # a call's name, read from JSON that does not parse
_HEAD = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_.]*\s*\(")  # how a list of calls begins after its "["
_HEAD_SO_FAR = re.compile(r"\s*(?:[A-Za-z_][A-Za-z0-9_.]*\s*)?")
_HEAD_CHARS = 200  # a list that has not begun a call by then is text
_LITERALS = {"true": True, "false": False, "null": None}


# -- where a span ends --------------------------------------------------------------------------------------


class JsonCallsScanner:
    """JSON calls: an object, and another after each ";". The span ends at the first other character after a
    value (which is not part of it), or at once where what follows the opener cannot begin an object
    (`opened`: the opener was the object's own "{", so a key or "}" must follow)."""

    def __init__(self, opened: bool = False) -> None:
        self._value: ValueScanner | None = ValueScanner(depth=1 if opened else 0)
        self._key_next = opened

    def feed(self, piece: str) -> int | None:
        i = 0
        while i < len(piece):
            ch = piece[i]
            if self._key_next:  # after the bare shape's "{", a key or "}", else it is prose (`{braces}`)
                if ch in WHITESPACE:
                    i += 1
                    continue
                if ch not in '"}':
                    return i
                self._key_next = False
            if self._value is not None:
                end = self._value.feed(piece[i:])
                if end is None:
                    return None
                if self._value.abandoned:
                    return i + end
                i += end
                self._value = None
            elif ch in WHITESPACE:
                i += 1
            elif ch == ";":
                self._value = ValueScanner()
                i += 1
            else:
                return i
        return None


class CallListScanner:
    """A Python list of calls after its "[": it ends where the list closes (brackets inside strings do not
    count), or, where what follows the "[" does not begin a call (`NAME(`), at that character."""

    def __init__(self) -> None:
        self._head = ""
        self._value: ValueScanner | None = None

    def feed(self, piece: str) -> int | None:
        if self._value is not None:
            return self._value.feed(piece)
        for i, ch in enumerate(piece):
            self._head += ch
            if _HEAD.fullmatch(self._head):
                self._value = ValueScanner(quotes="'\"", depth=2)  # inside "[" and "("
                end = self._value.feed(piece[i + 1 :])
                return None if end is None else i + 1 + end
            if len(self._head) > _HEAD_CHARS or not _HEAD_SO_FAR.fullmatch(self._head):
                return i
        return None


def _python_end_scanner() -> CloserScanner:
    return CloserScanner(PYTHON_END, lambda text: outside_strings(text, "'\""))


# -- reading a span ------------------------------------------------------------------------------------------


def _moved(error: ParseError, base: int) -> ParseError:
    """The error with its column counted from the span's start rather than the body's."""
    return ParseError(str(error), error.column + base)


def _kind(value: Any) -> str:
    """What a JSON value is, in words, for a message."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return f"the string {json.dumps(value, ensure_ascii=False)[:40]}"
    return json.dumps(value)


def json_call(value: Any, column: int) -> Call:
    """A decoded call object as a Call; `column` is where the object begins, for the messages."""
    where = f"at column {column}"
    if not isinstance(value, dict):
        raise ParseError(f"a call is a JSON object, found {_kind(value)} {where}; {JSON_SHAPE}", column)
    for key in value:
        if key not in _CALL_KEYS:
            raise ParseError(
                f'the call {where} has the key {json.dumps(key, ensure_ascii=False)[:40]}: a call has "name" and '
                f'"parameters" (or "arguments"), and may have "type": "function"; put the arguments inside '
                f'"parameters"; {JSON_SHAPE}',
                column,
            )
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise ParseError(f'the call {where} needs "name", a string that names the tool; {JSON_SHAPE}', column)
    if not TOOL_NAME.match(name):
        raise ParseError(
            f"the tool name {json.dumps(name, ensure_ascii=False)[:70]} {where} may use only letters, digits, "
            "_ . - and /",
            column,
        )
    if value.get("type", "function") != "function":
        raise ParseError(f'the call {where} has "type" {_kind(value["type"])}; write "type": "function"', column)
    if "parameters" in value and "arguments" in value:
        raise ParseError(f'the call {where} has both "parameters" and "arguments"; give its arguments once', column)
    arguments = value.get("parameters", value.get("arguments", {}))
    if isinstance(arguments, str):  # some models encode the object twice
        arguments = object_in(arguments)
    if not isinstance(arguments, dict):
        raise ParseError(
            f'the arguments of the call {where} must be a JSON object ("parameters": {{}} for none); {JSON_SHAPE}',
            column,
        )
    return Call(name, arguments)


def _json_calls(body: str, base: int, shape: str) -> list[ParsedCall]:
    """Every call of a span's body, its JSON objects separated by ";"; `base`: where the body starts in the
    span. Reading stops at the first call that does not read."""
    calls: list[ParsedCall] = []
    pos = skip_space(body, 0)
    if pos >= len(body):
        error = ParseError(f"{PYTHON_TAG} is not followed by a call; {JSON_SHAPE}", base + 1)
        return [ParsedCall(body, shape, None, error)]
    while pos < len(body):
        start = pos
        try:
            value, pos = read_value(body, start, JSON_SHAPE)
            calls.append(ParsedCall(body[start:pos], shape, json_call(value, base + start + 1)))
        except ParseError as e:
            return [*calls, ParsedCall(body[start:].strip(WHITESPACE), shape, None, _moved(e, base))]
        pos = skip_space(body, pos)
        if pos < len(body) and body[pos] != ";":
            error = ParseError(f"text after the call at column {base + pos + 1}; separate calls with ;", base + pos + 1)
            return [*calls, ParsedCall(body[pos:], shape, None, error)]
        pos = skip_space(body, pos + 1)
    return calls


def read_tagged_json(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
    """`<|python_tag|>` and JSON calls: calls, whatever tools they name."""
    return _json_calls(span[len(PYTHON_TAG) :], len(PYTHON_TAG), "python_tag")


def read_bare_json(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall | SpanText]:
    """JSON at the start of the message: calls when the first object names an offered tool, else text."""
    try:
        value, _ = read_value(span, 0, JSON_SHAPE)
    except ParseError as e:
        named = _NAMED.search(span[:_HEAD_CHARS])
        if named and named.group(1) in tools:  # a call that went wrong: the model is told
            return [ParsedCall(span.strip(WHITESPACE), "llama_json", None, e)]
        return [SpanText("content", span)]
    if not (isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"] in tools):
        return [SpanText("content", span)]
    return list(_json_calls(span, 0, "llama_json"))


def _at(source: str, line: int, offset: int, base: int) -> int:
    """The 1-based column in the span of the 0-based character `offset` on 1-based `line` of `source`."""
    lines = source.split("\n")
    return base + sum(len(text) + 1 for text in lines[: line - 1]) + offset + 1


def _column(source: str, node: ast.AST, base: int) -> int:
    """The 1-based column in the span of an ast node of `source` (ast counts UTF-8 bytes within a line)."""
    line, offset = getattr(node, "lineno", 1), getattr(node, "col_offset", 0)
    text = source.split("\n")[line - 1] if line <= source.count("\n") + 1 else ""
    return _at(source, line, len(text.encode("utf-8")[:offset].decode("utf-8", "ignore")), base)


def _literal(node: ast.AST, source: str, base: int) -> Any:
    """A Python literal as a JSON value."""
    column = _column(source, node, base)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):  # -1, the sign an operator
        number = _literal(node.operand, source, base) if isinstance(node.operand, ast.Constant) else None
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return -number if isinstance(node.op, ast.USub) else number
    elif isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
    elif isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item, source, base) for item in node.elts]
    elif isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values):
            key = None if key_node is None else _literal(key_node, source, base)
            at = _column(source, key_node or value_node, base)
            if not isinstance(key, str):
                raise ParseError(f"a dict's keys are strings in quotes (column {at})", at)
            if key in out:
                raise ParseError(f"the key {key[:40]!r} is given twice in a dict (column {at})", at)
            out[key] = _literal(value_node, source, base)
        return out
    elif isinstance(node, ast.Name) and node.id in _LITERALS:
        return _LITERALS[node.id]
    written = (ast.get_source_segment(source, node) or "")[:40]
    raise ParseError(
        f"{written!r} at column {column} is not a value: write a string in quotes, a number, True, False, None, "
        "a list or a dict",
        column,
    )


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def pythonic_call(node: ast.AST, source: str, base: int) -> Call:
    """One item of a call list, `name(key=value, ...)`, as a Call."""
    column = _column(source, node, base)
    if not isinstance(node, ast.Call):
        raise ParseError(f"the list's item at column {column} is not a call; {LIST_SHAPE}", column)
    name = _dotted(node.func)
    if name is None or not TOOL_NAME.match(name):
        raise ParseError(f"the call at column {column} does not start with a tool's name; {LIST_SHAPE}", column)
    if node.args:
        at = _column(source, node.args[0], base)
        raise ParseError(f"write every argument of {name} as key=value (column {at}); {LIST_SHAPE}", at)
    arguments: dict[str, Any] = {}
    for given in node.keywords:
        at = _column(source, given, base)
        if given.arg is None:
            raise ParseError(f"write every argument of {name} as key=value, not ** (column {at})", at)
        if given.arg in arguments:
            raise ParseError(f"the argument {given.arg} of {name} is given twice (column {at})", at)
        arguments[given.arg] = _literal(given.value, source, base)
    return Call(name, arguments)


def _call_list(body: str, base: int, shape: str, closed: bool) -> list[ParsedCall]:
    """The calls of a Python list; `base`: where the body starts in the span."""
    source = body.strip(WHITESPACE)
    base += len(body) - len(body.lstrip(WHITESPACE))
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as e:
        column = _at(source, e.lineno or 1, (e.offset or 1) - 1, base)
        ended = "" if closed else "the message ended inside the call list; "
        error = ParseError(
            f"{ended}the call list is not valid Python at column {column}: {e.msg}; {LIST_SHAPE}", column
        )
        return [ParsedCall(source, shape, None, error)]
    except (ValueError, RecursionError, MemoryError) as e:  # a number too long, nesting too deep
        return [ParsedCall(source, shape, None, ParseError(f"the call list cannot be read: {e}; {LIST_SHAPE}", base))]
    listed = tree.body
    if not isinstance(listed, ast.List) or not listed.elts:
        error = ParseError(f"the calls are a Python list of one or more calls; {LIST_SHAPE}", base + 1)
        return [ParsedCall(source, shape, None, error)]
    calls = []
    for item in listed.elts:
        text = ast.get_source_segment(source, item) or source
        try:
            calls.append(ParsedCall(text, shape, pythonic_call(item, source, base)))
        except ParseError as e:
            calls.append(ParsedCall(text, shape, None, e))
    return calls


def read_bare_list(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall | SpanText]:
    """A list at the start of the message: calls when it begins as one (`[NAME(`), else text."""
    if not _HEAD.match(span, 1):
        return [SpanText("content", span)]
    return list(_call_list(span, 0, "pythonic", closed))


def read_python_start(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
    """`<|python_start|>`, a list of calls, `<|python_end|>` (the message may end before it)."""
    body = span[len(PYTHON_START) :]
    if body.endswith(PYTHON_END):
        body = body[: -len(PYTHON_END)]
    return _call_list(body, len(PYTHON_START), "python_start", closed)


PYTHON_TAG_SHAPE = CallShape("python_tag", PYTHON_TAG, JsonCallsScanner, read_tagged_json)
BARE_JSON_SHAPE = CallShape(
    "llama_json", "{", lambda: JsonCallsScanner(opened=True), read_bare_json, message_start=True
)
PYTHON_START_SHAPE = CallShape("python_start", PYTHON_START, _python_end_scanner, read_python_start, PYTHON_END)
BARE_LIST_SHAPE = CallShape("pythonic", "[", CallListScanner, read_bare_list, message_start=True)


# -- writing calls -------------------------------------------------------------------------------------------


def _checked(call: Call) -> None:
    if not isinstance(call.name, str) or not TOOL_NAME.match(call.name):
        raise ValueError(f"cannot write a call to {call.name!r}: not a valid tool name")
    if not isinstance(call.arguments, dict):
        raise ValueError(f"cannot write arguments {call.arguments!r}: they must be a dict")


def render_json(call: Call) -> str:
    """A call as Llama 3's chat template writes it back: `{"name": ..., "parameters": {...}}`."""
    _checked(call)
    return json.dumps({"name": call.name, "parameters": call.arguments}, ensure_ascii=False, allow_nan=False)


def _python(value: Any) -> str:
    """A JSON value as a Python literal."""
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value!r}: JSON has no NaN or Infinity")
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_python(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_python(str(key))}: {_python(item)}" for key, item in value.items()) + "}"
    raise ValueError(f"cannot write {type(value).__name__} {value!r} as a value")


def render_pythonic(call: Call) -> str:
    """A call as Llama 4 writes it: `[name(key=value, ...)]`."""
    _checked(call)
    parts = []
    for key, value in call.arguments.items():
        if not key.isidentifier() or keyword.iskeyword(key):
            raise ValueError(f"cannot write the argument {key!r} of {call.name} as key=value: not a Python name")
        parts.append(f"{key}={_python(value)}")
    return f"[{call.name}({', '.join(parts)})]"


# -- the syntaxes --------------------------------------------------------------------------------------------


def _one(items: Sequence[ParsedCall | SpanText]) -> Call:
    calls = [item for item in items if isinstance(item, ParsedCall)]
    if len(calls) != 1:
        raise ParseError(f"expected one call, found {len(calls)}", 1)
    if calls[0].error is not None:
        raise calls[0].error
    assert calls[0].call is not None  # a ParsedCall holds a call or its error
    return calls[0].call


class _LlamaSyntax:
    """What Llama's two formats share: they read every shape, and differ in the one they write."""

    name = ""
    shape = ""
    shapes: tuple[CallShape, ...] = ()
    alternates: tuple = ()
    collect_calls = True  # parallel calls: several in one list, or one after another
    template_tools = True  # Llama's chat templates list the tools themselves
    reasoning: tuple[tuple[str, str], ...] = ()
    render_result = staticmethod(render_result)
    _teach = ""

    @property
    def opener(self) -> str:
        return self.shapes[0].opener

    @property
    def closer(self) -> str:
        return self.shapes[0].closer

    def scanner(self) -> Any:
        return self.shapes[0].scanner()

    def parse(self, text: str) -> Call:
        """The one call in `text`, written in any of the shapes (at the start of a message, JSON is read as a
        call whatever tool it names); raises ParseError."""
        if text.startswith(PYTHON_TAG):
            return _one(read_tagged_json(text, True, {}))
        if text.startswith(PYTHON_START):
            return _one(read_python_start(text, True, {}))
        if text.lstrip(WHITESPACE).startswith("["):
            return _one(_call_list(text, 0, "pythonic", True))
        return _one(_json_calls(text, 0, "llama_json"))

    def render(self, call: Call) -> str:
        raise NotImplementedError

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        return [tool_schema(tool) for tool in tools]

    def describe(self, tools: Iterable[Any]) -> str:
        """The system prompt's paragraphs where a chat template does not list the tools: how to call, then
        each tool's JSON schema on a line."""
        lines = [json.dumps(schema, ensure_ascii=False) for schema in self.tool_schemas(tools)]
        return self._teach + "\n".join(lines) if lines else ""


class Llama3Json(_LlamaSyntax):
    """Llama 3.1-3.3: `{"name": ..., "parameters": {...}}`, after <|python_tag|> or opening the message."""

    name = "llama3-json"
    shape = "python_tag"
    shapes = (PYTHON_TAG_SHAPE, BARE_JSON_SHAPE, PYTHON_START_SHAPE, BARE_LIST_SHAPE)
    # --constrain writes calls after <|python_tag|>, each object a call, ";" before the next (formats/calls/form.py);
    # JSON opening the message is the answer's text unless it names a tool, so it is not bent into a call
    grammar = CallForm(
        {PYTHON_TAG: Template((CallObject(("parameters", "arguments"), type_member=True),), again=";")},
        required=(Token(PYTHON_TAG),),
    )
    _teach = (
        "To call a function, reply with only a JSON object of the form "
        '{"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.'
        "\n\nThe functions:\n"
    )

    def render(self, call: Call) -> str:
        return render_json(call)


class Llama4Pythonic(_LlamaSyntax):
    """Llama 4: `[name(key=value), ...]`, opening the message or inside <|python_start|>...<|python_end|>."""

    name = "llama4-pythonic"
    shape = "python_start"
    shapes = (PYTHON_START_SHAPE, BARE_LIST_SHAPE, PYTHON_TAG_SHAPE, BARE_JSON_SHAPE)
    _teach = (
        "To call functions, reply with only a Python list of calls, "
        "[func_name1(param_name1=value1, param_name2=value2), func_name2(param=value)], "
        "and no other text.\n\nThe functions, in JSON format:\n"
    )

    def render(self, call: Call) -> str:
        return render_pythonic(call)
