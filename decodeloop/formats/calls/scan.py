"""Finding where a call's span ends while the model writes it: the scanners formats are built from.

A scanner is fed the text after a shape's opener, a piece at a time; `feed(piece)` returns the index in
the piece just past the span's end, or None while it is still open. Pieces may split anywhere.

    CloserScanner   the span ends at a closer, but only where `complete(text)` agrees: a closer written
                    inside a string argument, or inside a raw parameter value, is the value's text
    ValueScanner    the span is one bracketed value (JSON, or a Python-style call list) and ends where it
                    closes; brackets inside strings do not count

`outside_strings(text, quotes)` is the `complete` most JSON-bodied formats need: the text leaves no string
open. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable


def outside_strings(text: str, quotes: str = '"') -> bool:
    """Whether `text` leaves no string open (strings in `quotes`, with backslash escapes)."""
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in quotes:
            quote = ch
    return not quote


class CloserScanner:
    """Ends at the first `closer` for which `complete(span so far, the closer included)` holds."""

    def __init__(self, closer: str, complete: Callable[[str], bool] | None = None) -> None:
        if not closer:
            raise ValueError("a closer scanner needs a closer")
        self.closer = closer
        self.complete = complete
        self._text = ""
        self._looked = 0  # closers starting before this are already judged

    def feed(self, piece: str) -> int | None:
        before = len(self._text)
        self._text += piece
        text, closer = self._text, self.closer
        at = text.find(closer, max(self._looked, before - len(closer) + 1, 0))
        while at >= 0:
            end = at + len(closer)
            if self.complete is None or self.complete(text[:end]):
                return end - before
            at = text.find(closer, at + 1)
        self._looked = max(self._looked, len(text) - len(closer) + 1)
        return None


class ValueScanner:
    """Ends where the bracketed value that begins the span closes (`{...}` or `[...]`; strings in `quotes`
    followed, with backslash escapes). Whitespace may come first; `abandoned` is set, and the index of the
    character returned, when the span does not begin with a bracket (it is not a value)."""

    def __init__(self, quotes: str = '"', depth: int = 0) -> None:
        self.quotes = quotes
        self.abandoned = False
        self._depth = depth  # an opener that is itself a bracket ("[" of a call list) starts at depth 1
        self._quote = ""
        self._escaped = False

    def feed(self, piece: str) -> int | None:
        for i, ch in enumerate(piece):
            if self._quote:
                if self._escaped:
                    self._escaped = False
                elif ch == "\\":
                    self._escaped = True
                elif ch == self._quote:
                    self._quote = ""
                continue
            if self._depth == 0:
                if ch in " \t\r\n":
                    continue
                if ch not in "{[":
                    self.abandoned = True
                    return i
            if ch in self.quotes:
                self._quote = ch
            elif ch in "{[(":
                self._depth += 1
            elif ch in "}])":
                self._depth -= 1
                if self._depth <= 0:
                    return i + 1
        return None
