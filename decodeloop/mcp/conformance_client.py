"""The client the MCP conformance suite drives: `python3 -m decodeloop.mcp.conformance_client URL`.

The suite (npm @modelcontextprotocol/conformance, client mode) starts a test
server for each scenario and runs this with the server's URL as the last
argument, the scenario's name in MCP_CONFORMANCE_SCENARIO and any extra data
(pre-registered credentials, or the exact `toolCalls` to make) as JSON in
MCP_CONFORMANCE_CONTEXT. Every scenario asks the same of a client: connect over
Streamable HTTP (authorizing with OAuth when the server wants it), the wire
chosen as the harness chooses it (server/discover, else initialize), list the
tools, call each one (or the calls the context names), and answer what the
server asks on the way (elicitation requests are accepted with the defaults of
the requested schema). A tool that asks for a `schema` object gets the
inputSchema of another tool exactly as it was listed, which shows nothing was
taken out of it. Exit status 0 when all of that worked, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from decodeloop.mcp.auth.oauth import OAuth, follow_redirect
from decodeloop.mcp.client import McpClient, Tool
from decodeloop.mcp.errors import McpError
from decodeloop.mcp.transports.http import StreamableHttpTransport

# The suite's client ID metadata document URL; an authorization server that supports
# such documents accepts it as the client id.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
REDIRECT_URI = "http://localhost:3000/callback"


def sample_arguments(tool: Tool, tools: Sequence[Tool] = ()) -> dict:
    """Arguments that satisfy the required part of a tool's input schema."""
    properties = tool.input_schema.get("properties") or {}
    if (properties.get("schema") or {}).get("type") == "object" and "schema" in (
        tool.input_schema.get("required") or []
    ):
        others = [other for other in tools if other is not tool]
        if others:
            return {"schema": others[0].input_schema}
    samples: dict[str, Any] = {"number": 2, "integer": 3, "string": "test", "boolean": True, "array": [], "object": {}}
    arguments: dict[str, Any] = {}
    for n, name in enumerate(tool.input_schema.get("required") or []):
        kind = (properties.get(name) or {}).get("type")
        arguments[name] = samples.get(kind if isinstance(kind, str) else "string", "test")
        if kind in ("number", "integer"):
            arguments[name] += n
    return arguments


def accept_with_defaults(params: dict) -> dict:
    """Answer elicitation/create: accept, filling every field the schema gives a default for."""
    schema = params.get("requestedSchema") or {}
    fields = schema.get("properties") or {}
    return {
        "action": "accept",
        "content": {
            name: spec["default"] for name, spec in fields.items() if isinstance(spec, dict) and "default" in spec
        },
    }


def run(url: str, scenario: str, context: dict) -> None:
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    auth = None
    if scenario.startswith("auth/"):
        auth = OAuth(
            authorize_url=follow_redirect,
            redirect_uri=REDIRECT_URI,
            client_name="decodeloop",
            client_id=context.get("client_id"),
            client_secret=context.get("client_secret"),
            client_metadata_url=CLIENT_METADATA_URL,
            log=say,
        )
    transport = StreamableHttpTransport(url, timeout=20, auth=auth, log=say)
    with McpClient(
        transport,
        name="server",
        timeout=20,
        log=say,
        capabilities={"elicitation": {}},
        request_handlers={"elicitation/create": accept_with_defaults},
        on_notification=lambda method, params: say(f"notification {method} {params}"),
    ) as client:
        say(f"connected: MCP {client.protocol_version}, server {client.server_info}")
        tools = client.list_tools()
        calls = context.get("toolCalls")
        if isinstance(calls, list):
            plan = [(call["name"], call.get("arguments") or {}) for call in calls if isinstance(call, dict)]
        else:
            plan = [(tool.name, sample_arguments(tool, tools)) for tool in tools]
        for name, arguments in plan:
            result = client.call_tool(name, arguments)
            say(f"{name}: {'error: ' if result.is_error else ''}{result.text()[:200]}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python3 -m decodeloop.mcp.conformance_client URL", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
        run(argv[-1], scenario, context if isinstance(context, dict) else {})
    except (McpError, ValueError) as exc:
        print(f"conformance client ({scenario or 'no scenario'}): {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
