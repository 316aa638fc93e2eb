"""The Streamable HTTP transport (MCP 2025-03-26 and later): one POST per message.

This module owns the HTTP side of a session: the `Mcp-Session-Id` the server
assigns (captured from the first response that carries it and sent on every
request after, but only to the origin that issued it: a request redirected to
another origin goes without it, and that origin's own session id is ignored),
the `MCP-Protocol-Version` header (the client tells the transport the
negotiated version with `set_protocol_version`), the optional GET stream for
messages the server starts, and DELETE on close. The GET stream is reopened
when it ends, never sooner than a floor whatever its `retry:` says, with a
backoff that doubles for each stream in a row that fails or ends without a
message, and is given up with a notice after five such streams in a row.

Requests are POSTed by worker threads, each with its own keep-alive
connection, so the caller returns from `send` at once and waits on its own
timeout; the answer comes back as JSON or as an SSE stream that may carry the
server's own requests and notifications first. If such a stream ends before
the answer, the transport waits the stream's `retry:` delay and resumes it with
GET and `Last-Event-ID`. Notifications and responses are POSTed on the caller's
thread (202 Accepted), which keeps them in order.

A request that fails here (an HTTP status, a refused or dropped connection, a
stream that ends without the answer, an answer that cannot be read or is
larger than `max_message_bytes`) is reported for its id through `on_error`, so
it fails alone and the session goes on; a message on any stream that cannot be
read is skipped with a notice, and fails the request it answered if it shows
which. A notification the client sends after a timeout (the cancellation) goes
through `send_later`: POSTed from a thread of its own, with a short timeout of
its own, so it never lengthens the caller's wait. A 404 for a request that
carried a session id raises SessionExpired: the client initializes again.

On the stateless 2026-07-28 wire (`set_protocol_version("2026-07-28")`)
there is no session, no GET stream, no resumption and no cancellation message:
closing a request's stream is the cancellation, so a request given up on has
its connection shut (once its answer has begun to arrive). Every POST carries the version and the
headers headers.py mirrors from the body, plus any the caller adds (a tool's
`Mcp-Param-*`). A 4xx whose body is a JSON-RPC error raises HttpRpcError, so the
client can tell a modern server's refusal from a legacy server's.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from decodeloop.errors import (
    AuthorizationError,
    ConnectionClosed,
    HttpRpcError,
    HttpStatusError,
    McpError,
    ProtocolError,
    SessionExpired,
    TransportError,
)
from decodeloop.mcp import framing
from decodeloop.mcp.framing import DEFAULT_MAX_MESSAGE_BYTES, Unreadable
from decodeloop.mcp.headers import standard_headers
from decodeloop.mcp.transports.base import Message, Transport, Wire
from decodeloop.mcp.transports.httpbase import BodyTooLarge, HttpClient, Response, check_url, preview
from decodeloop.mcp.versions import is_stateless
from decodeloop.net.http import shut
from decodeloop.net.sse import SseError, SseParser

ACCEPT_BOTH = "application/json, text/event-stream"
READ_SIZE = 1 << 18  # large reads: a 20 MB event takes 80 of them
DEFAULT_RETRY = 1.0  # seconds before resuming a stream that named no retry: delay
MAX_RESUMES = 5  # reconnections of one request's stream before giving up
LISTEN_TIMEOUT = 300.0  # an idle GET stream is reopened after this long
MAX_LISTEN_FAILURES = 5  # GET streams in a row that fail or end without a message before giving up on it
STEADY_STREAM = 5.0  # a GET stream that stayed open this long was working, message or not
RECONNECT_FLOOR = 0.5  # seconds: the least wait before reopening the GET stream, whatever its retry: says
RECONNECT_CEILING = 30.0  # the backoff doubles up to this (a longer retry: from the server is kept)
DRAIN_TIMEOUT = 0.2  # after the answer, how long to wait for the stream's end (keeps the connection)
CLOSE_TIMEOUT = 2.0  # for the DELETE on close
LATER_TIMEOUT = 5.0  # for a notification sent in the background (a cancellation after a timeout)


def reconnect_backoff(failures: int, retry: float | None) -> float:
    """Seconds to wait before reopening the GET stream.

    The server's `retry:` (or the default) but never under the floor, doubled for
    each stream in a row that failed or ended without a message: a server that
    ends the stream at once with `retry: 0` is not reconnected to in a loop.
    """
    base = max(DEFAULT_RETRY if retry is None else retry, RECONNECT_FLOOR)
    return min(base * 2**failures, max(base, RECONNECT_CEILING))


def encode_message(message: dict) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def answers(message: Any, request_id: Any) -> bool:
    """Whether a JSON-RPC message (or batch) holds the response to `request_id`."""
    if isinstance(message, list):
        return any(answers(item, request_id) for item in message)
    return (
        isinstance(message, dict)
        and message.get("id") == request_id
        and "method" not in message
        and ("result" in message or "error" in message)
    )


class StreamableHttpTransport(Transport):
    wire: Wire = "http"

    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        *,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        auth: Any = None,
        listen: bool = True,
        log: Callable[[str], None] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        reconnect_delay: Callable[[int, float | None], float] | None = None,
    ) -> None:
        check_url(url)
        self.url = url
        # (failures in a row, the server's retry: in seconds or None) -> seconds before reopening the GET stream
        self.reconnect_delay = reconnect_delay or reconnect_backoff
        self.max_message_bytes = max_message_bytes
        # an auth.oauth.OAuth, or anything with header() (or request_headers(method, url)) and
        # authorize(url, status, challenge, headers)
        self.auth = auth
        self.listen = listen
        self.timeout = timeout
        self.log = log or (lambda line: None)
        self.http = HttpClient(url, headers, connect_timeout=connect_timeout, read_timeout=timeout)
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._stateless = False  # the 2026-07-28 wire: no session, no GET stream, mirrored headers
        self._streams: dict[Any, Response] = {}  # request id -> its answer being read (stateless wire)
        self._abandoned: set[Any] = set()  # ids the caller gave up on: their streams are shut
        self._on_message: Callable[[Message], None] = lambda m: None
        self._on_close: Callable[[str], None] = lambda r: None
        self._on_garbage: Callable[[str], None] = lambda line: None
        self._on_error: Callable[[Any, McpError], None] | None = None
        self._jobs: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._idle = 0
        self._queued = 0
        self._threads: list[threading.Thread] = []
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        self._started = False

    # -- lifecycle -----------------------------------------------------------------

    def start(
        self,
        on_message: Callable[[Message], None],
        on_close: Callable[[str], None],
        on_garbage: Callable[[str], None],
        on_error: Callable[[Any, McpError], None] | None = None,
    ) -> None:
        if self._started:
            raise RuntimeError("StreamableHttpTransport.start() called twice")
        self._started = True
        self._on_message, self._on_close, self._on_garbage, self._on_error = (
            on_message,
            on_close,
            on_garbage,
            on_error,
        )

    def set_protocol_version(self, version: str | None) -> None:
        """Every later request carries the version. After a legacy initialize, open the GET stream.

        The client calls this before `server/discover` (stateless) and again with
        None when it falls back to initialize, which goes out without the header.
        """
        self.protocol_version = version
        self._stateless = stateless = is_stateless(version)
        if stateless or version is None:
            return
        with self._lock:
            if self.listen and not self._stop.is_set() and (self._listener is None or not self._listener.is_alive()):
                self._listener = threading.Thread(target=self._listen, name="mcp-http-get", daemon=True)
                self._listener.start()

    def close(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            self._stop.set()
            threads = list(self._threads)
        if self.session_id is not None:
            try:  # tell the server the session is over; 405 means it does not let clients end sessions
                self.http.request(
                    "DELETE",
                    self.url,
                    headers=self._headers(accept=None),
                    private=self._auth_header("DELETE"),
                    read_timeout=CLOSE_TIMEOUT,
                ).error_preview()
            except McpError:
                pass
        self.http.close()  # wakes every thread blocked on a socket
        for _ in threads:
            self._jobs.put(None)
        for thread in [*threads, self._listener]:
            if thread is not None and thread is not threading.current_thread():
                thread.join(1.0)
        try:
            self._on_close("connection closed by the client")
        except Exception:
            pass

    # -- sending -------------------------------------------------------------------

    def send(self, message: dict, headers: dict[str, str] | None = None) -> None:
        """Send one message; `headers` are extra HTTP headers for its POST (a tool's Mcp-Param-*)."""
        if self._stop.is_set():
            raise ConnectionClosed("the connection to the server is closed")
        body = encode_message(message)
        extra = standard_headers(message) if self._stateless else {}
        if headers:
            extra.update(headers)
        if "method" in message and "id" in message:
            # subscriptions/listen is answered only when the server ends it: its stream may idle long
            read_timeout = LISTEN_TIMEOUT if message["method"] == "subscriptions/listen" else None
            with self._lock:
                self._queued += 1
                if self._queued > self._idle:
                    thread = threading.Thread(target=self._work, name="mcp-http-post", daemon=True)
                    self._threads.append(thread)
                    thread.start()
            self._jobs.put((body, message["id"], extra, read_timeout))
            return
        # a notification or a response: POST it here, so messages keep their order
        self._post(body, extra=extra).error_preview()

    def send_later(self, message: dict) -> None:
        """POST a notification from a thread of its own, with a short timeout; failures are only logged."""
        if self._stop.is_set():
            raise ConnectionClosed("the connection to the server is closed")
        if self._stateless and message.get("method") == "notifications/cancelled":
            # 2026-07-28 has no cancellation message over HTTP: the server sees the stream close
            self._abandon((message.get("params") or {}).get("requestId"))
            return
        body = encode_message(message)
        extra = standard_headers(message) if self._stateless else {}

        def post() -> None:
            try:
                self._post(body, read_timeout=min(LATER_TIMEOUT, self.timeout), extra=extra).error_preview()
            except McpError as exc:
                if not self._stop.is_set():
                    self.log(f"could not send {message.get('method', 'a message')}: {exc}")

        threading.Thread(target=post, name="mcp-http-later", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            if job is None:
                return
            body, request_id, extra, read_timeout = job
            try:
                self._request(body, request_id, extra, read_timeout)
            except McpError as exc:
                self._fail(request_id, exc)
            except Exception as exc:  # a bug here must fail the request, not hang it
                self._fail(request_id, TransportError(f"POST {self.url}: {type(exc).__name__}: {exc}"))

    def _fail(self, request_id: Any, error: McpError) -> None:
        if self._stop.is_set():
            return  # the session failed every request already
        if self._on_error is not None:
            self._on_error(request_id, error)
        else:
            self.log(f"request {request_id} failed: {error}")

    def _request(
        self, body: bytes, request_id: Any, extra: dict[str, str] | None = None, read_timeout: float | None = None
    ) -> None:
        if self._stateless:
            with self._lock:
                if request_id in self._abandoned:  # given up on while it waited for a worker: never sent
                    self._abandoned.discard(request_id)
                    return
        response = self._post(body, read_timeout=read_timeout, extra=extra)
        if not self._stateless:
            self._read_response(response, request_id)
            return
        with self._lock:
            abandoned = request_id in self._abandoned
            if not abandoned:
                self._streams[request_id] = response
        try:
            if abandoned:  # given up on while its headers were on the way
                shut(response.reading_socket())
                response.close()
                return
            self._read_response(response, request_id)
        finally:
            with self._lock:
                self._streams.pop(request_id, None)
                self._abandoned.discard(request_id)

    def _abandon(self, request_id: Any) -> None:
        """Shut the connection an abandoned request's answer arrives on (or will, once it starts)."""
        with self._lock:
            self._abandoned.add(request_id)
            response = self._streams.pop(request_id, None)
        if response is not None:
            shut(response.reading_socket())

    def _read_response(self, response: Response, request_id: Any) -> None:
        if response.status == 202:
            response.error_preview()
            return  # accepted without an answer here: it may arrive on the GET stream
        kind = response.content_type
        if kind == "text/event-stream":
            self._read_answer_stream(response, request_id)
        elif kind == "application/json" or not kind:
            try:
                data = response.read_capped(self.max_message_bytes)
            except BodyTooLarge as exc:
                raise ProtocolError(f"the response to request {request_id!r} is {exc}; it was skipped") from None
            response.close()
            if not self._deliver(data, request_id, whole=True):
                raise TransportError(
                    f"POST {self.url} answered {response.status} without the response "
                    f"to request {request_id}: {preview(data) or '(empty body)'}"
                )
        else:
            raise TransportError(
                f"POST {self.url} answered with Content-Type {kind!r}, expected JSON "
                f"or an event stream: {response.error_preview()}"
            )

    def _post(self, body: bytes, read_timeout: float | None = None, extra: dict[str, str] | None = None) -> Response:
        """POST one message; returns a 2xx response or raises the error its status means."""
        authorized = 0
        while True:
            sent_session = self.session_id
            headers = self._headers()
            if extra:
                headers.update(extra)
            response = self.http.request(
                "POST", self.url, body, headers, private=self._auth_header("POST"), read_timeout=read_timeout
            )
            status = response.status
            if status in (401, 403) and self.auth is not None and authorized < 2:
                challenge = response.headers.get("WWW-Authenticate", "")
                response.error_preview()
                authorized += 1
                if self.auth.authorize(self.url, status, challenge, response.headers):
                    continue
                raise AuthorizationError(f"POST {self.url}: HTTP {status} and authorization did not succeed")
            break
        if 200 <= status < 300:
            if not self._stateless:
                self._capture_session(response)
            return response
        if 400 <= status < 500 and status not in (401, 403) and response.content_type == "application/json":
            refusal, text = _rpc_error(response, status)
        else:
            refusal, text = None, response.error_preview()
        if status == 404 and sent_session is not None:
            with self._lock:
                if self.session_id == sent_session:
                    self.session_id = None
            raise SessionExpired(f"the server no longer knows session {sent_session} (HTTP 404)", status, text)
        if refusal is not None:
            raise refusal
        if status in (401, 403):
            raise AuthorizationError(
                f"POST {self.url}: HTTP {status} (the server wants authorization{': ' + text if text else ''})"
            )
        raise HttpStatusError(
            f"POST {self.url}: HTTP {status} {response.raw.reason}{': ' + text if text else ''}", status, text
        )

    def _headers(self, accept: str | None = ACCEPT_BOTH, last_event_id: str | None = None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"} if accept == ACCEPT_BOTH else {}
        if accept:
            headers["Accept"] = accept
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        return headers

    def _auth_header(self, method: str) -> dict[str, str] | None:
        """The headers that authorize one request (a DPoP proof is made for its method and URL)."""
        if self.auth is None:
            return None
        request_headers = getattr(self.auth, "request_headers", None)
        if request_headers is not None:
            return request_headers(method, self.url) or None
        value = self.auth.header()
        return {"Authorization": value} if value else None

    def _capture_session(self, response: Response) -> None:
        """Take the session id of the first response that carries one, bound to the origin that sent it.

        A later response never replaces it or moves it: another origin that a
        redirect reached and that names a session of its own is not believed.
        """
        session = response.headers.get("Mcp-Session-Id")
        if session and self.session_id is None:
            with self._lock:
                if self.session_id is None:
                    self.http.bind_session(response.url)  # before the id: it is never sent unbound
                    self.session_id = session

    # -- receiving -----------------------------------------------------------------

    def _deliver(self, data: bytes, request_id: Any = None, whole: bool = False) -> bool:
        """Hand one JSON message (or batch) on; True if it answered `request_id`.

        A message that cannot be read is skipped with a notice; the request it
        answered fails with the reason: `request_id` by raising (always, when the
        data is the `whole` answer to it), another through on_error.
        """
        try:
            message = framing.loads(data)
        except Unreadable as bad:
            self._on_garbage(bad.describe())
            if whole or (request_id is not None and bad.request_id == request_id):
                bad.request_id = request_id
                raise bad.error() from None
            if bad.request_id is not None:
                self._fail(bad.request_id, bad.error())
            return False
        answered = request_id is not None and answers(message, request_id)
        self._on_message(message)
        return answered

    def _read_answer_stream(self, response: Response, request_id: Any) -> None:
        parser = SseParser(self.max_message_bytes, cap_name="max_message_bytes")
        resumes = 0
        while not self._consume(response, parser, request_id)[0]:
            if self._stop.is_set():
                return
            if self._stateless:
                raise TransportError(
                    f"POST {self.url}: the event stream ended before the response to "
                    f"request {request_id} (streams of this protocol version cannot resume)"
                )
            if not parser.last_event_id:  # never set, or reset by an empty id: nothing to resume from
                raise TransportError(
                    f"POST {self.url}: the event stream ended before the response to "
                    f"request {request_id}, and named no event id to resume from"
                )
            if resumes == MAX_RESUMES:
                raise TransportError(
                    f"POST {self.url}: the event stream for request {request_id} dropped "
                    f"{resumes + 1} times without the response"
                )
            resumes += 1
            self._stop.wait(DEFAULT_RETRY if parser.retry is None else parser.retry / 1000)
            if self._stop.is_set():
                return
            response = self.http.request(
                "GET",
                self.url,
                headers=self._headers("text/event-stream", parser.last_event_id),
                private=self._auth_header("GET"),
            )
            if response.status == 405:
                response.error_preview()
                raise TransportError(
                    f"the event stream for request {request_id} dropped and the server "
                    "does not offer resumption (GET answered 405)"
                )
            if not 200 <= response.status < 300 or response.content_type != "text/event-stream":
                raise HttpStatusError(
                    f"resuming the event stream for request {request_id}: HTTP "
                    f"{response.status}: {response.error_preview()}",
                    response.status,
                )
            parser.finish()

    def _consume(self, response: Response, parser: SseParser, request_id: Any) -> tuple[bool, int]:
        """Read events until the stream ends or answers `request_id`: (whether it answered, messages read)."""
        answered = False
        messages = 0
        try:
            while not answered:
                chunk = response.read1(READ_SIZE)
                if not chunk:
                    break
                for event in parser.feed(chunk):
                    if event.event == "message" and event.data.strip():
                        messages += 1
                        answered = self._deliver(event.data, request_id) or answered
        except SseError as exc:
            response.close()
            raise TransportError(f"{self.url}: malformed event stream: {exc}") from None
        except TransportError as exc:
            if self._stop.is_set():
                return answered, messages
            if request_id in self._abandoned:  # shut on purpose: nothing to report
                response.close()
                return answered, messages
            self.log(f"event stream interrupted: {exc}")
        if answered:
            self._drain(response)
        response.close()
        return answered, messages

    def _drain(self, response: Response) -> None:
        """After the answer, wait briefly for the stream's end so the connection can be reused."""
        sock = response._conn.sock
        try:
            if sock is not None:
                sock.settimeout(DRAIN_TIMEOUT)
            while response.raw.read1(READ_SIZE):
                pass
        except Exception:
            pass

    def _listen(self) -> None:
        """The GET stream: messages the server starts on its own, reopened when it ends.

        Reopened after `reconnect_delay` (`reconnect_backoff` by default): never
        sooner than its floor, and later for each stream in a row that failed or
        ended without a message (an event id alone, such as a priming event, is
        not one). After MAX_LISTEN_FAILURES of those in a row the stream is
        given up, with a notice.
        """
        last_id: str | None = None
        retry: float | None = None  # the server's retry:, in seconds, once it sent one
        failures = 0
        while not self._stop.is_set():
            opened = time.monotonic()
            response: Response | None
            problem: str | None
            try:
                response = self.http.request(
                    "GET",
                    self.url,
                    headers=self._headers("text/event-stream", last_id),
                    private=self._auth_header("GET"),
                    read_timeout=LISTEN_TIMEOUT,
                )
            except McpError as exc:
                response, problem = None, str(exc)
            else:
                problem = None
                if response.status == 405:
                    response.error_preview()
                    self.log("the server offers no GET stream for messages it starts (HTTP 405)")
                    return
                if not 200 <= response.status < 300 or response.content_type != "text/event-stream":
                    self.log(
                        f"GET stream refused: HTTP {response.status} {response.content_type or ''}: "
                        f"{response.error_preview()}".replace(":  :", ":")
                    )
                    return
            delivered = 0
            if response is not None:
                parser = SseParser(self.max_message_bytes, cap_name="max_message_bytes")
                parser.last_event_id = last_id
                try:
                    delivered = self._consume(response, parser, None)[1]
                except Exception as exc:  # a broken stream (or a bug) ends this stream, never the listener
                    response.close()
                    problem = str(exc) if isinstance(exc, McpError) else f"{type(exc).__name__}: {exc}"
                    self.log(f"GET stream failed: {problem}")
                last_id = parser.last_event_id
                if parser.retry is not None:
                    retry = parser.retry / 1000
            if self._stop.is_set():
                return
            # a stream that fails or ends without a message, again and again, is not worth reopening forever
            failures = 0 if delivered or time.monotonic() - opened > STEADY_STREAM else failures + 1
            if failures >= MAX_LISTEN_FAILURES:
                self.log(
                    f"gave up on the GET stream for messages the server starts: it failed or ended without "
                    f"a message {failures} times in a row" + (f" ({problem})" if problem else "")
                )
                return
            self._stop.wait(self.reconnect_delay(failures, retry))


def _rpc_error(response: Response, status: int) -> tuple[HttpRpcError | None, str]:
    """A 4xx whose body is a JSON-RPC error (a modern server refusing a request) as HttpRpcError; and a preview."""
    try:
        data = response.read_capped(1 << 16)
    except (BodyTooLarge, McpError):
        return None, ""
    finally:
        response.close()
    try:
        message = json.loads(data)
    except ValueError:
        message = None
    error = message.get("error") if isinstance(message, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return None, preview(data)
    refusal = HttpRpcError(error["code"], str(error.get("message", "")), error.get("data"), status)
    refusal.args = (f"POST {response.url}: HTTP {status}: {refusal.message} (JSON-RPC error {refusal.code})",)
    return refusal, preview(data)
