"""JSON-RPC 2.0 sessions over any Transport; knows nothing of MCP beyond cancellation and ping.

This module owns request ids and the table of requests waiting for a response.
`request()` blocks its caller on an Event until the transport's reader thread
delivers the matching response, the timeout passes, or the connection ends; in
the last case every waiting request fails at once, which is what turns a
crashed server into an error in milliseconds rather than at the timeout.

A request's timeout is a number of seconds, or a `Deadline` that the caller
may push back while it waits (the client does so on progress notifications,
as the TypeScript SDK's resetTimeoutOnProgress does), up to a maximum total.
When a request times out (or Ctrl-C interrupts the wait) the server is told
with `notifications/cancelled`; a transport whose sends can wait on the network
(HTTP) offers `send_later`, so the cancellation never adds its own wait to the
caller's: a timeout is the timeout.

Requests the server sends us are answered from `request_handlers` (method ->
function of params returning the result, or raising RpcError); `ping` is
always answered, anything unknown gets "method not found". While a handler
runs (a user deciding, a model sampling), none of our waiting requests times
out, and each one's timeout starts again once it is answered: the server asked
for that time. A transport that
can fail one request without ending the connection (HTTP) reports that
through `on_error(request_id, error)`, and only that request fails.

Traffic tracing: `on_traffic("send", request)` and `on_traffic("recv", response)`
run on the caller's thread, in order, so a single-threaded trace printer shows
each pair as it happened. Messages the server starts (notifications, its own
requests, our answers to them) are traced from the reader thread.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from decodeloop.errors import ConnectionClosed, McpError, ProtocolError, RequestTimeout, RpcError
from decodeloop.mcp.transports.base import Message, Transport
from decodeloop.text.credentials import clip

METHOD_NOT_FOUND = -32601
PAUSED_RECHECK = 0.5  # seconds between looks at a timed-out wait held open while a server's request is answered
INTERNAL_ERROR = -32603


class _Waiter:
    """One pending request: the caller sleeps on a held lock, the reader fills one slot and releases it.

    A bare lock rather than threading.Event: an Event builds a Condition and a
    lock per wait, which is most of the client's CPU per round trip. Only the
    thread that popped the waiter from the pending table resolves it, so the
    lock is released exactly once.
    """

    __slots__ = ("_done", "failure", "response")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self.response: dict | None = None
        self.failure: Exception | None = None

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.acquire(timeout=-1 if timeout is None else timeout)

    def resolve(self, response: dict) -> None:
        self.response = response
        self._done.release()

    def fail(self, failure: Exception) -> None:
        self.failure = failure
        self._done.release()


class Deadline:
    """A request's timeout that the caller may push back while it waits, up to a maximum total.

    `timeout` counts from the start or from the latest `extend()`; `max_total`
    counts from the start, whatever extended it. None for either: no such limit.
    """

    __slots__ = ("_last", "_progressed", "max_total", "started", "timeout")

    def __init__(self, timeout: float | None, max_total: float | None = None) -> None:
        self.timeout = timeout
        self.max_total = max_total
        self.started = self._last = time.monotonic()
        self._progressed = False

    def extend(self) -> None:
        """Progress: the timeout counts again from now."""
        self._last = time.monotonic()
        self._progressed = True

    def resume(self) -> None:
        """The timeout counts again from now, after a wait that was not the server's (the user answering it)."""
        self._last = time.monotonic()

    def remaining(self) -> float | None:
        """Seconds left (at most 0 once expired), or None if nothing limits the wait."""
        ends = [] if self.timeout is None else [self._last + self.timeout]
        if self.max_total is not None:
            ends.append(self.started + self.max_total)
        return min(ends) - time.monotonic() if ends else None

    def expired(self, method: str) -> str:
        """Why the request ended, once remaining() ran out."""
        if self.max_total is not None and time.monotonic() >= self.started + self.max_total:
            return f"{method} timed out: no answer within the maximum total of {self.max_total:g}s" + (
                f" (progress extended its {self.timeout:g}s timeout until then)"
                if self.timeout is not None and self._progressed
                else ""
            )
        if self._progressed:
            return f"{method} timed out after {self.timeout:g}s without progress"
        return f"{method} timed out after {self.timeout:g}s"


