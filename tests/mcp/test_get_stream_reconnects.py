"""The GET stream of a server that ends it at once with `retry: 0`: reopened with a floor and a backoff,
and given up with a notice after MAX_LISTEN_FAILURES streams in a row without a message.

tests/servers/http_faulty.py --get-stream-primes answers every GET with a priming
event (a new event id, empty data) and `retry: 0`, and ends the stream: a client
that took the new id for progress, or the retry for its wait, reconnected in a
loop without end. The server records every GET it receives. The waits go through
the transport's reconnect_delay, replaced here by one that records what it was
asked and waits a millisecond: the test counts, it never times.
"""

from __future__ import annotations

from conftest import Recorder

from decodeloop.mcp.transports import http as http_transport
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.startup import ClientOptions, start_servers

GUARD = 60  # seconds: only keeps a client that never gives up from hanging the suite


def test_a_get_stream_that_ends_at_once_with_retry_0_is_given_up_after_n_with_a_notice(http_server, monkeypatch):
    server = http_server("--get-stream-primes")
    asked: list[tuple[int, float | None]] = []

    def recorded(failures: int, retry: float | None) -> float:
        asked.append((failures, retry))
        return 0.001

    monkeypatch.setattr(http_transport, "reconnect_backoff", recorded)
    events = Recorder()
    spec = ServerSpec(name="flappy", url=server.url + "/mcp", protocol="2025-11-25")
    with start_servers([spec], events, options=ClientOptions(timeout=GUARD)) as router:
        listener = router.clients["flappy"].transport._listener
        listener.join(GUARD)
        assert not listener.is_alive()  # it stopped reconnecting on its own
    notices = [event.message for event in events.of("notice")]
    n = http_transport.MAX_LISTEN_FAILURES
    assert [text for text in notices if "gave up on the GET stream" in text] == [
        f"gave up on the GET stream for messages the server starts: it failed or ended without a message "
        f"{n} times in a row"
    ]
    gets = [r for r in server.seen() if r["method"] == "GET" and r["path"] == "/mcp"]
    assert len(gets) == n
    # each reopening resumed from the last priming id, and waited what the backoff said for that many failures
    assert [r["headers"].get("Last-Event-ID") for r in gets] == [None] + [f"g{k}" for k in range(1, n)]
    assert asked == [(k, 0.0) for k in range(1, n)]


def test_the_reconnect_backoff_has_a_floor_and_doubles_for_each_failure_in_a_row():
    floor = http_transport.RECONNECT_FLOOR
    assert http_transport.reconnect_backoff(0, 0.0) == floor  # retry: 0 waits the floor
    assert [http_transport.reconnect_backoff(k, 0.0) for k in range(1, 4)] == [2 * floor, 4 * floor, 8 * floor]
    assert http_transport.reconnect_backoff(0, None) == http_transport.DEFAULT_RETRY
    assert http_transport.reconnect_backoff(30, 0.0) == http_transport.RECONNECT_CEILING
    assert http_transport.reconnect_backoff(3, 120.0) == 120.0  # a server's long retry: is kept
