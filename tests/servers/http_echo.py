"""An MCP server over HTTP that echoes the headers of a request back to the client, for the redaction tests.

Run as `python3 tests/servers/http_echo.py --echo WHERE [--on REQUEST]`; it listens on 127.0.0.1 (a free port)
and prints the port on stdout. POST /mcp is the bundled weather server (JSON answers, no session). The
request `--on` names (`start`: the first of a session, server/discover or initialize, or a ping; `list`: tools/list;
`call`, the default: tools/call) is answered with every header it carried quoted, where `--echo` says, as
servers do that mean no harm:

  body       an HTML error page listing the headers by name: HTTP 401 to the first request, 400 to a later one
  challenge  HTTP 401 with a `WWW-Authenticate` challenge whose error_description quotes them and whose
             resource_metadata URL (on this server, answered 404) carries them in its query
  rpc-error  a JSON-RPC error whose message quotes them
  result     get_weather's result, its text preceded by the headers as JSON

`echo(where, headers, message, base)` is that answer, for oauth_server.py too. GET /seen lists every request
this server received (path and headers), as JSON.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from decodeloop.servers.weather import build_server

WHERE = ("body", "challenge", "rpc-error", "result")
# the requests each --on names; start has ping too, the unauthenticated POST of `decodeloop auth login`
ON = {"start": ("server/discover", "initialize", "ping"), "list": ("tools/list",), "call": ("tools/call",)}


class Answer:
    """An HTTP answer: status, headers, body."""

    def __init__(self, status: int, body: bytes, kind: str = "application/json", headers: dict | None = None):
        self.status, self.body, self.kind, self.headers = status, body, kind, headers or {}


def echo(where: str, headers: dict[str, str], message: dict, base: str, answer: dict | None) -> Answer:
    """The answer that echoes `headers` to `message` (whose normal answer is `answer`), as `where` says."""
    listed = "\n".join(f"{name}: {value}" for name, value in sorted(headers.items()))
    if where == "body":
        # 401 at the start, where a client without OAuth shows the page; 400 later, where one with OAuth does too
        status, reason = (401, "Unauthorized") if message.get("method") in ON["start"] else (400, "Bad Request")
        page = (
            f"<html><body><h1>{status} {reason}</h1><p>Your request:</p><pre>{html.escape(listed)}</pre></body></html>"
        )
        return Answer(status, page.encode(), "text/html")
    if where == "challenge":
        quoted = json.dumps(dict(headers))
        metadata = f"{base}/.well-known/oauth-protected-resource/mcp?for={urllib.parse.quote(quoted, safe='')}"
        description = quoted.replace("\\", "\\\\").replace('"', '\\"')
        challenge = f'Bearer error="invalid_token", error_description="{description}", resource_metadata="{metadata}"'
        return Answer(401, b'{"error": "invalid_token"}', headers={"WWW-Authenticate": challenge})
    request_id = message.get("id")
    if where == "rpc-error":
        error = {"code": -32000, "message": f"not allowed for the request with these headers: {json.dumps(headers)}"}
        return Answer(200, json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode())
    result = dict((answer or {}).get("result") or {})
    content = [dict(item) for item in result.get("content") or [{"type": "text", "text": ""}]]
    content[0]["text"] = f"(seen: {json.dumps(headers)}) {content[0].get('text', '')}"
    result["content"] = content
    return Answer(200, json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--echo", choices=WHERE, required=True)
    parser.add_argument("--on", choices=sorted(ON), default="call")
    args = parser.parse_args()
    mcp = build_server()
    seen: list[dict] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a) -> None:
            pass

        def send(self, answer: Answer) -> None:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.kind)
            self.send_header("Content-Length", str(len(answer.body)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)

        def do_GET(self) -> None:
            if self.path == "/seen":
                with lock:
                    return self.send(Answer(200, json.dumps(seen).encode()))
            with lock:
                seen.append({"method": "GET", "path": self.path, "headers": dict(self.headers.items())})
            self.send(Answer(404, b'{"error": "not_found"}'))

        def do_POST(self) -> None:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = dict(self.headers.items())
            with lock:
                seen.append({"method": "POST", "path": self.path, "headers": headers})
            message = json.loads(data)
            answer = mcp.handle(message)
            if isinstance(message, dict) and message.get("method") in ON[args.on]:
                base = f"http://127.0.0.1:{self.server.server_address[1]}"
                return self.send(echo(args.echo, headers, message, base, answer))
            if answer is None:
                return self.send(Answer(202, b""))
            self.send(Answer(200, json.dumps(answer).encode()))

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    print(httpd.server_address[1], flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
