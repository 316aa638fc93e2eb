"""HTTP plumbing shared by the Streamable HTTP and legacy SSE transports (and OAuth).

This module owns connections and what can go wrong on them. `HttpClient`
keeps keep-alive `http.client` connections, one set per thread and origin, so a
thread's requests reuse its connection and threads never share one; every
socket has a timeout, so nothing waits forever; `close()` shuts every socket
down, which wakes any thread blocked reading. It follows redirects, and sends
the caller's own headers (credentials) only to the origin they were given for,
and the session id only to the origin that issued it (the transport names it
with `bind_session` when it takes the id; no later response moves it): a
redirect to another origin arrives without them. Every failure becomes a
TransportError (or HttpStatusError) that says what happened and where. The
caller's credential headers are held for redaction (text/credentials.py), and an
error's preview of a body never shows one, whole or cut.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Mapping

from decodeloop.errors import HttpStatusError, TransportError
from decodeloop.net.http import BadUrl, content_type, new_connection, shut, socket_of, split_http_url
from decodeloop.text.credentials import clip, hold_headers, redact

MAX_REDIRECTS = 5
PREVIEW_BYTES = 2048  # of an error response's body, read for the message
PREVIEW_CHARS = 200
REDIRECTS = (301, 302, 303, 307, 308)
ORIGIN_BOUND = frozenset({"mcp-session-id"})  # headers (lower case) sent only to the origin that issued them


def check_url(url: str) -> urllib.parse.SplitResult:
    """A parsed http(s) URL, or a TransportError saying why it is not one."""
    try:
        return split_http_url(url)
    except BadUrl as exc:
        raise TransportError(f"bad URL {url!r}: {exc}") from None


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port): two URLs with the same origin may share credentials."""
    parts = check_url(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


def preview(body: bytes) -> str:
    """A short one-line excerpt of a response body, for error messages (an HTML page without its tags), with
    the credentials this process holds redacted (a server's error page may echo the request's headers)."""
    text = body[:PREVIEW_BYTES].decode("utf-8", errors="replace")
    if text.lstrip().startswith("<"):
        text = re.sub(r"<[^>]*>", " ", text)
    text = " ".join(text.split())
    if len(text) > PREVIEW_CHARS:
        return clip(text, PREVIEW_CHARS) + "..."
    return redact(text, cut=len(body) >= PREVIEW_BYTES)


class BodyTooLarge(Exception):
    """A response body longer than the cap the caller gave."""

    def __init__(self, size: int, cap: int, ended: bool) -> None:
        super().__init__(
            f"{'' if ended else 'at least '}{size:,} bytes, over the {cap:,}-byte cap on one message "
            "(max_message_bytes)"
        )


class Response:
    """An open response. Read it, then `close()`; a fully read body frees the connection for reuse."""

    def __init__(
        self,
        client: HttpClient,
        key: tuple,
        conn: http.client.HTTPConnection,
        raw: http.client.HTTPResponse,
        url: str,
    ) -> None:
        self._client, self._key, self._conn, self.raw, self.url = client, key, conn, raw, url
        self.status = raw.status
        self.headers = raw.headers
        self._done = False

    @property
    def content_type(self) -> str:
        return content_type(self.headers.get("Content-Type"))

    def read(self) -> bytes:
        try:
            return self.raw.read()
        except Exception as exc:
            self.close()
            raise self._client.translate(exc, self.url) from None

    def read_capped(self, cap: int) -> bytes:
        """The whole body, unless it is longer than `cap` bytes: then BodyTooLarge, and the connection is dropped.

        A body with a Content-Length over the cap is refused before any of it is read.
        """
        length = self.raw.length
        if length is not None:
            if length > cap:
                self.close()
                raise BodyTooLarge(length, cap, ended=True)
            return self.read()
        pieces: list[bytes] = []
        size = 0
        while True:
            piece = self.read1(1 << 18)
            if not piece:
                return b"".join(pieces)
            size += len(piece)
            if size > cap:
                self.close()
                raise BodyTooLarge(size, cap, ended=False)
            pieces.append(piece)

    def read1(self, n: int) -> bytes:
        try:
            return self.raw.read1(n)
        except Exception as exc:
            self.close()
            raise self._client.translate(exc, self.url) from None

    def set_read_timeout(self, seconds: float) -> None:
        """Every later read of this response waits at most `seconds` (its headers may have had another wait)."""
        sock = self.reading_socket()
        if sock is not None:
            sock.settimeout(seconds)

    def reading_socket(self) -> socket.socket | None:
        """The socket this response is read from (None once closed)."""
        return socket_of(self._conn, self.raw)

    def error_preview(self) -> str:
        try:
            body = self.raw.read(PREVIEW_BYTES)
        except Exception:
            body = b""
        self.close()
        return preview(body)

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        reusable = self.raw.isclosed() and not self.raw.will_close
        self._client._release(self._key, self._conn, reusable)


def _connect(conn: http.client.HTTPConnection) -> None:
    conn.connect()
    # http.client writes headers and body in two sends: without this, Nagle's
    # algorithm and the peer's delayed ACK hold the body back ~40 ms
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Idle(threading.local):
    def __init__(self) -> None:
        self.connections: dict[tuple, list[http.client.HTTPConnection]] = {}


class HttpClient:
    """Requests with timeouts, per-thread keep-alive, redirects and an origin rule for credentials."""

    def __init__(
        self,
        trusted_url: str,
        credentials: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
    ) -> None:
        self.trusted_origin = origin(trusted_url)
        self.session_origin: tuple | None = None  # the origin that issued the session id (bind_session)
        self.credentials = dict(credentials or {})
        # held for redaction, named for the host unless the caller held them first for its server (connect_url)
        hold_headers(self.credentials, "{}:{}".format(*self.trusted_origin[1:]))
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._idle = _Idle()
        self._open: set[http.client.HTTPConnection] = set()
        self._lock = threading.Lock()
        self._closed = False

    def request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        private: Mapping[str, str] | None = None,
        read_timeout: float | None = None,
        follow_redirects: bool = True,
    ) -> Response:
        """Send a request and return the response once its headers arrived (any status).

        `private` headers (an access token, say) join the client's credentials:
        both go to the trusted origin only.
        """
        for _ in range(MAX_REDIRECTS + 1):
            response = self._once(method, url, body, headers, private, read_timeout)
            location = response.headers.get("Location")
            if not (follow_redirects and response.status in REDIRECTS and location):
                return response
            response.error_preview()  # drain and release
            if response.status in (301, 302, 303) and method not in ("GET", "HEAD"):
                if response.status != 303:
                    raise HttpStatusError(
                        f"{method} {url} was redirected ({response.status}) to {location}; "
                        "only 307 and 308 keep the method, so it was not followed",
                        response.status,
                    )
                method, body = "GET", None
            url = urllib.parse.urljoin(url, location)
        raise TransportError(f"{method} {url}: more than {MAX_REDIRECTS} redirects")

    def bind_session(self, url: str) -> None:
        """The session id just taken was issued by `url`'s origin: it goes there only, for as long as it lives."""
        self.session_origin = origin(url)

    def _once(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str] | None,
        private: Mapping[str, str] | None,
        read_timeout: float | None,
    ) -> Response:
        parts = check_url(url)
        key = origin(url)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        all_headers = dict(headers or {})
        if key == self.trusted_origin:
            all_headers.update(self.credentials)
            all_headers.update(private or {})
        if key != (self.session_origin or self.trusted_origin):
            # a redirect elsewhere: the session id would let that origin act in our session
            all_headers = {name: value for name, value in all_headers.items() if name.lower() not in ORIGIN_BOUND}
        timeout = self.read_timeout if read_timeout is None else read_timeout
        for attempt in (0, 1):
            conn, reused = self._acquire(key, parts)
            try:
                if conn.sock is None:
                    _connect(conn)
                conn.sock.settimeout(timeout)
                conn.request(method, target, body=body, headers=all_headers)
                raw = conn.getresponse()
            except Exception as exc:
                self._release(key, conn, False)
                # A keep-alive connection the server already closed fails at once: retry on a fresh one.
                if (
                    reused
                    and attempt == 0
                    and isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))
                ):
                    continue
                raise self.translate(exc, url) from None
            return Response(self, key, conn, raw, url)
        raise AssertionError("unreachable")

    def translate(self, exc: Exception, url: str) -> TransportError:
        """A socket or http.client exception as a TransportError that says what happened."""
        where = url.split("?")[0]
        if self._closed:
            return TransportError(f"{where}: the connection was closed by the client")
        if isinstance(exc, TransportError):
            return exc
        if isinstance(exc, ConnectionRefusedError):
            return TransportError(f"cannot connect to {where}: connection refused")
        if isinstance(exc, socket.timeout):
            return TransportError(f"{where}: no answer within the timeout ({exc or 'timed out'})")
        if isinstance(exc, socket.gaierror):
            return TransportError(f"cannot connect to {where}: unknown host ({exc.strerror or exc})")
        if isinstance(
            exc,
            (
                http.client.RemoteDisconnected,
                http.client.IncompleteRead,
                ConnectionResetError,
                BrokenPipeError,
                ConnectionAbortedError,
            ),
        ):
            return TransportError(f"{where}: the server dropped the connection ({type(exc).__name__})")
        if isinstance(exc, ssl.SSLError):
            return TransportError(f"{where}: TLS failed: {exc}")
        if isinstance(exc, http.client.HTTPException):
            return TransportError(f"{where}: malformed HTTP response ({type(exc).__name__}: {exc})")
        if isinstance(exc, OSError):
            return TransportError(f"{where}: {exc.strerror or exc}")
        return TransportError(f"{where}: {type(exc).__name__}: {exc}")

    # -- connections ---------------------------------------------------------------

    def _acquire(self, key: tuple, parts: urllib.parse.SplitResult) -> tuple[http.client.HTTPConnection, bool]:
        if self._closed:
            raise TransportError(f"{parts.geturl()}: the connection was closed by the client")
        idle = self._idle.connections.get(key)
        if idle:
            return idle.pop(), True
        scheme, host, port = key
        context = ssl.create_default_context() if scheme == "https" else None
        conn = new_connection(scheme, host, port, self.connect_timeout, context)
        with self._lock:
            self._open.add(conn)
        return conn, False

    def _release(self, key: tuple, conn: http.client.HTTPConnection, reusable: bool) -> None:
        if reusable and not self._closed and conn.sock is not None:
            self._idle.connections.setdefault(key, []).append(conn)
            return
        with self._lock:
            self._open.discard(conn)
        conn.close()

    def close(self) -> None:
        """Shut down every connection, waking any thread blocked on one."""
        self._closed = True
        with self._lock:
            connections, self._open = list(self._open), set()
        for conn in connections:
            shut(conn.sock)
            conn.close()
