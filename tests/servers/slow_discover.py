"""A 2026-07-28 MCP server slow to start: it answers server/discover only after a delay, and once it has, it
refuses the initialize handshake as the Python SDK's servers do (JSON-RPC -32022).

Run as `python3 tests/servers/slow_discover.py SECONDS`: the bundled weather server's tools, behind that.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from decodeloop.servers.weather import build_server

server = build_server()

DELAY = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
_handle = server.handle
_serving_2026 = False


def handle(message):
    global _serving_2026
    method = message.get("method") if isinstance(message, dict) else None
    if method == "server/discover":
        time.sleep(DELAY)  # a slow start: imports, a model, a database
        _serving_2026 = True
    elif method == "initialize" and _serving_2026:
        return {
            "jsonrpc": "2.0",
            "id": message.get("id"),
            "error": {
                "code": -32022,
                "message": "connection is serving the 2026-07-28 protocol; the initialize handshake is not accepted",
            },
        }
    return _handle(message)


server.handle = handle

if __name__ == "__main__":
    sys.exit(server.serve_stdio())
