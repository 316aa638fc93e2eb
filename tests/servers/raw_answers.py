"""For test servers whose tools write their own answer, byte for byte, past the ToolServer's framing.

`RawAnswers(server)` wraps a ToolServer's handler: `current` is the request being
answered; a tool that calls `answer(...)` (or sets `answered`) has written the
answer itself, so the server writes none; `write` puts bytes on stdout as they are.
"""

from __future__ import annotations

import json
import os


class RawAnswers:
    def __init__(self, server) -> None:
        self.current: dict = {}  # the request being answered
        self.answered = False  # the tool wrote its answer itself: the server must not answer again
        self._handle = server.handle
        server.handle = self._handled

    def _handled(self, message):
        self.current, self.answered = message if isinstance(message, dict) else {}, False
        response = self._handle(message)
        return None if self.answered else response

    def id(self) -> bytes:
        """The current request's id, as JSON."""
        return json.dumps(self.current.get("id")).encode()

    @staticmethod
    def write(*parts: bytes) -> None:
        """These bytes on stdout, whole, as they are."""
        for part in parts:
            view = memoryview(part)
            while view:
                view = view[os.write(1, view) :]

    def answer(self, *parts: bytes) -> None:
        """Write the answer to the current request from these pieces, as they are."""
        self.answered = True
        self.write(*parts)
