"""The exceptions a user of the CLI or the library can meet, in one place to import and catch them from.

    ConfigError        the servers asked for cannot be started as written (a config file, a flag, the pin
                       store, tools that cannot fit the prompt: ToolSurfaceError)
    Misconfigured      a ConfigError in a file or model the command line names: a config file missing,
                       unreadable, not UTF-8, not JSON or of the wrong shape; a model that does not load
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


__all__ = ["ConfigError", "McpError", "Misconfigured", "MissingDependency", "RemoteError", "ToolSurfaceError"]
