"""The remote engine's wire (models/openai/wire.py) against canned answers: what each malformed stream becomes.

A raw socket server sends fixed bytes for one request, so the checks see the
stream exactly as written: line endings, keep-alives, a last event without its
blank line, a line that is not server-sent events, a line over the cap.
"""

from __future__ import annotations

import socket
import threading

import pytest

from decodeloop.errors import RemoteError
from decodeloop.models.openai import wire as openai_wire
from decodeloop.models.openai.wire import Endpoint

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def answering(body: bytes) -> str:
    """The URL of a one-request server that answers with HEAD and `body`, then closes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(rest) < length:
                rest += conn.recv(65536)
            conn.sendall(HEAD + body)
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}/v1"


def chunks(body: bytes) -> list[dict]:
    stream = Endpoint(answering(body), timeout=10).open({"prompt": "x"})
    got: list[dict] = []
    try:
        for chunk in stream.chunks():
            got.append(chunk)
    finally:
        stream.close()
    return got


def test_every_line_ending_and_a_keep_alive():
    body = (
        b': keep-alive\r\ndata: {"n": 1}\r\n\r\nevent: x\nid: 7\nretry: soon\ndata: {"n":\ndata: 2}\n\ndata: [DONE]\n\n'
    )
    assert chunks(body) == [{"n": 1}, {"n": 2}]


def test_a_last_event_without_its_blank_line_is_read_then_the_cut_reported():
    got: list[dict] = []
    with pytest.raises(RemoteError, match=r"closed the stream before \[DONE\]"):
        stream = Endpoint(answering(b'data: {"n": 1}\n\ndata: {"n": 2}'), timeout=10).open({"prompt": "x"})
        for chunk in stream.chunks():
            got.append(chunk)
    assert got == [{"n": 1}, {"n": 2}]


def test_a_line_that_is_not_server_sent_events():
    with pytest.raises(RemoteError, match="sent a line that is not server-sent events: <html>"):
        chunks(b"<html>\n\n")


def test_a_line_over_the_cap(monkeypatch):
    monkeypatch.setattr(openai_wire, "MAX_LINE", 100)
    with pytest.raises(RemoteError, match="sent an event line over 100 bytes"):
        chunks(b"data: " + b"x" * 200 + b"\n\n")
