"""JSON-RPC session: ids, timeouts and cancellation, server requests, notifications, bad input.

The server side is scripted: a fake transport answers each sent message through a
`reply` function and delivers everything from its own reader thread, as a real
transport does.
"""

from __future__ import annotations

import queue
import threading
import time

import pytest

from decodeloop.errors import ConnectionClosed, ProtocolError, RequestTimeout, RpcError
from decodeloop.mcp.jsonrpc import JsonRpcSession
from decodeloop.mcp.transports.base import Transport

WAIT = 30  # how long the test side waits for the reader thread: a guard against a hang, never a check


class ScriptedTransport(Transport):
    def __init__(self, reply=None):
        self.reply = reply or (lambda message: [])
        self.sent: list[dict] = []
        self._sent_changed = threading.Condition()
        self._inbox: queue.Queue = queue.Queue()
        self._closed = False

    def start(self, on_message, on_close, on_garbage, on_error=None):
        handlers = {"message": on_message, "garbage": on_garbage, "close": on_close}

        def read():
            while True:
                kind, payload = self._inbox.get()
                if kind == "flush":
                    payload.set()
                    continue
                handlers[kind](payload)
                if kind == "close":
                    return

        threading.Thread(target=read, daemon=True).start()

    def send(self, message, headers=None):
        if self._closed:
            raise ConnectionClosed("scripted server is gone")
        with self._sent_changed:
            self.sent.append(message)
            self._sent_changed.notify_all()
        for answer in self.reply(message):
            self.deliver(answer)

    def close(self):
        self._closed = True

    # -- the test's side of the wire --
    def deliver(self, message):
        self._inbox.put(("message", message))

    def garbage(self, line):
        self._inbox.put(("garbage", line))

    def hang_up(self, reason):
        self._closed = True
        self._inbox.put(("close", reason))

    def flush(self):
        """Wait until the reader thread has handled everything delivered so far."""
        done = threading.Event()
        self._inbox.put(("flush", done))
        assert done.wait(WAIT), "reader thread stuck"

    def wait_sent(self, predicate, timeout=WAIT):
        with self._sent_changed:
            found = self._sent_changed.wait_for(lambda: next((m for m in self.sent if predicate(m)), None), timeout)
        assert found, f"nothing matching was sent; sent: {self.sent}"
        return found


def echo_server(message):
    """Answers every request with its own id and method, except 'slow' (never) and 'fail'."""
    if "id" not in message or "method" not in message:
        return []
    if message["method"] == "slow":
        return []
    if message["method"] == "fail":
        error = {"code": -32000, "message": "it broke", "data": {"why": "testing"}}
        return [{"jsonrpc": "2.0", "id": message["id"], "error": error}]
    if message["method"] == "both":
        return [{"jsonrpc": "2.0", "id": message["id"], "result": {}, "error": {"code": 1, "message": "x"}}]
    if message["method"] == "neither":
        return [{"jsonrpc": "2.0", "id": message["id"]}]
    return [{"jsonrpc": "2.0", "id": message["id"], "result": {"method": message["method"], "id": message["id"]}}]


def make_session(reply=echo_server, **kw):
    transport = ScriptedTransport(reply)
    logs: list[str] = []
    session = JsonRpcSession(transport, log=logs.append, **kw)
    session.start()
    return session, transport, logs


def request_ids(transport):
    return [m["id"] for m in transport.sent if "method" in m and "id" in m]


def test_ids_start_at_one_and_are_never_reused():
    session, transport, _ = make_session()
    assert session.request("a") == {"method": "a", "id": 1}
    with pytest.raises(RpcError):
        session.request("fail")
    with pytest.raises(RequestTimeout):
        session.request("slow", timeout=0.05)
    assert session.request("b")["id"] == 4
    ids = request_ids(transport)
    assert ids == [1, 2, 3, 4]
    assert all(isinstance(i, int) for i in ids)


def test_rpc_error_carries_code_message_and_data():
    session, _, _ = make_session()
    with pytest.raises(RpcError) as excinfo:
        session.request("fail", {"x": 1})
    assert (excinfo.value.code, excinfo.value.message, excinfo.value.data) == (-32000, "it broke", {"why": "testing"})


def test_timeout_cancels_and_a_late_response_is_ignored():
    session, transport, logs = make_session()
    start = time.monotonic()
    with pytest.raises(RequestTimeout, match="slow timed out after 0.2s"):
        session.request("slow", timeout=0.2)
    assert time.monotonic() - start >= 0.2  # the timeout was waited out, not cut short
    cancel = transport.wait_sent(lambda m: m.get("method") == "notifications/cancelled")
    assert "id" not in cancel
    assert cancel["params"] == {"requestId": 1, "reason": "timed out after 0.2s"}

    transport.deliver({"jsonrpc": "2.0", "id": 1, "result": {"too": "late"}})
    transport.flush()
    assert any("unknown request id 1" in line for line in logs)
    assert session.request("next") == {"method": "next", "id": 2}


