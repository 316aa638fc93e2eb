"""The MCP layer's own error types.

Everything that goes wrong below the client (a dead pipe, a JSON-RPC error
response, a silent server, a server speaking another protocol version) is
translated into one of these at the boundary where it happens, so callers catch
`McpError` and never a `BrokenPipeError` or a `json.JSONDecodeError`.
"""

from __future__ import annotations

from typing import Any


class McpError(Exception):
    """Base class for every error raised by decodeloop.mcp."""


class RpcError(McpError):
    """The server answered a request with a JSON-RPC error response."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.message = message
        self.data = data


class RequestTimeout(McpError):
    """No response arrived within the request's timeout (the request was cancelled)."""


class ConnectionClosed(McpError):
    """The server is gone: it exited, closed its pipe, or could not be started."""


class ProtocolError(McpError):
    """The server broke the protocol: bad handshake, unsupported version, malformed reply."""


class Unsupported(McpError):
    """The server's capabilities do not offer what was asked (resources, subscriptions): nothing was sent."""


class TransportError(McpError):
    """A message or its answer could not cross the wire: refused connection, dropped stream, bad framing."""


class HttpStatusError(TransportError):
    """The server answered an HTTP request with a status that is not success."""

    def __init__(self, message: str, status: int, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class HttpRpcError(HttpStatusError, RpcError):
    """An HTTP error status whose body is a JSON-RPC error: how a 2026-07-28 server refuses a request."""

    def __init__(self, code: int, message: str, data: Any, status: int) -> None:
        RpcError.__init__(self, code, message, data)
        self.status = status
        self.body = message
        self.args = (f"{message} (JSON-RPC error {code}, HTTP {status})",)


class SessionExpired(HttpStatusError):
    """The server no longer knows our Mcp-Session-Id (HTTP 404): the client must initialize again."""


class AuthorizationError(TransportError):
    """The server wants authorization that could not be obtained (HTTP 401 or 403)."""
