"""decodeloop's client against MCP servers no one here wrote, each a real process.

- @modelcontextprotocol/server-basic-vanillajs (npm, MCP Apps' own example): a tool with a page;
- @modelcontextprotocol/server-everything (npm, the reference server) over stdio,
  Streamable HTTP and legacy SSE: a 2025-11-25 server, found by the discover probe
  failing; its task-only tool is not offered;
- mcp-server-time (PyPI) over stdio, on both wires: 2026-07-28 (found by
  server/discover) and 2025-11-25 (pinned);
- a server written with the official Python SDK 2.3 (tests/servers/sdk_server.py)
  over stdio and Streamable HTTP on both wires, and legacy SSE;
- a Python SDK server whose tools take optional, list and pydantic-model arguments
  (tests/servers/sdk_arguments.py): the compact syntax's strings are converted
  through anyOf and $ref to what it accepts.

Every tool is listed; calls that return each content type are made and what
would enter the model's context is checked exactly. The npm package is installed
once per session under .cache/npm; if that fails the tests fail, unless
DECODELOOP_OFFLINE=1 says to skip them.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT, npm_package
from test_viewer import embedded

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.calls.compact import describe_tool
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.mcp import McpClient
from decodeloop.mcp.transports.http import StreamableHttpTransport
from decodeloop.mcp.transports.sse_legacy import SseLegacyTransport
from decodeloop.sampling import Sampler
from decodeloop.schema import ArgumentError, validate_arguments
from decodeloop.tools.config import load_config
from decodeloop.tools.dispatch import output_problem
from decodeloop.tools.startup import ClientOptions, start_servers
from decodeloop.trust.policy import Policy
from decodeloop.ui.html import MAX_STRING

EVERYTHING_VERSION = "2026.8.31"
SDK_SERVER = [sys.executable, os.path.join(ROOT, "tests", "servers", "sdk_server.py")]
SDK_ARGUMENTS = [sys.executable, os.path.join(ROOT, "tests", "servers", "sdk_arguments.py")]
EVERYTHING_TOOLS = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
}
SDK_TOOLS = ["echo", "tiny_image", "beep", "report_link", "embedded", "weather", "fail", "big", "count", "grow"]


@pytest.fixture(scope="session")
def everything() -> str:
    """The path of server-everything's entry point, installed with npm if it is not there yet."""
    return os.path.join(npm_package("@modelcontextprotocol/server-everything", EVERYTHING_VERSION), "dist", "index.js")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Process:
    """A server process listening on a port; stopped at the end of the test."""

    def __init__(self, argv: list[str], port: int, env: dict | None = None) -> None:
        self.proc = subprocess.Popen(
            argv, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{argv} did not start: {self.proc.stderr.read()[-2000:]!r}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(5)
        self.proc.stderr.close()


@pytest.fixture
def serve():
    started: list[Process] = []

    def start(argv: list[str], port: int, env: dict | None = None) -> None:
        started.append(Process(argv, port, env))

    yield start
    for process in started:
        process.stop()


def everything_client(everything: str, transport: str, serve, **kw) -> McpClient:
    if transport == "stdio":
        return McpClient.start_stdio(["node", everything, "stdio"], name="everything", timeout=30, **kw)
    port = free_port()
    serve(["node", everything, "streamableHttp" if transport == "http" else "sse"], port, {"PORT": str(port)})
    path = "/mcp" if transport == "http" else "/sse"
    return McpClient.connect_url(f"http://127.0.0.1:{port}{path}", name="everything", timeout=30, **kw)


def sdk_client(transport: str, serve, **kw) -> McpClient:
    if transport == "sse":
        kw.pop("protocol", None)  # legacy SSE speaks only the initialize revisions
    if transport == "stdio":
        return McpClient.start_stdio([*SDK_SERVER, "stdio"], name="sdk", timeout=30, **kw)
    port = free_port()
    serve([*SDK_SERVER, "streamable-http" if transport == "http" else "sse", str(port)], port)
    path = "/mcp" if transport == "http" else "/sse"
    return McpClient.connect_url(f"http://127.0.0.1:{port}{path}", name="sdk", timeout=30, **kw)


TRANSPORT_CLASS = {"http": StreamableHttpTransport, "sse": SseLegacyTransport}


@pytest.mark.parametrize("transport", ["stdio", "http", "sse"])
def test_server_everything(everything, serve, transport):
    notes: list[tuple[str, dict]] = []
    logs: list[str] = []
    statuses: list[tuple[str, dict]] = []
    with everything_client(
        everything,
        transport,
        serve,
        log=logs.append,
        on_notification=lambda method, params: notes.append((method, params)),
        on_task=lambda tool, task: statuses.append((tool, task)),
    ) as client:
        if transport != "stdio":
            assert isinstance(client.transport, TRANSPORT_CLASS[transport])  # auto found the right one
        assert client.protocol_version == "2025-11-25"
        assert client.server_info["name"] == "mcp-servers/everything"
        tools = {tool.name: tool for tool in client.list_tools()}
        assert set(tools) >= EVERYTHING_TOOLS
        # a tool that only runs as a task: called as one (the server offers tasks), polled to its end
        assert client.tasks_offered and "simulate-research-query" in tools
        report = client.call_tool("simulate-research-query", {"topic": "tides"})
        assert not report.is_error and "tides" in report.text(), report.text()
        [task_id] = {task["taskId"] for _, task in statuses}
        assert [task["status"] for _, task in statuses][-1] == "completed" and task_id
        assert {tool for tool, _ in statuses} == {"simulate-research-query"}

        assert client.call_tool("echo", {"message": "hé there"}).text() == "Echo: hé there"
        assert client.call_tool("get-sum", {"a": 2, "b": 40}).text() == "The sum of 2 and 40 is 42."
        image = client.call_tool("get-tiny-image", {})
        assert [item["type"] for item in image.content] == ["text", "image", "text"]
        assert "[image image/png, " in image.text() and image.content[1]["data"][:20] not in image.text()

        links = client.call_tool("get-resource-links", {"count": 2}).text().split("\n")
        assert links[1].startswith("[resource link ") and "demo://resource/dynamic/" in links[1]
        reference = client.call_tool("get-resource-reference", {"resourceType": "Text", "resourceId": 1}).text()
        assert "[resource demo://resource/dynamic/text/1 (text/plain)]\nResource 1: This is a plaintext" in reference
        blob_result = client.call_tool("get-resource-reference", {"resourceType": "Blob", "resourceId": 2})
        # the blob's text holds the server's local time, so its size is read from the blob itself
        data = next(item["resource"]["blob"] for item in blob_result.content if item.get("type") == "resource")
        size = len(base64.b64decode(data))
        blob = blob_result.text()
        assert f"[resource demo://resource/dynamic/blob/2 text/plain, {size} bytes]" in blob  # a blob: size, no base64
        assert data[:20] not in blob

        gzip = client.call_tool(
            "gzip-file-as-resource",
            {"name": "hi.txt.gz", "outputType": "resource", "data": "data:text/plain;base64,aGVsbG8gd29ybGQ="},
        )
        assert not gzip.is_error, gzip.text()
        assert gzip.text().startswith("[resource ") and " bytes]" in gzip.text()

        structured = client.call_tool("get-structured-content", {"location": "Chicago"})
        assert structured.structured == json.loads(structured.text())
        assert output_problem(tools["get-structured-content"], structured) is None  # its outputSchema holds

        annotated = client.call_tool("get-annotated-message", {"messageType": "error", "includeImage": True})
        assert annotated.text().startswith("Error: Operation failed") and "[image image/png," in annotated.text()

        long = client.call_tool("trigger-long-running-operation", {"duration": 0.3, "steps": 3})
        assert long.text().startswith("Long running operation completed")
        progress = [p for method, p in notes if method == "notifications/progress"]
        assert [(p["progress"], p["total"]) for p in progress] == [(1, 3), (2, 3), (3, 3)]

        wrong = client.call_tool("get-sum", {"a": "two", "b": 3})
        assert wrong.is_error and "a" in wrong.text()


def run_json(*args: str) -> list[dict]:
    """`decodeloop run --json ARGS` as a user types it (the lab's table model): its events."""
    p = subprocess.run(
        [sys.executable, "-m", "decodeloop", "run", "--json", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]


def test_the_table_model_gets_an_answer_from_server_everything_s_task_only_tool_through_run(everything):
    """`decodeloop run`, as a user types it: the research tool runs only as an MCP task; the harness follows
    it to its end, says each status, and the model answers from its report."""
    events = run_json("--mcp", f"node {everything} stdio", "Research the tides.")
    [call] = [e for e in events if e["event"] == "tool_call"]
    assert (call["name"], call["arguments"]) == ("simulate-research-query", {"topic": "tides"})
    tasks = [e for e in events if e["event"] == "task"]
    assert tasks[0]["status"] == "working" and tasks[-1]["status"] == "completed"
    assert [e["message"] for e in tasks[:4]] == [
        "Gathering sources...",
        "Analyzing content...",
        "Synthesizing findings...",
        "Generating report...",
    ]
    [result] = [e for e in events if e["event"] == "tool_result"]
    assert result["text"].startswith("# Research Report: tides") and not result["is_error"]
    done = events[-1]
    assert done["event"] == "done" and done["reason"] == "eos"
    assert done["answer"].startswith("The research on tides went through four stages")


def test_a_public_app_s_page_is_kept_whole_with_its_call_through_run(basic_app, tmp_path):
    """`decodeloop run --html`, as a user types it, against MCP Apps' own example server: the tool's page (its
    framework bundled in, ten times the viewer's cap on a string) is read once and kept whole with the call, in
    the JSON Lines and in the viewer's page; the model answers from the result, never from the page."""
    page = tmp_path / "clock.html"
    events = run_json("--html", str(page), "--mcp", " ".join(basic_app), "What time is it on the server?")
    [call] = [e for e in events if e["event"] == "tool_call"]
    assert (call["name"], call["arguments"]) == ("get-time", {})
    [result] = [e for e in events if e["event"] == "tool_result"]
    [app] = [e for e in events if e["event"] == "app"]
    assert (app["tool"], app["uri"]) == ("get-time", "ui://get-time/mcp-app.html")
    assert app["result"]["structuredContent"]["time"] == result["text"]
    with McpClient.start_stdio(basic_app, name="basic", timeout=30) as client:
        [served] = client.read_resource(app["uri"]).contents
    assert app["html"] == served["text"] and len(served["text"]) > 10 * MAX_STRING  # the whole program
    assert served["text"][:200] not in "".join(e.get("text", "") for e in events if e["event"] == "inject")
    done = events[-1]
    assert done["event"] == "done" and done["answer"] == "That is the server's clock, in UTC; its page shows it too."
    [shown] = [e for e in embedded(page.read_text(encoding="utf-8"))["events"] if e["event"] == "app"]
    assert shown["html"] == served["text"]


@pytest.mark.parametrize("protocol, wire", [("auto", "2026-07-28"), ("2025-11-25", "2025-11-25")])
def test_mcp_server_time(protocol, wire):
    sent: list[dict] = []
    with McpClient.start_stdio(
        [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
        name="time",
        timeout=30,
        protocol=protocol,
        on_traffic=lambda direction, message: sent.append(message),
    ) as client:
        assert client.protocol_version == wire
        assert ("initialize" in [m.get("method") for m in sent]) == (wire == "2025-11-25")
        tools = {tool.name: tool for tool in client.list_tools()}
        assert set(tools) == {"get_current_time", "convert_time"}
        assert "timezone" in tools["get_current_time"].input_schema["required"]
        now = client.call_tool("get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error and json.loads(now.text())["timezone"] == "Europe/Paris"
        converted = client.call_tool(
            "convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
        )
        assert json.loads(converted.text())["target"]["datetime"].endswith("21:00:00+09:00")
        bad = client.call_tool("get_current_time", {"timezone": "Mars/Olympus_Mons"})
        assert bad.is_error and "Mars/Olympus_Mons" in bad.text()


@pytest.mark.parametrize(
    "transport, protocol, wire",
    [
        ("stdio", "auto", "2026-07-28"),
        ("stdio", "2025-11-25", "2025-11-25"),
        ("http", "auto", "2026-07-28"),
        ("http", "2025-11-25", "2025-11-25"),
        ("sse", "auto", "2025-11-25"),
    ],
)
def test_python_sdk_server_every_content_type(serve, transport, protocol, wire):
    notes: list[tuple[str, dict]] = []
    with sdk_client(
        transport, serve, protocol=protocol, on_notification=lambda method, params: notes.append((method, params))
    ) as client:
        assert client.protocol_version == wire
        if transport == "http":  # the stateless wire keeps no session; the old one does
            assert (client.transport.session_id is None) == (wire == "2026-07-28")
        tools = {tool.name: tool for tool in client.list_tools()}
        assert list(tools) == SDK_TOOLS
        assert tools["weather"].output_schema["properties"]["temperature_c"]["type"] == "integer"

        def text(name, **arguments):
            result = client.call_tool(name, arguments)
            assert not result.is_error, result.text()
            return result.text()

        assert text("echo", text="hé") == "hé"
        assert text("tiny_image") == "[image image/png, 69 bytes]"
        assert text("beep") == "[audio audio/wav, 1644 bytes]"
        assert (
            text("report_link")
            == "[resource link report file:///reports/q3.pdf (application/pdf)] the third-quarter report"
        )
        assert text("embedded") == (
            "[resource file:///notes.txt (text/plain)]\nremember the milk\n"
            "[resource file:///data.bin application/octet-stream, 1024 bytes]"
        )
        weather = client.call_tool("weather", {"city": "Oslo"})
        assert weather.structured == {"city": "Oslo", "temperature_c": 12, "conditions": "clear"}
        assert output_problem(tools["weather"], weather) is None
        failed = client.call_tool("fail", {"reason": "testing"})
        assert failed.is_error and failed.text() == "Error executing tool fail: failed on purpose: testing"
        assert text("count", steps=3) == "counted to 3"
        assert [p["message"] for m, p in notes if m == "notifications/progress"] == ["step 1", "step 2", "step 3"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_changed_tools_are_heard_on_the_2026_wire_through_subscriptions_listen(serve, transport):
    notes: list[str] = []
    with sdk_client(transport, serve, on_notification=lambda method, params: notes.append(method)) as client:
        assert client.stateless and "grown" not in {tool.name for tool in client.list_tools()}
        # a change is heard once the stream is acknowledged; one made before that is not replayed
        assert client.listening.wait(30)  # a guard against a hang, not a measure
        assert client.call_tool("grow", {}).text() == "added grown"
        assert client.tools_stale.wait(30)
        assert "grown" in {tool.name for tool in client.list_tools()}  # not kept from before: listed again
    assert notes[:2] == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed"]


def test_several_servers_from_a_config_file_through_the_harness(everything, serve, tmp_path, events):
    port = free_port()
    serve(["node", everything, "streamableHttp"], port, {"PORT": str(port)})
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "everything": {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Client": "decodeloop"}},
                    "sdk": {"command": SDK_SERVER[0], "args": [SDK_SERVER[1], "stdio"]},
                    "time": {"type": "stdio", "command": sys.executable, "args": ["-m", "mcp_server_time"]},
                }
            }
        )
    )
    question = "Show me a tiny image."
    table = {
        "<|user|>" + question + "<|assistant|>": "[call sdk__echo text=hello]",
        "<|tool|>hello<|assistant|>": "[call tiny_image]",
        "<|tool|>[image image/png, 69 bytes]<|assistant|>": "[call count steps=2]",
        "<|tool|>counted to 2<|assistant|>": "[call weather city=Oslo]",
        "<|assistant|>": "Here it is.<|eos|>",
    }
    tokenizer = CharTokenizer()
    with start_servers(load_config(str(config)), events, options=ClientOptions(timeout=30)) as router:
        # echo is offered by two servers: the first configured keeps the name, the other is namespaced
        assert {"echo", "sdk__echo", "tiny_image", "get-sum", "get_current_time"} <= set(router.tools)
        assert router.routes["echo"].server == "everything" and "everything__echo" not in router.tools
        result = Harness(
            lab_bundle(TableModel(tokenizer, table), tokenizer),
            Sampler(),
            router,
            events,
            config=TurnConfig(max_tokens=400),
            policy=Policy.off(),
        ).run(question)
    assert [(c.name, c.server) for c in events.of("tool_call")] == [
        ("sdk__echo", "sdk"),
        ("tiny_image", "sdk"),
        ("count", "sdk"),
        ("weather", "sdk"),
    ]
    progress = [(e.tool, e.progress, e.total, e.message) for e in events.of("progress") if e.server == "sdk"]
    assert progress == [("count", 1, 2, "step 1"), ("count", 2, 2, "step 2")]  # events of the call they belong to
    results = events.of("tool_result")
    assert [r.text for r in results[:3]] == ["hello", "[image image/png, 69 bytes]", "counted to 2"]
    assert results[3].text.startswith("{") and not events.of("tool_error")  # structured, schema kept
    assert result.answer == "Here it is."
    assert {e.server for e in events.of("server")} == {"everything", "sdk", "time"}


def test_optional_list_and_model_arguments_reach_a_python_sdk_server_converted():
    sent: list[tuple[str, dict]] = []
    with McpClient.start_stdio(
        SDK_ARGUMENTS,
        name="sdk-arguments",
        timeout=30,
        on_traffic=lambda direction, message: sent.append((direction, message)),
    ) as client:
        tools = {tool.name: tool for tool in client.list_tools()}

        def call(name: str, **compact: str) -> tuple[dict, dict]:
            """Strings in, as the compact call syntax gives them; what was sent and what the server made of it."""
            arguments = validate_arguments(name, compact, tools[name].input_schema)
            result = client.call_tool(name, arguments)
            assert not result.is_error, result.text()
            return arguments, json.loads(result.text())

        # Optional[int], Optional[list[str]], Optional[bool], Optional[Literal]: anyOf with null
        arguments, got = call("search", query="cats", limit="5", tags='["a", "b"]', exact="true", mode="fast")
        assert arguments == {"query": "cats", "limit": 5, "tags": ["a", "b"], "exact": True, "mode": "fast"}
        assert got == {
            "query": ["cats", "str"],
            "limit": [5, "int"],
            "tags": [["a", "b"], "list"],
            "exact": [True, "bool"],
            "mode": ["fast", "str"],
        }
        arguments, got = call("search", query="null", limit="null")
        assert arguments == {"query": "null", "limit": None} and got["limit"] == [None, "NoneType"]
        # a pydantic model ($ref into $defs) and an optional list of them, written as JSON
        arguments, got = call("place", point='{"x": "3", "label": "origin"}', others='[{"x": 1, "y": 2.5}]')
        assert arguments == {"point": {"x": 3, "label": "origin"}, "others": [{"x": 1, "y": 2.5}]}
        assert got["point"] == [{"x": 3, "y": 0.0, "label": "origin"}, "Point"]
        assert got["others"] == [[{"x": 1, "y": 2.5, "label": None}], "list"]
        # an optional model inside which another model sits; float | int
        arguments, got = call("pack", box='{"corner": {"x": "7"}, "tags": ["red"]}', scale="2.5")
        assert arguments == {"box": {"corner": {"x": 7}, "tags": ["red"]}, "scale": 2.5}
        assert got == {
            "box": [{"corner": {"x": 7, "y": 0.0, "label": None}, "tags": ["red"]}, "Box"],
            "scale": [2.5, "float"],
        }

        # what is wrong is said before the server sees it, in the schema's own terms
        search, place = tools["search"].input_schema, tools["place"].input_schema
        with pytest.raises(ArgumentError, match='argument "limit" must be an integer or null, got "five"'):
            validate_arguments("search", {"query": "q", "limit": "five"}, search)
        with pytest.raises(ArgumentError, match='argument "tags" must be a JSON array or null, written like'):
            validate_arguments("search", {"query": "q", "tags": "a, b"}, search)
        with pytest.raises(ArgumentError, match='missing required argument "point.x" \\(integer\\)'):
            validate_arguments("place", {"point": '{"y": 1}'}, place)
        assert "limit (integer or null, optional, default null)" in describe_tool(tools["search"])
        assert "tags (JSON array of strings or null, optional" in describe_tool(tools["search"])
    # on the wire, typed: a server less lenient than this SDK (which parses JSON text itself) gets what it asked for
    [first] = [m["params"]["arguments"] for d, m in sent if d == "send" and m.get("method") == "tools/call"][:1]
    assert json.dumps(first) == '{"query": "cats", "limit": 5, "tags": ["a", "b"], "exact": true, "mode": "fast"}'
