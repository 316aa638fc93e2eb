"""Roots, server log levels and progress, against a real server process on both wires."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from decodeloop.errors import ConfigError
from decodeloop.events import Notice, Progress
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.startup import ClientOptions, start_servers
from decodeloop.ui.jsonl import JsonlView
from decodeloop.ui.trace import TraceView

SERVER = [sys.executable, os.path.join(ROOT, "tests", "servers", "roots_logging.py")]
WIRES = ["2026-07-28", "2025-11-25"]
META = "io.modelcontextprotocol/"


def start(events, protocol, **options):
    spec = ServerSpec(name="rl", command=SERVER, transport="stdio")
    return start_servers([spec], events, ClientOptions(**{"timeout": 30, "protocol": protocol, **options}))


def answer(router, tool: str):
    return json.loads(router.call(tool, {}).text())


def as_root(path) -> dict:
    path = Path(os.path.abspath(path))
    return {"uri": path.as_uri(), "name": path.name}


@pytest.mark.parametrize("protocol", WIRES)
def test_the_working_directory_is_the_default_root(events, protocol, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with start(events, protocol) as router:
        assert router.clients["rl"].protocol_version == protocol
        assert answer(router, "roots") == {"roots": [as_root(tmp_path)]}
        assert answer(router, "roots") == {"roots": [as_root(tmp_path)]}  # asked twice, said once
        capabilities = answer(router, "state")["capabilities"]
    said = [e.message for e in events.of("notice") if "deprecates" in e.message]
    assert said == (
        ["uses roots (roots/list), which MCP 2026-07-28 deprecates in favour of input requests (it still works)"]
        if protocol == "2026-07-28"
        else []
    )
    # 2026-07-28 has no roots/list_changed, so it is not promised there
    assert capabilities["roots"] == ({} if protocol == "2026-07-28" else {"listChanged": True})


@pytest.mark.parametrize("protocol", WIRES)
def test_roots_given_replace_the_default_and_a_change_is_announced_where_the_wire_can(events, protocol, tmp_path):
    first, second = tmp_path / "first dir", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    with start(events, protocol, roots=[str(first), str(second)]) as router:
        assert answer(router, "roots") == {"roots": [as_root(first), as_root(second)]}
        router.set_roots([str(second)])
        assert answer(router, "roots") == {"roots": [as_root(second)]}  # asked again: the new list
        seen = answer(router, "state")["list_changed"]
    assert seen == (0 if protocol == "2026-07-28" else 1)
    assert as_root(first)["uri"].endswith("/first%20dir")


@pytest.mark.parametrize("protocol", WIRES)
def test_no_roots_declares_no_capability_and_refuses_roots_list(events, protocol):
    with start(events, protocol, roots=[]) as router:
        assert "roots" not in answer(router, "state")["capabilities"]
        result = router.call("roots", {}) if protocol == "2025-11-25" else None
        if result is not None:  # the session answers an unknown request with "method not found"
            assert json.loads(result.text())["code"] == -32601
        else:
            with pytest.raises(Exception, match="roots/list"):
                router.call("roots", {})
        with pytest.raises(ValueError, match="no roots were offered"):
            router.clients["rl"].set_roots([])


def test_a_root_that_does_not_exist_is_a_config_error_before_anything_starts(events, tmp_path):
    with pytest.raises(ConfigError, match="no such file or directory"):
        start(events, "auto", roots=[str(tmp_path / "missing")])
    assert events == []


@pytest.mark.parametrize("protocol", WIRES)
def test_each_server_sees_the_roots_its_config_entry_names(events, protocol, tmp_path):
    from decodeloop.tools.config import load_config

    for name in ("alpha", "beta", "everyone", "later"):
        (tmp_path / name).mkdir()
    config = tmp_path / "mcp.json"
    command = {"command": SERVER[0], "args": SERVER[1:], "protocolVersion": protocol}
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "a": {**command, "roots": ["alpha"]},  # relative: from the file's folder
                    "b": {**command, "roots": [str(tmp_path / "beta"), "alpha"]},
                    "none": {**command, "roots": []},
                    "global": command,
                }
            }
        )
    )
    specs = load_config(str(config))
    with start_servers(specs, events, options=ClientOptions(timeout=30, roots=[str(tmp_path / "everyone")])) as router:
        assert answer(router, "roots") == {"roots": [as_root(tmp_path / "alpha")]}
        assert answer(router, "b__roots") == {"roots": [as_root(tmp_path / "beta"), as_root(tmp_path / "alpha")]}
        assert answer(router, "global__roots") == {"roots": [as_root(tmp_path / "everyone")]}
        assert "roots" not in answer(router, "none__state")["capabilities"]
        assert "roots" in answer(router, "global__state")["capabilities"]
        router.set_roots([str(tmp_path / "later")])  # the global roots change; a server's own stay
        assert answer(router, "global__roots") == {"roots": [as_root(tmp_path / "later")]}
        assert answer(router, "roots") == {"roots": [as_root(tmp_path / "alpha")]}


def test_a_servers_own_root_that_does_not_exist_is_a_config_error_naming_it_before_anything_starts(events, tmp_path):
    specs = [
        ServerSpec(name="fine", command=SERVER, transport="stdio"),
        ServerSpec(name="rl", command=SERVER, transport="stdio", roots=(str(tmp_path / "gone"),)),
    ]
    with pytest.raises(ConfigError, match="server 'rl': root '.*gone': no such file or directory"):
        start_servers(specs, events, options=ClientOptions(timeout=30))
    assert events == []


@pytest.mark.parametrize("protocol", WIRES)
def test_the_log_level_reaches_the_server_and_its_messages_are_notices(events, protocol):
    with start(events, protocol, log_level="error") as router:
        assert router.call("log", {}).text() == "logged from error"
        levels = answer(router, "state")["levels"]
    assert levels == ([] if protocol == "2026-07-28" else ["error"])
    logs = [e.message for e in events.of("notice") if e.message.startswith("log ")]
    assert logs == ["log error: {'message': 'at error'}", "log critical: at critical", "log alert: at alert"] + [
        "log emergency: at emergency"
    ]
    # 2026-07-28 deprecates logging (and roots, and sampling): said once, and the messages still come
    deprecated = [e.message for e in events.of("notice") if "deprecates" in e.message]
    assert deprecated == (
        [
            "uses logging (notifications/message), which MCP 2026-07-28 deprecates in favour of input requests "
            "(it still works)"
        ]
        if protocol == "2026-07-28"
        else []
    )


@pytest.mark.parametrize("protocol", WIRES)
def test_without_a_log_level_nothing_is_asked_for(events, protocol):
    with start(events, protocol) as router:
        text = router.call("log", {}).text()
        levels = answer(router, "state")["levels"]
    assert levels == []
    # 2026-07-28: a request without logLevel gets no log messages; the older server keeps its own default
    assert text == ("logged from None" if protocol == "2026-07-28" else "logged from debug")
    assert any(e.message == "log debug: at debug" for e in events.of("notice")) == (protocol == "2025-11-25")


@pytest.mark.parametrize("protocol", WIRES)
def test_progress_is_an_event_of_its_call_in_the_trace_and_the_json_lines(events, protocol):
    with start(events, protocol) as router:
        assert router.call("slow", {}).text() == "done"
    progress = events.of("progress")
    assert [(e.server, e.tool, e.progress, e.total) for e in progress] == [("rl", "slow", n, 3) for n in (1, 2, 3)]
    assert [e.message for e in progress] == ["starting", "half\x1b[31m way", None]
    trace = io.StringIO()
    view = TraceView(trace, color=False)
    jsonl = io.StringIO()
    lines = JsonlView(jsonl)
    for event in progress:
        view(event)
        lines(event)
    assert trace.getvalue().splitlines() == [
        "· rl/slow: progress 1/3: starting",
        "· rl/slow: progress 2/3: half\\x1b[31m way",  # the server's escape is shown, never run
        "· rl/slow: progress 3/3",
    ]
    rows = [json.loads(line) for line in jsonl.getvalue().splitlines()]
    assert rows[1] == {
        "event": "progress",
        "server": "rl",
        "tool": "slow",
        "progress": 2,
        "total": 3,
        "message": "half\x1b[31m way",
    }
    assert "\\u001b" in jsonl.getvalue().splitlines()[1]


def test_progress_text_is_capped_and_a_malformed_one_is_a_notice():
    from decodeloop.tools.startup import MAX_NOTICE_CHARS, progress_event

    long = progress_event("s", "t", {"progressToken": 1, "progress": 1, "message": "x" * 10_000})
    assert isinstance(long, Progress) and long.message is not None
    assert len(long.message) < MAX_NOTICE_CHARS + 200 and "truncated" in long.message
    odd = progress_event("s", "t", {"progressToken": 1, "progress": "half"})
    assert isinstance(odd, Notice) and odd.message.startswith("progress half")


def _first_request(jsonl: str, method: str) -> dict:
    for line in jsonl.splitlines():
        event = json.loads(line)
        if event["event"] == "rpc" and event["message"].get("method") == method:
            return event["message"]
    raise AssertionError(f"no {method} request in the JSON Lines")


@pytest.mark.parametrize("protocol", WIRES)
def test_the_command_line_offers_roots_and_asks_for_a_log_level(protocol, tmp_path):
    from test_cli import run

    server = " ".join(SERVER)
    common = ["-m", "decodeloop", "run", "--json", "--mcp", server, "--mcp-protocol", protocol, "hi"]
    p = run(*common[:-1], "--root", str(tmp_path), "--server-log-level", "warning", "hi", no_site=False)
    assert p.returncode == 0, p.stderr
    # run offers sampling and elicitation (each denied or declined without a terminal)
    apps = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}  # MCP Apps, shown by pages
    asks = {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "extensions": apps}
    if protocol == "2025-11-25":
        assert _first_request(p.stdout, "initialize")["params"]["capabilities"] == {
            "roots": {"listChanged": True},
            **asks,
        }
        assert _first_request(p.stdout, "logging/setLevel")["params"] == {"level": "warning"}
    else:
        meta = _first_request(p.stdout, "tools/list")["params"]["_meta"]
        assert meta[META + "clientCapabilities"] == {"roots": {}, **asks}
        assert meta[META + "logLevel"] == "warning"
    bare = run(*common[:-1], "--no-roots", "hi", no_site=False)
    assert bare.returncode == 0, bare.stderr
    assert "logLevel" not in bare.stdout and "logging/setLevel" not in bare.stdout
    if protocol == "2025-11-25":
        assert _first_request(bare.stdout, "initialize")["params"]["capabilities"] == asks
    else:
        assert _first_request(bare.stdout, "tools/list")["params"]["_meta"][META + "clientCapabilities"] == asks
    missing = run(*common[:-1], "--root", str(tmp_path / "missing"), "hi", no_site=False)
    assert (
        missing.returncode == 2 and "--root: root " in missing.stderr and "no such file or directory" in missing.stderr
    )
    both = run(*common[:-1], "--root", str(tmp_path), "--no-roots", "hi", no_site=False)
    assert both.returncode == 2 and "not allowed with" in both.stderr


# -- against a server written with the official Python SDK ---------------------------------------------------------

SDK_SERVER = [sys.executable, os.path.join(ROOT, "tests", "servers", "sdk_roots_logging.py")]


def start_sdk(events, protocol, **options):
    spec = ServerSpec(name="sdk", command=SDK_SERVER, transport="stdio", protocol=protocol)
    return start_servers([spec], events, ClientOptions(**{"timeout": 30, **options}))


class Logs:
    """The log messages of a server, as they arrive, with a way to wait for one."""

    def __init__(self) -> None:
        import threading

        self.messages: list[dict] = []
        self.arrived = threading.Condition()

    def __call__(self, method: str, params: dict) -> None:
        if method == "notifications/message":
            with self.arrived:
                self.messages.append(params)
                self.arrived.notify_all()

    def wait_for(self, data: str) -> list[str]:
        """The levels heard so far, once a message with `data` has arrived (a guard, not a measure)."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: any(m.get("data") == data for m in self.messages), 30)
            levels = [m["level"] for m in self.messages]
            self.messages.clear()
            return levels


