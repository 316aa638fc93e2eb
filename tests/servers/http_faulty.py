"""A deliberately misbehaving MCP server over HTTP, for the HTTP fault tests.

Run as `python3 tests/servers/http_faulty.py`; it listens on 127.0.0.1 (a free
port) and prints the port on stdout. POST /mcp speaks Streamable HTTP well
enough to initialize and list tools; each tool then misbehaves in its own way
(HTTP 500, a body cut short, an event stream that drops or carries garbage, no
answer at all, a forgotten session, 20 MB). Other paths: POST /status/NNN
answers NNN; POST /redirect answers 307 to the URL given with --redirect-to;
POST /moving initializes here and answers every later message with that 307;
GET /sse-elsewhere is a legacy SSE stream whose endpoint is on that other
origin; GET /seen returns every request this server received, as JSON. With
--own-session, every answer carries a new Mcp-Session-Id of this server's own and
no request needs a known session (what a redirect's target may do). With
--get-stream-primes, GET /mcp answers a priming event (a new event id, empty
data) with `retry: 0` and ends the stream at once, every time. With --blob-megabytes N it offers resources:
`resources/read` of `blob://big` answers N megabytes of bytes as one base64 blob, as a JSON answer encoded
once at start-up (only the request id is spliced in), so that timing a read measures the client.
With --get-stream, GET /mcp is the stream for messages the server starts
(what the tool push_deep queues). With --stateless it also speaks MCP
2026-07-28: server/discover, and requests that name that version in `_meta`
need no session. `slow_sse` streams a progress notification every 0.1 s for
`steps` steps before its answer, and records in GET /seen whether it finished
or the client closed the stream first. `header_check` is first listed without
the `x-mcp-header` mark on its `region` argument and then with it, and refuses
(HeaderMismatch) a call whose Mcp-Param-Region is not its region. A `silent` call with hold_cancel makes the
server hold every later notifications/cancelled POST unanswered until POST
/release (or two minutes). `split` answers with the UTF-8 text whose bytes are `hex`, written so that every
byte of the span that spells `marker` (also hex) goes out in a TCP write of its own: as a JSON body, an event
stream, or an event stream in HTTP chunks (`framing`: json, sse, chunked); with `escape` the JSON spells
`<`, `>`, `|`, `[` and `/` as `\\u` escapes, which the cuts fall inside too.
"""

from __future__ import annotations

import argparse
import base64
import json
import queue
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOLS = [
    "echo",
    "headers",
    "fail500",
    "drop_json",
    "drop_sse",
    "resume_sse",
    "garbage_sse",
    "silent",
    "big",
    "forget",
    "bad_utf8",
    "deep",
    "push_deep",
    "slow_sse",
    "header_check",
    "split",
]
SPLIT = {
    "type": "object",
    "properties": {
        "hex": {"type": "string"},
        "marker": {"type": "string"},
        "escape": {"type": "boolean"},
        "framing": {"type": "string", "enum": ["json", "sse", "chunked"]},
    },
    "required": ["hex", "marker"],
}
seen: list[dict] = []
sessions: set[str] = set()
resumable: dict[str, dict] = {}  # event id -> the response to replay on GET with that Last-Event-ID
lock = threading.Lock()
redirect_to = ""
get_stream = False
stateless = False  # also serve 2026-07-28 requests, which carry no session
own_session = False  # answer everything, each answer naming a new session id of this server's
get_stream_primes = False  # GET /mcp: a priming event, retry: 0, and the stream ends
primed = 0  # GET streams primed so far: each event id is new
blob_answer: tuple[bytes, bytes] | None = None  # --blob-megabytes: resources/read of blob://big, around its id
listings = 0  # tools/list answered: header_check's schema marks its argument from the second on
pushed: queue.Queue = queue.Queue()  # messages for the GET stream
holding_cancels = threading.Event()  # set: a notifications/cancelled POST waits for release
released = threading.Event()


