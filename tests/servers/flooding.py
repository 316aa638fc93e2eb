"""An MCP server that floods the client during a call: log notifications by the thousand, a result of many items.

Run as `python3 tests/servers/flooding.py [--log-messages N] [--log-chars C] [--result-items N]
[--item-chars C]`. Its one tool, `get_weather` (the call the table model writes), first sends N
notifications/message of C characters each (numbered, so each differs), then answers with a result of
--result-items text items of --item-chars characters each (one short item by default). The
notifications and the answer are written straight to the file descriptor, as a server that floods
would, in large writes so that a flood of hundreds of megabytes takes seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# Runnable as a plain script from anywhere: make the repository importable.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from raw_answers import RawAnswers

from decodeloop.servers.base import ToolServer

server = ToolServer("flooding", "0.0.1")
options = argparse.Namespace(log_messages=0, log_chars=1000, result_items=1, item_chars=20)
raw = RawAnswers(server)


@server.tool(
    "get_weather",
    "Flood the client with log notifications, then answer.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "state": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
def get_weather(city: str, state: str = "") -> str:
    filler = "x" * options.log_chars
    batch: list[bytes] = []
    for n in range(options.log_messages):
        data = f"{n:>9} {filler}"[: options.log_chars]
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}}
        batch.append((json.dumps(note) + "\n").encode())
        if len(batch) == 1000:
            raw.write(b"".join(batch))
            batch.clear()
    raw.write(b"".join(batch))
    items = [{"type": "text", "text": f"{n} " + "y" * options.item_chars} for n in range(options.result_items)]
    response = {"jsonrpc": "2.0", "id": raw.current.get("id"), "result": {"content": items, "isError": False}}
    raw.answer((json.dumps(response) + "\n").encode())
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-messages", type=int, default=0)
    parser.add_argument("--log-chars", type=int, default=1000)
    parser.add_argument("--result-items", type=int, default=1)
    parser.add_argument("--item-chars", type=int, default=20)
    parser.parse_args(namespace=options)
    return server.serve_stdio()


if __name__ == "__main__":
    sys.exit(main())
