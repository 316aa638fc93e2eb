"""An MCP server whose tools ask the client for something, on both wires: sampling and elicitation.

`python3 tests/servers/asking.py` speaks 2026-07-28 and 2025-11-25 on stdio.
Each tool takes the request to make, verbatim, so a test says exactly what the
server asks:

- `sample {"request": {...}}` asks `sampling/createMessage` with those params;
- `elicit {"request": {...}}` asks `elicitation/create` with those params;
- `relay {"request": {...}}` asks `sampling/createMessage` and answers with the
  sampled text alone, as a server that passes a completion on would;
- `complete {"elicitationId": "..."}` sends `notifications/elicitation/complete`
  for that id before its result, as a server does when the user is done at a URL.

With `--weather sample` it also has `get_weather {"city", "state"}`, the call
the lab's table model writes, which relays a request to describe that city's
weather; with `--weather elicit` the same call asks the user which units to use
and answers with the answer as JSON. A model the CLI runs can then make a call
that asks.

On 2025-11-25 the request goes to the client mid-call (a JSON-RPC request on
the same pipe, its answer read before the call's result; over HTTP, an event on
the call's answer stream, its answer POSTed back); on 2026-07-28 the call's
result is `input_required` with the request in `inputRequests`, and the retried
call carries the answer. `sample` and `elicit` answer with the
client's answer (its result or its JSON-RPC error) as JSON text.

With `--ask-from PATH` (a named pipe the test made) it also asks while no call
is in flight, as a 2025-11-25 server may: each line written to the pipe,
`{"method", "params"}`, is sent to the client as a request of the server's
own, and the client's answer comes back as a log message
(`notifications/message`, data `answered METHOD: ANSWER`). With `--http` it
serves Streamable HTTP (2025-11-25) on 127.0.0.1 instead of stdio, printing
its port on the first line of stdout: POST /mcp takes every message, and the
server's own requests and log messages go on the GET stream. A tools/call that
asks answers with an event stream instead of JSON, as the spec lets a server
do: the request (or `complete`'s notification) first, then, once the client
has POSTed its answer, the call's result.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from decodeloop.servers.base import META, ToolServer

REQUEST = {
    "type": "object",
    "properties": {"request": {"type": "object"}},
    "required": ["request"],
    "additionalProperties": False,
}
ASKS = {"sample": "sampling/createMessage", "elicit": "elicitation/create", "relay": "sampling/createMessage"}


class AskingServer(ToolServer):
    def __init__(self) -> None:
        super().__init__("asking", "0.0.1")
        self.params: dict = {}  # the tools/call being served
        self._ids = itertools.count(1)
        self.send = self._send_stdio  # how a message the server starts goes out (--http: the GET stream)
        self.waiting: dict[str, queue.Queue] = {}  # the id of a request asked unprompted -> where its answer goes
        self.lock = threading.Lock()
        self.stream = threading.local()  # --http: `say`, which sends on the answer stream of this thread's POST

    def handle(self, message):
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params")
            self.params = params if isinstance(params, dict) else {}
        if isinstance(message, dict) and "method" not in message and message.get("id") in self.waiting:
            self.waiting.pop(message["id"]).put({key: message[key] for key in ("result", "error") if key in message})
            return None
        return super().handle(message)

    def _send_stdio(self, message: dict) -> None:
        out = sys.__stdout__.buffer  # serve_stdio points sys.stdout at stderr while it serves
        with self.lock:  # one whole line at a time, beside the answers serve_stdio writes
            out.write(json.dumps(message).encode() + b"\n")
            out.flush()

    def ask_from(self, path: str) -> None:
        """Each line of the named pipe at `path` asked of the client unprompted; its answer logged back."""
        while True:
            with open(path, encoding="utf-8") as pipe:  # waits for a writer; its end is the end of a batch
                for line in pipe:
                    try:
                        asked = json.loads(line)
                    except ValueError:
                        continue
                    threading.Thread(target=self._ask_unprompted, args=(asked,), daemon=True).start()

    def _ask_unprompted(self, asked: dict) -> None:
        ask_id = f"later-{next(self._ids)}"
        answer: queue.Queue = queue.Queue()
        self.waiting[ask_id] = answer
        method = asked.get("method")
        self.send({"jsonrpc": "2.0", "id": ask_id, "method": method, "params": asked.get("params", {})})
        got = answer.get()
        answer = json.dumps(got, sort_keys=True, separators=(",", ":"))
        log = {"level": "info", "data": f"answered {method}: {answer}"}
        self.send({"jsonrpc": "2.0", "method": "notifications/message", "params": log})

    def call_tool(self, name, arguments):
        if name == "get_weather" and isinstance(arguments, dict):
            place = f"{arguments.get('city')}, {arguments.get('state')}"
            if WEATHER[0] == "elicit":
                units = {"type": "string", "title": "Units", "enum": ["fahrenheit", "celsius"]}
                schema = {"type": "object", "properties": {"units": units}, "required": ["units"]}
                name, arguments = "elicit", {"request": {"message": f"Units for {place}?", "requestedSchema": schema}}
            else:
                message = {"role": "user", "content": {"type": "text", "text": f"Describe the weather in {place}."}}
                name, arguments = "relay", {"request": {"messages": [message], "maxTokens": 80}}
        if name == "complete" and isinstance(arguments, dict) and isinstance(arguments.get("elicitationId"), str):
            note = {"elicitationId": arguments["elicitationId"]}
            self._tell({"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": note})
            return {"content": [{"type": "text", "text": "sent"}], "isError": False}
        if name not in ASKS or not isinstance(arguments, dict) or not isinstance(arguments.get("request"), dict):
            return super().call_tool(name, arguments)
        meta = self.params.get("_meta") or {}
        if META + "protocolVersion" in meta:  # 2026-07-28: ask in the result, read the answer in the retry
            answers = self.params.get("inputResponses")
            if not isinstance(answers, dict):
                ask = {"method": ASKS[name], "params": arguments["request"]}
                return {"resultType": "input_required", "inputRequests": {"a": ask}}
            answer = {"result": answers.get("a")}
        else:
            answer = self._ask(ASKS[name], arguments["request"])
        if name == "relay":
            result = answer.get("result")
            content = result.get("content") if isinstance(result, dict) else None
            text = content.get("text") if isinstance(content, dict) else None
            if not isinstance(text, str):
                return {"content": [{"type": "text", "text": f"no sample: {json.dumps(answer)}"}], "isError": True}
            return {"content": [{"type": "text", "text": text}], "isError": False}
        return {"content": [{"type": "text", "text": json.dumps(answer)}], "isError": False}

    def _tell(self, message: dict) -> None:
        """Send a message of the call being served: on the pipe, or (--http) on the call's answer stream."""
        say = getattr(self.stream, "say", None)
        if say is not None:
            say(message)
            return
        out = sys.__stdout__.buffer  # serve_stdio points sys.stdout at stderr while it serves
        out.write(json.dumps(message).encode() + b"\n")
        out.flush()

    def _ask(self, method: str, params: dict) -> dict:
        """Send a request to the client mid-call and wait for its answer: {"result"} or {"error"}.

        On stdio the answer is read from the pipe here; over HTTP the client POSTs it, and do_POST hands it
        over through `waiting`.
        """
        ask_id = f"ask-{next(self._ids)}"
        request = {"jsonrpc": "2.0", "id": ask_id, "method": method, "params": params}
        if getattr(self.stream, "say", None) is not None:
            answer: queue.Queue = queue.Queue()
            self.waiting[ask_id] = answer
            self._tell(request)
            return answer.get()
        self._tell(request)
        for line in sys.stdin.buffer:
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if isinstance(reply, dict) and reply.get("id") == ask_id and "method" not in reply:
                return {key: reply[key] for key in ("result", "error") if key in reply}
            response = self.handle(reply)  # a ping or a notification in the meantime
            if response is not None:
                self._tell(response)
        return {"error": {"code": -32000, "message": "the client closed the pipe"}}


