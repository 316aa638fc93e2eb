"""The two MCP wires: chosen per server by config and command line, and the 2026-07-28 wire's own rules.

The bundled servers are real processes started through the router; the edge
cases of the stateless revision (results that ask for input, lists with a
freshness, tools only a task can run, header marks) come from scripted servers
in memory, each answering exactly what the case needs.
"""

from __future__ import annotations

import json
import sys

import pytest

from decodeloop.errors import ConfigError, ProtocolError
from decodeloop.events import ServerReady
from decodeloop.mcp import McpClient, MemoryTransport
from decodeloop.mcp.headers import encode_value, header_params, header_problem, param_headers, standard_headers
from decodeloop.tools.config import load_config, parse_config
from decodeloop.tools.startup import ClientOptions, start_servers

META = "io.modelcontextprotocol/"


def test_config_pins_a_revision_per_server(tmp_path):
    path = tmp_path / "servers.json"
    weather = ["-m", "decodeloop.servers.weather"]
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "new": {"command": sys.executable, "args": weather, "protocolVersion": "2026-07-28"},
                    "old": {"command": sys.executable, "args": weather, "protocolVersion": "2025-11-25"},
                    "either": {"command": sys.executable, "args": weather},
                }
            }
        )
    )
    specs = load_config(str(path))
    assert [spec.protocol for spec in specs] == ["2026-07-28", "2025-11-25", None]
    events: list = []
    with start_servers(specs, events.append, options=ClientOptions(timeout=30, protocol="2025-11-25")) as router:
        assert sorted(router.tools) and len(router.tools) == 6
    ready = {e.server: e.protocol_version for e in events if isinstance(e, ServerReady)}
    # a server's own pin wins; the others take the command line's
    assert ready == {"new": "2026-07-28", "old": "2025-11-25", "either": "2025-11-25"}


def test_the_command_line_pins_the_servers_the_config_leaves_open_and_the_trace_says_which(tmp_path):
    from test_cli import run

    config = tmp_path / "mcp.json"
    weather = ["-m", "decodeloop.servers.weather"]
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "new": {"command": sys.executable, "args": weather, "protocolVersion": "2026-07-28"},
                    "old": {"command": sys.executable, "args": weather},
                }
            }
        )
    )
    p = run(
        "-m",
        "decodeloop",
        "run",
        "--mcp-config",
        str(config),
        "--mcp-protocol",
        "2025-11-25",
        "What's the weather in Polson, MT?",
        no_site=False,
    )
    assert p.returncode == 0, p.stderr
    trace = p.stdout + p.stderr
    assert '● new: MCP 2026-07-28, server "weather"' in trace
    assert '● old: MCP 2025-11-25, server "weather"' in trace
    bad = run("-m", "decodeloop", "run", "--mcp-protocol", "2030-01-01", "hi", no_site=False)
    assert bad.returncode == 2 and "--mcp-protocol" in bad.stderr


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"command": "x", "protocolVersion": "2030-01-01"}, "protocolVersion"),
        ({"url": "sse+http://localhost/sse", "protocolVersion": "2026-07-28"}, "cannot speak MCP 2026-07-28"),
    ],
)
def test_config_refuses_a_revision_it_cannot_speak(entry, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"mcpServers": {"s": entry}})


class Scripted:
    """A 2026-07-28 server in memory whose tools/list and tools/call answers come from the test."""

    def __init__(self, tools: list[dict], call=None, ttl_ms: int | None = None) -> None:
        self.tools, self.call, self.ttl_ms = tools, call, ttl_ms
        self.received: list[dict] = []

    def handle(self, message: dict) -> dict | None:
        self.received.append(message)
        if "id" not in message:
            return None
        method, params = message["method"], message.get("params", {})
        assert params["_meta"][META + "protocolVersion"] == "2026-07-28"  # on every request
        if method == "server/discover":
            result = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "_meta": {META + "serverInfo": {"name": "scripted", "version": "0"}},
            }
        elif method == "tools/list":
            result = {
                "tools": self.tools,
                **({"ttlMs": self.ttl_ms, "cacheScope": "private"} if self.ttl_ms is not None else {}),
            }
        else:
            result = self.call(params)
        return {"jsonrpc": "2.0", "id": message["id"], "result": {"resultType": "complete", **result}}

    def calls(self) -> list[dict]:
        return [m["params"] for m in self.received if m.get("method") == "tools/call"]


TOOL = {"name": "deploy", "inputSchema": {"type": "object"}}


def asking(params: dict) -> dict:
    """A tool that wants a confirmation first, carried in requestState, then answers with what it got."""
    if "inputResponses" not in params:
        return {
            "resultType": "input_required",
            "requestState": "opaque+state/1=",
            "inputRequests": {
                "confirm": {
                    "method": "elicitation/create",
                    "params": {
                        "message": "Deploy to production?",
                        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                    },
                }
            },
        }
    answer = params["inputResponses"]["confirm"]
    return {"content": [{"type": "text", "text": f"{answer['action']} {params.get('requestState')}"}]}


