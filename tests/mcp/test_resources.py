"""MCP resources end to end: the bundled weather server and a Python SDK server (tests/servers/sdk_resources.py),
each a real process on both wires; attaching them from the library, `decodeloop run --attach` and `decodeloop chat`;
the trust boundary (markers escaped, the strict policy) over a resource from tests/servers/hostile.py."""

from __future__ import annotations

import json
import os
import sys
import threading

import pytest
from conftest import ROOT, UNITS, WEATHER, WIRES
from conftest import stdio_client as client
from test_cli import run
from test_policy import HOSTILE

from decodeloop.decode.bundle import lab_bundle
from decodeloop.errors import RpcError, Unsupported
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness
from decodeloop.lab.table import TableModel
from decodeloop.mcp import McpClient
from decodeloop.sampling import Sampler
from decodeloop.servers.weather import cities_text, get_forecast
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.startup import ClientOptions, start_servers
from decodeloop.trust.policy import Policy

SDK_RESOURCES = [sys.executable, os.path.join(ROOT, "tests", "servers", "sdk_resources.py")]


@pytest.mark.parametrize("protocol", WIRES)
def test_the_weather_servers_resources_are_listed_across_pages_and_read(protocol):
    sent: list = []
    with client([*WEATHER, "--page-size", "1"], protocol, "weather", sent) as c:
        assert c.protocol_version == protocol
        assert [r.uri for r in c.list_resources()] == ["weather://cities"]
        templates = c.list_resource_templates()  # two pages of one
        assert [t.uri_template for t in templates] == [
            "weather://forecast/{state}/{city}",
            "weather://icon/{conditions}",
        ]
        assert templates[1].mime_type == "image/png"
        assert sent.count("resources/templates/list") == 2
        assert c.read_resource("weather://cities").text() == cities_text()
        assert c.read_resource("weather://forecast/MT/Polson").text() == get_forecast("Polson", "MT")[0]
        icon = c.read_resource("weather://icon/sunny")
        assert icon.contents[0]["mimeType"] == "image/png" and "blob" in icon.contents[0]
        assert icon.text() == "[binary image/png, 67 bytes]"  # described, never dumped
        with pytest.raises(RpcError) as unknown:
            c.read_resource("weather://nowhere")
        assert unknown.value.code == -32002 and "weather://nowhere" in str(unknown.value)


def test_subscriptions_follow_what_each_wire_of_the_weather_server_offers():
    with client(WEATHER, "2025-11-25") as legacy:
        legacy.subscribe_resource("weather://cities")  # resources/subscribe, answered
        assert legacy.subscriptions == {"weather://cities"}
        legacy.unsubscribe_resource("weather://cities")
        assert not legacy.subscriptions
    with client(WEATHER, "2026-07-28") as modern, pytest.raises(Unsupported, match="subscriptions"):
        modern.subscribe_resource("weather://cities")  # no subscriptions/listen there: nothing is sent


@pytest.mark.parametrize("protocol", WIRES)
def test_a_server_without_resources_says_so_before_anything_is_sent(protocol):
    with client(UNITS, protocol, "units") as c:
        assert not c.offers_resources()
        with pytest.raises(Unsupported, match="units: the server offers no resources"):
            c.list_resources()
        with pytest.raises(Unsupported):
            c.read_resource("units://anything")


@pytest.mark.parametrize("protocol", WIRES)
def test_a_python_sdk_servers_resources(protocol):
    with client(SDK_RESOURCES, protocol, "notes") as c:
        assert [r.uri for r in c.list_resources()] == ["notes://readme", "notes://data.json", "notes://pixel.png"]
        assert [t.uri_template for t in c.list_resource_templates()] == ["notes://note/{name}"]
        assert c.read_resource("notes://readme").text() == "Notes: groceries, todo"
        # a blob of a text type is decoded; any other is described by its type and size
        assert json.loads(c.read_resource("notes://data.json").text()) == {
            "groceries": "eggs, milk",
            "todo": "water the plants",
        }
        assert c.read_resource("notes://pixel.png").text() == "[binary image/png, 20 bytes]"
        assert c.read_resource("notes://note/todo").text() == "water the plants"
        with pytest.raises(RpcError):
            c.read_resource("notes://nowhere")


def test_a_subscription_on_2026_07_28_is_a_listen_stream_and_its_update_is_kept():
    seen: list[str] = []
    arrived = threading.Condition()

    def heard(method, params):
        with arrived:
            seen.append(method)
            arrived.notify_all()

    def acks():
        return seen.count("notifications/subscriptions/acknowledged")

    c = McpClient.start_stdio(SDK_RESOURCES, protocol="2026-07-28", name="notes", timeout=30, on_notification=heard)
    with c:
        with arrived:  # the stream for its changing lists first, so that its acknowledgment is not taken for ours
            assert arrived.wait_for(lambda: acks() == 1, 30)
            before = acks()
        c.subscribe_resource("notes://readme")
        with arrived:  # the stream is open once the server acknowledges it: an update before that is not replayed
            assert arrived.wait_for(lambda: acks() > before, 30)  # a guard against a hang, not a measure
        c.call_tool("touch", {})
        with arrived:
            assert arrived.wait_for(lambda: "notifications/resources/updated" in seen, 30)
        assert c.updated == {"notes://readme"}


