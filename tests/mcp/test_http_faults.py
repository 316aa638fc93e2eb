"""The HTTP transports against a misbehaving server process: every failure a clear McpError, never a hang.

tests/servers/http_faulty.py is a real HTTP server in its own process; each
tool misbehaves in its own way. The checks are on what the caller sees (the
error type and message) and on what the server received, never on how long it
took: a transport that hung instead would end in the client's timeout, whose
error is not the one expected, so a hang fails the test just the same.
"""

from __future__ import annotations

import io
import json
import socket
import threading
import time
import tracemalloc

import pytest
from conftest import FAULTY

from decodeloop.errors import ConnectionClosed, HttpStatusError, McpError, ProtocolError, RequestTimeout, TransportError
from decodeloop.mcp import McpClient, StdioTransport, framing
from decodeloop.mcp.transports import http as http_transport
from decodeloop.mcp.transports.httpbase import HttpClient

TIMEOUT = 60  # the client's request timeout: a guard against a hang, never what a test waits for


def connect(server, path="/mcp", **kw):
    # the server speaks the 2025-11-25 wire; the probe that finds that out has a test of its own
    kw.setdefault("protocol", "2025-11-25")
    logs: list[str] = []
    traffic: list[tuple[str, dict]] = []
    client = McpClient.connect_url(
        server.url + path,
        name="faulty",
        timeout=kw.pop("timeout", TIMEOUT),
        log=logs.append,
        on_traffic=lambda d, m: traffic.append((d, m)),
        **kw,
    )
    client.logs, client.traffic = logs, traffic
    return client


def test_http_500_is_a_clear_error_and_the_session_goes_on(http_server):
    server = http_server()
    with connect(server) as client:
        with pytest.raises(HttpStatusError) as excinfo:
            client.call_tool("fail500", {})
        assert excinfo.value.status == 500
        assert str(excinfo.value).startswith("faulty: POST ") and "HTTP 500" in str(excinfo.value)
        assert "kaboom: the database is on fire" in str(excinfo.value)
        assert client.call_tool("echo", {"text": "still here"}).text() == "still here"


def test_a_body_cut_short_is_a_dropped_connection(http_server):
    server = http_server()
    with connect(server) as client:
        with pytest.raises(TransportError, match="dropped the connection"):
            client.call_tool("drop_json", {})
        assert client.call_tool("echo", {"text": "next"}).text() == "next"


def test_an_event_stream_that_ends_before_the_answer(http_server):
    server = http_server()
    seen = []
    with connect(server, on_notification=lambda method, params: seen.append(params)) as client:
        with pytest.raises(TransportError, match="ended before the response .* no event id to resume from"):
            client.call_tool("drop_sse", {})
    assert seen == [{"level": "info", "data": "half way"}]  # what came before the drop was delivered


def test_a_dropped_stream_is_resumed_with_last_event_id_after_retry(http_server):
    server = http_server()
    with connect(server) as client:
        started = time.monotonic()
        assert client.call_tool("resume_sse", {}).text() == "resumed"
        assert time.monotonic() - started >= 0.1  # the stream's retry: 100
    [get] = [r for r in server.seen() if r["method"] == "GET" and r["headers"].get("Last-Event-ID")]
    assert get["headers"]["Last-Event-ID"] == "r1"


def test_garbage_on_an_event_stream_is_logged_and_the_call_fails_clearly(http_server):
    server = http_server()
    with connect(server) as client:
        with pytest.raises(TransportError, match="ended before the response"):
            client.call_tool("garbage_sse", {})
        assert any("not JSON (Expecting value at character 0): this is not JSON" in line for line in client.logs), (
            client.logs
        )
        assert any("): {broken" in line for line in client.logs), client.logs
        assert client.call_tool("echo", {"text": "fine"}).text() == "fine"


def test_a_server_that_never_answers_times_out_and_is_cancelled(http_server):
    server = http_server()
    with connect(server) as client:
        # the server answers nothing for 60 s, then drops the connection: only the timeout gives RequestTimeout
        with pytest.raises(RequestTimeout, match="timed out after 0.5s"):
            client.call_tool("silent", {"seconds": TIMEOUT}, timeout=0.5)
        call = next(m for d, m in client.traffic if m.get("params", {}).get("name") == "silent")
        assert client.call_tool("echo", {"text": "after"}).text() == "after"
    cancels = [json.loads(r["body"]) for r in server.seen() if "notifications/cancelled" in r["body"]]
    assert cancels[0]["params"]["requestId"] == call["id"]


