"""Server-Sent Events: an incremental parser for the text/event-stream format.

This module owns the framing of an SSE stream as the WHATWG HTML standard
defines it: lines end in CRLF, LF or a lone CR (also when a CR ends one read
and its LF starts the next); `data:` lines accumulate, joined by newlines;
`event:`, `id:` and `retry:` set the event's type, the stream's last event id
and the reconnection delay; a line starting with `:` is a comment; a blank line
dispatches the event. The MCP client's HTTP transports and the remote
engine's `/v1/completions` stream read through it.

What a reader may tighten: `max_event_bytes` caps one event (a stream that
never dispatches is refused, not buffered without end), `max_line_bytes` one
line, and `strict` refuses a line whose field the standard does not define (a
body that is not an event stream at all). `unfinished()` hands over the event a
stream ended in the middle of, for a reader that shows what arrived rather than
discard it as the standard does.

Cost is linear in the stream's size: a line split across many reads is kept as
a list of pieces and joined once when it ends, so a 20 MB `data:` line costs
one join, not one copy per read. Event data stays bytes (JSON parses bytes
directly, so a large message is never copied into a str first).
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_EVENT_BYTES = 256 * 1024 * 1024  # a stream that never dispatches is broken, not big


class SseError(ValueError):
    """The stream is not a usable event stream."""


class SseTooLarge(SseError):
    """An event (`what` is "event") or a line ("line") longer than its cap."""

    def __init__(self, message: str, what: str, cap: int) -> None:
        super().__init__(message)
        self.what = what
        self.cap = cap


class SseNotAField(SseError):
    """A line whose field the standard does not define, refused by a strict parser."""

    def __init__(self, line: bytes) -> None:
        super().__init__(f"a line that is not server-sent events: {line[:200]!r}")
        self.line = line


@dataclass(slots=True)
class SseEvent:
    event: str  # "message" unless the stream named another type
    data: bytes  # the data lines joined by b"\n"
    id: str | None  # the stream's last event id after this event (None: never set)
    retry: int | None  # reconnection delay in ms, if this event carried one

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class SseParser:
    """Feed bytes as they arrive; complete events come out in order."""

    def __init__(
        self,
        max_event_bytes: int = MAX_EVENT_BYTES,
        *,
        max_line_bytes: int | None = None,
        strict: bool = False,
        cap_name: str = "",
    ) -> None:
        self.max_event_bytes = max_event_bytes
        self.max_line_bytes = max_line_bytes
        self.strict = strict
        self.cap_name = cap_name  # the caller's name for max_event_bytes, for the message that quotes it
        self.last_event_id: str | None = None  # persists across events, as the standard says
        self.retry: int | None = None  # the latest retry: value seen on the stream
        self._pieces: list[bytes] = []  # the unfinished line, in pieces
        self._pending = 0  # bytes in _pieces
        self._skip_lf = False  # the last read ended in CR: a leading LF belongs to it
        self._first = True  # a byte order mark may start the stream
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event = ""
        self._event_retry: int | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        events: list[SseEvent] = []
        size = len(chunk)
        if not size:
            return events
        start = 0
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 10:
                start = 1
        # bytes.find runs at memchr speed; each position of the next LF and CR is
        # looked up once and reused until passed, so a chunk is scanned O(size) times 2
        lf = chunk.find(b"\n", start)
        cr = chunk.find(b"\r", start)
        while lf >= 0 or cr >= 0:
            if cr < 0 or 0 <= lf < cr:
                end, after = lf, lf + 1
            else:
                end = cr
                after = cr + 2 if cr + 1 < size and chunk[cr + 1] == 10 else cr + 1
                if after == size and cr + 1 == size:
                    self._skip_lf = True  # the LF of a CRLF may start the next read
            if self._pieces:
                self._pieces.append(chunk[start:end])
                line = b"".join(self._pieces)
                self._pieces.clear()
                self._pending = 0
            else:
                line = chunk[start:end]
            start = after
            if lf >= 0 and lf < start:
                lf = chunk.find(b"\n", start)
            if cr >= 0 and cr < start:
                cr = chunk.find(b"\r", start)
            event = self._line(line)
            if event is not None:
                events.append(event)
        if start < size:
            rest = chunk[start:] if start else chunk
            self._pieces.append(rest)
            self._pending += len(rest)
            if self.max_line_bytes is not None and self._pending > self.max_line_bytes:
                raise self._too_large("line")
            if self._pending + self._data_bytes > self.max_event_bytes:
                raise self._too_large("event")
        return events

    def finish(self) -> None:
        """End of stream: an event without its blank line is discarded, as the standard says."""
        self._pieces.clear()
        self._data.clear()
        self._pending = self._data_bytes = 0

    def unfinished(self) -> SseEvent | None:
        """End of stream: the event it stopped in the middle of (its last line read without an ending), or None.

        The standard discards such an event; this is for a reader that would rather show what arrived.
        The parser is then reset as by `finish`.
        """
        try:
            if self._pieces:
                line = b"".join(self._pieces)
                self._pieces.clear()
                self._pending = 0
                self._line(line)
            return self._dispatch()
        finally:
            self.finish()

    def _too_large(self, what: str) -> SseTooLarge:
        if what == "line":
            cap = self.max_line_bytes or 0
            return SseTooLarge(f"a line is longer than the {cap:,}-byte cap on one line", what, cap)
        cap = self.max_event_bytes
        named = f" ({self.cap_name})" if self.cap_name else ""
        return SseTooLarge(f"an event is larger than the {cap:,}-byte cap on one message{named}", what, cap)

    def _line(self, line: bytes) -> SseEvent | None:
        if self._first:
            self._first = False
            if line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
        if self.max_line_bytes is not None and len(line) > self.max_line_bytes:
            raise self._too_large("line")
        if not line:
            return self._dispatch()
        if line[:1] == b":":
            return None  # a comment, often a keep-alive
        colon = line.find(b":")
        if colon < 0:
            field, value = line, b""
        else:  # one slice for the value, however long: a 20 MB data line is copied once here
            field = line[:colon]
            value = line[colon + 2 :] if line[colon + 1 : colon + 2] == b" " else line[colon + 1 :]
        if field == b"data":
            self._data.append(value)
            self._data_bytes += len(value) + 1
            if self._data_bytes > self.max_event_bytes:
                raise self._too_large("event")
        elif field == b"event":
            self._event = value.decode("utf-8", errors="replace")
        elif field == b"id":
            if b"\0" not in value:
                self.last_event_id = value.decode("utf-8", errors="replace")
        elif field == b"retry":
            if value.isdigit():
                self.retry = self._event_retry = int(value)
        elif self.strict:
            raise SseNotAField(line)
        return None  # unknown fields are ignored

    def _dispatch(self) -> SseEvent | None:
        retry, self._event_retry = self._event_retry, None
        if not self._data:
            self._event = ""
            return None  # no data: nothing to dispatch (ids and retry still took effect)
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        event = SseEvent(self._event or "message", data, self.last_event_id, retry)
        self._data = []
        self._data_bytes = 0
        self._event = ""
        return event
