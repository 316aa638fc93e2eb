#!/usr/bin/env python3
"""A stdio MCP server for the client benchmark whose large result is encoded once, at start-up.

`big(megabytes)` answers with a result line built before the first request (only
the request id is spliced in), so timing a call measures the client receiving
and parsing the bytes, not the server building them; so does `resources/read` of
`blob://big`, that many megabytes of bytes as one base64 blob. `echo(text)` answers
normally. It speaks both MCP wires: server/discover and 2026-07-28 requests
(their version in `_meta`, `resultType` in each result), and initialize.
Standard library only; used by bench/mcp_client.py for both clients.
"""

from __future__ import annotations

import base64
import json
import sys

BLOB_URI = "blob://big"

TOOLS = [
    {
        "name": "echo",
        "description": "Return the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "big",
        "description": "A text result of that many megabytes.",
        "inputSchema": {"type": "object", "properties": {"megabytes": {"type": "integer"}}, "required": ["megabytes"]},
    },
]


def encode(message: dict) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def main() -> int:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    text = "y" * (megabytes * 1024 * 1024)
    big_tail = encode({"content": [{"type": "text", "text": text}], "isError": False})[:-1] + b"}\n"
    big_tail_modern = (
        encode({"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": False})[:-1] + b"}\n"
    )
    blob = base64.b64encode(bytes(range(256)) * (megabytes * 4096)).decode()
    blob_tail = encode({"contents": [{"uri": BLOB_URI, "mimeType": "application/octet-stream", "blob": blob}]})
    blob_tail = blob_tail[:-1] + b"}\n"
    blob_tail_modern = b'{"resultType":"complete",' + blob_tail[1:]
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" not in message:
            continue  # notifications
        method, request_id = message.get("method"), message["id"]
        meta = (message.get("params") or {}).get("_meta") or {}
        modern = meta.get("io.modelcontextprotocol/protocolVersion") == "2026-07-28"
        if method == "tools/call" and message["params"]["name"] == "big":
            out.write(
                b'{"jsonrpc":"2.0","id":'
                + json.dumps(request_id).encode()
                + b',"result":'
                + (big_tail_modern if modern else big_tail)
            )
        elif method == "resources/read" and message["params"]["uri"] == BLOB_URI:
            out.write(
                b'{"jsonrpc":"2.0","id":'
                + json.dumps(request_id).encode()
                + b',"result":'
                + (blob_tail_modern if modern else blob_tail)
            )
        else:
            if method == "server/discover":
                result = {
                    "supportedVersions": ["2026-07-28", "2025-11-25"],
                    "capabilities": {"tools": {}, "resources": {}},
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "prebuilt", "version": "1"}},
                }
            elif method == "initialize":
                result = {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}, "resources": {}},
                    "serverInfo": {"name": "prebuilt", "version": "1"},
                }
            elif method == "tools/list":
                result = {"tools": TOOLS}
            elif method == "tools/call":
                result = {
                    "content": [{"type": "text", "text": message["params"]["arguments"]["text"]}],
                    "isError": False,
                }
            else:
                result = {}
            if modern:
                result = {"resultType": "complete", **result}
                if method == "tools/list":
                    result.update(ttlMs=0, cacheScope="private")
            out.write(encode({"jsonrpc": "2.0", "id": request_id, "result": result}))
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