def test_connection_refused_is_clear_and_not_a_timeout():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once it closes
    with pytest.raises(TransportError, match=f"cannot connect to http://127.0.0.1:{port}/mcp: connection refused"):
        McpClient.connect_url(f"http://127.0.0.1:{port}/mcp", name="nobody", timeout=TIMEOUT)


@pytest.mark.parametrize("status", [401, 403, 500, 502, 503])
def test_non_2xx_on_initialize_names_the_status_and_shows_the_body(http_server, status):
    server = http_server()
    with pytest.raises(HttpStatusError if status >= 500 else McpError) as excinfo:
        McpClient.connect_url(f"{server.url}/status/{status}", name="faulty", timeout=TIMEOUT)
    message = str(excinfo.value)
    assert f"HTTP {status}" in message and "Service Unavailable try later" in message
    assert len(message) < 300 and "<" not in message  # a short preview: tags dropped, whitespace collapsed


def test_404_on_initialize_falls_back_to_legacy_sse_and_says_why_that_failed(http_server):
    server = http_server()
    logs: list[str] = []
    with pytest.raises(HttpStatusError, match="GET .*/status/404: HTTP 405"):
        McpClient.connect_url(f"{server.url}/status/404", name="faulty", timeout=TIMEOUT, log=logs.append)
    assert any("answered HTTP 404; trying the legacy HTTP+SSE transport" in line for line in logs)


def test_an_expired_session_is_initialized_again_and_the_request_retried(http_server):
    server = http_server()
    with connect(server) as client:
        first = client.transport.session_id
        assert client.call_tool("forget", {}).text() == "forgotten"
        assert client.call_tool("echo", {"text": "again"}).text() == "again"
        assert client.transport.session_id not in (None, first)
        sent = [m.get("method") for d, m in client.traffic if d == "send"]
        assert sent.count("initialize") == 2 and sent.count("notifications/initialized") == 2
        assert any("initializing again" in line for line in client.logs)


def test_session_and_version_headers_and_custom_headers(http_server):
    server = http_server()
    with connect(server, headers={"Authorization": "Bearer s3cret", "X-Team": "blue"}) as client:
        seen = json.loads(client.call_tool("headers", {}).text())
        session = client.transport.session_id
    assert seen["Authorization"] == "Bearer s3cret" and seen["X-Team"] == "blue"
    assert seen["Mcp-Session-Id"] == session and seen["MCP-Protocol-Version"] == "2025-11-25"
    assert seen["Accept"] == "application/json, text/event-stream" and seen["Content-Type"] == "application/json"
    requests = server.seen()
    initialize = requests[0]
    assert "MCP-Protocol-Version" not in initialize["headers"] and "Mcp-Session-Id" not in initialize["headers"]
    # the GET stream was tried (405: none offered) and the session was ended with DELETE
    assert any(r["method"] == "GET" and r["path"] == "/mcp" for r in requests)
    [delete] = [r for r in requests if r["method"] == "DELETE"]
    assert delete["headers"]["Mcp-Session-Id"] == session


def test_a_legacy_server_refuses_the_discover_probe_and_is_initialized(http_server):
    server = http_server()
    with connect(server, protocol="auto") as client:
        assert client.protocol_version == "2025-11-25"
        assert client.call_tool("echo", {"text": "old wire"}).text() == "old wire"
    probe, initialize = [r for r in server.seen() if r["method"] == "POST"][:2]
    assert json.loads(probe["body"])["method"] == "server/discover"
    assert (
        probe["headers"]["MCP-Protocol-Version"] == "2026-07-28" and probe["headers"]["Mcp-Method"] == "server/discover"
    )
    # the fallback is a plain 2025-11-25 initialize: no version header, no mirrored method
    assert json.loads(initialize["body"])["method"] == "initialize"
    assert "MCP-Protocol-Version" not in initialize["headers"] and "Mcp-Method" not in initialize["headers"]
    # and the legacy wire stays: the call carries the negotiated version and no mirrored headers
    [call] = [r for r in server.seen() if r["method"] == "POST" and json.loads(r["body"]).get("method") == "tools/call"]
    assert call["headers"]["MCP-Protocol-Version"] == "2025-11-25" and "Mcp-Method" not in call["headers"]
    assert any("using initialize" in line for line in client.logs)


