"""MCP Tasks against a real server process that runs its tools as tasks (tests/servers/tasks.py), on both
wires: a call followed to its end, its status said on each change, failures and cancels as errors, a task
past its bound cancelled on the server, input asked mid-task answered, several tasks polled together, a
flood of status updates kept to a trickle, and an interrupted wait cancelling what still runs."""

from __future__ import annotations

import os
import sys
import threading

import pytest
from conftest import ROOT, WIRES

from decodeloop.errors import McpError, RequestTimeout
from decodeloop.mcp.client import McpClient
from decodeloop.mcp.tasks import REPORT_EVERY, RunningTask, TaskFailed, wait_all

TASKS = [sys.executable, os.path.join(ROOT, "tests", "servers", "tasks.py")]


class Server:
    """A client of the tasks server, with what it reported: each task status, the server's stderr."""

    def __init__(self, protocol: str, **kw) -> None:
        self.statuses: list[tuple[str, str, str | None]] = []  # (tool, status, message)
        self.stderr: list[str] = []
        self.client = McpClient.start_stdio(
            TASKS,
            name="tasks",
            timeout=20,
            protocol=protocol,
            on_task=lambda tool, task: self.statuses.append((tool, task["status"], task.get("statusMessage"))),
            on_stderr=self.stderr.append,
            **kw,
        )
        self.tools = {tool.name for tool in self.client.list_tools()}

    def of(self, tool: str) -> list[str]:
        return [status for name, status, _ in self.statuses if name == tool]

    def cancelled(self, tool: str) -> bool:
        """Whether the server heard the client cancel a task of `tool` (its stderr says so, a moment later)."""
        done = threading.Event()
        for _ in range(100):
            if any(line.startswith(f"cancelled by the client: {tool} ") for line in self.stderr):
                return True
            done.wait(0.05)
        return False


@pytest.fixture(params=WIRES)
def server(request):
    s = Server(request.param)
    yield s
    s.client.close()


def test_a_task_is_followed_to_its_end_and_its_status_said_on_each_change(server):
    assert server.client.tasks_offered and "slow" in server.tools
    result = server.client.call_tool("slow", {"seconds": 0.5})
    assert (result.is_error, result.text()) == (False, "slow: worked 0.5s")
    statuses = server.of("slow")
    assert statuses[0] == "working" and statuses[-1] == "completed" and statuses.count("completed") == 1
    messages = [m for tool, _, m in server.statuses if tool == "slow"]
    assert len(messages) == len(set(messages))  # said once per change, never twice the same


def test_an_optional_task_tool_and_a_plain_one(server):
    assert server.client.call_tool("quick", {"text": "hi"}).text() == "quick: hi"
    assert server.of("quick")[-1] == "completed"  # called as a task: the server offers them
    assert server.client.call_tool("plain", {"text": "hi"}).text() == "plain: hi"
    assert server.of("plain") == []  # forbidden: a plain call


def test_a_failed_task_is_the_error_it_failed_with(server):
    with pytest.raises(McpError, match="the task for failing failed: the job broke"):
        server.client.call_tool("failing", {})
    assert server.of("failing")[-1] == "failed"


def test_a_task_the_server_cancels_is_an_error(server):
    with pytest.raises(TaskFailed, match="the task for dropped was cancelled by the server"):
        server.client.call_tool("dropped", {})


def test_a_task_past_its_bound_is_cancelled_on_the_server_and_never_hangs(server):
    server.client.task_timeout = 0.5
    with pytest.raises(RequestTimeout, match=r"the task for forever did not finish in 0\.5s \(--task-timeout\)"):
        server.client.call_tool("forever", {})
    assert server.cancelled("forever")


@pytest.mark.parametrize("wire", WIRES)
def test_input_asked_mid_task_is_answered(wire):
    asked: list[dict] = []

    def answer(params: dict) -> dict:
        asked.append(params)
        return {"action": "accept", "content": {"answer": "yes"}}

    s = Server(wire, request_handlers={"elicitation/create": answer}, capabilities={"elicitation": {}})
    try:
        assert s.client.call_tool("ask", {"question": "Shall I?"}).text() == "ask: accept: yes"
        assert [p["message"] for p in asked] == ["Shall I?"]  # asked once, though polled many times
        assert "input_required" in s.of("ask") and s.of("ask")[-1] == "completed"
    finally:
        s.client.close()


def test_several_tasks_run_together(server):
    started = [server.client.start_tool("slow", {"seconds": 0.3}) for _ in range(3)]
    assert all(isinstance(task, RunningTask) for task in started)
    assert len({task.task_id for task in started}) == 3
    wait_all(started)
    assert [server.client.task_result(task).text() for task in started] == ["slow: worked 0.3s"] * 3
    statuses = server.of("slow")
    # all three were working before any completed: the server ran them at once
    assert statuses.index("completed") >= 3 and statuses.count("completed") == 3


def test_a_flood_of_status_updates_is_said_as_a_trickle(server):
    assert server.client.call_tool("flood", {"count": 3000}).text() == "flood: done"
    said = server.of("flood")
    assert said[-1] == "completed" and len(said) < 3000 / 10  # each change of message at most every REPORT_EVERY
    assert REPORT_EVERY > 0


def test_an_interrupted_wait_cancels_every_task_still_running(server):
    stop = threading.Event()
    started = [server.client.start_tool("forever", {}) for _ in range(2)]
    quick = server.client.start_tool("quick", {"text": "x"})
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        wait_all([*started, quick], stop)
    assert all(isinstance(task.failure, TaskFailed) for task in started)
    assert server.cancelled("forever")
    assert sum(line.startswith("cancelled by the client: forever ") for line in server.stderr) == 2
    assert server.client.task_result(quick).text() == "quick: x"  # done before the interrupt: kept


def test_tasks_over_streamable_http_on_the_2026_wire_name_the_task_in_their_headers():
    from conftest import HttpServer

    server = HttpServer("--http", command=TASKS)
    try:
        answered = lambda params: {"action": "accept", "content": {"answer": "over HTTP"}}  # noqa: E731
        statuses: list[str] = []
        with McpClient.connect_url(
            server.url + "/mcp",
            name="tasks",
            timeout=20,
            protocol="2026-07-28",
            request_handlers={"elicitation/create": answered},
            capabilities={"elicitation": {}},
            on_task=lambda tool, task: statuses.append(task["status"]),
        ) as client:
            assert client.tasks_offered
            assert client.call_tool("slow", {"seconds": 0.3}).text() == "slow: worked 0.3s"
            assert client.call_tool("ask", {"question": "HTTP?"}).text() == "ask: accept: over HTTP"
            client.task_timeout = 0.3
            with pytest.raises(RequestTimeout, match="did not finish in 0.3s"):
                client.call_tool("forever", {})
        assert statuses[0] == "working" and "input_required" in statuses
        seen = server.seen()
        tasks = [r for r in seen if r["method"].startswith("tasks/")]
        assert {r["method"] for r in tasks} == {"tasks/get", "tasks/update", "tasks/cancel"}
        assert all(r["Mcp-Method"] == r["method"] and r["Mcp-Name"].startswith("task-") for r in tasks)
    finally:
        server.stop()
