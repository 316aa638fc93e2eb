"""The Transport protocol: moving JSON-RPC messages to and from one server.

A transport knows framing and processes (or threads), never MCP methods. It
hands every parsed message to `on_message`, reports a line it could not parse to
`on_garbage` (the session goes on), and reports the end of the connection to
`on_close` exactly once. All three callbacks run on the transport's own reader
thread, so they must be quick and must not block on a response.

Every transport has the same members, so the session calls each the same way.
`on_error` hears a request that failed on the wire alone ((request id, the
error); the session goes on); `send` takes extra headers for the message, which
only HTTP has a place for (a tool's `Mcp-Param-*`: the others send the message
alone); `send_later` sends what may wait (a cancellation) without blocking;
`set_protocol_version` hears the negotiated revision. `answers_or_refuses` is
the one thing a transport says about its wire: a request is never met with
silence (HTTP answers each with a status), so a probe can wait for its answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from decodeloop.errors import McpError

# A JSON-RPC message, or a list of them (a batch from an older server).
Message = dict | list


class Transport(Protocol):
    answers_or_refuses: bool = False  # every request gets an answer or a refusal (an HTTP status), never silence
    stateless: bool = False  # speaking the stateless 2026-07-28 wire (set by set_protocol_version; HTTP: no session)

    def start(
        self,
        on_message: Callable[[Message], None],
        on_close: Callable[[str], None],
        on_garbage: Callable[[str], None],
        on_error: Callable[[Any, McpError], None] | None = None,
    ) -> None:
        """Open the connection and begin delivering incoming messages."""

    def send(self, message: dict, headers: dict[str, str] | None = None) -> None:
        """Send one message (with `headers` where the wire has them); raises ConnectionClosed if the peer is gone."""

    def close(self) -> None:
        """Shut the connection down; safe to call more than once."""

    def send_later(self, message: dict) -> None:
        """Send a message the caller will not wait on (a cancellation); a transport whose `send` can block
        for long sends it from a thread of its own."""
        self.send(message)

    def set_protocol_version(self, version: str | None, stateless: bool = False) -> None:
        """The revision the session negotiated (None before it is known); HTTP sends it as a header."""
        return None
