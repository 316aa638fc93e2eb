"""The legacy HTTP+SSE transport (MCP 2024-11-05): answers on one long GET stream.

This module owns the older way of speaking MCP over HTTP. The client opens a
GET event stream; the server's first event, `endpoint`, names the URL to POST
messages to (resolved against the stream's URL, and refused if it is on
another origin, which must never see our headers); every message from the
server, answers included, then arrives on the stream as a `message` event.
One reader thread reads the stream; when it ends the connection is over.
`start()` waits at most `start_timeout` for the stream's headers and its
endpoint event together (the client gives it what is left of a server's
start-up); the stream may then idle for `stream_timeout`. A
message on the stream that cannot be read is skipped with a notice, and fails
the request it answered when it shows which; an event larger than
`max_message_bytes` ends the stream (its parser cannot skip it). A cancellation
after a timeout is POSTed by `send_later`, from its own thread with a short
timeout, so it never lengthens the caller's wait.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from decodeloop.errors import ConnectionClosed, HttpStatusError, McpError, ProtocolError, TransportError
from decodeloop.mcp import framing
from decodeloop.mcp.framing import DEFAULT_MAX_MESSAGE_BYTES, Unreadable
from decodeloop.mcp.transports.base import Message, Transport, Wire
from decodeloop.mcp.transports.http import LATER_TIMEOUT, encode_message
from decodeloop.mcp.transports.httpbase import HttpClient, Response, check_url, origin
from decodeloop.net.sse import SseError, SseParser

READ_SIZE = 1 << 18  # large reads: a 20 MB event takes 80 of them
STREAM_TIMEOUT = 3600.0  # an idle stream is given up after this long; each request has its own timeout


class SseLegacyTransport(Transport):
    wire: Wire = "sse"

    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        *,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        stream_timeout: float = STREAM_TIMEOUT,
        log: Callable[[str], None] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        start_timeout: float | None = None,
    ) -> None:
        check_url(url)
        self.url = url
        self.max_message_bytes = max_message_bytes
        self.timeout = timeout
        self.start_timeout = timeout if start_timeout is None else start_timeout
        self.stream_timeout = stream_timeout
        self.log = log or (lambda line: None)
        self.http = HttpClient(url, headers, connect_timeout=connect_timeout, read_timeout=timeout)
        self.endpoint: str | None = None
        self._endpoint_known = threading.Event()
        self._problem: str | None = None  # why the stream ended or the endpoint was refused
        self._reader: threading.Thread | None = None
        self._closing = False
        self._on_error: Callable[[Any, McpError], None] | None = None

    def start(
        self,
        on_message: Callable[[Message], None],
        on_close: Callable[[str], None],
        on_garbage: Callable[[str], None],
        on_error: Callable[[Any, McpError], None] | None = None,
    ) -> None:
        self._on_error = on_error
        if self._reader is not None:
            raise RuntimeError("SseLegacyTransport.start() called twice")
        # no start_timeout (a client without a timeout): the headers wait as an idle stream may, the endpoint forever
        ends = None if self.start_timeout is None else time.monotonic() + self.start_timeout
        # the headers within the start's wait: a server that accepts and says nothing must not hold us for long
        response = self.http.request(
            "GET",
            self.url,
            headers={"Accept": "text/event-stream"},
            read_timeout=self.stream_timeout if ends is None else self.start_timeout,
        )
        response.set_read_timeout(self.stream_timeout)  # then the stream may idle between events
        if not 200 <= response.status < 300:
            text = response.error_preview()
            raise HttpStatusError(
                f"GET {self.url}: HTTP {response.status}{': ' + text if text else ''}", response.status, text
            )
        if response.content_type != "text/event-stream":
            raise TransportError(
                f"GET {self.url} answered with Content-Type {response.content_type!r}, "
                f"not an event stream: {response.error_preview()}"
            )
        self._reader = threading.Thread(
            target=self._read, args=(response, on_message, on_close, on_garbage), name="mcp-sse-reader", daemon=True
        )
        self._reader.start()
        if not self._endpoint_known.wait(None if ends is None else max(0.0, ends - time.monotonic())):
            self.close()
            raise TransportError(f"GET {self.url}: no endpoint event within {self.start_timeout:g}s")
        if self.endpoint is None:
            self.close()
            raise ProtocolError(self._problem or f"GET {self.url}: the stream ended before the endpoint event")

    def send(self, message: dict, headers: dict[str, str] | None = None) -> None:
        # the 2024-11-05 wire has no per-message headers: the message alone
        if self._closing or self.endpoint is None:
            raise ConnectionClosed(self._problem or "the connection to the server is closed")
        response = self.http.request(
            "POST", self.endpoint, encode_message(message), {"Content-Type": "application/json"}
        )
        text = response.error_preview()
        if not 200 <= response.status < 300:
            raise HttpStatusError(
                f"POST {self.endpoint}: HTTP {response.status}{': ' + text if text else ''}", response.status, text
            )

    def send_later(self, message: dict) -> None:
        """POST a notification from a thread of its own, with a short timeout; failures are only logged."""
        if self._closing or self.endpoint is None:
            raise ConnectionClosed(self._problem or "the connection to the server is closed")
        endpoint, body = self.endpoint, encode_message(message)

        def post() -> None:
            try:
                response = self.http.request(
                    "POST",
                    endpoint,
                    body,
                    {"Content-Type": "application/json"},
                    read_timeout=min(LATER_TIMEOUT, self.timeout),
                )
                text = response.error_preview()
                if not 200 <= response.status < 300:
                    raise HttpStatusError(
                        f"POST {endpoint}: HTTP {response.status}{': ' + text if text else ''}", response.status, text
                    )
            except McpError as exc:
                if not self._closing:
                    self.log(f"could not send {message.get('method', 'a message')}: {exc}")

        threading.Thread(target=post, name="mcp-sse-later", daemon=True).start()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self.http.close()  # wakes the reader
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(1.0)

    def _read(
        self,
        response: Response,
        on_message: Callable[[Message], None],
        on_close: Callable[[str], None],
        on_garbage: Callable[[str], None],
    ) -> None:
        parser = SseParser(self.max_message_bytes, cap_name="max_message_bytes")
        reason = "the server closed the event stream"
        try:
            while True:
                chunk = response.read1(READ_SIZE)
                if not chunk:
                    break
                for event in parser.feed(chunk):
                    if event.event == "endpoint":
                        if not self._set_endpoint(event.text.strip()):
                            return
                    elif event.event == "message" and event.data.strip():
                        try:
                            message = framing.loads(event.data)
                        except Unreadable as bad:
                            on_garbage(bad.describe())
                            if bad.request_id is not None and self._on_error is not None:
                                self._on_error(bad.request_id, bad.error())
                            continue
                        on_message(message)
        except SseError as exc:
            reason = f"malformed event stream: {exc}"
        except McpError as exc:
            reason = str(exc)
        except Exception as exc:  # a failing callback must still end the session cleanly
            reason = f"reading the event stream failed: {exc!r}"
        finally:
            response.close()
            if self._closing:
                reason = f"connection closed by the client ({reason})"
            self._problem = self._problem or reason
            self._endpoint_known.set()
            try:
                on_close(self._problem)
            except Exception:
                pass

    def _set_endpoint(self, target: str) -> bool:
        url = urllib.parse.urljoin(self.url, target)
        try:
            same = origin(url) == origin(self.url)
        except McpError:
            same = False
        if not same:
            # our headers (credentials) must never go to another origin
            self._problem = (
                f"the server's endpoint {url!r} is not on the origin of {self.url}; refusing to send messages there"
            )
            return False
        if self.endpoint is None:
            self.endpoint = url
            self._endpoint_known.set()
        return True