server = AskingServer()


@server.tool("sample", "Ask the client's model for a completion (sampling/createMessage).", REQUEST)
def sample(request: dict) -> str:
    return "unreachable"


@server.tool("elicit", "Ask the client's user for input (elicitation/create).", REQUEST)
def elicit(request: dict) -> str:
    return "unreachable"


@server.tool("relay", "Ask the client's model for a completion and answer with its text.", REQUEST)
def relay(request: dict) -> str:
    return "unreachable"


@server.tool(
    "complete",
    "Say that the interaction at a URL is complete (notifications/elicitation/complete).",
    {
        "type": "object",
        "properties": {"elicitationId": {"type": "string"}},
        "required": ["elicitationId"],
        "additionalProperties": False,
    },
)
def complete(elicitationId: str) -> str:
    return "unreachable"


CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "state": {"type": "string"}},
    "required": ["city", "state"],
    "additionalProperties": False,
}
WEATHER = [""]  # what get_weather asks for: "sample", "elicit", or "" (no get_weather)
server.options.append((("--weather",), {"choices": ("sample", "elicit"), "help": "also offer get_weather, which asks"}))

server.options.append((("--ask-from",), {"metavar": "PIPE", "help": "ask what each line of this pipe says"}))
server.options.append((("--http",), {"action": "store_true", "help": "serve Streamable HTTP, not stdio"}))