class JsonRpcSession:
    def __init__(
        self,
        transport: Transport,
        on_notification: Callable[[str, dict], None] | None = None,
        on_traffic: Callable[[str, dict], None] | None = None,
        log: Callable[[str], None] | None = None,
        request_handlers: dict[str, Callable[[dict], Any]] | None = None,
    ) -> None:
        self.transport = transport
        self.request_handlers = dict(request_handlers or {})
        self.on_notification = on_notification
        self.on_traffic = on_traffic
        self.log = log or (lambda line: None)
        self._ids = itertools.count(1)  # ids are never reused, even after a timeout
        self._pending: dict[int, _Waiter] = {}
        self._lock = threading.Lock()
        # a request of the server's being answered (the user deciding, the model sampling): no wait of ours
        # times out meanwhile, and each starts its timeout again once it is answered
        self._answering = 0
        self._waits: set[Deadline] = set()
        self._started = False
        self._close_called = False
        self._closed_reason: str | None = None  # set once no more requests can succeed

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        if not self._started:
            self._started = True
            self.transport.start(self._on_message, self._on_close, self._on_garbage, on_error=self._on_request_error)

    def close(self) -> None:
        with self._lock:
            if self._close_called:
                return
            self._close_called = True
            if self._closed_reason is None:
                self._closed_reason = "the session was closed"
            pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.fail(ConnectionClosed(self._closed_reason))
        # Even when the server already exited, the transport still has a
        # process to reap and threads to join.
        self.transport.close()

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    # -- outgoing ----------------------------------------------------------------------

    def request(
        self,
        method: str,
        params: dict | None = None,
        timeout: float | Deadline | None = 60.0,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Send a request and wait for its result; `timeout=None` waits forever, a Deadline as long as it says.

        `headers` go to the transport with the message (HTTP adds them to its POST).
        """
        waiter = _Waiter()
        with self._lock:
            if self._closed_reason is not None:
                raise ConnectionClosed(self._closed_reason)
            request_id = next(self._ids)
            self._pending[request_id] = waiter
        message = _message(method, params, request_id)
        self._trace("send", message)
        try:
            self.transport.send(message, headers)
        except BaseException:
            self._drop(request_id)
            raise

        deadline = timeout if isinstance(timeout, Deadline) else Deadline(timeout)
        with self._lock:
            self._waits.add(deadline)
        try:
            answered = _wait_deadline(waiter, deadline, lambda: self._answering > 0)
        except KeyboardInterrupt:
            # Ctrl-C while waiting: the server should stop working on it too.
            if self._drop(request_id):
                self._cancel(request_id, "interrupted")
            raise
        finally:
            with self._lock:
                self._waits.discard(deadline)
        if not answered:
            if self._drop(request_id):
                why = (
                    timeout.expired(method)
                    if isinstance(timeout, Deadline)
                    else f"{method} timed out after {timeout:g}s"
                )
                self._cancel(request_id, why.removeprefix(f"{method} "))
                raise RequestTimeout(why)
            # The reader claimed the waiter between the timeout and the drop,
            # so the response (or the failure) is a moment away: take it.
            waiter.wait()
        if waiter.failure is not None:
            raise waiter.failure
        response = waiter.response
        assert response is not None  # a waiter released without a failure was resolved with its response
        self._trace("recv", response)
        if "error" in response:
            error = response["error"]
            raise RpcError(error["code"], error["message"], error.get("data"))
        return response["result"]

    def notify(self, method: str, params: dict | None = None) -> None:
        if self._closed_reason is not None:
            raise ConnectionClosed(self._closed_reason)
        message = _message(method, params)
        self._trace("send", message)
        self.transport.send(message)

    def _cancel(self, request_id: int, reason: str) -> None:
        """Tell the server to stop working on it, without making the caller wait; if it is gone, nothing to do."""
        if self._closed_reason is not None:
            return
        message = _message("notifications/cancelled", {"requestId": request_id, "reason": reason})
        self._trace("send", message)
        try:
            self.transport.send_later(message)
        except McpError:
            pass

    def _drop(self, request_id: int) -> bool:
        with self._lock:
            return self._pending.pop(request_id, None) is not None

    def _trace(self, direction: str, message: dict) -> None:
        if self.on_traffic is not None:
            self.on_traffic(direction, message)

    # -- incoming (reader thread) ----------------------------------------------------

    def _on_message(self, message: Message) -> None:
        if isinstance(message, list):  # a batch, from a server of an older revision: one level, never nested
            for item in message:
                if isinstance(item, dict):
                    self._on_message(item)
                else:
                    self.log(f"ignored a batch item that is not an object: {_short(item)}")
            return
        if not isinstance(message, dict):
            self.log(f"ignored a message that is not an object: {_short(message)}")
        elif "method" in message:
            if "id" in message:
                self._answer_request(message)
            else:
                self._deliver_notification(message)
        elif "id" in message:
            self._on_response(message)
        else:
            self.log(f"ignored a message that is neither request nor response: {clip(repr(message), 200)}")

    def _on_response(self, message: dict) -> None:
        request_id = message["id"]
        problem = _response_problem(message)
        with self._lock:
            waiter = self._pending.pop(request_id, None) if _valid_id(request_id) else None
        if waiter is None:
            # Late (after a timeout) or never ours; either way nobody is waiting. After close,
            # answers to what close() ended (a subscription the server ends as it exits) are expected.
            if self._closed_reason is None:
                self.log(f"ignored a response for unknown request id {request_id!r}")
        elif problem is not None:
            self.log(f"malformed response to request {request_id}: {problem}")
            waiter.fail(ProtocolError(f"malformed response from server: {problem}"))
        else:
            waiter.resolve(message)

    def _answer_request(self, message: dict) -> None:
        self._trace_from_reader("recv", message)
        method = message["method"]
        handler = self.request_handlers.get(method)
        reply: dict = {"jsonrpc": "2.0", "id": message["id"]}
        if handler is not None:
            params = message.get("params")
            with self._lock:
                self._answering += 1
            try:
                reply["result"] = handler(params if isinstance(params, dict) else {})
            except RpcError as exc:
                reply["error"] = {"code": exc.code, "message": exc.message}
            except Exception as exc:  # a handler's bug is the server's error to read, not a crash here
                reply["error"] = {"code": INTERNAL_ERROR, "message": f"client failed on {method}: {exc!r}"}
            finally:
                with self._lock:
                    self._answering -= 1
                    for deadline in self._waits:
                        deadline.resume()
        elif method == "ping":
            reply["result"] = {}
        else:
            reply["error"] = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}
        self._trace_from_reader("send", reply)
        try:
            self.transport.send(reply)
        except McpError as exc:
            self.log(f"could not answer the server's {method} request: {exc}")

    def _deliver_notification(self, message: dict) -> None:
        self._trace_from_reader("recv", message)
        if self.on_notification is None:
            return
        params = message.get("params")
        try:
            self.on_notification(message["method"], params if isinstance(params, dict) else {})
        except Exception as exc:  # a notification handler's bug must not end the session
            self.log(f"notification handler failed on {message['method']}: {exc!r}")

    def _trace_from_reader(self, direction: str, message: dict) -> None:
        try:
            self._trace(direction, message)
        except Exception as exc:
            self.log(f"traffic handler failed: {exc!r}")

    def _on_request_error(self, request_id: Any, error: McpError) -> None:
        with self._lock:
            waiter = self._pending.pop(request_id, None) if _valid_id(request_id) else None
        if waiter is not None:
            waiter.fail(error)

    def _on_garbage(self, text: str) -> None:
        """A message the transport could not read: what was wrong with it, and how it started."""
        self.log(f"skipped a message from the server: {text}")

    def _on_close(self, reason: str) -> None:
        with self._lock:
            unexpected = self._closed_reason is None
            if unexpected:
                self._closed_reason = reason
            pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.fail(ConnectionClosed(reason))
        if unexpected:
            self.log(f"connection lost ({len(pending)} request(s) pending): {reason}")


def _wait_deadline(waiter: _Waiter, deadline: Deadline, paused: Callable[[], bool]) -> bool:
    """Wait until answered or the deadline, re-reading it each time the last wait ends: it may have moved.
    While `paused()` the deadline does not end the wait."""
    while True:
        remaining = deadline.remaining()
        if remaining is not None and remaining <= 0:
            if not paused():
                return False
            remaining = PAUSED_RECHECK
        if waiter.wait(remaining):
            return True


def _short(value: Any) -> str:
    text = (
        repr(value)
        if not isinstance(value, (list, dict))
        else f"a JSON {'array' if isinstance(value, list) else 'object'}"
    )
    return clip(text, 200)


def _message(method: str, params: dict | None, request_id: int | None = None) -> dict:
    message: dict = {"jsonrpc": "2.0"}
    if request_id is not None:
        message["id"] = request_id
    message["method"] = method
    if params is not None:
        message["params"] = params
    return message


def _valid_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _response_problem(message: dict) -> str | None:
    """What is wrong with a response, or None if it is well formed."""
    has_result, has_error = "result" in message, "error" in message
    if has_result == has_error:
        return "it must hold exactly one of result and error"
    if has_error:
        error = message["error"]
        if not isinstance(error, dict):
            return "error is not an object"
        if not isinstance(error.get("code"), int) or isinstance(error.get("code"), bool):
            return "error.code is not an integer"
        if not isinstance(error.get("message"), str):
            return "error.message is not a string"
    return None
