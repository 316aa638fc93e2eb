"""The redirect of a user's login, received on this machine (RFC 8252 section 7.3, loopback interface redirection).

This module owns the one-shot HTTP listener a native client gives as its `redirect_uri`:
`http://127.0.0.1:PORT/callback`, on the loopback address only and an ephemeral port the system picks,
so nothing off this machine can reach it and no port is configured. The browser lands there after the
user agrees (or refuses); the first request to the callback path with a `code` or an `error` is taken as
the redirect, answered with a short page that says the browser may be closed, and handed to whoever
waits (`wait`). `offer_line` takes the same redirect pasted by hand, for a browser on another machine
(over ssh, 127.0.0.1 is not this one). Checking `state` and `iss` is the OAuth client's job (oauth.py),
not this module's. Standard library only.
"""

from __future__ import annotations

import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CALLBACK_PATH = "/callback"
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>decodeloop</title>"
    "<p>{}</p><p>You can close this page and go back to the terminal.</p>"
)


class LoopbackRedirect:
    """Listens on 127.0.0.1 (an ephemeral port) for the authorization redirect; use as a context manager."""

    def __init__(self, path: str = CALLBACK_PATH) -> None:
        self.path = path
        self._landed: str | None = None
        self._event = threading.Event()
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass  # the query holds the code: nothing of it goes to stderr

            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parts.query))
                if parts.path != owner.path or not ("code" in query or "error" in query):
                    self._page(404, "Not the authorization redirect.")
                    return
                taken = owner.land(owner.redirect_uri + "?" + parts.query)
                if not taken:
                    text = "A redirect already arrived; this one was not used."
                elif "error" in query:
                    text = "The authorization was refused; the terminal says why."
                else:
                    text = "decodeloop received the authorization."
                self._page(200, text)

            def _page(self, status: int, text: str) -> None:
                body = _PAGE.format(text).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.redirect_uri = f"http://127.0.0.1:{self._server.server_address[1]}{path}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="oauth-redirect", daemon=True)
        self._thread.start()

    def land(self, url: str) -> bool:
        """Keep the first redirect URL that arrives (from the browser or pasted); False for any later one."""
        with self._lock:
            if self._landed is not None:
                return False
            self._landed = url
        self._event.set()
        return True

    def offer_line(self, line: str) -> bool:
        """A redirect URL pasted by hand (a browser on another machine): taken when it carries a code or an error."""
        text = line.strip()
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(text).query))
        if not text.startswith(("http://", "https://")) or not ("code" in query or "error" in query):
            return False
        return self.land(text)

    def wait(self, timeout: float | None = None) -> str | None:
        """The redirect URL the browser (or the user) brought back, or None when `timeout` seconds passed first."""
        self._event.wait(timeout)
        return self._landed

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LoopbackRedirect:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
