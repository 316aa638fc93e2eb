"""The client the MCP conformance suite drives: `python3 -m decodeloop.mcp.conformance_client URL`.

The suite (npm @modelcontextprotocol/conformance, client mode) starts a test
server for each scenario and runs this with the server's URL as the last
argument, the scenario's name in MCP_CONFORMANCE_SCENARIO and any extra data
(pre-registered credentials, or the exact `toolCalls` to make) as JSON in
MCP_CONFORMANCE_CONTEXT. Every scenario asks the same of a client: connect over
Streamable HTTP (authorizing with OAuth when the server wants it: the
authorization code grant, or the grant the context's credentials call for,
see `oauth_for`), the wire
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

from decodeloop.errors import McpError, RpcError
from decodeloop.mcp.auth.client_credentials import ClientCredentials
from decodeloop.mcp.auth.enterprise import EnterpriseManaged
from decodeloop.mcp.auth.oauth import OAuth, follow_redirect
from decodeloop.mcp.auth.workload import WorkloadIdentity
from decodeloop.mcp.client import McpClient, Tool
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


def oauth_for(scenario: str, context: dict, log: Any) -> OAuth:
    """The OAuth client a scenario's context calls for.

    A workload JWT (`valid_jwt`) means workload identity federation; an IdP ID token
    (`idp_id_token`) enterprise-managed authorization; a private key (`private_key_pem`)
    client credentials with private_key_jwt; the client-credentials scenarios with a
    secret, client credentials with it. Anything else is the authorization code grant
    (with the context's pre-registered client, if any). DPoP is used whenever the
    authorization server offers it.
    """
    client_id, client_secret = context.get("client_id"), context.get("client_secret")
    if context.get("valid_jwt"):
        return OAuth(grant=WorkloadIdentity(context["valid_jwt"]), client_id=client_id, log=log)
    if context.get("idp_id_token"):
        grant = EnterpriseManaged(
            idp_token_endpoint=context["idp_token_endpoint"],
            id_token=context["idp_id_token"],
            idp_client_id=context.get("idp_client_id"),
        )
        return OAuth(grant=grant, client_id=client_id, client_secret=client_secret, log=log)
    if context.get("private_key_pem"):
        from decodeloop.mcp.auth.jwt import SigningKey

        key = SigningKey.from_pem(context["private_key_pem"], context.get("signing_algorithm"))
        return OAuth(grant=ClientCredentials(), client_id=client_id, client_key=key, log=log)
    if scenario.startswith("auth/client-credentials"):
        return OAuth(grant=ClientCredentials(), client_id=client_id, client_secret=client_secret, log=log)
    return OAuth(
        authorize_url=follow_redirect,
        redirect_uri=REDIRECT_URI,
        client_name="decodeloop",
        client_id=client_id,
        client_secret=client_secret,
        client_metadata_url=CLIENT_METADATA_URL,
        log=log,
    )


METHOD_NOT_FOUND = -32601


def run(url: str, scenario: str, context: dict) -> None:
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    auth = oauth_for(scenario, context, say) if scenario.startswith("auth/") else None
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
            try:
                result = client.call_tool(name, arguments)
            except RpcError as exc:
                if exc.code != METHOD_NOT_FOUND or isinstance(calls, list):
                    raise
                # a scenario about listing (a schema kept as sent) may serve no tools/call at all
                say(f"{name}: the server takes no tools/call ({exc.message})")
                break
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
