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
`set_protocol_version` hears the negotiated revision.

`wire` names the wire, the one thing a transport says about itself: the spec
ties a few rules to Streamable HTTP alone (every request is answered or refused
with a status, so a probe can wait for its answer; a tool with bad `x-mcp-header`
marks is dropped, and the marked arguments travel as `Mcp-Param-*` headers), and
the session applies them where `wire == "http"`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

from decodeloop.errors import McpError

# A JSON-RPC message, or a list of them (a batch from an older server).
Message = dict | list


Wire = Literal["stdio", "http", "sse", "memory"]


class Transport(Protocol):
    wire: Wire  # which wire this is: "http" is Streamable HTTP, whose own rules the session applies

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

    def set_protocol_version(self, version: str | None) -> None:
        """The revision the session negotiated (None before it is known); HTTP sends it as a header, and
        follows the stateless wire's rules where the revision is that wire's."""
        return None
