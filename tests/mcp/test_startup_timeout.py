"""One timeout covers a server's whole start-up: the server/discover probe, initialize and the first tools/list.

Real silent servers (tests/servers/silent.py: on stdio, and over HTTP a server
that accepts every request and never answers) record each method they
receive. A server that says nothing fails in one timeout, not one per request,
and the error names every request that went unanswered and the total; on the
legacy SSE transport the stream's headers and endpoint are waited for within it. The
checks are on what each request was given (McpClient.startup.given), what the
server received and the error's text, never on how long anything took.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from conftest import ROOT, WEATHER

from decodeloop.errors import RequestTimeout, TransportError
from decodeloop.mcp import McpClient, StdioTransport
from decodeloop.mcp import client as mcp_client
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.startup import ClientOptions, start_servers

SILENT = os.path.join(ROOT, "tests", "servers", "silent.py")
TIMEOUT = 2.0
GUARD = 60  # seconds: only keeps a client that waits far longer than TIMEOUT from hanging the suite
WHOLE = "the timeout for a server's whole start-up"


def received(log) -> list[str]:
    """The requests the server received (the cancellations after each timeout left out)."""
    return [m for m in log.read_text().split() if not m.startswith("notifications/")] if log.exists() else []


def test_a_silent_stdio_server_fails_in_one_timeout_and_the_probe_keeps_to_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(mcp_client, "DISCOVER_PROBE_TIMEOUT", 0.25)  # the limit, small: under half of TIMEOUT
    log = tmp_path / "received"
    client = McpClient(StdioTransport([sys.executable, SILENT, str(log)]), name="silent", timeout=TIMEOUT)
    with pytest.raises(RequestTimeout) as excinfo:
        client.start()
    assert str(excinfo.value) == f"silent: no answer to server/discover or initialize in {TIMEOUT:g}s, {WHOLE}"
    (probe, probe_given), (handshake, handshake_given) = client.startup.given
    assert (probe, probe_given) == ("server/discover", 0.25)  # the probe's limit applies on a pipe
    # initialize was given what the probe left of the one timeout, not a timeout of its own
    assert handshake == "initialize" and 0 < handshake_given <= TIMEOUT - probe_given
    assert received(log) == ["server/discover", "initialize"]


def test_on_a_pipe_the_probe_takes_at_most_half_of_what_is_left(tmp_path):
    log = tmp_path / "received"
    client = McpClient(StdioTransport([sys.executable, SILENT, str(log)]), name="silent", timeout=TIMEOUT)
    with pytest.raises(RequestTimeout, match="no answer to server/discover or initialize"):
        client.start()
    (_, probe_given), (_, handshake_given) = client.startup.given
    assert 0 < probe_given <= TIMEOUT / 2 < mcp_client.DISCOVER_PROBE_TIMEOUT
    assert handshake_given <= TIMEOUT - probe_given


def test_a_silent_http_server_fails_in_one_timeout_and_initialize_is_not_sent_without_time(tmp_path):
    log = tmp_path / "received"
    server = subprocess.Popen([sys.executable, SILENT, str(log), "--http"], stdout=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{int(server.stdout.readline())}/mcp"
        with pytest.raises(RequestTimeout) as excinfo:
            McpClient.connect_url(url, name="silent", timeout=TIMEOUT)
        assert str(excinfo.value) == f"silent: no answer to server/discover or initialize in {TIMEOUT:g}s, {WHOLE}"
    finally:
        server.terminate()
        server.wait(10)
    # over HTTP the probe may take all that is left (a server answers or refuses); initialize had nothing left
    assert received(log) == ["server/discover"]


def test_the_first_tools_list_waits_within_the_start_ups_timeout(tmp_path, events):
    log = tmp_path / "received"
    spec = ServerSpec(name="mute", command=[sys.executable, SILENT, str(log), "--answers", "initialize"])
    with pytest.raises(RequestTimeout) as excinfo:
        start_servers([spec], events, options=ClientOptions(timeout=TIMEOUT))
    assert str(excinfo.value) == f"mute: no answer to server/discover or tools/list in {TIMEOUT:g}s, {WHOLE}"
    assert received(log) == ["server/discover", "initialize", "tools/list"]


def test_a_silent_server_on_the_legacy_sse_transport_fails_within_the_start_ups_timeout(tmp_path):
    # the stream's headers were waited for as long as an idle stream may last (an hour): run it on a
    # thread, so a client that waits that long fails the test at the guard instead of hanging the suite
    log = tmp_path / "received"
    server = subprocess.Popen([sys.executable, SILENT, str(log), "--http"], stdout=subprocess.PIPE, text=True)
    outcome: list[BaseException] = []

    def connect() -> None:
        try:
            McpClient.connect_url(url, transport="sse", name="silent", timeout=TIMEOUT)
        except BaseException as exc:
            outcome.append(exc)

    try:
        url = f"http://127.0.0.1:{int(server.stdout.readline())}/sse"
        thread = threading.Thread(target=connect, daemon=True)
        thread.start()
        thread.join(GUARD)
        assert not thread.is_alive(), "the client was still waiting for the stream's headers"
    finally:
        server.terminate()
        server.wait(10)
    assert [type(exc) for exc in outcome] == [TransportError]
    assert str(outcome[0]) == f"silent: {url}: no answer within the timeout (timed out)"


def test_a_client_without_a_timeout_starts_as_before_and_the_probe_on_a_pipe_keeps_its_limit(
    tmp_path, monkeypatch, http_server
):
    # timeout=None waits as long as a server takes: the start-up has no limit, save the pipe probe's own
    with McpClient.start_stdio(WEATHER, name="weather", timeout=None) as client:
        assert client.startup.given == [("server/discover", mcp_client.DISCOVER_PROBE_TIMEOUT)]
        assert {tool.name for tool in client.list_tools(client.startup)} == {"get_weather", "get_forecast"}
    monkeypatch.setattr(mcp_client, "DISCOVER_PROBE_TIMEOUT", 0.25)  # a legacy server on a pipe ignores the probe
    log = tmp_path / "received"
    with McpClient.start_stdio(
        [sys.executable, SILENT, str(log), "--answers", "initialize"], name="mute", timeout=None
    ) as client:
        assert client.startup.given == [("server/discover", 0.25), ("initialize", None)]
        assert client.protocol_version == "2025-11-25"
    with McpClient.connect_url(http_server().url + "/mcp", name="http", timeout=None) as client:
        assert client.startup.given == [("server/discover", None), ("initialize", None)]
        assert client.call_tool("echo", {"text": "hi"}).text() == "hi"


def test_a_server_slow_to_answer_the_probe_is_asked_again_when_it_refuses_the_handshake(monkeypatch):
    # the probe on a pipe gives up early (here after 0.5 s); the server answers it at 1.5 s and then refuses
    # initialize as a 2026-07-28 server does: that refusal says which wire it speaks, so it is asked again
    import decodeloop.mcp.client as client_module

    monkeypatch.setattr(client_module, "DISCOVER_PROBE_TIMEOUT", 0.5)
    slow = [sys.executable, os.path.join(ROOT, "tests", "servers", "slow_discover.py"), "1.5"]
    lines: list[str] = []
    with McpClient.start_stdio(slow, name="slow", timeout=30, log=lines.append) as client:
        assert client.protocol_version == "2026-07-28"
        assert [m for m, _ in client.startup.given] == ["server/discover", "initialize", "server/discover"]
        assert client.call_tool("get_weather", {"city": "Polson", "state": "MT"}).text().startswith("Polson, MT:")
    assert any("asking server/discover again" in line for line in lines)
