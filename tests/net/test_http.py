"""The HTTP pieces both wires share (net/http.py): which URLs are http(s) URLs, media types, hanging up."""

from __future__ import annotations

import socket

import pytest

from decodeloop.net.http import BadUrl, content_type, new_connection, shut, split_http_url


@pytest.mark.parametrize(
    "url, part",
    [("http://[::1", "syntax"), ("ftp://host/x", "scheme"), ("http:///path", "scheme"), ("http://h:99999/", "port")],
)
def test_a_bad_url_names_the_part_that_is_wrong(url, part):
    with pytest.raises(BadUrl) as info:
        split_http_url(url)
    assert info.value.part == part


def test_a_good_url_and_its_connection():
    parts = split_http_url("https://Example.org:8443/v1?x=1")
    assert (parts.scheme, parts.hostname, parts.port, parts.path) == ("https", "example.org", 8443, "/v1")
    conn = new_connection(parts.scheme, parts.hostname, parts.port, 3.0)
    assert type(conn).__name__ == "HTTPSConnection" and conn.timeout == 3.0 and conn.sock is None
    assert type(new_connection("http", "h", None, 1.0)).__name__ == "HTTPConnection"


def test_content_type_is_the_media_type_alone():
    assert content_type("Text/Event-Stream; charset=utf-8") == "text/event-stream"
    assert content_type(None) == ""


def test_shut_wakes_a_blocked_reader_and_tolerates_a_closed_socket():
    a, b = socket.socketpair()
    try:
        shut(a)
        assert a.recv(1) == b""  # no wait: the read side is shut
        shut(None)
        a.close()
        shut(a)  # a closed socket: nothing to do, no error
    finally:
        b.close()
