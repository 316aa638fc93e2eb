"""The studio's server (studio/server.py) over real HTTP: the token, the Host and Origin checks, the page's
headers, the actions and the event stream, with the lab table model and the real weather server."""

from __future__ import annotations

import http.client
import json

import pytest
from test_session import QUESTION, studio  # noqa: F401  (the fixture)

from decodeloop.studio.server import COOKIE, MAX_BODY, StudioServer

TIMEOUT = 30  # a guard against a hang, never a check


@pytest.fixture
def server(studio):  # noqa: F811
    server = StudioServer(token="the-secret")
    server.start(studio)
    yield server
    server.shutdown()


def request(server, method, path, body=None, headers=None, token=True, raw=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    sent = {"Host": f"127.0.0.1:{server.port}"}
    if token:
        sent["Cookie"] = f"{COOKIE}=the-secret"
    if body is not None or raw is not None:
        sent["Content-Type"] = "application/json"
    sent.update(headers or {})
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers=sent)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response, payload


def test_without_the_token_every_request_is_refused_with_403(server):
    for method, path in (("GET", "/"), ("GET", "/studio.js"), ("GET", "/api/state"), ("GET", "/events")):
        response, _ = request(server, method, path, token=False)
        assert response.status == 403, path
    response, _ = request(server, "POST", "/api/ask", {"prompt": QUESTION}, token=False)
    assert response.status == 403
    response, _ = request(server, "GET", "/", headers={"Cookie": f"{COOKIE}=not-the-secret"}, token=False)
    assert response.status == 403
    response, _ = request(server, "GET", "/?token=not-the-secret", token=False)
    assert response.status == 403
    assert server.session.state()["phase"] == "idle"  # nothing was asked


def test_the_url_s_token_becomes_a_cookie_and_leaves_the_address_bar(server):
    assert server.url == f"http://127.0.0.1:{server.port}/?token=the-secret"
    response, _ = request(server, "GET", "/?token=the-secret", token=False)
    assert response.status == 303 and response.getheader("Location") == "/"
    cookie = response.getheader("Set-Cookie")
    assert cookie.startswith(f"{COOKIE}=the-secret;") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    response, page = request(server, "GET", "/", headers={"Cookie": cookie.split(";")[0]}, token=False)
    assert response.status == 200 and b'<script src="/studio.js"></script>' in page
    csp = response.getheader("Content-Security-Policy")
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert response.getheader("Referrer-Policy") == "no-referrer"


def test_another_host_or_another_origin_is_refused(server):
    for headers in (
        {"Host": f"evil.example:{server.port}"},  # a DNS-rebinding page: its own name for 127.0.0.1
        {"Host": "127.0.0.1:1"},
        {"Origin": "http://evil.example"},
        {"Origin": f"http://127.0.0.1:{server.port + 1}"},
    ):
        response, _ = request(server, "POST", "/api/ask", {"prompt": QUESTION}, headers=headers)
        assert response.status == 403, headers
    assert server.session.state()["phase"] == "idle"
    response, _ = request(
        server, "POST", "/api/ask", {"prompt": QUESTION}, headers={"Origin": f"http://localhost:{server.port}"}
    )
    assert response.status == 200


def test_the_actions_drive_the_turn_and_the_stream_carries_its_events(server):
    response, body = request(server, "POST", "/api/ask", {"prompt": QUESTION})
    assert response.status == 200 and json.loads(body)["phase"] == "writing"
    response, body = request(server, "POST", "/api/to-stop", {})
    assert json.loads(body)["held"][0]["name"] == "get_weather"
    response, body = request(server, "POST", "/api/to-end", {})
    state = json.loads(body)
    assert state["phase"] == "over" and state["answer"].endswith("It is 33°F and overcast.")
    events = read_stream(server, "/events?from=0", until="done")
    kinds = [e["event"] for _, e in events]
    assert kinds.index("prompt") < kinds.index("tool_call") < kinds.index("inject") < kinds.index("done")
    numbers = [n for n, _ in events]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    later = read_stream(server, f"/events?from={numbers[-1]}", until="done")
    assert [n for n, _ in later] == [numbers[-1]]  # from a number on: that one and what follows


def read_stream(server, path, until):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{server.port}", "Cookie": f"{COOKIE}=the-secret"})
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Type").startswith("text/event-stream")
    events, number = [], None
    while True:
        line = response.fp.readline().decode()
        assert line, "the stream ended"
        if line.startswith("id: "):
            number = int(line[4:])
        elif line.startswith("data: "):
            data = json.loads(line[6:])
            events.append((number, data))
            if data["event"] == until:
                break
    conn.close()
    return events


def test_bodies_that_are_not_what_an_action_takes_get_a_clear_error(server):
    response, body = request(server, "POST", "/api/step", {"tokens": 1})
    assert response.status == 409 and "ask something first" in json.loads(body)["error"]
    response, body = request(server, "POST", "/api/ask", raw=b"{not json")
    assert response.status == 400 and "not JSON" in json.loads(body)["error"]
    response, body = request(server, "POST", "/api/ask", raw=b"[1, 2]")
    assert response.status == 400
    response, body = request(server, "POST", "/api/ask", raw=b"\xff\xfe")
    assert response.status == 400
    # a body said to be over the cap is refused from its Content-Length, before it is read
    response, body = request(server, "POST", "/api/ask", raw=b"{}", headers={"Content-Length": str(MAX_BODY + 1)})
    assert response.status == 413
    response, body = request(server, "POST", "/api/ask", {"prompt": 5})
    assert response.status == 409 and "empty" in json.loads(body)["error"]
    response, body = request(server, "POST", "/api/fork", {"at": "x", "token": 1})
    assert response.status == 409 and "at: a whole number" in json.loads(body)["error"]
    response, _ = request(server, "POST", "/api/nothing", {})
    assert response.status == 404
    response, _ = request(server, "POST", "/api/ask", {"prompt": QUESTION}, headers={"Content-Type": "text/plain"})
    assert response.status == 415
    assert server.session.state()["phase"] == "idle"


def test_a_session_saves_as_json_lines_and_as_the_viewer_s_page(server):
    request(server, "POST", "/api/ask", {"prompt": QUESTION})
    request(server, "POST", "/api/to-end", {})
    response, body = request(server, "GET", "/api/export.jsonl")
    assert response.status == 200 and "attachment" in response.getheader("Content-Disposition")
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert [e["event"] for e in lines] == [d["event"] for _, d in server.session.log.since(0)]
    assert lines[-1]["event"] == "done" and lines[-1]["answer"].endswith("It is 33°F and overcast.")
    response, body = request(server, "GET", "/api/export.html")
    html = body.decode()
    assert response.status == 200 and html.startswith("<!DOCTYPE html>") and "decodeloop studio session" in html
    assert '"event":"done"' in html.replace(" ", "")
    response, _ = request(server, "GET", "/api/export.jsonl", token=False)
    assert response.status == 403


def test_the_lab_s_questions_to_start_from(server):
    response, body = request(server, "GET", "/api/questions")
    assert response.status == 200
    questions = json.loads(body)["questions"]
    assert questions[0] == QUESTION and len(questions) == len(set(questions)) > 3
    assert all(isinstance(q, str) and q.endswith(("?", ".")) for q in questions)
