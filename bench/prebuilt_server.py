#!/usr/bin/env python3
"""A stdio MCP server for the client benchmark whose large result is encoded once, at start-up.

`big(megabytes)` answers with a result line built before the first request (only
the request id is spliced in), so timing a call measures the client receiving
and parsing the bytes, not the server building them. `echo(text)` answers
normally. Standard library only; used by bench/mcp_client.py for both clients.
"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {"name": "echo", "description": "Return the text.", "inputSchema": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "big", "description": "A text result of that many megabytes.", "inputSchema": {
        "type": "object", "properties": {"megabytes": {"type": "integer"}}, "required": ["megabytes"]}},
]


def encode(message: dict) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def main() -> int:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    big_tail = encode({"content": [{"type": "text", "text": "y" * (megabytes * 1024 * 1024)}],
                       "isError": False})[:-1] + b"}\n"
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" not in message:
            continue  # notifications
        method, request_id = message.get("method"), message["id"]
        if method == "tools/call" and message["params"]["name"] == "big":
            out.write(b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":' + big_tail)
        else:
            if method == "initialize":
                result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                          "serverInfo": {"name": "prebuilt", "version": "1"}}
            elif method == "tools/list":
                result = {"tools": TOOLS}
            elif method == "tools/call":
                result = {"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}],
                          "isError": False}
            else:
                result = {}
            out.write(encode({"jsonrpc": "2.0", "id": request_id, "result": result}))
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