@pytest.mark.parametrize("protocol", WIRES)
def test_a_python_sdk_server_gets_the_roots_offered(events, protocol, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second dir"
    first.mkdir()
    second.mkdir()
    with start_sdk(events, protocol, roots=[str(first), str(second)]) as router:
        assert router.clients["sdk"].protocol_version == protocol
        assert json.loads(router.call("roots", {}).text()) == [as_root(first), as_root(second)]
        router.set_roots([str(second)])
        assert json.loads(router.call("roots", {}).text()) == [as_root(second)]
    with start_sdk(events, protocol, roots=[]) as router:  # no roots capability: the SDK refuses to ask
        with pytest.raises(Exception, match="did not declare the roots capability"):
            router.call("roots", {})


@pytest.mark.parametrize("protocol", WIRES)
def test_a_python_sdk_server_sends_the_log_levels_asked_for(protocol):
    from decodeloop.mcp import McpClient

    logs = Logs()
    c = McpClient.start_stdio(
        SDK_SERVER, protocol=protocol, name="sdk", timeout=30, on_notification=logs, log_level="warning"
    )
    with c:
        assert "logging" in c.capabilities
        assert c.call_tool("log", {}).text() == "logged"
        assert logs.wait_for("at emergency") == ["warning", "error", "critical", "alert", "emergency"]
        c.set_log_level("critical")
        assert c.call_tool("log", {}).text() == "logged"
        assert logs.wait_for("at emergency") == ["critical", "alert", "emergency"]
        levels = json.loads(c.call_tool("state", {}).text())["levels"]
    # 2025-11-25: logging/setLevel, each time; 2026-07-28 has none: the level rides each request's _meta
    assert levels == ([] if protocol == "2026-07-28" else ["warning", "critical"])


@pytest.mark.parametrize("protocol", WIRES)
def test_without_a_log_level_a_python_sdk_server_sends_what_its_wire_says(protocol):
    from decodeloop.mcp import McpClient

    logs = Logs()
    with McpClient.start_stdio(SDK_SERVER, protocol=protocol, name="sdk", timeout=30, on_notification=logs) as c:
        assert c.call_tool("log", {}).text() == "logged"
        c.call_tool("state", {})  # answered after anything the log call sent, on the same stream
        with logs.arrived:
            heard = [m["level"] for m in logs.messages]
    # 2026-07-28: a request without logLevel gets none; on the handshake wire the server's default is every level
    assert heard == (
        []
        if protocol == "2026-07-28"
        else ["debug", "info", "notice", "warning", "error"] + ["critical", "alert", "emergency"]
    )
