"""The stdio client against a misbehaving server: crashes, hangs, floods, garbage, stubbornness.

Each test runs tests/servers/faulty.py as a real child process and checks that
the failure reaches the caller as the right McpError and that the client never
deadlocks. No check bounds how long anything took: a failure that was not
noticed would end in the request timeout instead, whose error is not the one
expected, so the test fails without racing a clock on a busy machine.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import tracemalloc

import pytest
from conftest import FAULTY

from decodeloop.errors import ConnectionClosed, McpError, ProtocolError, RequestTimeout
from decodeloop.mcp import McpClient, StdioTransport
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.startup import ClientOptions, start_servers, stdio_specs

TIMEOUT = 60  # the client's request timeout: a guard against a hang, never what a test waits for


class Faulty:
    """A client connected to a fresh faulty server, recording everything it reports."""

    def __init__(
        self, *flags: str, close_timeout: float = 0.3, max_message_bytes: int | None = None, **client_options
    ) -> None:
        flags = ("--wire-faults", *flags)  # the tools that break the wire too
        self.stderr: list[str] = []
        self.logs: list[str] = []
        self.traffic: list[tuple[str, dict]] = []
        self.transport = StdioTransport(
            [*FAULTY, *flags],
            on_stderr=self._on_stderr,
            close_timeout=close_timeout,
            **({"max_message_bytes": max_message_bytes} if max_message_bytes else {}),
        )
        self.client = McpClient(
            self.transport,
            name="faulty",
            timeout=TIMEOUT,
            on_traffic=lambda direction, message: self.traffic.append((direction, message)),
            log=self.logs.append,
            **client_options,
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
    with pytest.raises(RequestTimeout, match="timed out after 0.5s"):
        server.client.call_tool("hang", {}, timeout=0.5)  # the server never answers
    call = next(m for d, m in server.traffic if d == "send" and m.get("params", {}).get("name") == "hang")
    cancels = [m for d, m in server.traffic if d == "send" and m.get("method") == "notifications/cancelled"]
    assert cancels == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call["id"], "reason": "timed out after 0.5s"},
        }
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
    assert any(
        "skipped a message from the server: not JSON (Expecting value at character 0): this line is not JSON" in line
        for line in server.logs
    ), server.logs
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
    server.client.close()
    assert server.transport.returncode == -signal.SIGTERM  # SIGTERM ended it: no SIGKILL
    assert "stdin closed; staying up anyway" in server.transport.stderr_tail  # stdin was closed first


def test_close_kills_a_server_that_also_ignores_sigterm(faulty):
    server = faulty("--ignore-eof", "--ignore-term", close_timeout=0.3)
    server.client.close()
    assert server.transport.returncode == -signal.SIGKILL  # after stdin EOF and SIGTERM were ignored


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


def wait_for(condition, what: str, guard: float = TIMEOUT):
    """Poll until `condition()` is true; the guard only keeps a broken client from hanging the suite."""
    deadline = time.monotonic() + guard
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def gone(pid: int) -> bool:
    """Whether a process has ended (a zombie nobody reaped yet counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def last_call_id(server: Faulty) -> int:
    return [m for d, m in server.traffic if d == "send" and m.get("method") == "tools/call"][-1]["id"]


# -- one message: a cap, bounded memory, and what cannot be read -----------------------------------

MB = 1 << 20


class PeakMemory:
    """tracemalloc's peak over a block, above what was allocated when it began."""

    def __enter__(self) -> PeakMemory:
        self._was_tracing = tracemalloc.is_tracing()
        if not self._was_tracing:
            tracemalloc.start()
        tracemalloc.reset_peak()
        self._base = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc) -> None:
        self.peak = tracemalloc.get_traced_memory()[1] - self._base
        if not self._was_tracing:
            tracemalloc.stop()


def test_a_20_megabyte_result_peaks_at_about_twice_its_size(faulty):
    # bytes, text and parsed result never all at once: the bytes go before the parse (it was 4 times the size)
    server = faulty()
    with PeakMemory() as memory:
        text = server.client.call_tool("big", {"megabytes": 20}).text()
    assert len(text) == 20 * MB
    assert 20 * MB < memory.peak < 2.5 * 20 * MB, f"{memory.peak / (20 * MB):.2f} times the result"