def test_a_request_given_up_on_the_2026_wire_has_its_stream_closed_which_is_its_cancellation(http_server):
    server = http_server("--stateless")
    with connect(server, protocol="2026-07-28", timeout=1) as client:
        with pytest.raises(RequestTimeout):
            client.call_tool("slow_sse", {"steps": 600})
        outcomes: list[str] = []
        for _ in range(1200):  # the server says how the stream ended: when the client closed it, or after its steps
            outcomes = [r["outcome"] for r in server.seen() if r["method"] == "TOOL"]
            if outcomes:
                break
            time.sleep(0.1)
        assert outcomes == ["closed by the client"]
        assert client.call_tool("echo", {"text": "next"}).text() == "next"
    bodies = [json.loads(r["body"]) for r in server.seen() if r["method"] == "POST"]
    assert not any(b.get("method") == "notifications/cancelled" for b in bodies)  # no such message on this wire
    assert not any("event stream interrupted" in line for line in client.logs)


def test_a_header_mismatch_lists_the_tools_again_and_calls_once_more(http_server):
    server = http_server("--stateless")
    with connect(server, protocol="2026-07-28") as client:
        first = {tool.name: tool for tool in client.list_tools()}
        assert first["header_check"].header_params is None  # as first listed: no argument goes in a header
        assert client.call_tool("header_check", {"region": "eu-west"}).text() == "region eu-west"
        assert client.tools_stale.is_set()  # the owner hears the definition changed
    calls = [r for r in server.seen() if r["method"] == "POST" and json.loads(r["body"])["method"] == "tools/call"]
    assert [call["headers"].get("Mcp-Param-Region") for call in calls] == [None, "eu-west"]
    assert any("do not match its body" in line for line in client.logs)


def test_a_redirect_to_another_origin_never_carries_the_headers(http_server):
    other = http_server()
    server = http_server("--redirect-to", other.url)
    with connect(server, path="/redirect", headers={"Authorization": "Bearer s3cret"}) as client:
        assert client.call_tool("echo", {"text": "via redirect"}).text() == "via redirect"
    assert next(r["path"] for r in server.seen() if r["method"] == "POST") == "/redirect"
    received = other.seen()
    assert received and all("Authorization" not in r["headers"] for r in received)
    assert "Bearer s3cret" not in json.dumps(received)


def test_a_legacy_endpoint_on_another_origin_is_refused(http_server):
    other = http_server()
    server = http_server("--redirect-to", other.url)
    with pytest.raises(ProtocolError, match="not on the origin .* refusing to send messages there"):
        McpClient.connect_url(
            f"{server.url}/sse-elsewhere",
            transport="sse",
            headers={"Authorization": "Bearer s3cret"},
            name="faulty",
            timeout=TIMEOUT,
        )
    assert other.seen() == []


def test_after_close_sends_fail_at_once(http_server):
    server = http_server()
    client = connect(server)
    client.close()
    with pytest.raises(ConnectionClosed, match="closed"):
        client.call_tool("echo", {"text": "too late"})


def wait_for(condition, what: str, guard: float = TIMEOUT):
    """Poll until `condition()` is true; the guard only keeps a broken client from hanging the suite."""
    deadline = time.monotonic() + guard
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def test_the_cancellation_after_a_timeout_is_sent_in_the_background(http_server, monkeypatch):
    # The server holds the notifications/cancelled POST unanswered. Sent on the caller's thread with the
    # request's timeout, it would double every timeout; it must come from another thread, with its own bound.
    server = http_server()
    monkeypatch.setattr(http_transport, "LATER_TIMEOUT", 0.5)
    posted_from: list[threading.Thread] = []
    plain_request = HttpClient.request

    def request(self, method, url, body=None, *args, **kw):
        if body and b"notifications/cancelled" in body:
            posted_from.append(threading.current_thread())
        return plain_request(self, method, url, body, *args, **kw)

    monkeypatch.setattr(HttpClient, "request", request)
    with connect(server) as client:
        with pytest.raises(RequestTimeout, match="timed out after 0.5s"):
            client.call_tool("silent", {"seconds": TIMEOUT, "hold_cancel": True}, timeout=0.5)
        call = next(m for d, m in client.traffic if m.get("params", {}).get("name") == "silent")
        wait_for(lambda: any("notifications/cancelled" in r["body"] for r in server.seen()), "the cancel arrived")
        assert posted_from and threading.current_thread() not in posted_from
        # bounded: the background POST gives up after its own timeout, and says so
        wait_for(
            lambda: any("could not send notifications/cancelled" in line for line in client.logs),
            "the held cancellation gave up",
        )
        assert client.call_tool("echo", {"text": "after"}).text() == "after"
    [cancel] = [json.loads(r["body"]) for r in server.seen() if "notifications/cancelled" in r["body"]]
    assert cancel["params"] == {"requestId": call["id"], "reason": "timed out after 0.5s"}
    urllib_post(server.url + "/release")


