"""The in-memory transport: a client talking to an in-process server, for tests.

It behaves like a pipe to a one-threaded server: messages go through a queue to a
worker thread that calls `server.handle(message)` and delivers any response back
through `on_message`. Every message is round-tripped through JSON text, so what
could not cross a real wire cannot cross this one either.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

from decodeloop.errors import ConnectionClosed, McpError
from decodeloop.mcp.transports.base import Message, Transport, Wire

_STOP = object()


class Handler(Protocol):
    def handle(self, message: dict) -> dict | None: ...


def _through_the_wire(message: Any) -> Any:
    return json.loads(json.dumps(message, ensure_ascii=False))


class MemoryTransport(Transport):
    wire: Wire = "memory"

    def __init__(self, server: Handler) -> None:
        self.server = server
        self._inbox: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._on_close: Callable[[str], None] = lambda reason: None

    def start(
        self,
        on_message: Callable[[Message], None],
        on_close: Callable[[str], None],
        on_garbage: Callable[[str], None],
        on_error: Callable[[Any, McpError], None] | None = None,
    ) -> None:
        if self._worker is not None:
            raise RuntimeError("MemoryTransport.start() called twice")
        self._on_close = on_close
        self._worker = threading.Thread(target=self._serve, args=(on_message,), name="mcp-memory", daemon=True)
        self._worker.start()

    def send(self, message: dict, headers: dict[str, str] | None = None) -> None:
        wire = _through_the_wire(message)  # no headers in memory: the message alone
        with self._lock:
            if self._closed:
                raise ConnectionClosed("the in-memory connection is closed")
            self._inbox.put(wire)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._inbox.put(_STOP)
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join(1.0)

    def _serve(self, on_message: Callable[[Message], None]) -> None:
        reason = "connection closed by the client"
        try:
            while True:
                message = self._inbox.get()
                if message is _STOP:
                    return
                response = self.server.handle(message)
                if response is not None:
                    on_message(_through_the_wire(response))
        except Exception as exc:  # a server bug ends the connection, as a crash would
            reason = f"in-memory server failed: {exc!r}"
            with self._lock:
                self._closed = True
        finally:
            try:
                self._on_close(reason)
            except Exception:
                pass