def test_a_message_over_the_cap_fails_its_request_at_once_naming_the_cap(faulty):
    server = faulty(max_message_bytes=MB)
    with pytest.raises(ProtocolError) as excinfo:
        server.client.call_tool("huge", {"megabytes": 8})
    message = str(excinfo.value)
    # failed as soon as the line passed the cap, not when it ended: its start named the request
    assert re.fullmatch(
        rf"faulty: the response to request {last_call_id(server)} is at least [0-9,]+ bytes, over the "
        r"1,048,576-byte cap on one message \(max_message_bytes\); it was skipped",
        message,
    ), message
    assert server.client.call_tool("echo", {"text": "next"}).text() == "next"  # the rest of the line was dropped
    assert any("over the 1,048,576-byte cap" in line and '{"jsonrpc":"2.0","id":' in line for line in server.logs)


def test_a_message_over_the_cap_with_its_id_at_the_end_fails_when_it_ends(faulty):
    server = faulty(max_message_bytes=MB)  # TypeScript servers write {"result": ..., "jsonrpc": "2.0", "id": 7}
    with pytest.raises(ProtocolError) as excinfo:
        server.client.call_tool("huge", {"megabytes": 8, "id_last": True})
    size = len(b'{"result":{"content":[{"type":"text","text":""}]},"jsonrpc":"2.0","id":}') + 8 * MB
    size += len(str(last_call_id(server)))
    assert str(excinfo.value) == (
        f"faulty: the response to request {last_call_id(server)} is {size:,} bytes, over "
        "the 1,048,576-byte cap on one message (max_message_bytes); it was skipped"
    )
    assert server.client.call_tool("echo", {"text": "next"}).text() == "next"


def test_a_gigabyte_line_without_a_newline_never_takes_the_clients_memory(faulty):
    server = faulty(max_message_bytes=MB)
    with PeakMemory() as memory:
        with pytest.raises(ProtocolError, match="over the 1,048,576-byte cap"):
            server.client.call_tool("huge", {"megabytes": 1024, "newline": False})
        wait_for(lambda: server.transport.bytes_read >= 1024 * MB, "the whole gigabyte was read")
        server.client.close()
    assert memory.peak < 4 * MB, f"{memory.peak / MB:.1f} MB"  # the cap and one read's buffer, never the line


def test_the_cap_is_the_default_64_megabytes():
    assert StdioTransport(["true"]).max_message_bytes == 64 * MB


def test_invalid_utf8_fails_the_request_at_once_with_the_byte_position(faulty):
    server = faulty()
    with pytest.raises(ProtocolError) as excinfo:
        server.client.call_tool("bad_utf8", {})
    request_id = last_call_id(server)
    position = len(f'{{"jsonrpc":"2.0","id":{request_id},"result":{{"content":[{{"type":"text","text":"caf')
    assert str(excinfo.value) == (
        f"faulty: the response to request {request_id} could not be read: "
        f"not valid UTF-8: byte 0xff at position {position}"
    )
    assert server.client.call_tool("echo", {"text": "café"}).text() == "café"


@pytest.mark.parametrize("levels", [300, 100_000])
def test_a_deeply_nested_answer_fails_its_request_and_the_session_goes_on(faulty, levels):
    server = faulty()
    with pytest.raises(ProtocolError, match="could not be read: nested (more than 256 levels deep|too deeply)"):
        server.client.call_tool("deep", {"levels": levels})
    assert server.client.call_tool("echo", {"text": "still here"}).text() == "still here"


def test_a_deeply_nested_notification_is_skipped_with_a_notice(faulty):
    server = faulty()
    assert server.client.call_tool("deep", {"levels": 100_000, "notification": True}).text() == (
        "after the deep notification"
    )
    assert any(
        line.startswith("faulty: skipped a message from the server: nested too deeply to parse") for line in server.logs
    ), server.logs


# -- the process, not only the pipe ------------------------------------------------------------------


def test_a_server_that_exits_while_its_child_holds_stdout_is_noticed(faulty):
    server = faulty()
    with pytest.raises(ConnectionClosed) as excinfo:  # not RequestTimeout: the pipe never closes by itself
        server.client.call_tool("orphan", {})
    message = str(excinfo.value)
    assert message.startswith("faulty: server exited with code 3 (a process it started still held its output open")
    [child] = [int(m.group(1)) for line in server.stderr if (m := re.match(r"started child (\d+)", line))]
    wait_for(lambda: gone(child), f"the child {child} ended with the server's process group")


def test_close_ends_what_the_server_started(faulty):
    server = faulty(close_timeout=2.0)
    child = int(server.client.call_tool("spawn_child", {}).text())
    assert not gone(child)
    server.client.close()
    assert server.transport.returncode == 0  # the server left on stdin EOF
    # close() ended the rest of the group (it returns once the child has let go of the pipe, as it exits)
    wait_for(lambda: gone(child), f"the child {child} ended")


