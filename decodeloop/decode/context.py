"""The context: the token ids of a conversation and where each span came from.

To the model a tool result is just more tokens; only the harness knows which
tokens the model sampled, which the user wrote and which a tool returned. The
context keeps that: every span has a source, and the spans cover the ids
exactly, in order. Sources:

    "chat"               markup the chat format placed (role markers, ...)
    "system"             the system prompt (with the tool descriptions)
    "user"               the user's text
    "model"              tokens the model sampled
    "reasoning"          tokens the model sampled inside a reasoning block (<think>...</think>), markers included
    "tool:SERVER/TOOL"   a tool result (or an error about a call) for TOOL on SERVER
    "resource:SERVER/URI"  a resource's text, attached to a user message
    "prompt:SERVER/NAME"   a server's prompt's text, sent as (part of) a user message

`ids` is a plain list, which is what engines read; the loop appends sampled
tokens to it directly after opening a "model" span, so provenance costs
nothing per token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MODEL = "model"
REASONING = "reasoning"
AUTHORED = (MODEL, REASONING)  # what the model wrote itself


@dataclass(slots=True)
class Span:
    start: int
    end: int
    source: str

    def to_json(self) -> list:
        return [self.start, self.end, self.source]


class Context:
    def __init__(self) -> None:
        self.ids: list[int] = []
        self._starts: list[int] = []  # where each span starts
        self._sources: list[str] = []  # its source

    def __len__(self) -> int:
        return len(self.ids)

    def open(self, source: str) -> None:
        """Ids appended from now on (to `ids` directly) come from `source`."""
        if self._sources and self._sources[-1] == source:
            return
        if self._starts and self._starts[-1] == len(self.ids):  # an empty span is replaced
            self._sources[-1] = source
            return
        self._starts.append(len(self.ids))
        self._sources.append(source)

    def relabel_from(self, start: int, source: str) -> None:
        """The ids from `start` on come from `source` (tokens whose kind the stop check knew only later: the
        ones that spelled a reasoning marker, say)."""
        if start >= len(self.ids):
            return
        while self._starts and self._starts[-1] >= start:
            self._starts.pop()
            self._sources.pop()
        if not self._sources or self._sources[-1] != source:
            self._starts.append(start)
            self._sources.append(source)

    def extend(self, ids: Iterable[int], source: str) -> None:
        ids = list(ids)
        if ids:
            self.open(source)
            self.ids.extend(ids)

    def extend_pieces(self, pieces: Iterable[tuple[list[int], str]]) -> int:
        """Append a chat format's pieces; returns how many ids were added."""
        before = len(self.ids)
        for ids, source in pieces:
            self.extend(ids, source)
        return len(self.ids) - before

    def truncate(self, n: int) -> None:
        """Forget every id from position n on (an interrupted turn is cut back to where it was whole)."""
        del self.ids[n:]
        while self._starts and self._starts[-1] >= n:
            self._starts.pop()
            self._sources.pop()

    def spans(self, start: int = 0) -> list[Span]:
        """The spans that overlap ids[start:], clipped to it, in order."""
        out = []
        ends = self._starts[1:] + [len(self.ids)]
        for s, e, source in zip(self._starts, ends, self._sources):
            if e > start and e > s:
                out.append(Span(max(s, start), e, source))
        return out

    def source_at(self, position: int) -> str:
        """The source of the id at `position`."""
        from bisect import bisect_right

        if not 0 <= position < len(self.ids):
            raise IndexError(position)
        return self._sources[bisect_right(self._starts, position) - 1]
