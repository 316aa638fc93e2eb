"""An MCP server that asks for the client's roots and logs at every level, written with the official Python SDK.

Run as `python3 sdk_roots_logging.py` (stdio). `roots` gets the client's roots through the SDK's `ListRoots`
resolver (a `roots/list` request mid-call on 2025-11-25, an input request of an `input_required` result on
2026-07-28) and answers with them as JSON. `log` sends one log message at each of the eight levels through
`ctx.log`: on 2026-07-28 the SDK itself drops those below the request's `logLevel` (and sends none without
one); on the handshake wire, where filtering is the application's, it sends those from the level the last
`logging/setLevel` asked for (every level before one). The server declares `logging` by handling
`logging/setLevel`; `state` answers with the levels it was asked for, as JSON.
"""

from __future__ import annotations

import json
import warnings
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import ListRoots, Resolve
from mcp_types import EmptyResult, ListRootsResult, SetLevelRequestParams

warnings.simplefilter("ignore")  # the SDK marks roots and logging deprecated as of 2026-07-28; this tests them
server = MCPServer("sdk-roots-logging")
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
levels: list[str] = []  # logging/setLevel requests, in order


async def set_level(ctx, params: SetLevelRequestParams) -> EmptyResult:
    levels.append(params.level)
    return EmptyResult()


server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
async def roots(found: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """Answer with the client's roots."""
    return json.dumps([{"uri": str(root.uri), "name": root.name} for root in found.roots])


@server.tool()
async def log(ctx: Context) -> str:
    """Log once at each level (from the one set, on the handshake wire)."""
    start = LEVELS.index(levels[-1]) if levels else 0
    for level in LEVELS[start:]:
        await ctx.log(level, f"at {level}", logger_name="sdk")
    return "logged"


@server.tool()
def state() -> str:
    """The levels logging/setLevel asked for."""
    return json.dumps({"levels": levels})


if __name__ == "__main__":
    server.run("stdio")
