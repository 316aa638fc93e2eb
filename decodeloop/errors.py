"""The exceptions a user of the CLI or the library can meet, in one place to import and catch them from.

    ConfigError        the servers asked for cannot be started as written (a config file, a flag, the pin
                       store, tools that cannot fit the prompt: ToolSurfaceError)
    MissingDependency  an optional extra is not installed; the message names the command that installs it
    RemoteError        an `openai:` engine's server is down, refuses, goes silent or cuts a stream off
    McpError           an MCP server failed: a JSON-RPC error, a timeout, a closed connection, a broken
                       message (its kinds are in mcp/errors.py)

Errors a model makes (a malformed call, bad arguments) are not exceptions: they come back to the model as
tool messages (dispatch.py).
"""

from __future__ import annotations

from decodeloop.mcp.errors import McpError


class ConfigError(Exception):
    """The servers the user asked for cannot be started as written."""


class ToolSurfaceError(ConfigError):
    """The tools' descriptions take more of the prompt than the cap or the model's context allows."""


class MissingDependency(ImportError):
    """A model whose optional dependency is not installed; the message names what to install."""


class RemoteError(Exception):
    """The server could not be reached, or answered with something that is not a completion stream."""


__all__ = ["ConfigError", "McpError", "MissingDependency", "RemoteError", "ToolSurfaceError"]
