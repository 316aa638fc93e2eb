"""The studio's web server: the page and one `StudioSession`, on 127.0.0.1, behind a secret token.

The standard library's `ThreadingHTTPServer`, with the session's events streamed as server-sent events: the
lab runs with `python3 -S`, so the studio needs nothing outside the standard library (docs/studio.md says
why not an ASGI stack).

Every request must carry the token: the URL printed at start holds it once (`/?token=...`), which sets it as
a cookie (HttpOnly, SameSite=Strict) and redirects to `/`, so the token leaves the address bar. Without it,
403. The `Host` header must name the loopback address and port the server listens on (a DNS-rebinding page's
host is refused), and a request that says where it comes from (`Origin`) must come from the page itself.
Actions are POSTs with a JSON body (at most 64 KB); the page's own files are served with a
Content-Security-Policy that allows only them (no inline script, no other origin) and no referrer.

    GET  /?token=T        the token as a cookie, then the page
    GET  /                the page (studio.html; /studio.js, /studio.css beside it)
    GET  /events?from=N   the events from number N on, as text/event-stream (`id:` is the number)
    GET  /api/state       where the conversation stands (StudioSession.state)
    GET  /api/questions   the lab's questions to start from
    GET  /api/export.jsonl, /api/export.html   the session's events as JSON Lines, or as the viewer's page
    GET  /app/N           the page of the app event numbered N (MCP Apps), under a policy of its own: sandboxed
    POST /api/model       {"model": NAME}  (another model, in a conversation of its own)
    POST /api/ask         {"prompt": "..."}
    POST /api/step        {"tokens": N}
    POST /api/to-stop     {}  (a message that ends in calls is held before dispatch)
    POST /api/send        {} or {"arguments": [...]}  (the held calls, edited or not, dispatched; results held)
    POST /api/inject      {} or {"results": [...]}  (the held results, edited or not, into the context)
    POST /api/to-end      {}
    POST /api/fork        {"at": POSITION, "token": ID}  (another candidate at a token of this turn)
    POST /api/back        {"branch": N}  (back to a branch a fork left; the one left becomes a branch)
    POST /api/distribution  {"at": POSITION}  (the model's top 40 logits there, for the page to reshape)
    POST /api/attention   {"at": POSITION}  (the numpy transformer's heads from the position that chose it)
    POST /api/app-call    {"server", "app", "name", "arguments"}  (a tool call an app's page asked for; where
                          the policy asks the user: {"confirm": {"id", "question"}}, and the call waits)
    POST /api/app-answer  {"id", "allow"}  (the person's answer to that question: the call runs or is refused)

An action answers with the state (200), or {"error": ...} with 409 for a step that cannot be taken now, 400
for a body that is not what the action takes.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from decodeloop.studio.session import EventLog, StudioError, StudioSession
from decodeloop.text.untrusted import json_escaped, visible
from decodeloop.ui.html import APP_JS, TEXT_JS, page

PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "page")  # package data


def _page_file(name: str) -> str:
    with open(os.path.join(PAGE, name), encoding="utf-8") as f:
        return f.read()


FILES = {  # path -> (the file from page/, its type), read once; the script starts with the viewer's text.js
    "/": (_page_file("studio.html").encode(), "text/html"),
    "/studio.js": ((TEXT_JS + APP_JS + _page_file("studio.js")).encode(), "text/javascript"),
    "/studio.css": (_page_file("studio.css").encode(), "text/css"),
}
MAX_BODY = 1024 * 1024  # an edited result may be longer than the result cap, to see it cut
KEEPALIVE = 15.0  # seconds between comments on a quiet event stream (a closed tab is noticed then)
COOKIE = "decodeloop_studio"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# an app's page (MCP Apps), in a frame of the studio's page only: its own inline script and style, nothing fetched,
# and sandboxed even if opened alone (no origin of its own: no cookie, no storage, no call to the studio's API)
APP_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:; "
    "media-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox allow-scripts"
)


class StudioServer:
    """The server: it listens from the moment it is made (a port in use is known before a model loads), and
    serves one session from `serve_forever(session)` until `shutdown` (Ctrl-C, or a test)."""

    def __init__(self, port: int = 0, token: str | None = None) -> None:
        self.token = token or secrets.token_urlsafe(24)
        self.session: StudioSession | None = None  # the one it serves, from serve_forever on
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        self.origins = {f"http://{host}" for host in self.hosts}

    @property
    def url(self) -> str:
        """The address to open: it holds the token."""
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def serve_forever(self, session: StudioSession) -> None:
        self.session = session
        self._httpd.serve_forever(poll_interval=0.2)

    def shutdown(self) -> None:
        """Stop serving (the event streams end) and close the socket; safe before serving, and twice."""
        if self.session is not None:
            self.session.log.close()
            self._httpd.shutdown()
        self._httpd.server_close()

    def start(self, session: StudioSession) -> threading.Thread:
        """Serve on a thread of its own (tests)."""
        self.session = session
        thread = threading.Thread(target=self._httpd.serve_forever, args=(0.2,), name="studio", daemon=True)
        thread.start()
        return thread

    def allowed(self, headers: Any, query_token: str | None) -> bool:
        """The loopback host this server is, the page's own origin (when one is given) and the token."""
        if headers.get("Host") not in self.hosts:
            return False
        origin = headers.get("Origin")
        if origin is not None and origin not in self.origins:
            return False
        given = query_token if query_token is not None else _cookie(headers.get("Cookie", ""))
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def _number(text: str) -> int:
    """An event number from the page (0 for anything that is not one)."""
    return int(text) if text.isdigit() and len(text) <= 15 else 0


