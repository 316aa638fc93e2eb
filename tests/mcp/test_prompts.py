"""MCP prompts and argument completion end to end: the bundled weather server and a Python SDK server
(tests/servers/sdk_prompts.py), each a real process on both wires; a prompt sent as the user's turn from the
library and from `decodeloop chat`; the trust boundary (markers escaped, the strict policy) over a prompt
from tests/servers/hostile.py."""

from __future__ import annotations

import os
import sys

import pytest
from conftest import ROOT, WEATHER

from decodeloop.mcp import McpClient
from decodeloop.mcp.client import prompt_ref, resource_ref
from decodeloop.mcp.errors import RpcError, Unsupported
from decodeloop.servers.weather import get_forecast

SDK_PROMPTS = [sys.executable, os.path.join(ROOT, "tests", "servers", "sdk_prompts.py")]
UNITS = [sys.executable, "-m", "decodeloop.servers.units"]
WIRES = ("2025-11-25", "2026-07-28")


def client(command, protocol, name="server", sent=None):
    def traffic(direction, message):
        if sent is not None and direction == "send":
            sent.append(message.get("method"))

    return McpClient.start_stdio(command, protocol=protocol, name=name, timeout=30, on_traffic=traffic)


@pytest.mark.parametrize("protocol", WIRES)
def test_the_weather_servers_prompts_are_listed_across_pages_got_and_completed(protocol):
    sent: list = []
    with client([*WEATHER, "--page-size", "1"], protocol, "weather", sent) as c:
        assert c.protocol_version == protocol and c.offers_prompts() and c.offers_completions()
        prompts = c.list_prompts()  # two pages of one
        assert sent.count("prompts/list") == 2
        assert [p.name for p in prompts] == ["weather_report", "what_to_wear"]
        assert [(a.name, a.required) for a in prompts[1].arguments] == [
            ("city", True),
            ("state", True),
            ("activity", False),
        ]
        got = c.get_prompt("weather_report", {"city": "Polson", "state": "mt"})
        assert [m.role for m in got.messages] == ["user", "user"]
        assert got.messages[0].content == {
            "type": "text",
            "text": "Write a short weather report for Polson, MT: today and the next two days.",
        }
        embedded = got.messages[1].content
        assert embedded["type"] == "resource" and embedded["resource"]["uri"] == "weather://forecast/MT/Polson"
        assert embedded["resource"]["text"] == get_forecast("Polson", "MT")[0]
        with pytest.raises(RpcError) as missing:
            c.get_prompt("weather_report", {"city": "Polson"})
        assert missing.value.code == -32602 and "state" in missing.value.message
        with pytest.raises(RpcError):
            c.get_prompt("no_such_prompt")
        assert c.complete(prompt_ref("weather_report"), "state", "m").values == [
            "MA",
            "MD",
            "ME",
            "MI",
            "MN",
            "MO",
            "MS",
            "MT",
        ]
        # the other arguments chosen are the completion's context
        assert c.complete(prompt_ref("what_to_wear"), "city", "", {"state": "TX"}).values == ["Austin"]
        assert c.complete(resource_ref("weather://forecast/{state}/{city}"), "state", "vt").values == ["VT"]
        assert c.complete(prompt_ref("weather_report"), "nothing", "x").values == []


@pytest.mark.parametrize("protocol", WIRES)
def test_a_python_sdk_servers_prompts_and_completion(protocol):
    with client(SDK_PROMPTS, protocol, "sdk") as c:
        prompts = c.list_prompts()
        assert [p.name for p in prompts] == ["trip", "greeting"]
        assert [(a.name, a.required) for a in prompts[0].arguments] == [("city", True), ("days", False)]
        got = c.get_prompt("trip", {"city": "Polson", "days": "2"})
        assert [(m.role, m.content["type"]) for m in got.messages] == [
            ("user", "text"),
            ("assistant", "text"),
            ("user", "resource"),
        ]
        assert got.messages[0].content["text"] == "Plan 2 days in Polson."
        assert got.messages[2].content["resource"]["text"] == "Notes on Polson: bring boots."
        assert c.get_prompt("greeting").messages[0].content["text"] == "Hello from the SDK."
        assert c.complete(prompt_ref("trip"), "city", "B", {"days": "2"}).values == ["Boise", "Bozeman", "Burlington"]
        with pytest.raises(RpcError):
            c.get_prompt("trip", {})  # the SDK refuses it too, in its own words


@pytest.mark.parametrize("protocol", WIRES)
def test_a_server_without_prompts_says_so_before_anything_is_sent(protocol):
    sent: list = []
    with client(UNITS, protocol, "units", sent) as c:
        assert not c.offers_prompts() and not c.offers_completions()
        with pytest.raises(Unsupported, match="units: the server offers no prompts"):
            c.list_prompts()
        with pytest.raises(Unsupported, match="no prompts"):
            c.get_prompt("anything")
        with pytest.raises(Unsupported, match="units: the server offers no completions"):
            c.complete(prompt_ref("anything"), "x", "")
    assert not {"prompts/list", "prompts/get", "completion/complete"} & set(sent)