def result(request_id, text: str, modern: bool = False) -> dict:
    kind = {"resultType": "complete"} if modern else {}  # 2026-07-28 results say what they are
    return {"jsonrpc": "2.0", "id": request_id, "result": {**kind, "content": [{"type": "text", "text": text}]}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    disable_nagle_algorithm = True  # headers and body go in separate writes

    def log_message(self, *args) -> None:
        pass

    def _record(self, body: bytes = b"") -> None:
        with lock:
            seen.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers.items()),
                    "body": body[:500].decode("utf-8", errors="replace"),
                }
            )

    def _send(self, status: int, body: bytes = b"", kind: str = "application/json", headers: dict | None = None):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, message: dict, headers: dict | None = None) -> None:
        if getattr(self, "modern", False) and isinstance(message.get("result"), dict):
            message = {**message, "result": {"resultType": "complete", **message["result"]}}
        self._send(200, json.dumps(message).encode(), headers=headers)

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def do_GET(self) -> None:
        self._record()
        if self.path == "/seen":
            with lock:
                self._send(200, json.dumps(seen).encode())
            return
        if self.path == "/sse-elsewhere":
            self._sse_start()
            self.wfile.write(f"event: endpoint\ndata: {redirect_to}/messages?session=1\n\n".encode())
            self.wfile.flush()
            time.sleep(2)
            return
        last = self.headers.get("Last-Event-ID")
        if self.path == "/mcp" and get_stream_primes:
            global primed
            with lock:
                primed += 1
                event_id = f"g{primed}"
            self._sse_start()
            self.wfile.write(f"id: {event_id}\nretry: 0\ndata: \n\n".encode())
            self.wfile.flush()
            return
        if self.path == "/mcp" and get_stream and last is None:
            self._sse_start()
            while True:
                try:
                    message = pushed.get(timeout=0.5)
                    self.wfile.write(b"data: " + message + b"\n\n")
                    self.wfile.flush()
                except queue.Empty:
                    try:
                        self.wfile.write(b": keep-alive\n\n")
                        self.wfile.flush()
                    except OSError:
                        return
                except OSError:
                    return
        if self.path == "/mcp" and last in resumable:
            self._sse_start()
            self.wfile.write(b"id: r2\ndata: " + json.dumps(resumable.pop(last)).encode() + b"\n\n")
            self.wfile.flush()
            return
        self._send(405, b"no GET stream here", "text/plain")

    def do_DELETE(self) -> None:
        self._record()
        self._send(200, b"")

    def do_POST(self) -> None:
        self.modern = False  # set per request below: one connection may carry both wires
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._record(body)
        if self.path.startswith("/status/"):
            status = int(self.path.rsplit("/", 1)[1])
            self._send(
                status, b"<html><body><h1>Service   Unavailable</h1>\n<p>try later</p></body></html>", "text/html"
            )
            return
        if self.path == "/redirect":
            self._send(307, b"", headers={"Location": redirect_to + "/mcp"})
            return
        if self.path == "/release":
            released.set()
            self._send(200, b"{}")
            return
        try:
            message = json.loads(body)
        except ValueError:
            self._send(400, b'{"error": "not JSON"}')
            return
        if self.path == "/moving" and message.get("method") != "initialize":
            # the session begins here, then every later message is sent to another origin
            self._send(307, b"", headers={"Location": redirect_to + "/mcp"})
            return
        if "id" not in message or "method" not in message:
            if message.get("method") == "notifications/cancelled" and holding_cancels.is_set():
                released.wait(120)
            self._send(202)
            return
        method, request_id = message["method"], message["id"]
        if method == "initialize":
            session = uuid.uuid4().hex
            with lock:
                sessions.add(session)
            version = message["params"]["protocolVersion"]
            self._json(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": version,
                        "capabilities": {"tools": {}, **({"resources": {}} if blob_answer else {})},
                        "serverInfo": {"name": "http-faulty", "version": "0"},
                    },
                },
                {"Mcp-Session-Id": session},
            )
            return
        meta = (message.get("params") or {}).get("_meta") or {}
        modern = self.modern = stateless and meta.get("io.modelcontextprotocol/protocolVersion") == "2026-07-28"
        if modern and method == "server/discover":
            self._json(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "resultType": "complete",
                        "supportedVersions": ["2026-07-28", "2025-11-25"],
                        "capabilities": {"tools": {}, **({"resources": {}} if blob_answer else {})},
                        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "http-faulty", "version": "0"}},
                    },
                }
            )
            return
        if own_session:
            self._json(
                result(request_id, "answered by " + self.headers.get("Host", "?")),
                {"Mcp-Session-Id": "own-" + uuid.uuid4().hex},
            )
            return
        if not modern and self.headers.get("Mcp-Session-Id") not in sessions:
            self._send(404, b'{"error": "unknown session"}')
            return
        if method == "tools/list":
            global listings
            with lock:
                listings += 1
                marked = listings > 1
            tools = [{"name": name, "inputSchema": SPLIT if name == "split" else {"type": "object"}} for name in TOOLS]
            if marked:  # the schema changed: the server now wants region in a header
                tools[TOOLS.index("header_check")]["inputSchema"] = {
                    "type": "object",
                    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                }
            self._json(
                {"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools, "ttlMs": 0, "cacheScope": "private"}}
            )
            return
        if method == "resources/read" and blob_answer and (message.get("params") or {}).get("uri") == "blob://big":
            before, after = blob_answer
            self._send(
                200,
                before
                + json.dumps(request_id).encode()
                + (b',"result":{"resultType":"complete",' if modern else b',"result":{')
                + after,
            )
            return
        if method != "tools/call":
            self._json({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no"}})
            return
        getattr(self, "tool_" + message["params"]["name"])(request_id, message["params"].get("arguments") or {})

    # -- tools -------------------------------------------------------------------------

    def tool_echo(self, request_id, arguments) -> None:
        self._json(result(request_id, arguments.get("text", "")))

    def tool_headers(self, request_id, arguments) -> None:
        self._json(result(request_id, json.dumps(dict(self.headers.items()))))

    def tool_fail500(self, request_id, arguments) -> None:
        self._send(500, b"kaboom: the database is on fire", "text/plain")

    def tool_drop_json(self, request_id, arguments) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b'{"jsonrpc"')
        self.wfile.flush()
        self.close_connection = True

    def tool_drop_sse(self, request_id, arguments) -> None:
        self._sse_start()
        self.wfile.write(
            b': working on it\n\ndata: {"jsonrpc": "2.0", "method": "notifications/message", '
            b'"params": {"level": "info", "data": "half way"}}\n\n'
        )
        self.wfile.flush()

    def tool_resume_sse(self, request_id, arguments) -> None:
        with lock:
            resumable["r1"] = result(request_id, "resumed")
        self._sse_start()
        self.wfile.write(b"id: r1\nretry: 100\ndata: \n\n")
        self.wfile.flush()

    def tool_garbage_sse(self, request_id, arguments) -> None:
        self._sse_start()
        self.wfile.write(b"data: this is not JSON\n\nevent: message\ndata: {broken\r\n\r\nretry: soon\nid\n\n")
        self.wfile.flush()

    def tool_silent(self, request_id, arguments) -> None:
        if arguments.get("hold_cancel"):
            holding_cancels.set()
        time.sleep(float(arguments.get("seconds", 30)))
        self.close_connection = True

    def tool_header_check(self, request_id, arguments) -> None:
        if self.headers.get("Mcp-Param-Region") != arguments.get("region"):
            self._send(
                400,
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "error": {
                            "code": -32020,
                            "message": "Header mismatch: Mcp-Param-Region does not match the body",
                        },
                    }
                ).encode(),
            )
            return
        self._json(result(request_id, f"region {arguments.get('region')}"))

    def tool_slow_sse(self, request_id, arguments) -> None:
        self._sse_start()
        outcome = "finished"
        try:
            for step in range(int(arguments.get("steps", 100))):
                self.wfile.write(
                    b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":'
                    b'{"progressToken":0,"progress":%d}}\n\n' % step
                )
                self.wfile.flush()
                time.sleep(0.1)
            self.wfile.write(b"data: " + json.dumps(result(request_id, "done", self.modern)).encode() + b"\n\n")
            self.wfile.flush()
        except OSError:
            outcome = "closed by the client"
            self.close_connection = True
        with lock:
            seen.append({"method": "TOOL", "path": "slow_sse", "outcome": outcome})

    def tool_big(self, request_id, arguments) -> None:
        text = "y" * (int(arguments.get("megabytes", 1)) * 1024 * 1024)
        data = json.dumps(result(request_id, text, getattr(self, "modern", False))).encode()
        if arguments.get("sse"):
            self._sse_start()
            view = memoryview(b"id: b1\ndata: " + data + b"\n\n")
            for start in range(0, len(view), 1 << 16):  # in many writes, as a real stream arrives
                self.wfile.write(view[start : start + (1 << 16)])
            self.wfile.flush()
        else:
            self._send(200, data)

    def tool_bad_utf8(self, request_id, arguments) -> None:
        data = (
            b'{"jsonrpc":"2.0","id":'
            + json.dumps(request_id).encode()
            + b',"result":{"content":[{"type":"text","text":"caf\xff"}]}}'
        )
        if arguments.get("sse"):
            self._sse_start()
            self.wfile.write(b"data: " + data + b"\n\n")
            self.wfile.flush()
            time.sleep(float(arguments.get("linger", 0)))  # the stream stays open: only the bad event can end the call
        else:
            self._send(200, data)

    def tool_deep(self, request_id, arguments) -> None:
        levels = int(arguments.get("levels", 100_000))
        data = (
            b'{"jsonrpc":"2.0","id":'
            + json.dumps(request_id).encode()
            + b',"result":{"content":[],"deep":'
            + b"[" * levels
            + b"]" * levels
            + b"}}"
        )
        self._sse_start()
        self.wfile.write(b"data: " + data + b"\n\n")
        self.wfile.flush()
        time.sleep(float(arguments.get("linger", 0)))

    def tool_push_deep(self, request_id, arguments) -> None:
        levels = int(arguments.get("levels", 100_000))
        pushed.put(
            b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":'
            + b"[" * levels
            + b"]" * levels
            + b"}}"
        )
        pushed.put(
            b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"after the deep one"}}'
        )
        self._json(result(request_id, "queued"))

    def tool_split(self, request_id, arguments) -> None:
        def encode(text: str) -> str:
            encoded = json.dumps(text)
            if arguments.get("escape"):
                for char in "<>|[/":
                    encoded = encoded.replace(char, f"\\u{ord(char):04x}")
            return encoded

        text = bytes.fromhex(arguments["hex"]).decode("utf-8")
        marker = encode(bytes.fromhex(arguments["marker"]).decode("utf-8"))[1:-1].encode()
        kind = '"resultType":"complete",' if self.modern else ""
        data = (
            f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{{{kind}"content":[{{"type":"text","text":{encode(text)}}}]}}}}'
        ).encode()
        framing = arguments.get("framing", "json")
        if framing != "json":
            data = b"event: message\ndata: " + data + b"\n\n"
        start = data.index(marker)
        end = start + len(marker)
        pieces = [data[:start], *(data[at : at + 1] for at in range(start, end)), data[end:]]
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if framing == "json" else "text/event-stream")
        if framing == "json":
            self.send_header("Content-Length", str(len(data)))
        elif framing == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.flush()
        for piece in pieces:
            if framing == "chunked":
                piece = b"%x\r\n" % len(piece) + piece + b"\r\n"
            self.wfile.write(piece)
            self.wfile.flush()
            time.sleep(0.001)  # a write of its own on the wire, not coalesced with the next
        if framing == "chunked":
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def tool_forget(self, request_id, arguments) -> None:
        with lock:
            sessions.discard(self.headers.get("Mcp-Session-Id"))
        self._json(result(request_id, "forgotten"))


