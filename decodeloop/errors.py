"""The exceptions a user of the CLI or the library can meet, in one place to import and catch them from.

    ConfigError        the servers asked for cannot be started as written (a config file, a flag, the pin
                       store, tools that cannot fit the prompt: ToolSurfaceError)
    Misconfigured      a ConfigError in a file or model the command line names: a config file missing,
                       unreadable, not UTF-8, not JSON or of the wrong shape; a model that does not load
    MissingDependency  an optional extra is not installed; the message names the command that installs it
    RemoteError        an `openai:` engine's server is down, refuses, goes silent or cuts a stream off
    McpError           an MCP server failed: a JSON-RPC error, a timeout, a closed connection, a broken
                       message (its kinds below: RpcError, RequestTimeout, ConnectionClosed, ...)

Everything that goes wrong below the MCP client (a dead pipe, a JSON-RPC error response, a silent server, a
server speaking another protocol version) is translated into an McpError at the boundary where it happens, so
callers catch McpError and never a BrokenPipeError or a json.JSONDecodeError.

Errors a model makes (a malformed call, bad arguments) are not exceptions: they come back to the model as
tool messages (dispatch.py).
"""

from __future__ import annotations

from typing import Any


class ConfigError(Exception):
    """The servers the user asked for cannot be started as written."""


class Misconfigured(ConfigError):
    """A file or model named to the harness cannot be used as it is: a config file that is missing,
    unreadable, not UTF-8, not JSON or of the wrong shape, or a model that does not load. The CLI exits
    with 78 (sysexits.h's EX_CONFIG) for it, where another ConfigError is 1."""


class ToolSurfaceError(ConfigError):
    """The tools' descriptions take more of the prompt than the cap or the model's context allows."""


class MissingDependency(ImportError):
    """A model whose optional dependency is not installed; the message names what to install."""


class RemoteError(Exception):
    """The server could not be reached, or answered with something that is not a completion stream."""


# -- the MCP client's ------------------------------------------------------------------------------------


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


__all__ = [
    "AuthorizationError",
    "ConfigError",
    "ConnectionClosed",
    "HttpRpcError",
    "HttpStatusError",
    "McpError",
    "Misconfigured",
    "MissingDependency",
    "ProtocolError",
    "RemoteError",
    "RequestTimeout",
    "RpcError",
    "SessionExpired",
    "ToolSurfaceError",
    "TransportError",
    "Unsupported",
]