def test_server_ping_is_answered_and_unknown_requests_are_refused():
    session, transport, _ = make_session()
    transport.deliver({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
    pong = transport.wait_sent(lambda m: m.get("id") == "srv-1")
    assert pong == {"jsonrpc": "2.0", "id": "srv-1", "result": {}}

    transport.deliver({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}})
    refusal = transport.wait_sent(lambda m: m.get("id") == 7)
    assert refusal["error"]["code"] == -32601
    assert "sampling/createMessage" in refusal["error"]["message"]
    assert session.request("still") == {"method": "still", "id": 1}


def test_notifications_are_delivered_and_a_failing_handler_is_survived():
    seen = []

    def on_notification(method, params):
        seen.append((method, params))
        if method == "explode":
            raise RuntimeError("handler bug")

    session, transport, logs = make_session(on_notification=on_notification)
    transport.deliver({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}})
    transport.deliver({"jsonrpc": "2.0", "method": "explode"})
    transport.deliver(
        [  # a batch, as servers of older revisions may send
            {"jsonrpc": "2.0", "method": "one", "params": {"n": 1}},
            {"jsonrpc": "2.0", "method": "two", "params": {"n": 2}},
        ]
    )
    transport.flush()
    assert seen == [
        ("notifications/message", {"level": "info", "data": "hi"}),
        ("explode", {}),
        ("one", {"n": 1}),
        ("two", {"n": 2}),
    ]
    assert any("handler bug" in line for line in logs)
    assert session.request("after")["method"] == "after"


def test_malformed_messages_are_logged_and_the_session_survives():
    session, transport, logs = make_session()
    transport.deliver({"jsonrpc": "2.0", "result": {}})  # no id
    transport.deliver({"jsonrpc": "2.0", "id": 99, "result": {}})  # nobody asked
    transport.deliver(42)  # inside a batch-shaped hole
    transport.garbage("Traceback (most recent call last):")
    transport.flush()
    assert len(logs) == 4
    assert logs[3] == "skipped a message from the server: Traceback (most recent call last):"

    # A malformed answer to a pending request fails that request, not the session.
    with pytest.raises(ProtocolError, match="exactly one of result and error"):
        session.request("both")
    with pytest.raises(ProtocolError):
        session.request("neither")
    assert session.request("fine")["method"] == "fine"


def test_connection_loss_fails_every_pending_request_at_once():
    session, transport, _ = make_session()
    outcomes: dict[str, tuple[type, str]] = {}

    def wait_forever(name):
        try:
            session.request("slow", timeout=WAIT)  # never answered: only its timeout or the hang-up ends it
        except Exception as exc:
            outcomes[name] = (type(exc), str(exc))

    threads = [threading.Thread(target=wait_forever, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    transport.wait_sent(lambda m: len(request_ids(transport)) == 2)
    transport.hang_up("server exited with code 1")
    for thread in threads:
        thread.join(2 * WAIT)
    assert set(outcomes) == {"a", "b"}
    for kind, message in outcomes.values():
        # the hang-up's reason, not RequestTimeout: they failed when the connection went, not at their timeout
        assert (kind, message) == (ConnectionClosed, "server exited with code 1")
    with pytest.raises(ConnectionClosed, match="code 1"):
        session.request("after")
    with pytest.raises(ConnectionClosed):
        session.notify("notifications/whatever")


def test_traffic_is_reported_on_the_callers_thread_in_order():
    events = []
    session, _, _ = make_session(
        on_traffic=lambda direction, message: events.append((direction, message, threading.get_ident()))
    )
    session.request("tools/list", {"cursor": "c"})
    session.notify("notifications/initialized")
    me = threading.get_ident()
    assert [(d, m.get("method"), m.get("id"), t) for d, m, t in events] == [
        ("send", "tools/list", 1, me),
        ("recv", None, 1, me),
        ("send", "notifications/initialized", None, me),
    ]
    assert events[0][1]["params"] == {"cursor": "c"}


def test_close_is_idempotent_and_fails_later_requests():
    session, transport, _ = make_session()
    session.close()
    session.close()
    assert transport._closed
    with pytest.raises(ConnectionClosed):
        session.request("a")


def test_a_batch_is_read_one_level_deep_only():
    # a batch nested a thousand levels would otherwise be walked by recursion, off the end of the stack
    session, transport, logs = make_session()
    nested: list = [{"jsonrpc": "2.0", "method": "deep"}]
    for _ in range(5000):
        nested = [nested]
    seen = []
    session.on_notification = lambda method, params: seen.append(method)
    transport.deliver([nested, {"jsonrpc": "2.0", "method": "shallow"}])
    transport.flush()
    assert seen == ["shallow"]
    assert logs == ["ignored a batch item that is not an object: a JSON array"]
    assert session.request("after")["method"] == "after"
