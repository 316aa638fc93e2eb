"""A deliberately misbehaving MCP server for the fault tests: crashes, hangs, floods, garbage.

Run as `python3 tests/servers/faulty.py [--ignore-eof] [--ignore-term]`:
--ignore-eof keeps running after stdin closes, --ignore-term also ignores SIGTERM,
so the client's shutdown has to escalate.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

# Runnable as a plain script from anywhere: make the repository importable.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from decodeloop.servers.base import ToolServer  # noqa: E402

server = ToolServer("faulty", "0.0.1")

MEGABYTES = {
    "type": "object",
    "properties": {"megabytes": {"type": "integer", "minimum": 0, "maximum": 100}},
    "required": ["megabytes"],
    "additionalProperties": False,
}
NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}


@server.tool(
    "echo",
    "Return the text unchanged.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False},
)
def echo(text: str) -> str:
    return text


@server.tool("crash", "Exit with code 3 in the middle of the call, answering nothing.", NO_ARGUMENTS)
def crash() -> str:
    # The clock is CLOCK_MONOTONIC, shared by every process on the machine, so
    # the test can measure from this moment.
    print(f"crashing at {time.monotonic():.6f}", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool("hang", "Never answer.", NO_ARGUMENTS)
def hang() -> str:
    threading.Event().wait()
    return "unreachable"


@server.tool("flood", "Write that many megabytes to stderr, then answer done.", MEGABYTES)
def flood(megabytes: int) -> str:
    line = "x" * 1023 + "\n"
    for _ in range(megabytes * 1024):
        sys.stderr.write(line)
    sys.stderr.flush()
    return "done"


@server.tool("garbage", "Write a line that is not JSON to stdout, then answer normally.", NO_ARGUMENTS)
def garbage() -> str:
    os.write(1, b"this line is not JSON\n")  # straight to the fd, past the server's stdout guard
    return "after garbage"


@server.tool("big", "Return a text result of that many megabytes.", MEGABYTES)
def big(megabytes: int) -> str:
    return "y" * (megabytes * 1024 * 1024)


def _send(message: dict) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())  # past the stdout guard, as a real server writes


@server.tool("ping_client", "Ping the client in the middle of the call; answer with what came back.", NO_ARGUMENTS)
def ping_client() -> str:
    _send({"jsonrpc": "2.0", "id": "server-ping-1", "method": "ping"})
    reply = json.loads(sys.stdin.buffer.readline())
    return f"client answered: {json.dumps(reply, sort_keys=True)}"


@server.tool("chatty", "Send a log notification and a progress notification, then answer.", NO_ARGUMENTS)
def chatty() -> str:
    _send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}})
    _send({"jsonrpc": "2.0", "method": "notifications/unknown_kind", "params": {"x": 1}})
    return "finished"


@server.tool(
    "count_words",
    "Count the words of TEXT; with lie=true the structured result breaks the declared outputSchema.",
    {"type": "object", "properties": {"text": {"type": "string"}, "lie": {"type": "boolean"}},
     "required": ["text"], "additionalProperties": False},
    output_schema={"type": "object", "properties": {"words": {"type": "integer", "minimum": 0}},
                   "required": ["words"]},
)
def count_words(text: str, lie: bool = False) -> tuple[str, dict]:
    words = len(text.split())
    return f"{words} words", ({"words": str(words)} if lie else {"words": words})


@server.tool(
    "grow",
    "Add an echo tool called NAME at run time and announce notifications/tools/list_changed.",
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": False},
)
def grow(name: str) -> str:
    server.tool(name, "Return the text unchanged (added at run time).",
                {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})(echo)
    _send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    return f"added {name}"


def main() -> int:
    parser = server.argument_parser()
    parser.add_argument("--ignore-eof", action="store_true", help="keep running after stdin closes")
    parser.add_argument("--ignore-term", action="store_true", help="ignore SIGTERM")
    args = parser.parse_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    server.page_size = args.page_size
    code = server.serve_stdio()
    if args.ignore_eof:
        print("stdin closed; staying up anyway", file=sys.stderr, flush=True)
        threading.Event().wait()
    return code


if __name__ == "__main__":
    sys.exit(main())