class HttpHandler(BaseHTTPRequestHandler):
    """Streamable HTTP on 2025-11-25: POST /mcp takes every message, GET /mcp is the stream the server starts."""

    protocol_version = "HTTP/1.1"
    pushed: queue.Queue = queue.Queue()  # messages for the GET stream
    streaming = False  # whether this POST's answer became an event stream

    def log_message(self, *args) -> None:
        pass

    def _reply(self, status: int, body: bytes = b"", kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Mcp-Session-Id", "asking-1")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            message = json.loads(body)
        except ValueError:
            self._reply(400, b"not JSON", "text/plain")
            return
        if isinstance(message, dict) and "method" not in message and message.get("id") in server.waiting:
            server.handle(message)  # an answer to the server's request: never behind the call that waits for it
            self._reply(202)
            return
        self.streaming = False
        server.stream.say = self._say
        try:
            with server.lock:  # the server is synchronous: one message at a time
                response = server.handle(message)
        finally:
            server.stream.say = None
        if self.streaming:  # the call asked on its answer stream: its result ends the stream
            self._say(response)
        elif response is None:
            self._reply(202)
        else:
            self._reply(200, json.dumps(response).encode())

    def _say(self, message: dict) -> None:
        """Send one message on this POST's answer stream, which the first one opens (an event stream)."""
        if not self.streaming:
            self.streaming = True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Mcp-Session-Id", "asking-1")
            self.send_header("Connection", "close")  # no length: the stream ends with the connection
            self.end_headers()
            self.close_connection = True
        self.wfile.write(b"data: " + json.dumps(message).encode() + b"\n\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        if self.path != "/mcp":
            self._reply(404, b"", "text/plain")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        while True:
            try:
                message = self.pushed.get(timeout=0.5)
            except queue.Empty:
                message = None
            try:
                self.wfile.write(b"data: " + json.dumps(message).encode() + b"\n\n" if message else b": alive\n\n")
                self.wfile.flush()
            except OSError:
                return

    def do_DELETE(self) -> None:
        self._reply(200)


def serve_http() -> int:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), HttpHandler)
    httpd.daemon_threads = True
    server.send = HttpHandler.pushed.put
    print(httpd.server_address[1], flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    options = server.argument_parser().parse_args()
    if options.ask_from:
        threading.Thread(target=server.ask_from, args=(options.ask_from,), daemon=True).start()
    if options.weather:
        WEATHER[0] = options.weather

        @server.tool("get_weather", "The weather in a US city, as the client's model describes it.", CITY)
        def get_weather(city: str, state: str) -> str:
            return "unreachable"

    if options.http:
        sys.exit(serve_http())
    sys.exit(server.main())