def urllib_post(url: str) -> None:
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(url, data=b"{}", method="POST"), timeout=5).read()


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
def test_an_answer_over_the_cap_fails_its_request_naming_the_cap(http_server, sse):
    server = http_server()
    with connect(server, max_message_bytes=MB) as client:
        with pytest.raises(McpError) as excinfo:
            client.call_tool("big", {"megabytes": 2, "sse": sse})
        if sse:  # an event over the cap ends its stream
            assert "an event is larger than the 1,048,576-byte cap on one message (max_message_bytes)" in str(
                excinfo.value
            )
        else:  # refused from its Content-Length, before a byte of it is read
            request_id = [m for d, m in client.traffic if m.get("method") == "tools/call"][-1]["id"]
            size = len(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "result": {"content": [{"type": "text", "text": "y" * (2 * MB)}]},
                    }
                )
            )
            assert str(excinfo.value) == (
                f"faulty: the response to request {request_id} is {size:,} bytes, over "
                "the 1,048,576-byte cap on one message (max_message_bytes); it was skipped"
            )
        assert client.call_tool("echo", {"text": "next"}).text() == "next"


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
def test_invalid_utf8_in_an_answer_fails_it_at_once_with_the_position(http_server, sse):
    server = http_server()
    with connect(server) as client:
        # over SSE the stream stays open a minute after the bad event: only reading that event can end the call
        with pytest.raises(ProtocolError) as excinfo:
            client.call_tool("bad_utf8", {"sse": sse, "linger": TIMEOUT})
        request_id = [m for d, m in client.traffic if m.get("method") == "tools/call"][-1]["id"]
        position = len(f'{{"jsonrpc":"2.0","id":{request_id},"result":{{"content":[{{"type":"text","text":"caf')
        assert str(excinfo.value) == (
            f"faulty: the response to request {request_id} could not be read: "
            f"not valid UTF-8: byte 0xff at position {position}"
        )
        assert client.call_tool("echo", {"text": "café"}).text() == "café"


def test_a_deeply_nested_answer_on_an_event_stream_fails_its_request(http_server):
    server = http_server()
    with connect(server) as client:
        with pytest.raises(ProtocolError, match="could not be read: nested too deeply"):
            client.call_tool("deep", {"levels": 100_000, "linger": TIMEOUT})
        assert client.call_tool("echo", {"text": "next"}).text() == "next"


def test_a_deeply_nested_message_on_the_get_stream_leaves_the_listener_running(http_server):
    server = http_server("--get-stream")
    seen: list[dict] = []
    with connect(server, on_notification=lambda method, params: seen.append(params)) as client:
        assert client.call_tool("push_deep", {}).text() == "queued"
        # the message after the deep one arrives: the GET stream's reader is still reading
        wait_for(lambda: {"level": "info", "data": "after the deep one"} in seen, "the message after the deep one")
        assert any("skipped a message from the server: nested too deeply" in line for line in client.logs)


# -- 20 MB results: linear work, over HTTP (JSON and SSE) and stdio ---------------------------------
#
# Linear is shown by counting, not timing: every read from the socket or pipe is cut to READ bytes and
# the meter adds up the memory allocated between one read and the next. A reader that keeps the
# pieces and joins them once allocates a few times the message's size in all; one that copies what it
# holds on every read (buf += chunk, a join or a decode per read) allocates about size**2 / (2 * READ),
# over 600 times the size at 20 MB. JSON parses are counted too: the message is parsed once, whole.