def main() -> int:
    global redirect_to, get_stream, stateless, own_session, get_stream_primes, blob_answer
    parser = argparse.ArgumentParser()
    parser.add_argument("--redirect-to", default="http://127.0.0.1:9", help="another origin, for redirects")
    parser.add_argument("--get-stream", action="store_true", help="offer a GET stream on /mcp")
    parser.add_argument("--stateless", action="store_true", help="also speak MCP 2026-07-28")
    parser.add_argument(
        "--own-session", action="store_true", help="answer every request, naming a new session id of this server's own"
    )
    parser.add_argument(
        "--get-stream-primes", action="store_true", help="GET /mcp: a priming event with retry: 0, then the stream ends"
    )
    parser.add_argument(
        "--blob-megabytes", type=int, default=0, help="offer resources: blob://big, this many megabytes as base64"
    )
    args = parser.parse_args()
    if args.blob_megabytes > 0:
        blob = base64.b64encode(bytes(range(256)) * (args.blob_megabytes * 4096)).decode()
        contents = json.dumps(
            {"contents": [{"uri": "blob://big", "mimeType": "application/octet-stream", "blob": blob}]}
        )
        blob_answer = (b'{"jsonrpc":"2.0","id":', contents[1:].encode() + b"}")
    redirect_to = args.redirect_to.rstrip("/")
    get_stream = args.get_stream
    stateless = args.stateless
    own_session = args.own_session
    get_stream_primes = args.get_stream_primes
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
