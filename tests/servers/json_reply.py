"""One JSON answer from a test server's http.server handler: the status, the body and its length."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


def reply_json(handler: BaseHTTPRequestHandler, status: int, body: object) -> None:
    """Send `body` as JSON with `status` (None: an empty body, as a 202 has)."""
    data = b"" if body is None else json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