def test_each_server_runs_in_its_own_process_group(faulty):
    server = faulty()
    assert os.getpgid(server.transport.pid) == server.transport.pid != os.getpgid(0)


# -- progress may extend a timeout, as the TypeScript SDK's resetTimeoutOnProgress ---------------------


def test_progress_restarts_the_timeout_when_asked(faulty):
    server = faulty(reset_timeout_on_progress=True)
    # 20 notifications 0.05 s apart take at least 1 s: the call outlives its 0.5 s timeout only because each
    # one restarts it (without the option the same call times out: the next test)
    assert server.client.call_tool("progress", {"steps": 20, "interval": 0.05}, timeout=0.5).text() == (
        "done after 20 steps"
    )


def test_without_the_option_progress_does_not_extend_the_timeout(faulty):
    server = faulty()
    with pytest.raises(RequestTimeout, match="tools/call timed out after 0.5s"):
        server.client.call_tool("progress", {"steps": 20, "interval": 0.05}, timeout=0.5)


def test_the_maximum_total_ends_a_call_whatever_its_progress(faulty):
    server = faulty(reset_timeout_on_progress=True, max_total_timeout=1.0)
    with pytest.raises(RequestTimeout, match="no answer within the maximum total of 1s"):
        server.client.call_tool("progress", {"steps": 10_000, "interval": 0.05}, timeout=TIMEOUT)
    cancel = [m for d, m in server.traffic if m.get("method") == "notifications/cancelled"][-1]
    assert cancel["params"]["reason"].startswith("timed out: no answer within the maximum total of 1s")


# -- starting several servers ---------------------------------------------------------------------------


def test_servers_start_at_the_same_time(tmp_path, events):
    # each server waits, before it answers anything, until all six are running: one after another would never do
    specs = stdio_specs([[*FAULTY, "--barrier", str(tmp_path), "6"] for _ in range(6)])
    with start_servers(specs, events, options=ClientOptions(timeout=TIMEOUT)) as router:
        assert list(router.clients) == ["faulty", "faulty2", "faulty3", "faulty4", "faulty5", "faulty6"]
    assert len(os.listdir(tmp_path)) == 6


def test_servers_tools_and_events_keep_the_configs_order(events):
    # the first server is the slowest to start: it still comes first in everything
    specs = stdio_specs([[*FAULTY, "--start-delay", "0.5"], FAULTY, FAULTY])
    with start_servers(specs, events, options=ClientOptions(timeout=TIMEOUT)) as router:
        assert list(router.clients) == ["faulty", "faulty2", "faulty3"]
        # the first configured keeps the shared names; the others get server__tool
        assert list(router.tools)[:3] == ["echo", "crash", "hang"] and "faulty3__echo" in router.tools
        assert [router.routes[name].server for name in router.tools] == sorted(
            router.routes[n].server for n in router.tools
        )
        assert router.call("faulty2__echo", {"text": "two"}).text() == "two"
    ready = [e.server for e in events.of("server")]
    assert ready == ["faulty", "faulty2", "faulty3"]
    startup = events[: events.index(events.of("server")[-1]) + 1]
    order = [e.source if e.kind == "notice" else e.server for e in startup]  # notices: the names given
    assert order == sorted(order), "each server's events come after all of those before it"


def test_a_failed_start_names_the_first_failure_in_order_and_ends_every_server(tmp_path, events):
    first, last = tmp_path / "first.pid", tmp_path / "last.pid"
    specs = [
        ServerSpec("first", [*FAULTY, "--pid-file", str(first)], transport="stdio"),
        ServerSpec("broken", [*FAULTY, "--exit-at-start", "5"], transport="stdio"),
        ServerSpec("missing", ["/nonexistent/decodeloop-server"], transport="stdio"),
        ServerSpec("last", [*FAULTY, "--start-delay", "0.5", "--pid-file", str(last)], transport="stdio"),
    ]
    with pytest.raises(ConnectionClosed) as excinfo:
        start_servers(specs, events, options=ClientOptions(timeout=TIMEOUT))
    message = str(excinfo.value)
    assert message.startswith("broken: server exited with code 5") and "exiting at start, as asked" in message
    assert [e.server for e in events.of("server")] == ["first"]
    # it had started; it was closed (and has exited) before the error came out
    assert gone(int(first.read_text()))
    assert not last.exists() or gone(int(last.read_text()))