MB = 1024 * 1024
READ = 1 << 14
MAX_COPIES = 8  # bytes allocated while reading, as a multiple of the message's size


class CopyMeter:
    """Bytes allocated between consecutive reads (tracemalloc's peak, reset at each read), summed."""

    def __init__(self) -> None:
        self.reads = self.bytes_read = self.allocated = 0
        self._lock = threading.Lock()
        self._active = False

    def __enter__(self) -> CopyMeter:
        self._was_tracing = tracemalloc.is_tracing()
        if not self._was_tracing:
            tracemalloc.start()
        self.reads = self.bytes_read = self.allocated = 0
        tracemalloc.reset_peak()
        self._base = tracemalloc.get_traced_memory()[0]
        self._active = True
        return self

    def __exit__(self, *exc) -> None:
        self.step()
        self._active = False
        if not self._was_tracing:
            tracemalloc.stop()

    def step(self) -> None:
        with self._lock:
            if not self._active:
                return
            current, peak = tracemalloc.get_traced_memory()
            self.allocated += max(0, peak - self._base)
            tracemalloc.reset_peak()
            self._base = current

    def read(self, readinto, buffer) -> int | None:
        """One metered read of at most READ bytes into `buffer` by `readinto`."""
        self.step()
        with memoryview(buffer) as whole, whole[:READ] as part:
            count = readinto(part)
        with self._lock:
            if self._active:
                self.reads += 1
                self.bytes_read += count or 0
        return count


class CountingJson:
    """Stands in for a module's `json`: counts loads() and the bytes it parsed."""

    def __init__(self) -> None:
        self.parses = self.bytes_parsed = 0

    def loads(self, data, *args, **kw):
        self.parses += 1
        self.bytes_parsed += len(data)
        return json.loads(data, *args, **kw)

    def __getattr__(self, name):
        return getattr(json, name)


def assert_linear(meter: CopyMeter, parser: CountingJson, size: int) -> None:
    assert meter.bytes_read >= size and meter.reads >= size // READ  # the message came through the meter
    assert parser.parses == 1 and size <= parser.bytes_parsed < size + 4096  # one parse of the whole message
    assert meter.allocated < MAX_COPIES * size, f"{meter.allocated / size:.1f} copies of the message"


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
def test_a_20_megabyte_result_over_http_is_read_in_linear_work(http_server, sse, monkeypatch):
    server = http_server()
    counter = CountingJson()
    monkeypatch.setattr(framing, "json", counter)
    with connect(server) as client:
        with monkeypatch.context() as patch, CopyMeter() as meter:
            plain_readinto = socket.SocketIO.readinto
            patch.setattr(
                socket.SocketIO,
                "readinto",
                lambda sock, buffer: meter.read(lambda part: plain_readinto(sock, part), buffer),
            )
            counter.parses = counter.bytes_parsed = 0
            text = client.call_tool("big", {"megabytes": 20, "sse": sse}).text()
        assert text == "y" * (20 * MB)
    assert_linear(meter, counter, 20 * MB)


class MeteredPipe(io.RawIOBase):
    """A child's stdout pipe read through a CopyMeter."""

    def __init__(self, pipe, meter: CopyMeter) -> None:
        self.pipe, self.meter = pipe, meter

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:
        return self.meter.read(self.pipe.readinto, buffer)

    def fileno(self) -> int:
        return self.pipe.fileno()

    def close(self) -> None:
        self.pipe.close()
        super().close()


def test_a_20_megabyte_result_over_stdio_is_read_in_linear_work(monkeypatch):
    meter = CopyMeter()

    class MeteredStdio(StdioTransport):
        def _spawn(self):
            proc = super()._spawn()
            proc.stdout = MeteredPipe(proc.stdout, meter)
            return proc

    counter = CountingJson()
    monkeypatch.setattr(framing, "json", counter)
    with McpClient(MeteredStdio(FAULTY), name="faulty", timeout=TIMEOUT).start() as client:
        counter.parses = counter.bytes_parsed = 0
        with meter:
            text = client.call_tool("big", {"megabytes": 20}).text()
        assert text == "y" * (20 * MB)
    assert_linear(meter, counter, 20 * MB)
