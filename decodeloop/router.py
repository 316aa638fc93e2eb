"""The router: which MCP server serves which tool, and starting those servers.

Every tool the model is told about must be routable; an unknown name is an
error handed back to the model with the list of tools that do exist. Two
servers offering the same tool name is a configuration error at start-up.
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Any, Callable

from decodeloop.events import Emit, Notice, Rpc, ServerReady
from decodeloop.mcp.client import McpClient, Tool, ToolResult
from decodeloop.mcp.transports.stdio import StdioTransport
from decodeloop.schema import did_you_mean


class ConfigError(Exception):
    """The tools or servers a turn was given cannot work together."""


class UnknownTool(LookupError):
    pass


class Router:
    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.owner: dict[str, str] = {}        # tool name -> server name
        self.clients: dict[str, McpClient] = {}

    def add_server(self, server: str, client: McpClient, tools: list[Tool]) -> None:
        if server in self.clients:
            raise ConfigError(f"two servers are named {server!r}")
        for tool in tools:
            if tool.name in self.tools:
                raise ConfigError(
                    f"tool {tool.name!r} is offered by both {self.owner[tool.name]!r} and {server!r}")
        self.clients[server] = client
        for tool in tools:
            self.tools[tool.name] = tool
            self.owner[tool.name] = server

    def resolve(self, name: str) -> Tool:
        tool = self.tools.get(name)
        if tool is None:
            close = did_you_mean(name, list(self.tools))
            hint = f' Did you mean "{close[0]}"?' if close else ""
            available = ", ".join(self.tools) or "none"
            raise UnknownTool(f'unknown tool "{name}".{hint} Available tools: {available}.')
        return tool

    def call(self, name: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolResult:
        return self.clients[self.owner[name]].call_tool(name, arguments, timeout=timeout)

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def __enter__(self) -> "Router":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_stdio_servers(commands: list[list[str]], emit: Emit, *, timeout: float = 60.0,
                        verbose: bool = False, stderr: Callable[[str], None] | None = None) -> Router:
    """Start each stdio server, initialize it, list its tools, and route to them.

    On any failure the servers already started are shut down before the error
    propagates, so a bad configuration never leaves processes behind.
    """
    router = Router()
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    # the bundled servers import decodeloop: make that work from any directory
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        for command in commands:
            server = _server_name(command, router)
            show = _stderr_printer(server, stderr) if verbose else None
            client = McpClient(
                StdioTransport(command, env=env, on_stderr=show),
                name=server, timeout=timeout,
                on_traffic=lambda direction, message, server=server: emit(Rpc(server, direction, message)),
                on_notification=lambda method, params, server=server: emit(
                    Notice(server, f"{method} {params}" if params else method)),
                log=lambda text, server=server: emit(Notice(server, text)),
            )
            try:
                client.initialize()
                tools = client.list_tools()
            except BaseException:
                client.close()
                raise
            router.add_server(server, client, tools)
            info = client.server_info or {}
            emit(ServerReady(server, client.protocol_version or "", str(info.get("name", server)),
                             [t.name for t in tools]))
    except BaseException:
        router.close()
        raise
    return router


def parse_command(text: str) -> list[str]:
    """'python3 -m pkg --flag' -> argv list, with a clear error for bad quoting."""
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"cannot parse server command {text!r}: {e}") from None
    if not argv:
        raise ConfigError("empty server command")
    return argv


def _server_name(command: list[str], router: Router) -> str:
    """A short name for traces: the module after -m, else the script, else the program."""
    if "-m" in command[:-1]:
        base = command[command.index("-m") + 1].split(".")[-1]
    else:
        scripts = [a for a in command[1:] if a.endswith((".py", ".js", ".mjs"))]
        base = os.path.splitext(os.path.basename(scripts[0] if scripts else command[0]))[0]
    base = base or "server"
    name, n = base, 2
    while name in router.clients:
        name, n = f"{base}{n}", n + 1
    return name


def _stderr_printer(server: str, sink: Callable[[str], None] | None) -> Callable[[str], None]:
    write = sink or (lambda line: print(line, file=sys.stderr, flush=True))
    return lambda line: write(f"[{server} stderr] {line}")
