"""JSON Lines output: one object per event on stdout, for programs to read.

What a server sent is capped here as in the context: every string longer than
`max_chars` in a JSON-RPC message (`rpc`) or in a result's content items
(`tool_result`) is cut with a note giving its length, so a huge result costs
a few copies of the cap, not of the result. Every control, format and invisible
character (untrusted.py) is written as a JSON \\u escape: U+2028 and U+2029 cannot
split a line for a reader that splits on them, and a tag character or a bidi
override is not rendered raw by whatever shows the file. Read as JSON, the text
is exactly the server's.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from decodeloop.events import Event
from decodeloop.text.untrusted import cap_strings, json_escaped, visible

DEFAULT_MAX_CHARS = 16_000
CAPPED = {"rpc": "message", "tool_result": "content"}  # the field of each event that holds a server's raw text


class JsonlView:
    def __init__(self, out: TextIO | None = None, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self.out = out or sys.stdout
        self.max_chars = max_chars

    def __call__(self, event: Event) -> None:
        data = event.to_json()
        field = CAPPED.get(event.kind)
        if field is not None:
            data[field] = cap_strings(data[field], self.max_chars)
        self.out.write(json_escaped(json.dumps(data, ensure_ascii=False)) + "\n")
        self.out.flush()


class AnswerView:
    """--quiet: nothing but the answer (and a turn-ending error on stderr).

    The answer goes out as written into a pipe; on a terminal, and on stderr always,
    control characters are made visible (the model may copy them from a result).
    """

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def __call__(self, event: Event) -> None:
        if event.kind == "done":
            if event.error:  # type: ignore[attr-defined]
                self.err.write(f"decodeloop: {visible(event.error)}\n")  # type: ignore[attr-defined]
            answer = event.answer  # type: ignore[attr-defined]
            isatty = getattr(self.out, "isatty", None)
            self.out.write((visible(answer) if isatty and isatty() else answer) + "\n")
            self.out.flush()
