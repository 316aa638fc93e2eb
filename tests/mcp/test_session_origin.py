"""A session id belongs to the origin that issued it, for life: two real HTTP server processes.

The session begins on one origin; every later message is redirected (307) to a
second origin, which answers and names a session id of its own on every
answer. That origin is not believed: the client keeps the first session id,
sends it to the origin that issued it on every request, and never to the
other, however many redirected calls are made.
"""

from __future__ import annotations

import json

from decodeloop.mcp import McpClient


def test_a_session_id_never_moves_to_the_origin_a_redirect_reached(http_server):
    elsewhere = http_server("--own-session")
    issuer = http_server("--redirect-to", elsewhere.url)
    with McpClient.connect_url(issuer.url + "/moving", name="moving", timeout=60, protocol="2025-11-25") as client:
        session = client.transport.session_id
        assert session
        for n in range(3):  # the second and later calls are where a moved session would go elsewhere
            assert client.call_tool("echo", {"text": str(n)}).text().startswith("answered by 127.0.0.1:")
        assert client.transport.session_id == session  # the other origin's own session ids were not taken
    received = [r for r in elsewhere.seen() if r["method"] == "POST"]
    assert len(received) == 4  # notifications/initialized and the three calls
    assert all("mcp-session-id" not in {name.lower() for name in r["headers"]} for r in received)
    assert session not in json.dumps(elsewhere.seen())
    # the issuer saw its session id on every request sent to it: the three calls and the DELETE on close
    to_issuer = [r for r in issuer.seen() if r["path"] == "/moving" and r["method"] in ("POST", "DELETE")]
    assert len(to_issuer) == 6  # initialize, notifications/initialized, three calls, DELETE
    assert [r["headers"].get("Mcp-Session-Id") for r in to_issuer[1:]] == [session] * 5
