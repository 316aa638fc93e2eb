"""An MCP server with resources, written with the official Python SDK (`mcp` on PyPI), for the resource tests.

Run as `python3 sdk_resources.py` (stdio). It offers a text resource (`notes://readme`), a JSON document sent
as a blob (`notes://data.json`, a text type: the client decodes it), a PNG (`notes://pixel.png`, described,
never dumped) and a template (`notes://note/{name}`); `touch` tells the clients subscribed to
`notes://readme` that it changed (over `subscriptions/listen` on 2026-07-28, `resources/subscribe` before);
`add_note` adds a resource `notes://added/NAME` and says the list of resources changed.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resources.types import TextResource

server = MCPServer("sdk-resources")
NOTES = {"groceries": "eggs, milk", "todo": "water the plants"}


@server.resource("notes://readme", name="readme", description="What this server holds.", mime_type="text/plain")
def readme() -> str:
    return "Notes: " + ", ".join(NOTES)


@server.resource("notes://data.json", name="data", description="The notes as JSON.", mime_type="application/json")
def data() -> bytes:
    return json.dumps(NOTES).encode()


@server.resource("notes://pixel.png", name="pixel", description="A PNG.", mime_type="image/png")
def pixel() -> bytes:
    return b"\x89PNG\r\n\x1a\n" + bytes(12)


@server.resource("notes://note/{name}", name="note", description="One note by name.", mime_type="text/plain")
def note(name: str) -> str:
    if name not in NOTES:
        raise ValueError(f"no note named {name}")
    return NOTES[name]


@server.tool()
async def touch(ctx: Context) -> str:
    """Say that notes://readme changed."""
    await ctx.notify_resource_updated("notes://readme")
    try:
        await ctx.session.send_resource_updated("notes://readme")  # the handshake wire's subscribers
    except Exception:
        pass  # no session of that kind on 2026-07-28
    return "touched"


@server.tool()
async def add_note(name: str, ctx: Context) -> str:
    """Add a resource notes://added/NAME and say the list of resources changed."""
    server.add_resource(TextResource(uri=f"notes://added/{name}", name=name, text=f"added {name}"))
    await ctx.notify_resources_changed()  # the 2026-07-28 listen streams
    try:
        await ctx.session.send_resource_list_changed()  # the handshake wire's session
    except Exception:
        pass  # no session of that kind on 2026-07-28
    return f"added {name}"


if __name__ == "__main__":
    server.run("stdio")
