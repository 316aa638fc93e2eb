"""The stdio client against a misbehaving server: crashes, hangs, floods, garbage, stubbornness.

Each test runs tests/servers/faulty.py as a real child process and checks that
the failure reaches the caller as the right McpError and that the client never
deadlocks. No check bounds how long anything took: a failure that was not
noticed would end in the request timeout instead, whose error is not the one
expected, so the test fails without racing a clock on a busy machine.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from decodeloop.mcp import ConnectionClosed, McpClient, McpError, RequestTimeout, StdioTransport

FAULTY = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "faulty.py")]
TIMEOUT = 60  # the client's request timeout: a guard against a hang, never what a test waits for


class Faulty:
    """A client connected to a fresh faulty server, recording everything it reports."""

    def __init__(self, *flags: str, close_timeout: float = 0.3) -> None:
        self.stderr: list[str] = []
        self.logs: list[str] = []
        self.traffic: list[tuple[str, dict]] = []
        self.transport = StdioTransport([*FAULTY, *flags], on_stderr=self._on_stderr, close_timeout=close_timeout)
        self.client = McpClient(
            self.transport,
            name="faulty",
            timeout=TIMEOUT,
            on_traffic=lambda direction, message: self.traffic.append((direction, message)),
            log=self.logs.append,
        )
        self.client.initialize()

    def _on_stderr(self, line: str) -> None:
        self.stderr.append(line)


@pytest.fixture
def faulty():
    made: list[Faulty] = []

    def start(*flags: str, **kw) -> Faulty:
        made.append(Faulty(*flags, **kw))
        return made[-1]

    yield start
    for server in made:
        server.client.close()


def test_crash_mid_call_fails_the_call_at_once(faulty):
    server = faulty()
    # The call fails because the connection ended (ConnectionClosed with the exit code),
    # not because its timeout ran out (that would be RequestTimeout, after 60 s).
    with pytest.raises(ConnectionClosed) as excinfo:
        server.client.call_tool("crash", {})
    message = str(excinfo.value)
    assert message.startswith("faulty: server exited with code 3")
    assert server.transport.returncode == 3  # the server really exited, with the code the message gives
    assert "crashing at" in message  # the last stderr lines come along
    with pytest.raises(ConnectionClosed, match="code 3"):
        server.client.call_tool("echo", {"text": "anyone there?"})


def test_hang_times_out_and_cancels_the_request(faulty):
    server = faulty()
    started = time.monotonic()
    with pytest.raises(RequestTimeout, match="timed out after 0.5s"):
        server.client.call_tool("hang", {}, timeout=0.5)  # the server never answers
    assert time.monotonic() - started >= 0.5  # the timeout was waited out, not cut short
    call = next(m for d, m in server.traffic if d == "send" and m.get("params", {}).get("name") == "hang")
    cancels = [m for d, m in server.traffic if d == "send" and m.get("method") == "notifications/cancelled"]
    assert cancels == [
        {"jsonrpc": "2.0", "method": "notifications/cancelled",
         "params": {"requestId": call["id"], "reason": "timed out after 0.5s"}}
    ]


def test_stderr_flood_cannot_deadlock_the_pipe(faulty):
    server = faulty()
    # A full stderr pipe would block the server before it answers: the call would time out.
    result = server.client.call_tool("flood", {"megabytes": 20})
    assert result.text() == "done"
    assert server.client.call_tool("echo", {"text": "still here"}).text() == "still here"
    server.client.close()  # joins the drain, which may still hold the last pipeful
    flood_lines = [line for line in server.stderr if line.startswith("x")]
    assert len(flood_lines) == 20 * 1024


def test_a_20_megabyte_response_line_is_read_whole(faulty):
    server = faulty()
    result = server.client.call_tool("big", {"megabytes": 20})
    assert result.text() == "y" * (20 * 1024 * 1024)  # that it is read in linear work: test_http_faults.py
    assert server.client.call_tool("echo", {"text": "next"}).text() == "next"


def test_garbage_on_stdout_is_logged_and_the_session_goes_on(faulty):
    server = faulty()
    assert server.client.call_tool("garbage", {}).text() == "after garbage"
    assert any("not JSON-RPC: this line is not JSON" in line for line in server.logs), server.logs
    assert all(line.startswith("faulty: ") for line in server.logs)
    assert server.client.call_tool("echo", {"text": "hé\nthere"}).text() == "hé\nthere"


def test_concurrent_calls_each_get_their_own_answer(faulty):
    server = faulty()
    answers: dict[str, str] = {}

    def call(worker: int) -> None:
        for n in range(20):
            text = f"worker {worker} call {n} " + "z" * (worker * 5000)
            answers[text] = server.client.call_tool("echo", {"text": text}).text()

    threads = [threading.Thread(target=call, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)  # a guard against a hang; each call has its own timeout too
    assert len(answers) == 160
    assert all(text == answer for text, answer in answers.items())
    ids = [m["id"] for d, m in server.traffic if d == "send" and "id" in m]
    assert len(ids) == len(set(ids))


def test_close_of_a_well_behaved_server_needs_no_signal(faulty):
    server = faulty(close_timeout=TIMEOUT)  # time enough to exit however busy the machine
    server.client.close()
    # Exit code 0: it left on stdin EOF; had close() gone on to SIGTERM it would be -15.
    assert server.transport.returncode == 0
    server.client.close()  # idempotent


def test_close_terminates_a_server_that_ignores_stdin_eof(faulty):
    # close_timeout is also the time the server has to print its line after stdin EOF and to die after
    # SIGTERM: the default, 2 s, leaves room for a busy machine
    server = faulty("--ignore-eof", close_timeout=2.0)
    started = time.monotonic()
    server.client.close()
    assert time.monotonic() - started >= 2.0  # close_timeout was given to stdin EOF first
    assert server.transport.returncode == -signal.SIGTERM  # and SIGTERM ended it: no SIGKILL
    assert "stdin closed; staying up anyway" in server.transport.stderr_tail  # stdin was closed first


def test_close_kills_a_server_that_also_ignores_sigterm(faulty):
    server = faulty("--ignore-eof", "--ignore-term", close_timeout=0.3)
    started = time.monotonic()
    server.client.close()
    assert time.monotonic() - started >= 0.6  # close_timeout after stdin EOF, again after SIGTERM
    assert server.transport.returncode == -signal.SIGKILL


def test_a_missing_command_is_a_clean_error():
    with pytest.raises(ConnectionClosed) as excinfo:
        McpClient.start_stdio(["/nonexistent/decodeloop-weather-server"])
    assert "'/nonexistent/decodeloop-weather-server'" in str(excinfo.value)
    assert "not found" in str(excinfo.value)
    assert excinfo.value.__context__ is None and excinfo.value.__cause__ is None


def test_a_command_that_is_not_executable_is_a_clean_error(tmp_path):
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")
    os.chmod(script, 0o644)
    with pytest.raises(McpError, match="server.sh.*permission denied"):
        McpClient.start_stdio([str(script)])
