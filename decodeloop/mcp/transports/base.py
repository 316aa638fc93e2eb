"""The Transport protocol: moving JSON-RPC messages to and from one server.

A transport knows framing and processes (or threads), never MCP methods. It
hands every parsed message to `on_message`, reports a line it could not parse to
`on_garbage` (the session goes on), and reports the end of the connection to
`on_close` exactly once. All three callbacks run on the transport's own reader
thread, so they must be quick and must not block on a response.

Some transports do more, and say so in the members `Transport` declares with
their defaults (a transport subclasses it to take them): one with
`reports_request_errors` set takes `on_error` too (a request that failed on the
wire fails alone; the session goes on), `answers_or_refuses` says a request is
never met with silence, `send_later` sends what may wait (a cancellation) without
blocking, and `set_protocol_version` hears the negotiated revision. HTTP's `send`
takes extra headers for its POST. The protocols below name those shapes, for
the session to call them by.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from decodeloop.errors import McpError

# A JSON-RPC message, or a list of them (a batch from an older server).
Message = dict | list


class Transport(Protocol):
    reports_request_errors: bool = False  # start() takes on_error (ReportsRequestErrors)
    answers_or_refuses: bool = False  # every request gets an answer or a refusal (an HTTP status), never silence
    stateless: bool = False  # speaking the stateless 2026-07-28 wire (HTTP: no session, mirrored headers)

    def start(
        self,
        on_message: Callable[[Message], None],
        on_close: Callable[[str], None],
        on_garbage: Callable[[str], None],
    ) -> None:
        """Open the connection and begin delivering incoming messages."""

    def send(self, message: dict) -> None:
        """Send one message; raises ConnectionClosed if the peer is gone."""

    def close(self) -> None:
        """Shut the connection down; safe to call more than once."""

    def send_later(self, message: dict) -> None:
        """Send a message the caller will not wait on (a cancellation); a transport whose `send` can block
        for long sends it from a thread of its own."""
        self.send(message)

    def set_protocol_version(self, version: str | None, stateless: bool = False) -> None:
        """The revision the session negotiated (None before it is known); HTTP sends it as a header."""
        return None


class ReportsRequestErrors(Transport, Protocol):
    """A transport whose `start` takes `on_error`: (request id, the error) for a request that failed on the wire."""

    reports_request_errors: bool

    def start(
        self,
        on_message: Callable[[Message], None],
        on_close: Callable[[str], None],
        on_garbage: Callable[[str], None],
        on_error: Callable[[Any, McpError], None] | None = None,
    ) -> None: ...


class SendsHeaders(Transport, Protocol):
    """A transport whose `send` takes extra headers for the message (HTTP: a tool's `Mcp-Param-*`)."""

    def send(self, message: dict, headers: dict[str, str] | None = None) -> None: ...
