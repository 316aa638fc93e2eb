"""An MCP server that reads every message and never answers one, on stdio or over HTTP.

`python3 tests/servers/silent.py LOG` reads JSON-RPC lines on stdin and appends
each message's method to the file LOG, one a line, answering nothing; with
`--answers initialize` it answers initialize (MCP 2025-11-25) and nothing else.
`python3 tests/servers/silent.py LOG --http` listens on 127.0.0.1 instead (a
free port, printed on stdout): each POST's method is appended to LOG, and the
request is never answered; the connection is held until the client closes it.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()


def record(log: str, line: bytes) -> None:
    try:
        method = json.loads(line).get("method", "?")
    except ValueError:
        method = "?"
    with lock, open(log, "a") as out:
        out.write(method + "\n")


def serve_stdio(log: str, answers: set[str]) -> None:
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        record(log, line)
        message = json.loads(line)
        if message.get("method") == "initialize" and "initialize" in answers:
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "silent", "version": "0"},
                },
            }
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


def serve_http(log: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            record(log, self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            self.rfile.read(1)  # blocks until the client sends more or closes the connection
            self.close_connection = True

        do_GET = do_DELETE = do_POST

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    if "--http" in sys.argv[2:]:
        serve_http(sys.argv[1])
    else:
        serve_stdio(sys.argv[1], set(sys.argv[sys.argv.index("--answers") + 1 :]) if "--answers" in sys.argv else set())