def _cookie(header: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def _jsonl(log: EventLog) -> bytes:
    """The session's events as JSON Lines, as `--json` writes them (escapes and all)."""
    return "".join(json_escaped(json.dumps(data, ensure_ascii=False)) + "\n" for _, data in log.since(0)).encode()


def _html(log: EventLog) -> bytes:
    """The session's events as the viewer's page (ui/html.py), to keep or share."""
    meta = (
        {"title": "decodeloop studio session", "dropped": log.dropped}
        if log.dropped
        else {"title": "decodeloop studio session"}
    )
    return page([data for _, data in log.since(0)], meta).encode()


EXPORTS = {  # path -> (type, the file's name, what it holds)
    "/api/export.jsonl": ("application/x-ndjson", "decodeloop-studio.jsonl", _jsonl),
    "/api/export.html": ("text/html", "decodeloop-studio.html", _html),
}


def lab_questions() -> list[str]:
    """Questions to start from: the lab's first one, then the corpus's held-out ones (places no training
    episode names), each once."""
    from decodeloop.lab.corpus import episodes

    asked = ["What's the weather in Polson, MT?", *(e.user for e in episodes(0, 24, "heldout"))]
    return list(dict.fromkeys(asked))[:12]


ACTIONS: dict[str, Callable[[StudioSession, dict], dict]] = {
    "/api/model": lambda session, body: session.use(body.get("model")),
    "/api/ask": lambda session, body: session.ask(body.get("prompt")),
    "/api/step": lambda session, body: session.step(body.get("tokens", 1)),
    "/api/to-stop": lambda session, body: session.to_stop(),
    "/api/send": lambda session, body: session.send(body.get("arguments")),
    "/api/to-end": lambda session, body: session.to_end(),
    "/api/inject": lambda session, body: session.inject(body.get("results")),
    "/api/fork": lambda session, body: session.fork(body.get("at"), body.get("token")),
    "/api/back": lambda session, body: session.back(body.get("branch")),
    "/api/distribution": lambda session, body: session.distribution(body.get("at"), body.get("n", 40)),
    "/api/attention": lambda session, body: session.attention(body.get("at")),
    "/api/app-call": lambda session, body: session.app_call(
        body.get("server"), body.get("app"), body.get("name"), body.get("arguments")
    ),
    "/api/app-answer": lambda session, body: session.app_answer(body.get("id"), body.get("allow")),
}


def _handler(studio: StudioServer) -> type[BaseHTTPRequestHandler]:
    def session() -> StudioSession:
        assert studio.session is not None  # requests are served only once there is one
        return studio.session

    class Handler(BaseHTTPRequestHandler):
        def version_string(self) -> str:
            return "decodeloop-studio"

        def log_message(self, format: str, *args: Any) -> None:
            return None  # the terminal shows the URL and errors, not every request

        def _send(
            self,
            status: int,
            body: bytes,
            content_type: str,
            extra: dict[str, str] | None = None,
            policy: str = CSP,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type + "; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Content-Security-Policy", policy)
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, data: dict) -> None:
            self._send(status, json.dumps(data, ensure_ascii=True).encode(), "application/json")

        def _refused(self) -> None:
            self._send(403, b"forbidden: open the URL decodeloop studio printed\n", "text/plain")

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            token = query.get("token", [None])[0] if url.path == "/" else None
            if not studio.allowed(self.headers, token):
                return self._refused()
            if token is not None:  # the token into a cookie, and out of the address bar
                cookie = f"{COOKIE}={studio.token}; HttpOnly; SameSite=Strict; Path=/"
                return self._send(303, b"", "text/plain", {"Location": "/", "Set-Cookie": cookie})
            if url.path in FILES:
                body, content_type = FILES[url.path]
                return self._send(200, body, content_type)
            if url.path.startswith("/app/"):  # an app's page, for its frame: sandboxed by its own policy too
                try:
                    html = session().app_page(_number(url.path.removeprefix("/app/")))
                except StudioError as e:
                    return self._send(404, f"{e}\n".encode(), "text/plain")
                return self._send(200, html.encode(), "text/html", policy=APP_CSP)
            if url.path == "/favicon.ico":  # asked for by every browser: there is none
                return self._send(204, b"", "text/plain")
            if url.path == "/api/state":
                return self._json(200, session().state())
            if url.path == "/api/questions":
                return self._json(200, {"questions": lab_questions()})
            if url.path in EXPORTS:
                content_type, name, export = EXPORTS[url.path]
                attachment = {"Content-Disposition": f'attachment; filename="{name}"'}
                return self._send(200, export(session().log), content_type, attachment)
            if url.path == "/events":
                last = self.headers.get("Last-Event-ID")  # a reconnecting EventSource: the one after it
                return self._events(_number(last) + 1 if last else _number(query.get("from", ["0"])[0]))
            self._send(404, b"not found\n", "text/plain")

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            if not studio.allowed(self.headers, None):
                return self._refused()
            action = ACTIONS.get(url.path)
            if action is None:
                return self._send(404, b"not found\n", "text/plain")
            length = self.headers.get("Content-Length", "")
            if not length.isdigit():
                return self._json(411, {"error": "a body with its Content-Length"})
            if int(length) > MAX_BODY:
                return self._json(413, {"error": f"a body of at most {MAX_BODY} bytes"})
            if self.headers.get_content_type() != "application/json":
                return self._json(415, {"error": "a JSON body (Content-Type: application/json)"})
            try:
                body = json.loads(self.rfile.read(int(length)) or b"{}")
            except (ValueError, UnicodeDecodeError) as e:
                return self._json(400, {"error": f"the body is not JSON: {e}"})
            if not isinstance(body, dict):
                return self._json(400, {"error": "the body is a JSON object"})
            try:
                return self._json(200, action(session(), body))
            except StudioError as e:
                return self._json(409, {"error": str(e)})
            except Exception as e:  # a step that failed: said to the page, and the server goes on
                return self._json(500, {"error": f"{type(e).__name__}: {visible(str(e))}"})

        def _events(self, first: int) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            log = session().log
            try:
                while not log.closed:
                    events = log.since(first, wait=KEEPALIVE)
                    if not events:
                        self.wfile.write(b": quiet\n\n")
                    for n, data in events:
                        # ensure_ascii: every character past ASCII (a line separator included) as an escape
                        self.wfile.write(f"id: {n}\ndata: {json.dumps(data, ensure_ascii=True)}\n\n".encode())
                        first = n + 1
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return  # the tab closed

    return Handler


__all__ = ["StudioServer"]