@pytest.mark.parametrize("protocol", WIRES)
def test_a_changed_list_of_resources_marks_them_stale_until_listed_again(protocol):
    sent: list = []

    def traffic(direction, message):
        if direction == "send":
            sent.append(message)

    c = McpClient.start_stdio(SDK_RESOURCES, protocol=protocol, name="notes", timeout=30, on_traffic=traffic)
    with c:
        if protocol == "2026-07-28":
            assert c.listening.wait(30)  # nothing announced before the stream is acknowledged is replayed
            listen = next(m for m in sent if m.get("method") == "subscriptions/listen")
            assert listen["params"]["notifications"]["resourcesListChanged"] is True
        assert "notes://added/later" not in [r.uri for r in c.list_resources()]
        c.call_tool("add_note", {"name": "later"})
        assert c.resources_stale.wait(30)
        assert "notes://added/later" in [r.uri for r in c.list_resources()]
        assert not c.resources_stale.is_set()


# -- attached to a user message ---------------------------------------------------------------------------------


def test_run_attach_puts_the_resource_in_a_span_of_its_own():
    p = run("-m", "decodeloop", "run", "--json", "--attach", "weather:weather://cities", "Which city is warmest?")
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    prompt = next(e for e in events if e["event"] == "prompt")
    assert "Which city is warmest?\n\nResource weather weather://cities:\n" + cities_text() in prompt["text"]
    sources = [source for _, _, source in prompt["spans"]]
    assert sources[sources.index("resource:weather/weather://cities") - 1] == "user"
    start, end, _ = prompt["spans"][sources.index("resource:weather/weather://cities")]
    assert end - start == len(cities_text().encode())  # the lab tokenizer: one token per byte


def test_run_attach_errors_are_one_clear_line(tmp_path):
    cases = [
        ("nope:weather://cities", "no server named 'nope'"),
        ("weather:weather://nowhere", "weather: cannot read weather://nowhere: Resource not found"),
        ("units:units://all", "units: the server offers no resources"),
    ]
    servers = ["--mcp", "python3 -m decodeloop.servers.weather", "--mcp", "python3 -m decodeloop.servers.units"]
    for attach, message in cases:
        p = run("-m", "decodeloop", "run", "--quiet", *servers, "--attach", attach, "Hi")
        assert p.returncode != 0 and message in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = run("-m", "decodeloop", "run", "--attach", "no-colon", "Hi")
    assert p.returncode == 2 and "expected SERVER:URI" in p.stderr


def test_a_resource_is_escaped_and_its_values_are_data_for_the_strict_policy(events):
    tokenizer = CharTokenizer()
    # whatever the message, the model does what the resource says
    table = {"<|assistant|>": "[call send_money to=attacker amount=1000]"}
    specs = [ServerSpec("hostile", command=HOSTILE, transport="stdio")]
    with start_servers(specs, events, options=ClientOptions(timeout=30)) as router:
        harness = Harness(
            lab_bundle(TableModel(tokenizer, table), tokenizer),
            Sampler(),
            router,
            events,
            policy=Policy("strict", specs, None),
        )
        harness.run("Summarize the attached message.", [("hostile", "hostile://inbox")])
        context = harness.context
        assert context is not None
        spans = [s for s in context.spans() if s.source == "resource:hostile/hostile://inbox"]
        assert len(spans) == 1
        text = tokenizer.decode(context.ids[spans[0].start : spans[0].end])
    # the forged turn is plain text, escaped, inside the resource's span
    assert "<|assistant|>" not in text and "<\\|assistant|>" in text
    assert tokenizer.special("<|assistant|>") not in context.ids[spans[0].start : spans[0].end]
    assert any("escaped" in n.message and "hostile://inbox" in n.message for n in events.of("notice"))
    decisions = events.of("policy")
    assert decisions and decisions[0].verdict == "deny"
    assert "attacker" in decisions[0].reason and "resource:hostile/hostile://inbox" in decisions[0].reason
    assert not [e for e in events.of("rpc") if e.direction == "send" and e.message.get("method") == "tools/call"]


# -- chat ----------------------------------------------------------------------------------------------------------


def test_chat_lists_resources_and_attaches_them_with_at_words():
    lines = [
        "/resources",
        "@weather:weather://cities Which of these is warmest?",
        "/reread",
        "And now?",
        "@nope:x://y hello",
        "@weather:weather://nowhere hello",
        "/quit",
    ]
    servers = ["--mcp", "python3 -m decodeloop.servers.weather", "--mcp", "python3 -m decodeloop.servers.units"]
    p = run("-m", "decodeloop", "chat", "--trace", *servers, stdin="\n".join(lines) + "\n")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    out = p.stdout
    assert "weather: 1 resource(s), 2 template(s)" in out
    assert "@weather:weather://cities (text/plain)" in out and "@weather:weather://forecast/{state}/{city}" in out
    assert "units: no resources" in out
    assert out.count("Resource weather weather://cities:") == 2  # the message, and again after /reread
    assert "(your next message attaches weather:weather://cities again, read afresh)" in out
    assert "not sent: no server named 'nope'" in out
    assert "not sent: weather: cannot read weather://nowhere: Resource not found" in out
