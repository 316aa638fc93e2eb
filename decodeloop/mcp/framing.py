"""One JSON-RPC message from bytes, and which request a message that cannot be read was answering.

Every transport reads its messages through here. A message that cannot be read
(not UTF-8, not JSON, nested deeper than MAX_NESTING, larger than the transport's
cap) raises `Unreadable`, which says what is wrong (bad UTF-8 with the byte's
position) and, when the message shows it, the id of the response it was: the
transport then fails that request at once instead of leaving it to its timeout,
and the session goes on with the next message.

Which response it was is read from the message's first and last EDGE bytes, so
it works for a message too large to keep: `{"jsonrpc": "2.0", "id": 7, "result":
...` (Python servers) names its id first, `{"result": ..., "jsonrpc": "2.0", "id":
7}` (TypeScript servers) last. A message that starts with `"method"` is the
server's own request or notification, never a response.

Memory: `to_text` and `parse` are separate so that a caller can drop the bytes
before parsing; a large message then peaks at its text and the parsed result
(about twice its size), never the bytes, the text and the result together.
"""

from __future__ import annotations

import json
import re
from typing import Any

from decodeloop.errors import ProtocolError
from decodeloop.text.credentials import clip

Message = dict | list  # as in transports/base.py (imported from there, it would import every transport)

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # one message, as bytes on the wire
MAX_NESTING = 256  # deeper messages are skipped: code that walks them (a trace printing one) would recurse too far
EDGE = 4096  # bytes of a message's start and end searched for its id
SHOWN_CHARS = 200  # of a skipped message, shown in the notice

_SCALAR = rb'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null'
_MEMBER = re.compile(rb'\s*"((?:[^"\\]|\\.)*)"\s*:\s*(' + _SCALAR + rb"|[\[{])\s*,?")
_OPEN = re.compile(rb"\s*\{")
_LAST_ID = re.compile(rb'"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z')


class Unreadable(Exception):
    """A message that cannot be read; `request_id` is the request it answered, when that shows."""

    def __init__(self, problem: str, request_id: Any = None, excerpt: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.request_id = request_id
        self.excerpt = excerpt

    def describe(self) -> str:
        """For the log: what is wrong and how the message starts."""
        return f"{self.problem}: {self.excerpt}" if self.excerpt else self.problem

    def error(self) -> ProtocolError:
        """For the request it answered: what the caller (and the model) sees."""
        return ProtocolError(f"the response to request {self.request_id!r} could not be read: {self.problem}")


def preview(data: bytes | bytearray | memoryview | str, size: int | None = None) -> str:
    """A short printable excerpt of a message, for notices; `size` is the whole message's, if `data` is its start."""
    size = len(data) if size is None else size
    if isinstance(data, str):
        text, unit = data[: SHOWN_CHARS * 4], "characters"
    else:
        text, unit = bytes(data[: SHOWN_CHARS * 4]).decode("utf-8", errors="replace"), "bytes"
    text = text.rstrip("\r\n")
    if len(text) > SHOWN_CHARS or size > SHOWN_CHARS * 4:
        text = f"{clip(text, SHOWN_CHARS)}... ({size:,} {unit})"
    return text


def to_text(data: bytes | bytearray) -> str:
    """The message's bytes as text; Unreadable (with the first bad byte's position) if they are not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"not valid UTF-8: byte 0x{data[exc.start]:02x} at position {exc.start:,}"
        raise Unreadable(problem, answered(data), preview(data)) from None


def parse(text: str) -> Message:
    """A message (an object, or a batch: a list) from its text; Unreadable if it is not one."""
    try:
        message = json.loads(text)
    except RecursionError:
        raise Unreadable(
            f"nested too deeply to parse (more than {MAX_NESTING} levels)", answered(text), preview(text)
        ) from None
    except ValueError as exc:
        where = f" at character {exc.pos:,}" if isinstance(exc, json.JSONDecodeError) else ""
        raise Unreadable(
            f"not JSON ({exc.msg if isinstance(exc, json.JSONDecodeError) else exc}{where})",
            answered(text),
            preview(text),
        ) from None
    if not isinstance(message, (dict, list)):
        raise Unreadable(f"not a JSON-RPC message (a JSON {type(message).__name__})", None, preview(text))
    # a cheap necessary condition first: so many levels need at least as many brackets
    if len(text) > MAX_NESTING and text.count("[") + text.count("{") > MAX_NESTING and _too_deep(message):
        raise Unreadable(f"nested more than {MAX_NESTING} levels deep", _id_of(message), preview(text))
    return message


def loads(data: bytes | bytearray) -> Message:
    """to_text, then parse: for messages small enough that holding both copies does not matter."""
    return parse(to_text(data))


def answered(data: bytes | bytearray | memoryview | str, tail: bytes | bytearray | memoryview | None = None) -> Any:
    """The id of the response `data` is, read from its start and end; None if it shows none.

    `tail`, if given, is the message's end when `data` holds only its start
    (a message too large to keep whole).
    """
    if isinstance(data, str):
        head = data[:EDGE].encode("utf-8", errors="replace")
        end = data[-EDGE:].encode("utf-8", errors="replace") if tail is None else bytes(tail[-EDGE:])
    else:
        head = bytes(data[:EDGE])
        end = bytes((data if tail is None else tail)[-EDGE:])
    kind, request_id = _head(head)
    if kind != "response":
        return None
    if request_id is None:
        found = _LAST_ID.search(end)
        if found is not None:
            request_id = _scalar(found.group(1))
    return request_id if _valid_id(request_id) else None


def _head(head: bytes) -> tuple[str | None, Any]:
    """("response" | "request" | None, the id if seen): the message's first members, up to a structured one."""
    opened = _OPEN.match(head)
    if opened is None:
        return None, None
    position, request_id = opened.end(), None
    while True:
        member = _MEMBER.match(head, position)
        if member is None:
            return None, None
        key, value = member.group(1), member.group(2)
        if key in (b"result", b"error"):
            return "response", request_id
        if key == b"method":
            return "request", None
        if key == b"id" and value not in (b"[", b"{"):
            request_id = _scalar(value)
        if value in (b"[", b"{"):
            return None, None  # a structured member before result, error or method: give up
        position = member.end()


def _scalar(token: bytes) -> Any:
    try:
        return json.loads(token)
    except ValueError:
        return None


def _valid_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _id_of(message: Message) -> Any:
    if isinstance(message, dict) and "method" not in message and _valid_id(message.get("id")):
        return message["id"]
    return None


def _too_deep(message: Message) -> bool:
    """Whether containers nest more than MAX_NESTING levels; a loop, not recursion."""
    stack: list[tuple[Any, int]] = [(message, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            return True
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False
