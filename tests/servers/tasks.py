"""An MCP server that runs its tools as tasks, on both wires, over stdio.

Run as `python3 tests/servers/tasks.py` (stdio), or with `--http` to serve MCP 2026-07-28 over Streamable
HTTP on 127.0.0.1 (a free port, printed first on stdout; POST /mcp, one JSON answer a request; GET /seen lists
each request's method with its Mcp-Method and Mcp-Name headers). On 2025-11-25 (initialize) it declares the `tasks` capability for
tools/call and marks each tool's `execution.taskSupport`; on 2026-07-28 (server/discover) it offers the
`io.modelcontextprotocol/tasks` extension and answers a tools/call with a task when the request declares it
(a task-only tool called without it is error -32021). Requests are answered on threads, so `tasks/get`
is answered while tasks run and `tasks/result` (2025-11-25) can wait for one.

Tools (arguments in brackets):
- `quick` [text]: done at once (taskSupport optional: a call without a task gets a plain result);
- `slow` [seconds]: works that long, its statusMessage saying each tenth;
- `failing`: fails with a JSON-RPC error (-32603 "the job broke");
- `dropped`: the server cancels it itself;
- `forever`: never ends (until cancelled);
- `flood` [count]: `count` status changes as fast as it can (2025-11-25 pushes each as notifications/tasks/status),
  then done;
- `ask` [question]: needs the user's answer: input_required with an elicitation request (2025-11-25: sent
  while the client's tasks/result waits; 2026-07-28: in tasks/get's inputRequests, answered by tasks/update),
  then done with the answer;
- `plain` [text]: never a task (taskSupport forbidden).
Each cancel the client asks for is written to stderr: `cancelled by the client: TOOL TASKID`.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from datetime import datetime, timezone

from json_reply import reply_json  # tests/servers/, this script's own folder

STATELESS = "2026-07-28"
LEGACY = "2025-11-25"
META = "io.modelcontextprotocol/"
EXTENSION = META + "tasks"
RELATED = META + "related-task"
TERMINAL = ("completed", "failed", "cancelled")
POLL_MS = 50

TOOLS = {
    "quick": ("optional", {"text": {"type": "string"}}),
    "slow": ("required", {"seconds": {"type": "number"}}),
    "failing": ("required", {}),
    "dropped": ("required", {}),
    "forever": ("required", {}),
    "flood": ("required", {"count": {"type": "integer"}}),
    "ask": ("required", {"question": {"type": "string"}}),
    "plain": ("forbidden", {"text": {"type": "string"}}),
}

out_lock = threading.Lock()
tasks: dict[str, Task] = {}
ids = itertools.count(1)
waiting: dict[int, threading.Event] = {}  # this server's own requests (elicitation) -> their answer arrived
answers: dict[int, dict] = {}


def send(message: dict) -> None:
    with out_lock:
        sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


class Task:
    def __init__(self, tool: str, arguments: dict, stateless: bool) -> None:
        self.id = f"task-{next(ids)}"
        self.tool, self.arguments, self.stateless = tool, arguments, stateless
        self.status, self.message = "working", "started"
        self.result: dict | None = None
        self.error: dict | None = None
        self.created = self.updated = now()
        self.changed = threading.Condition()
        self.inputs: dict = {}  # 2026-07-28: pending input requests by key
        self.answers: dict = {}

    def set(self, status: str | None = None, message: str | None = None) -> None:
        with self.changed:
            if self.status in TERMINAL:
                return
            self.status = status or self.status
            self.message = message
            self.updated = now()
            self.changed.notify_all()
        if not self.stateless:
            send({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": self.shape()})

    def shape(self) -> dict:
        task = {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            **({"statusMessage": self.message} if self.message is not None else {}),
        }
        if self.stateless:
            return {**task, "ttlMs": 600_000, "pollIntervalMs": POLL_MS}
        return {**task, "ttl": 600_000, "pollInterval": POLL_MS}

    def detailed(self) -> dict:
        """tasks/get on 2026-07-28: the task, with its result, error or input requests."""
        shape = self.shape()
        if self.status == "completed":
            shape["result"] = self.result
        elif self.status == "failed":
            shape["error"] = self.error
        elif self.status == "input_required":
            shape["inputRequests"] = {k: v for k, v in self.inputs.items() if k not in self.answers}
        return shape

    def finish(self, text: str) -> None:
        self.result = {"content": [{"type": "text", "text": text}], "isError": False}
        self.set("completed", "done")

    def run(self) -> None:
        a, tool = self.arguments, self.tool
        if tool == "quick":
            self.finish(f"quick: {a.get('text', '')}")
        elif tool == "slow":
            seconds = float(a.get("seconds", 1))
            for n in range(1, 11):
                if self.wait(seconds / 10):
                    return
                self.set(message=f"{n * 10}% done")
            self.finish(f"slow: worked {seconds:g}s")
        elif tool == "failing":
            self.wait(0.1)
            self.error = {"code": -32603, "message": "the job broke"}
            self.set("failed", "the job broke")
        elif tool == "dropped":
            self.wait(0.1)
            self.set("cancelled", "the server dropped it")
        elif tool == "forever":
            while not self.wait(1):
                pass
        elif tool == "flood":
            for n in range(int(a.get("count", 1000))):
                self.set(message=f"update {n}")
            self.finish("flood: done")
        elif tool == "ask":
            self.ask(str(a.get("question", "Go on?")))

    def wait(self, seconds: float) -> bool:
        """Sleep; True when the task ended meanwhile (cancelled)."""
        with self.changed:
            self.changed.wait_for(lambda: self.status in TERMINAL, seconds)
            return self.status in TERMINAL

    def ask(self, question: str) -> None:
        request = {
            "message": question,
            "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}},
        }
        if self.stateless:
            self.inputs = {"answer": {"method": "elicitation/create", "params": {"mode": "form", **request}}}
            self.set("input_required", "waiting for the user")
            with self.changed:
                self.changed.wait_for(lambda: "answer" in self.answers or self.status in TERMINAL)
            reply = self.answers.get("answer")
        else:
            self.set("input_required", "waiting for the user")
            with self.changed:  # the client asks tasks/result, during which the question is asked
                self.changed.wait_for(lambda: self.asked or self.status in TERMINAL)
            if self.status in TERMINAL:
                return
            request_id = next(ids)
            event = waiting[request_id] = threading.Event()
            params = {"mode": "form", **request, "_meta": {RELATED: {"taskId": self.id}}}
            send({"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create", "params": params})
            event.wait()
            reply = answers.pop(request_id, {}).get("result")
            self.set("working", "answered")
        if self.status in TERMINAL:
            return
        content = (reply or {}).get("content") if isinstance(reply, dict) else None
        action = reply.get("action") if isinstance(reply, dict) else None
        answer = content.get("answer") if isinstance(content, dict) else None
        self.finish(f"ask: {action}: {answer}")

    asked = False


def listing() -> list[dict]:
    return [
        {
            "name": name,
            "description": f"The {name} task.",
            "inputSchema": {"type": "object", "properties": props},
            "execution": {"taskSupport": support},
        }
        for name, (support, props) in TOOLS.items()
    ]


def call(params: dict, stateless: bool) -> dict:
    name, arguments = params.get("name"), params.get("arguments") or {}
    if name not in TOOLS:
        raise Failure(-32602, f"unknown tool {name!r}")
    support = TOOLS[name][0]
    if stateless:
        capabilities = params.get("_meta", {}).get(META + "clientCapabilities", {})
        as_task = EXTENSION in capabilities.get("extensions", {}) and support != "forbidden"
        if not as_task and support == "required":
            raise Failure(
                -32021, "this tool runs only as a task", {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
            )
    else:
        as_task = "task" in params
        if as_task and support == "forbidden":
            raise Failure(-32601, f"{name} does not run as a task")
        if not as_task and support == "required":
            raise Failure(-32601, f"{name} runs only as a task")
    if not as_task:
        return {"content": [{"type": "text", "text": f"{name}: {arguments.get('text', '')}"}], "isError": False}
    task = Task(name, arguments, stateless)
    tasks[task.id] = task
    threading.Thread(target=task.run, daemon=True).start()
    return {"resultType": "task", **task.shape()} if stateless else {"task": task.shape()}


def found(params: dict) -> Task:
    task = tasks.get(params.get("taskId"))
    if task is None:
        raise Failure(-32602, f"no task {params.get('taskId')!r}")
    return task


def result(task: Task) -> dict:
    """tasks/result (2025-11-25): waits until the task is over, asking its question meanwhile."""
    with task.changed:
        task.asked = True
        task.changed.notify_all()
        task.changed.wait_for(lambda: task.status in TERMINAL)
    if task.status == "completed":
        return {**task.result, "_meta": {RELATED: {"taskId": task.id}}}
    if task.status == "failed":
        raise Failure(task.error["code"], task.error["message"])
    raise Failure(-32603, f"task {task.id} was cancelled and has no result")


def cancel(task: Task) -> dict:
    print(f"cancelled by the client: {task.tool} {task.id}", file=sys.stderr, flush=True)
    if task.status in TERMINAL and not task.stateless:
        raise Failure(-32602, f"task {task.id} is already {task.status}")
    task.set("cancelled", "cancelled by the client")
    return {"resultType": "complete"} if task.stateless else task.shape()


def update(task: Task, params: dict) -> dict:
    with task.changed:
        for key, value in (params.get("inputResponses") or {}).items():
            if key in task.inputs and key not in task.answers:
                task.answers[key] = value
        task.changed.notify_all()
    return {"resultType": "complete"}


class Failure(Exception):
    def __init__(self, code: int, message: str, data: dict | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def handle(message: dict) -> dict:
    method, params, request_id = message.get("method"), message.get("params") or {}, message.get("id")
    stateless = isinstance(params.get("_meta"), dict) and META + "protocolVersion" in params["_meta"]
    try:
        if method == "initialize":
            reply = {
                "protocolVersion": LEGACY,
                "capabilities": {"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}},
                "serverInfo": {"name": "tasks", "version": "1"},
            }
        elif method == "server/discover":
            reply = {
                "supportedVersions": [STATELESS, LEGACY],
                "capabilities": {"tools": {}, "extensions": {EXTENSION: {}}},
                "_meta": {META + "serverInfo": {"name": "tasks", "version": "1"}},
            }
        elif method == "tools/list":
            reply = {"tools": listing()}
        elif method == "tools/call":
            reply = call(params, stateless)
        elif method == "tasks/get":
            task = found(params)
            reply = task.detailed() if stateless else task.shape()
        elif method == "tasks/result" and not stateless:
            reply = result(found(params))
        elif method == "tasks/update" and stateless:
            reply = update(found(params), params)
        elif method == "tasks/cancel":
            reply = cancel(found(params))
        elif method == "tasks/list" and not stateless:
            reply = {"tasks": [task.shape() for task in tasks.values()]}
        elif method == "ping":
            reply = {}
        else:
            raise Failure(-32601, f"Method not found: {method}")
    except Failure as exc:
        error = {"code": exc.code, "message": exc.message, **({"data": exc.data} if exc.data else {})}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}
    if stateless and "resultType" not in reply:
        reply = {"resultType": "complete", **reply}
    return {"jsonrpc": "2.0", "id": request_id, "result": reply}


def main() -> None:
    print("tasks server ready", file=sys.stderr, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "method" not in message:  # an answer to this server's own request
            answers[message.get("id")] = message
            event = waiting.pop(message.get("id"), None)
            if event is not None:
                event.set()
        elif "id" in message:
            threading.Thread(target=lambda m: send(handle(m)), args=(message,), daemon=True).start()


def serve_http() -> None:
    """2026-07-28 over Streamable HTTP: each POST one request, answered as JSON (the wire has no session and,
    for tasks, nothing the server starts: input comes back through tasks/get and tasks/update)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _reply(self, status: int, body: dict | list | None) -> None:
            reply_json(self, status, body)

        def do_GET(self) -> None:
            self._reply(200, seen) if self.path == "/seen" else self._reply(404, None)

        def do_POST(self) -> None:
            message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            if "id" not in message or "method" not in message:
                return self._reply(202, None)
            seen.append(
                {
                    "path": self.path,
                    "method": message["method"],
                    "Mcp-Method": self.headers.get("Mcp-Method"),
                    "Mcp-Name": self.headers.get("Mcp-Name"),
                }
            )
            self._reply(200, handle(message))

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    serve_http() if "--http" in sys.argv[1:] else main()
