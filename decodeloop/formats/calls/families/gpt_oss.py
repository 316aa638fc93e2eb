"""gpt-oss's Harmony response format: the output is a sequence of messages, each on a channel.

  <|channel|>analysis<|message|>Need the weather in Paris.<|end|>
  <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>

(one message a line here; in the output they follow one another). The output follows the generation prompt
`<|start|>assistant`, so its first message starts at its header.
A message, as the model writes it:

    message   = ["<|start|>" ROLE] header "<|message|>" body [END]
    header    = [" to=" RECIPIENT] "<|channel|>" CHANNEL [" to=" RECIPIENT] [" "] ["<|constrain|>"] [TYPE]
    END       = "<|end|>" | "<|call|>" | "<|return|>"   (<|call|> and <|return|> are stop tokens: an
                output usually ends before them)

What a message is depends on its recipient and its channel:

    to=functions.NAME   a call to the tool NAME, on any channel: the body is its arguments, one JSON object
    another recipient   a built-in tool's (python, browser), not a function: an error the model reads
    analysis            reasoning
    final               the answer: content
    commentary          a preamble the user sees: content
    another channel     content

Variants the fixtures hold (engine tests of vLLM, SGLang and llama.cpp, bug reports, the spec): the recipient
in the role header (the chat template's) or after the channel (what the model generates); the content type as
`<|constrain|>json`, as ` json`, or absent, with or without a space before it; a call ended by <|end|>;
messages after a <|call|> when the stop is not applied (calls in sequence, an answer after a call); a
header with no <|message|> (its text after the last marker is content); a stray header before another.

How it is read: each message is a span of its own, opened by `<|start|>` or `<|channel|>`, or by ` to=` at
the start of the output (the recipient of a role header whose `<|start|>assistant` the prompt wrote). It
ends at its first END; inside a call's JSON only outside strings, so an argument may hold any marker's
text. A message to no recipient ends at <|end|> or <|return|> only: a <|call|> there is its text (the
model ends only a call with it). The span's read gives the message's text (`SpanText`) or its call; a
message the token cap cut off keeps its text and its call is not run (`holds_text`).

Sources: openai/harmony docs/format.md, vLLM's Harmony tool parser, llama.cpp's gpt-oss parser.
Standard library only.
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
    render_result,
    tool_schema,
)
from decodeloop.formats.calls.form import Arguments, CallForm, Maybe, Name, OneOf, Space, Template, Text, Token
from decodeloop.formats.calls.shapes import NotACall, strict_json

START = "<|start|>"
CHANNEL = "<|channel|>"
MESSAGE = "<|message|>"
CONSTRAIN = "<|constrain|>"
END = "<|end|>"
CALL = "<|call|>"
RETURN = "<|return|>"
ROLE_RECIPIENT = " to="  # the first message's recipient in its role header: `<|start|>assistant` was the prompt's
FUNCTIONS = "functions."
SHAPE = "harmony"

_HEADER_ENDS = (MESSAGE, END, CALL, RETURN)
_TEXT_ENDS = (END, RETURN)
_CALL_ENDS = (CALL, END, RETURN)
_RECIPIENT = re.compile(r"to=([^\s<]*)")
_CHANNEL_NAME = re.compile(r"\s*([^\s<]*)")
_MARKER = re.compile(r"<\|[a-z]+\|>")
_INSIDE_STRING = re.compile(r'["\\\n]')  # JSON forbids a raw line break in a string: it ends one too
_OUTSIDE_STRING = re.compile(r'["<]')


def example(name: str = "NAME") -> str:
    """A call as the model writes it, for messages."""
    return f'{CHANNEL}commentary to={FUNCTIONS}{name} {CONSTRAIN}json{MESSAGE}{{"key": "value"}}{CALL}'


def _marker_at(text: str, at: int, markers: Sequence[str]) -> str | None:
    """The marker written at `at`, "" when the text may still become one there, else None."""
    for marker in markers:
        if text.startswith(marker, at):
            return marker
    tail = text[at:]
    return "" if any(len(tail) < len(m) and m.startswith(tail) for m in markers) else None


class MessageScanner:
    """Where a message ends while it is written: fed the text after its opener, a piece at a time."""

    def __init__(self, opener: str) -> None:
        self.opener = opener
        self._text = ""
        self._pos = 0  # everything before is judged
        self._body: str | None = None  # None in the header, then "text" or "json" (a call's arguments)
        self._in_string = self._escaped = False

    def feed(self, piece: str) -> int | None:
        before = len(self._text)
        self._text += piece
        end = self._scan()
        return None if end is None else end - before

    def _scan(self) -> int | None:
        if self._body is None:
            found = self._find(_HEADER_ENDS)
            if found is None:
                return None
            marker, at = found
            if marker != MESSAGE:
                return at + len(marker)  # a header without a body
            header = self.opener + self._text[:at]
            self._body = "json" if _recipient(header).startswith(FUNCTIONS) else "text"
            self._pos = at + len(MESSAGE)
        if self._body == "text":
            found = self._find(_TEXT_ENDS)
            return None if found is None else found[1] + len(found[0])
        return self._scan_json()

    def _find(self, markers: Sequence[str]) -> tuple[str, int] | None:
        """The first of `markers` from where the scan stands; None (and the scan stays) while there is none."""
        text = self._text
        at = text.find("<", self._pos)
        while at >= 0:
            marker = _marker_at(text, at, markers)
            if marker:
                return marker, at
            if marker == "":  # the end of the text may be the start of one
                self._pos = at
                return None
            at = text.find("<", at + 1)
        self._pos = len(text)
        return None

    def _scan_json(self) -> int | None:
        text, pos = self._text, self._pos
        while pos < len(text):
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                    pos += 1
                    continue
                match = _INSIDE_STRING.search(text, pos)
                if match is None:
                    pos = len(text)
                    break
                pos = match.end()
                if match.group() == "\\":
                    self._escaped = True
                else:
                    self._in_string = False
                continue
            match = _OUTSIDE_STRING.search(text, pos)
            if match is None:
                pos = len(text)
                break
            at = match.start()
            if match.group() == '"':
                self._in_string, pos = True, at + 1
                continue
            marker = _marker_at(text, at, _CALL_ENDS)
            if marker:
                return at + len(marker)
            if marker == "":
                pos = at
                break
            pos = at + 1
        self._pos = pos
        return None


def _recipient(header: str) -> str:
    """The recipient a header names (in its role or after its channel), or ""."""
    match = _RECIPIENT.search(header)
    return match.group(1) if match else ""


def _without_end(text: str) -> str:
    for end in _CALL_ENDS:
        if text.endswith(end):
            return text[: -len(end)]
    return text


def read(span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall | SpanText]:
    """One message: its text, as reasoning or content, or its call. `closed` False: the token cap cut it."""
    at = span.find(MESSAGE)
    header = _without_end(span) if at < 0 else span[:at]
    recipient = _recipient(header)
    if recipient:
        return [_call(span, header, recipient, at, closed)]
    if at < 0:  # no body: a malformed header, whose text is what the model wrote
        text = _MARKER.split(header)[-1]
        return [SpanText("content", text)] if closed and text.strip() else []
    body = _without_end(span[at + len(MESSAGE) :])
    if not body:
        return []
    sections = header.split(CHANNEL)  # a stray header before the message's own: the last channel counts
    named = _CHANNEL_NAME.match(sections[-1]) if len(sections) > 1 else None
    channel = named.group(1) if named else ""
    return [SpanText("reasoning" if channel == "analysis" else "content", body)]


def _call(span: str, header: str, recipient: str, at: int, closed: bool) -> ParsedCall:
    """A message to a recipient: a call to a function, or the error that says why it is none."""
    try:
        return ParsedCall(span, SHAPE, _parse_call(span, header, recipient, at, closed))
    except ParseError as e:
        return ParsedCall(span, SHAPE, None, e)


def _parse_call(span: str, header: str, recipient: str, at: int, closed: bool) -> Call:
    column = header.find("to=") + 4
    if not recipient.startswith(FUNCTIONS):
        raise ParseError(
            f"the message at column 1 is addressed to {recipient[:40]!r}, which is not a function: a tool is "
            f"called as to={FUNCTIONS}NAME, as in {example()}",
            column,
        )
    name = recipient[len(FUNCTIONS) :]
    if not TOOL_NAME.match(name):
        shown = json.dumps(name[:40], ensure_ascii=False)
        raise ParseError(
            f"the recipient at column {column} names the tool {shown}: a tool's name uses only letters, digits, "
            f"_ . - and /, as in {example()}",
            column,
        )
    if not closed:
        raise ParseError(f"the message to {FUNCTIONS}{name} ends before its arguments do; it is not run", len(span))
    if at < 0:
        raise ParseError(
            f"the call to {name} has no {MESSAGE}: its header must end with {MESSAGE}, then the arguments, as in "
            f"{example(name)}",
            len(header),
        )
    start = at + len(MESSAGE)
    body = _without_end(span[start:])
    try:
        arguments = strict_json(body)
    except NotACall as e:
        raise ParseError(
            f"the arguments of the call to {name} at column {start + 1} are not one JSON object: {e}; write them "
            f"after {MESSAGE} as a JSON object ({{}} for none), as in {example(name)}",
            start + 1,
        ) from None
    if not isinstance(arguments, dict):
        raise ParseError(
            f"the arguments of the call to {name} at column {start + 1} must be a JSON object, found "
            f"{type(arguments).__name__ if arguments is not None else 'null'}; write {{}} for none, as in "
            f"{example(name)}",
            start + 1,
        )
    return Call(name, arguments)


def parse(text: str) -> Call:
    """One call message (its header through its end); raises ParseError."""
    for item in read(text, True, {}):
        if isinstance(item, ParsedCall):
            if item.error is not None:
                raise item.error
            assert item.call is not None  # a parsed call has one or the other
            return item.call
    raise ParseError(f"the message is not a call: a call names its tool as in {example()}", 1)


def _shape(opener: str, message_start: bool = False) -> CallShape:
    return CallShape(
        SHAPE,
        opener,
        lambda: MessageScanner(opener),
        read,
        to_end=True,  # the message the output ends in is whole: its stop token was cut
        message_start=message_start,
        holds_text=True,
    )


# how --constrain writes a call (formats/calls/form.py): from its recipient on, once a message's header names
# functions. (before its <|message|>: a message to no function is text), then the arguments and <|call|>
_CALL_TEMPLATE = Template(
    (
        Name(),
        Maybe(Token(CHANNEL), Text("commentary")),  # the recipient in the role header: its channel follows
        OneOf((Maybe(Text(" ")), Token(CONSTRAIN), Text("json")), (Text(" "), Maybe(Text("json"))), ()),
        Token(MESSAGE),
        Space(),
        Arguments(),
        Space(),
        OneOf((Token(CALL),), (Token(END),)),
    ),
    after=f"to={FUNCTIONS}",
    before=MESSAGE,
)
GRAMMAR = CallForm(
    {CHANNEL: _CALL_TEMPLATE, START: _CALL_TEMPLATE, ROLE_RECIPIENT: _CALL_TEMPLATE},
    required=(Token(CHANNEL), Text(f"commentary to={FUNCTIONS}")),
)

INTRO = (
    f"To use a tool, send it a message on the commentary channel: {example('get_weather')}, the arguments "
    "one JSON object. Its result comes back as the tool's message; then answer on the final channel."
)


class HarmonySyntax:
    """gpt-oss's Harmony messages: calls to functions.NAME, analysis reasoning, final and commentary text."""

    name = "harmony"
    shape = SHAPE
    alternates = ()
    opener = CHANNEL
    closer = CALL
    collect_calls = False  # a call message ends the turn (<|call|> is a stop token)
    template_tools = True  # the chat template's developer message lists the tools
    reasoning = ()  # analysis messages are reasoning through their spans
    grammar = GRAMMAR  # how --constrain writes its calls

    shapes = (_shape(CHANNEL), _shape(START), _shape(ROLE_RECIPIENT, message_start=True))

    def parse(self, text: str) -> Call:
        return parse(text)

    def render(self, call: Call) -> str:
        """A call as the model generates it after `<|start|>assistant`, its stop token included."""
        if not isinstance(call.name, str) or not TOOL_NAME.match(call.name):
            raise ValueError(f"cannot write a call to {call.name!r}: not a valid tool name")
        if not isinstance(call.arguments, dict):
            raise ValueError(f"cannot write arguments {call.arguments!r}: they must be a dict")
        body = json.dumps(call.arguments, ensure_ascii=False, allow_nan=False)
        return f"{CHANNEL}commentary to={FUNCTIONS}{call.name} {CONSTRAIN}json{MESSAGE}{body}{CALL}"

    def scanner(self) -> MessageScanner:
        return MessageScanner(CHANNEL)

    render_result = staticmethod(render_result)

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        return [tool_schema(tool) for tool in tools]

    def describe(self, tools: Iterable[Any]) -> str:
        """How to call, then one JSON line per tool (the chat template's own list is used where it has one)."""
        lines = [json.dumps(schema, ensure_ascii=False) for schema in self.tool_schemas(tools)]
        return INTRO + "\n\nThe tools:\n" + "\n".join(lines) if lines else ""