def test_input_required_is_answered_and_retried_with_the_state_echoed():
    server = Scripted([TOOL], asking)
    with McpClient(
        MemoryTransport(server),
        capabilities={"elicitation": {}},
        request_handlers={"elicitation/create": lambda params: {"action": "accept", "content": {"ok": True}}},
    ) as client:
        assert client.stateless
        assert client.call_tool("deploy", {}).text() == "accept opaque+state/1="
    first, retry = server.calls()
    assert "requestState" not in first and "inputResponses" not in first
    assert retry["requestState"] == "opaque+state/1=" and retry["inputResponses"]["confirm"]["content"] == {"ok": True}
    ids = [m["id"] for m in server.received if m.get("method") == "tools/call"]
    assert len(set(ids)) == 2  # the retry is a new request


def test_elicitation_without_anyone_to_ask_is_declined_with_a_notice():
    logs: list[str] = []
    server = Scripted([TOOL], asking)
    with McpClient(MemoryTransport(server), name="ops", log=logs.append) as client:
        assert client.call_tool("deploy", {}).text() == "decline opaque+state/1="
    assert any("Deploy to production?" in line and "declined" in line for line in logs)


def test_a_server_that_never_stops_asking_fails_the_call_clearly():
    server = Scripted([TOOL], lambda params: {"resultType": "input_required", "requestState": "again"})
    with McpClient(MemoryTransport(server), name="loop") as client:
        with pytest.raises(ProtocolError, match="still asked for input after 10 answers"):
            client.call_tool("deploy", {})
    assert len(server.calls()) == 10


def test_input_the_client_does_not_offer_fails_the_call_clearly():
    server = Scripted(
        [TOOL],
        lambda params: {
            "resultType": "input_required",
            "inputRequests": {"llm": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}},
        },
    )
    with McpClient(MemoryTransport(server), name="s") as client:
        with pytest.raises(ProtocolError, match="sampling/createMessage"):
            client.call_tool("deploy", {})


def test_a_result_without_result_type_is_complete():
    server = Scripted([TOOL], lambda params: {"content": [{"type": "text", "text": "done"}]})
    server.handle = (lambda handle: lambda message: _strip_result_type(handle(message)))(server.handle)
    with McpClient(MemoryTransport(server)) as client:
        assert client.call_tool("deploy", {}).text() == "done"
    assert len(server.calls()) == 1


def _strip_result_type(response: dict | None) -> dict | None:
    if response is not None and "result" in response:
        response["result"].pop("resultType", None)
    return response


def test_tools_list_is_cached_for_its_ttl_and_refetched_on_list_changed():
    server = Scripted([TOOL], ttl_ms=3_600_000)
    with McpClient(MemoryTransport(server)) as client:
        assert [t.name for t in client.list_tools()] == ["deploy"]
        assert [t.name for t in client.list_tools()] == ["deploy"]
        assert sum(m.get("method") == "tools/list" for m in server.received) == 1
        client._notified("notifications/tools/list_changed", {})
        client.list_tools()
        assert sum(m.get("method") == "tools/list" for m in server.received) == 2
    uncached = Scripted([TOOL], ttl_ms=0)
    with McpClient(MemoryTransport(uncached)) as client:
        client.list_tools(), client.list_tools()
    assert sum(m.get("method") == "tools/list" for m in uncached.received) == 2


def test_tools_that_run_only_as_tasks_are_not_offered():
    logs: list[str] = []
    tools = [
        TOOL,
        {"name": "research", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
        {"name": "maybe", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
    ]
    with McpClient(MemoryTransport(Scripted(tools)), log=logs.append) as client:
        assert [t.name for t in client.list_tools()] == ["deploy", "maybe"]
    assert any("'research'" in line and "task" in line for line in logs)


def test_ref_schemas_are_kept_as_sent():
    schema = {
        "type": "object",
        "$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"}}}},
        "properties": {"where": {"$ref": "#/$defs/place"}},
        "$schema": "https://json-schema.org/draft/2020-12/schema",
    }
    with McpClient(MemoryTransport(Scripted([{"name": "go", "inputSchema": schema}]))) as client:
        assert client.list_tools()[0].input_schema == schema


def test_header_values_are_encoded_as_the_spec_shows():
    assert encode_value("us-west1") == "us-west1"
    assert encode_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert encode_value(" padded ") == "=?base64?IHBhZGRlZCA=?="
    assert encode_value("line1\nline2") == "=?base64?bGluZTEKbGluZTI=?="
    assert encode_value("=?base64?literal?=") == "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
    assert standard_headers({"method": "tools/call", "params": {"name": "get_weather"}}) == {
        "Mcp-Method": "tools/call",
        "Mcp-Name": "get_weather",
    }
    assert standard_headers({"method": "tools/list", "params": {}}) == {"Mcp-Method": "tools/list"}


def test_header_marks_are_checked_and_mirrored():
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
            "flag": {"type": "boolean", "x-mcp-header": "Flag"},
        },
    }
    assert header_problem(schema) is None
    marks = header_params(schema)
    assert param_headers(marks, {"region": "eu", "opts": {"n": 7}, "flag": False}) == {
        "Mcp-Param-Region": "eu",
        "Mcp-Param-N": "7",
        "Mcp-Param-Flag": "false",
    }
    assert param_headers(marks, {"region": None}) == {}
    bad = [
        {"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}},
        {
            "type": "object",
            "properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}},
        },
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "has space"}}},
    ]
    assert all(header_problem(schema) for schema in bad)
