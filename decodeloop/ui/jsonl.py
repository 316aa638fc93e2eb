"""JSON Lines output: one object per event on stdout, for programs to read."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from decodeloop.events import Event


class JsonlView:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def __call__(self, event: Event) -> None:
        self.out.write(json.dumps(event.to_json(), ensure_ascii=False) + "\n")
        self.out.flush()


class AnswerView:
    """--quiet: nothing but the answer (and a turn-ending error on stderr)."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def __call__(self, event: Event) -> None:
        if event.kind == "done":
            if event.error:  # type: ignore[attr-defined]
                self.err.write(f"decodeloop: {event.error}\n")  # type: ignore[attr-defined]
            self.out.write(event.answer + "\n")  # type: ignore[attr-defined]
            self.out.flush()
