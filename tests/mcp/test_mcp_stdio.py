"""The MCP client against the bundled weather server, over a real stdio subprocess and in memory.

Every check runs over both transports and both wires (the stateless 2026-07-28
revision the client finds with server/discover, and the 2025-11-25 handshake
pinned): the in-memory twin must behave like the pipe.
The server's own functions are the reference for what the tools should answer.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import decodeloop
from decodeloop.errors import ProtocolError, RpcError
from decodeloop.mcp import McpClient, MemoryTransport, StdioTransport, Tool, ToolResult
from decodeloop.mcp.jsonrpc import JsonRpcSession
from decodeloop.servers import weather
from decodeloop.servers.base import ToolServer

REPO = Path(__file__).resolve().parent.parent.parent
WEATHER_LINE = re.compile(
    r"^(?P<city>[^,]+), (?P<state>[A-Z]{2}): (?P<temp>-?\d+)°F, (?P<conditions>[a-z ]+), "
    r"humidity (?P<humidity>\d+)%, wind (?P<wind>\d+) mph (?P<dir>N|NE|E|SE|S|SW|W|NW)$"
)


def weather_transport(kind: str):
    if kind == "stdio":
        command = [sys.executable, "-m", "decodeloop.servers.weather", "--page-size", "1"]
        return StdioTransport(command, cwd=str(REPO), close_timeout=1.0)
    return MemoryTransport(weather.build_server(page_size=1))


@pytest.fixture(
    params=[("stdio", "2025-11-25"), ("memory", "2025-11-25"), ("stdio", "auto"), ("memory", "auto")],
    ids=lambda p: f"{p[0]}-{'discover' if p[1] == 'auto' else p[1]}",
)
def client(request):
    sent = []
    kind, protocol = request.param
    with McpClient(
        weather_transport(kind),
        name="weather",
        timeout=10,
        on_traffic=lambda direction, message: sent.append((direction, message)),
        protocol=protocol,
    ) as client:
        client.traffic = sent
        yield client


def test_the_wire_is_chosen_per_server(client):
    assert client.server_info == {"name": "weather", "version": decodeloop.__version__}
    assert "tools" in client.capabilities
    assert "deterministic" in client.instructions
    hello = [m for d, m in client.traffic if d == "send"][:2]
    if client.protocol == "auto":  # the bundled server speaks 2026-07-28: discover, and no handshake
        assert client.protocol_version == "2026-07-28" and client.stateless
        assert [m["method"] for m in hello] == ["server/discover"]
        meta = hello[0]["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert meta["io.modelcontextprotocol/clientInfo"] == {"name": "decodeloop", "version": decodeloop.__version__}
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
    else:
        assert client.protocol_version == "2025-11-25" and not client.stateless
        assert hello[0]["method"] == "initialize"
        assert hello[0]["params"]["clientInfo"] == {"name": "decodeloop", "version": decodeloop.__version__}
        assert hello[1] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    client.ping()
    client.list_tools()
    calls = [m for d, m in client.traffic if d == "send" and m.get("method") in ("tools/list", "ping")]
    results = [m["result"] for d, m in client.traffic if d == "recv" and "tools" in m.get("result", {})]
    for message in calls:  # every 2026-07-28 request carries the version and capabilities; none on the old wire
        meta = message.get("params", {}).get("_meta", {})
        assert ("io.modelcontextprotocol/protocolVersion" in meta) == client.stateless
    assert all(("resultType" in r and r["ttlMs"] > 0) == client.stateless for r in results)


def legacy(server: ToolServer) -> ToolServer:
    """The server as one of the 2025-11-25 revision: server/discover is a method it does not know."""
    handle = server.handle
    server.handle = lambda message: (
        {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}}
        if message.get("method") == "server/discover"
        else handle(message)
    )
    return server


def test_a_legacy_server_is_spoken_to_with_initialize_after_discover_fails():
    sent = []
    with McpClient(
        MemoryTransport(legacy(ToolServer("legacy", "1.0"))),
        name="legacy",
        on_traffic=lambda direction, message: sent.append((direction, message)),
    ) as client:
        assert client.protocol_version == "2025-11-25"
    assert [m.get("method") for d, m in sent if d == "send"] == [
        "server/discover",
        "initialize",
        "notifications/initialized",
    ]


def test_a_pinned_2026_wire_refuses_a_server_without_it():
    client = McpClient(MemoryTransport(legacy(ToolServer("legacy", "1.0"))), name="legacy", protocol="2026-07-28")
    with pytest.raises(ProtocolError, match="does not speak MCP 2026-07-28"):
        client.start()


@pytest.mark.parametrize("kind", ["stdio", "memory"])
@pytest.mark.parametrize(
    "asked, agreed",
    [("2024-11-05", "2024-11-05"), ("2025-06-18", "2025-06-18"), ("1999-01-01", "2025-11-25")],
)
def test_server_echoes_a_supported_version_or_offers_its_latest(kind, asked, agreed):
    session = JsonRpcSession(weather_transport(kind))
    session.start()
    params = {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    try:
        result = session.request("initialize", params, timeout=10)
    finally:
        session.close()
    assert result["protocolVersion"] == agreed


def test_client_refuses_a_version_it_does_not_speak():
    class FutureServer(ToolServer):
        def _initialize(self, params):
            return {**super()._initialize(params), "protocolVersion": "2099-01-01"}

    transport = MemoryTransport(FutureServer("future", "1.0"))
    client = McpClient(transport, name="future")
    with pytest.raises(ProtocolError) as excinfo:
        client.initialize()
    assert "2099-01-01" in str(excinfo.value) and "2025-11-25" in str(excinfo.value)
    assert client.session.closed


def test_list_tools_follows_next_cursor(client):
    tools = client.list_tools()
    assert [t.name for t in tools] == ["get_weather", "get_forecast"]
    pages = [m for d, m in client.traffic if d == "send" and m.get("method") == "tools/list"]
    assert len(pages) == 2  # page size 1, two tools: the cursor was followed once
    assert "cursor" not in pages[0].get("params", {})
    assert isinstance(pages[1]["params"]["cursor"], str)
    get_weather = tools[0]
    assert isinstance(get_weather, Tool)
    assert get_weather.input_schema["required"] == ["city", "state"]
    assert get_weather.input_schema["additionalProperties"] is False
    assert get_weather.input_schema["properties"]["state"]["description"] == "Two-letter US state code, e.g. MT"
    assert get_weather.output_schema["properties"]["temperature_f"] == {"type": "integer"}
    assert tools[1].input_schema["properties"]["days"]["maximum"] == 7


def test_get_weather_text_and_structured_content_agree(client):
    result = client.call_tool("get_weather", {"city": "Polson", "state": "mt"})
    assert not result.is_error
    line = WEATHER_LINE.match(result.text())
    assert line, result.text()
    s = result.structured
    assert (line["city"], line["state"]) == ("Polson", "MT")
    assert (int(line["temp"]), line["conditions"], int(line["humidity"]), int(line["wind"]), line["dir"]) == (
        s["temperature_f"],
        s["conditions"],
        s["humidity_pct"],
        s["wind_mph"],
        s["wind_dir"],
    )
    assert (result.text(), s) == weather.get_weather("Polson", "MT")  # the reference


def test_get_weather_is_deterministic_and_ignores_case_and_spacing(client):
    first = client.call_tool("get_weather", {"city": "Polson", "state": "MT"})
    again = client.call_tool("get_weather", {"city": "Polson", "state": "MT"})
    shouty = client.call_tool("get_weather", {"city": "  POLSON ", "state": " mt"})
    assert first.text() == again.text()
    assert shouty.text() == first.text().replace("Polson", "POLSON")
    other = client.call_tool("get_weather", {"city": "Missoula", "state": "MT"})
    assert other.structured != {**first.structured, "city": "Missoula"}


def test_get_forecast_gives_one_line_per_day_from_monday(client):
    result = client.call_tool("get_forecast", {"city": "Polson", "state": "MT", "days": 5})
    lines = result.text().split("\n")
    assert [line[:4] for line in lines] == ["Mon ", "Tue ", "Wed ", "Thu ", "Fri "]
    assert all(re.fullmatch(r"\w{3} -?\d+°F, [a-z ]+", line) for line in lines)
    today = client.call_tool("get_weather", {"city": "Polson", "state": "MT"}).structured
    assert lines[0] == f"Mon {today['temperature_f']}°F, {today['conditions']}"
    assert result.text() == weather.get_forecast("Polson", "MT", 5)[0]
    default = client.call_tool("get_forecast", {"city": "Polson", "state": "MT"})
    assert default.text() == "\n".join(lines[:3])


def test_bad_arguments_are_tool_errors(client):
    bad_state = client.call_tool("get_weather", {"city": "Polson", "state": "XX"})
    assert bad_state.is_error
    assert bad_state.text() == 'unknown state code "XX": use a two-letter US state code such as MT'
    assert client.call_tool("get_forecast", {"city": "Polson", "state": "ZZ"}).is_error
    too_long = client.call_tool("get_forecast", {"city": "Polson", "state": "MT", "days": 8})
    assert too_long.is_error and "at most 7" in too_long.text()
    missing = client.call_tool("get_weather", {"city": "Polson"})
    assert missing.is_error and '"state"' in missing.text()
    extra = client.call_tool("get_weather", {"city": "Polson", "state": "MT", "units": "C"})
    assert extra.is_error and '"units"' in extra.text()


def test_unknown_tool_is_a_json_rpc_error(client):
    with pytest.raises(RpcError) as excinfo:
        client.call_tool("get_tides", {"city": "Polson"})
    assert excinfo.value.code == -32602
    assert "get_tides" in excinfo.value.message
    assert client.call_tool("get_weather", {"city": "Polson", "state": "MT"}).text()  # session intact


def test_weather_is_plausible_everywhere():
    for state in weather.STATE_MEAN_F:
        for city in ("Springfield", "Franklin", "Salem", "Madison", "Clinton"):
            w = weather.current_weather(city, state)
            assert abs(w["temperature_f"] - weather.STATE_MEAN_F[state]) <= 15
            if "snow" in w["conditions"]:
                assert w["temperature_f"] <= 36
            if "rain" in w["conditions"] or w["conditions"] == "thunderstorms":
                assert w["temperature_f"] > 32
            assert 0 <= w["humidity_pct"] <= 100 and 1 <= w["wind_mph"] <= 40
    assert len(weather.STATE_MEAN_F) == 51


def test_tool_result_text_never_shows_raw_binary():
    result = ToolResult(
        content=[
            {"type": "text", "text": "two charts:"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo" + "A" * 16372 + "="},
            {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="},
            {"type": "resource", "resource": {"uri": "file:///notes.txt", "text": "embedded notes"}},
            {"type": "resource_link", "name": "report", "uri": "file:///report.pdf"},
            {
                "type": "resource_link",
                "name": "data",
                "uri": "file:///d.csv",
                "mimeType": "text/csv",
                "description": "the raw numbers",
            },
            {
                "type": "resource",
                "resource": {"uri": "file:///a.bin", "mimeType": "application/octet-stream", "blob": "AAECAwQ="},
            },
            {"type": "hologram"},
        ],
        is_error=False,
    )
    assert result.text() == "\n".join(
        [
            "two charts:",
            "[image image/png, 12287 bytes]",
            "[audio audio/wav, 4 bytes]",
            "[resource file:///notes.txt]",
            "embedded notes",
            "[resource link report file:///report.pdf]",
            "[resource link data file:///d.csv (text/csv)] the raw numbers",
            "[resource file:///a.bin application/octet-stream, 5 bytes]",
            "[hologram content]",
        ]
    )
