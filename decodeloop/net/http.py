"""HTTP pieces that the MCP client's transports and the remote engine both need, over `http.client`.

This module owns what is the same on both wires: which URLs are http(s) URLs
(`split_http_url`, whose `BadUrl` says which part is wrong so each caller words
its own error), a connection of the URL's scheme, a response's media type, and
hanging up (the socket a response is read from, shut down so a blocked reader
wakes and the server sees the close). Errors, caps and redirects stay with the
callers: each wire reports them in its own terms.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import urllib.parse


class BadUrl(ValueError):
    """Not an http(s) URL; `part` is "syntax" (urlsplit refused it), "scheme" (or no host) or "port"."""

    def __init__(self, message: str, part: str) -> None:
        super().__init__(message)
        self.part = part


def split_http_url(url: str) -> urllib.parse.SplitResult:
    """The parts of an http(s) URL with a host and a valid port, or BadUrl."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:
        raise BadUrl(str(exc), "syntax") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadUrl("expected http://host/... or https://host/...", "scheme")
    try:
        _ = parts.port  # raises on a port that is not a number in range
    except ValueError as exc:
        raise BadUrl(str(exc), "port") from None
    return parts


def new_connection(
    scheme: str, host: str, port: int | None, timeout: float, context: ssl.SSLContext | None = None
) -> http.client.HTTPConnection:
    """A connection (not yet opened) for the scheme; `context` only for https (None: http.client's default)."""
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    return http.client.HTTPConnection(host, port, timeout=timeout)


def content_type(value: str | None) -> str:
    """The media type of a Content-Type header, lower case, without its parameters ("" when absent)."""
    return (value or "").split(";")[0].strip().lower()


def socket_of(conn: http.client.HTTPConnection, raw: http.client.HTTPResponse) -> socket.socket | None:
    """The socket a response is read from, or None once closed."""
    # a response read until the connection closes holds the socket alone: http.client let go of it
    return conn.sock or getattr(getattr(getattr(raw, "fp", None), "raw", None), "_sock", None)


def shut(sock: socket.socket | None) -> None:
    """Shut a socket down both ways: a thread blocked reading it wakes, and the peer sees the close."""
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
