"""A deliberately misbehaving MCP server for the fault tests: crashes, hangs, floods, garbage.

Run as `python3 tests/servers/faulty.py [--ignore-eof] [--ignore-term] [--start-delay S]
[--barrier DIR N] [--pid-file FILE] [--exit-at-start CODE] [--wire-faults]`: --ignore-eof keeps running
after stdin closes, --ignore-term also ignores SIGTERM, so the client's shutdown has to
escalate; --start-delay waits before serving; --barrier waits until N servers given the
same DIR have started (so they must start at the same time); --pid-file writes the pid;
--exit-at-start exits at once with CODE; --wire-faults adds the tools below.

Some tools write their answer themselves, straight to the file descriptor, as a server
that gets it wrong would: a line larger than any cap, bytes that are not UTF-8, JSON
nested too deeply. They use the id of the request being answered (`raw.current`).
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

from raw_answers import RawAnswers

from decodeloop.servers.base import ToolServer

server = ToolServer("faulty", "0.0.1")
raw = RawAnswers(server)

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
    {
        "type": "object",
        "properties": {"text": {"type": "string"}, "lie": {"type": "boolean"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    output_schema={"type": "object", "properties": {"words": {"type": "integer", "minimum": 0}}, "required": ["words"]},
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
    server.tool(
        name,
        "Return the text unchanged (added at run time).",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )(echo)
    _send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    return f"added {name}"


WIRE_TOOLS: list = []  # offered only with --wire-faults, so the default tool list stays as other tests know it


def wire_tool(*args, **kw):
    def register(function):
        WIRE_TOOLS.append((args, kw, function))
        return function

    return register


TEXT_HEAD = b'"result":{"content":[{"type":"text","text":"'
TEXT_END = b'"}]}'


@wire_tool(
    "huge",
    "Answer with a text of that many megabytes of z, written in pieces: the id first (as Python servers "
    "write it) or last (as TypeScript servers do); without the newline, then hang.",
    {
        "type": "object",
        "properties": {
            "megabytes": {"type": "integer", "minimum": 0},
            "id_last": {"type": "boolean"},
            "newline": {"type": "boolean"},
        },
        "required": ["megabytes"],
        "additionalProperties": False,
    },
)
def huge(megabytes: int, id_last: bool = False, newline: bool = True) -> str:
    piece = b"z" * (1 << 20)
    if id_last:
        raw.answer(b"{" + TEXT_HEAD)
    else:
        raw.answer(b'{"jsonrpc":"2.0","id":' + raw.id() + b"," + TEXT_HEAD)
    for _ in range(megabytes):
        raw.answer(piece)
    if not newline:
        print(f"wrote {megabytes} MB without a newline", file=sys.stderr, flush=True)
        threading.Event().wait()
    raw.answer(TEXT_END + (b',"jsonrpc":"2.0","id":' + raw.id() + b"}\n" if id_last else b"}\n"))
    return "unreachable"


@wire_tool(
    "bad_utf8",
    "Answer with a text holding the byte 0xff, which is not UTF-8.",
    NO_ARGUMENTS,
)
def bad_utf8() -> str:
    raw.answer(b'{"jsonrpc":"2.0","id":' + raw.id() + b"," + TEXT_HEAD + b"caf\xff" + TEXT_END + b"}\n")
    return "unreachable"


@wire_tool(
    "deep",
    "Send a message nested LEVELS deep: the answer itself, or a notification before a plain answer.",
    {
        "type": "object",
        "properties": {"levels": {"type": "integer", "minimum": 1}, "notification": {"type": "boolean"}},
        "required": ["levels"],
        "additionalProperties": False,
    },
)
def deep(levels: int, notification: bool = False) -> str:
    nested = b"[" * levels + b"]" * levels
    if notification:
        raw.write(
            b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":' + nested + b"}}\n"
        )
        return "after the deep notification"
    raw.answer(b'{"jsonrpc":"2.0","id":' + raw.id() + b',"result":{"content":[],"deep":' + nested + b"}}\n")
    return "unreachable"


@wire_tool(
    "orphan",
    "Start a process that holds this server's stdout and lives on, then exit with code 3 mid-call.",
    NO_ARGUMENTS,
)
def orphan() -> str:
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # inherits stdout
    print(f"started child {child.pid}", file=sys.stderr, flush=True)
    os._exit(3)


@wire_tool(
    "spawn_child",
    "Start a process that holds this server's stdout and lives on; answer with its pid.",
    NO_ARGUMENTS,
)
def spawn_child() -> str:
    import subprocess

    return str(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]).pid)


@wire_tool(
    "progress",
    "Send STEPS progress notifications for this call, one every INTERVAL seconds, then answer.",
    {
        "type": "object",
        "properties": {"steps": {"type": "integer", "minimum": 0}, "interval": {"type": "number", "minimum": 0}},
        "required": ["steps", "interval"],
        "additionalProperties": False,
    },
)
def progress(steps: int, interval: float) -> str:
    token = ((raw.current.get("params") or {}).get("_meta") or {}).get("progressToken")
    for step in range(1, steps + 1):
        time.sleep(interval)
        _send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": step, "total": steps},
            }
        )
    return f"done after {steps} steps"


def _barrier(folder: str, count: int) -> None:
    """Wait until `count` servers have reached this point with the same folder (60 s at most)."""
    with open(os.path.join(folder, str(os.getpid())), "w"):
        pass
    deadline = time.monotonic() + 60
    while len(os.listdir(folder)) < count:
        if time.monotonic() > deadline:
            print(f"barrier: only {len(os.listdir(folder))} of {count} servers started", file=sys.stderr, flush=True)
            sys.exit(4)
        time.sleep(0.01)


def main() -> int:
    parser = server.argument_parser()
    parser.add_argument("--ignore-eof", action="store_true", help="keep running after stdin closes")
    parser.add_argument("--ignore-term", action="store_true", help="ignore SIGTERM")
    parser.add_argument("--start-delay", type=float, default=0.0, help="wait this long before serving")
    parser.add_argument("--barrier", nargs=2, metavar=("DIR", "N"), help="wait until N servers reached DIR")
    parser.add_argument("--pid-file", help="write the pid here")
    parser.add_argument("--exit-at-start", type=int, help="exit at once with this code")
    parser.add_argument(
        "--wire-faults",
        action="store_true",
        help="also offer the tools that break the wire: huge, bad_utf8, deep, orphan, spawn_child, progress",
    )
    args = parser.parse_args()
    if args.wire_faults:
        for tool_args, tool_kw, function in WIRE_TOOLS:
            server.tool(*tool_args, **tool_kw)(function)
    if args.pid_file:
        with open(args.pid_file, "w") as f:
            f.write(str(os.getpid()))
    if args.exit_at_start is not None:
        print("exiting at start, as asked", file=sys.stderr, flush=True)
        return args.exit_at_start
    if args.barrier:
        _barrier(args.barrier[0], int(args.barrier[1]))
    time.sleep(args.start_delay)
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
