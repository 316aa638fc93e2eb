"""MCP Apps (`io.modelcontextprotocol/ui`): the interface a tool brings, kept with the call it belongs to.

A tool whose `_meta.ui.resourceUri` names a `ui://` resource has a page of its own: HTML the server serves with
`resources/read` (mime type `text/html;profile=mcp-app`). After a call to such a tool returns, `app_view`
reads that page (once per server and URI: kept for the session) and makes the `app` event that carries it
with the call's arguments and result, for a page that can show it in a sandboxed frame: the viewer (a replay)
and the studio (live, where the app may ask for tool calls: `app_tool`). The HTML is the server's text: it
never enters the context, and it is shown only inside a frame that has no origin of its own, no network and
no way to the page around it.

What an app is granted (docs/mcp-client.md): its own call's arguments and result, the tool's definition, and,
in the studio, calls to tools of its own server whose visibility includes "app", each a call like the model's
(the schema, the policy, the trace). Nothing else: not the conversation, not the context, not another server.
"""

from __future__ import annotations

from typing import Any

from decodeloop.errors import McpError
from decodeloop.events import AppView, Emit, Notice
from decodeloop.mcp.content import Tool, ToolResult
from decodeloop.mcp.ui import MIME

# an app's HTML kept at most, whole (a single-file app with its framework bundled in is a few hundred kilobytes;
# the viewer's page keeps it whole too, past its cap on other strings); a bigger one is not shown
MAX_APP_CHARS = 2_000_000


def app_view(router: Any, server: str, tool: Tool, arguments: dict, result: ToolResult, emit: Emit) -> None:
    """The app of a call to `tool` on `server`, as an `app` event (nothing for a tool without one)."""
    uri = tool.ui
    if uri is None:
        return
    pages = router.app_pages
    html = pages.get((server, uri))
    if html is None:
        try:
            read = router.clients[server].read_resource(uri)
        except McpError as exc:
            emit(Notice(source=server, message=f"the app of {tool.name} ({uri}) could not be read: {exc}"))
            return
        items = [item for item in read.contents if item.get("mimeType") == MIME and isinstance(item.get("text"), str)]
        if not items:
            emit(Notice(source=server, message=f"the app of {tool.name} ({uri}) holds no {MIME} text: not shown"))
            return
        html = items[0]["text"]
        if len(html) > MAX_APP_CHARS:
            emit(
                Notice(
                    source=server,
                    message=f"the app of {tool.name} ({uri}) is {len(html):,} characters, over "
                    f"{MAX_APP_CHARS:,}: not shown",
                )
            )
            return
        pages[(server, uri)] = html
    emit(
        AppView(
            server=server,
            tool=tool.name,
            uri=uri,
            html=html,
            definition={"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema},
            arguments=arguments,
            result=result_json(result),
        )
    )


def result_json(result: ToolResult) -> dict[str, Any]:
    """A call's result as the extension hands it to an app: a CallToolResult."""
    return {
        "content": result.content,
        "isError": result.is_error,
        **({"structuredContent": result.structured} if result.structured is not None else {}),
    }


def server_tools(router: Any, server: str) -> list[Tool]:
    """Every tool `server` serves: those offered to the model and those kept for its apps alone."""
    return [*router.served.get(server, []), *router.app_only.get(server, {}).values()]


def app_tool(router: Any, server: str, name: str) -> Tool:
    """The tool an app of `server` may call by `name`: one of that server's, whose visibility includes "app".
    LookupError, saying why, for any other (another server's tool, a model-only one, one that does not exist)."""
    for tool in server_tools(router, server):
        if tool.name == name:
            if "app" not in tool.visibility:
                raise LookupError(f"{name} is not a tool {server}'s app may call (its visibility is model only)")
            return tool
    raise LookupError(f"{server} has no tool {name!r}: an app may call only its own server's tools")
