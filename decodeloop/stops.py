"""Deciding, token by token, whether the model's turn should stop, and why.

Owns the stop conditions of one turn: end-of-sequence ids, stop strings, the
opening of a tool call (and, through a call scanner, its close), and the token
cap. `Stops.check` is called once per generated token with that token's text
and returns a `Verdict`: why to stop (or None), and which text is now safe to
show the user.

Text is held back while it could still be the start of a stop string or of the
call opener, so a stop string is never shown even in part, and call syntax
never leaks into the visible reply. The held text is at most one character
shorter than the longest watched string, and every check looks only at that
plus the new piece, so a check costs the same however long the turn has been.

When several watched strings appear in the same piece, the one that is
completed first wins (ties: the one that started first, then stop strings
before the opener). That is exactly what a one-character-per-token stream
would see, so the outcome never depends on how the text was cut into tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Collection, Sequence

if TYPE_CHECKING:
    from .calls import CallScanner


@dataclass(slots=True)
class Verdict:
    """What one token did to the turn."""

    reason: str | None  # None, "eos", "stop_sequence", "tool_call", "max_tokens"
    delta: str  # text released to the user by this token (safe to show now)
    call_text: str | None  # for "tool_call": the whole call span, opener through closer
    held: str  # text held back: it may be the start of a stop string or of the call opener
    in_call: bool  # this token's text belongs to a tool call the model is writing
    count: int  # tokens checked so far in this turn


class Stops:
    """Incremental stop conditions for one turn of generation."""

    def __init__(
        self,
        *,
        eos_ids: Collection[int],
        stop_strings: Sequence[str] = (),
        opener: str | None = None,
        scanner_factory: Callable[[], CallScanner] | None = None,
        max_tokens: int = 256,
        max_call_chars: int = 4096,
    ) -> None:
        if isinstance(stop_strings, str):
            raise ValueError(f"stop_strings must be a sequence of strings, not the string {stop_strings!r}")
        if any(s == "" for s in stop_strings):
            raise ValueError("stop strings must be non-empty: an empty stop string would match before any text")
        if opener == "":
            raise ValueError("the call opener must be a non-empty string (or None for no tool calls)")
        if opener is not None and scanner_factory is None:
            raise ValueError("a call opener needs a scanner_factory to find where the call closes")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens!r}")
        if max_call_chars < 1:
            raise ValueError(f"max_call_chars must be >= 1, got {max_call_chars!r}")
        self.eos_ids = frozenset(eos_ids)
        self.stop_strings = tuple(dict.fromkeys(stop_strings))  # dedupe, keep order
        self.opener = opener
        self.max_tokens = max_tokens
        self.max_call_chars = max_call_chars
        self._scanner_factory = scanner_factory

        watched = self.stop_strings + ((opener,) if opener is not None else ())
        # Every proper prefix of a watched string: the only suffixes worth holding back.
        self._prefixes = frozenset(w[:i] for w in watched for i in range(1, len(w)))
        # Held text never reaches a whole watched string, so it is at most this long.
        self.max_held = max((len(w) for w in watched), default=1) - 1

        self.conditions: tuple[str, ...] = tuple(
            name
            for name, on in (
                ("eos", bool(self.eos_ids)),
                ("stop_sequence", bool(self.stop_strings)),
                ("tool_call", opener is not None),
                ("max_tokens", True),
            )
            if on
        )

        self.count = 0
        self._held = ""
        self._call: list[str] | None = None  # pieces of the call being written; None outside a call
        self._call_chars = 0
        self._scanner: CallScanner | None = None

    @property
    def held(self) -> str:
        """Text currently held back from the user."""
        return self._held

    @property
    def in_call(self) -> bool:
        """Whether the model is in the middle of writing a tool call."""
        return self._call is not None

    def new_segment(self) -> None:
        """Start afresh after a tool result was injected; the token count (per turn) is kept."""
        self._held = ""
        self._end_call()

    def check(self, token: int, piece: str) -> Verdict:
        """Account for one generated token whose decoded text is `piece` ("" for a partial character)."""
        self.count += 1
        if token in self.eos_ids:
            if self._call is not None:
                # The model ended mid-call; hand over what it wrote so the parser can report it unclosed.
                return Verdict("tool_call", "", self._end_call(), "", True, self.count)
            delta, self._held = self._held, ""  # held text turned out not to be a stop string
            return Verdict("eos", delta, None, "", False, self.count)
        if self._call is not None:
            verdict = self._extend_call(piece, "")
        else:
            verdict = self._scan_text(piece)
        if verdict.reason is None and self.count >= self.max_tokens:
            verdict.reason = "max_tokens"
            verdict.delta += self._held
            verdict.held = self._held = ""
            if self._call is not None:
                self._end_call()  # a half-written call is dropped, never shown as text
        return verdict

    def _scan_text(self, piece: str) -> Verdict:
        """Normal text: release what cannot start a watched string, hold back the rest."""
        buf = self._held + piece
        # Find the watched string completed first; ties go to the earlier start,
        # then to stop strings (checked first, and only a strictly earlier one replaces).
        best_end = best_start = len(buf) + 1
        found = is_call = False
        for stop in self.stop_strings:
            start = buf.find(stop)
            if start >= 0 and (start + len(stop), start) < (best_end, best_start):
                best_end, best_start, found = start + len(stop), start, True
        if self.opener is not None:
            start = buf.find(self.opener)
            if start >= 0 and (start + len(self.opener), start) < (best_end, best_start):
                best_end, best_start, found, is_call = start + len(self.opener), start, True, True

        if not found:
            keep = min(len(buf), self.max_held)
            prefixes = self._prefixes
            while keep and buf[-keep:] not in prefixes:
                keep -= 1
            cut = len(buf) - keep
            self._held = buf[cut:]
            return Verdict(None, buf[:cut], None, self._held, False, self.count)

        self._held = ""
        if not is_call:
            return Verdict("stop_sequence", buf[:best_start], None, "", False, self.count)
        # The opener: text before it is released, text after it starts the call.
        self._call = [self.opener]
        self._call_chars = len(self.opener)
        self._scanner = self._scanner_factory()
        return self._extend_call(buf[best_end:], buf[:best_start])

    def _extend_call(self, piece: str, delta: str) -> Verdict:
        """Inside a call: feed the scanner until it reports the closing bracket."""
        close = self._scanner.feed(piece) if piece else None
        if close is not None:
            self._call.append(piece[:close])  # text after the closer is dropped
            return Verdict("tool_call", delta, self._end_call(), "", True, self.count)
        self._call.append(piece)
        self._call_chars += len(piece)
        if self._call_chars > self.max_call_chars:
            # Hand over the over-long text; the parser rejects it with a message for the model.
            return Verdict("tool_call", delta, self._end_call(), "", True, self.count)
        return Verdict(None, delta, None, "", True, self.count)

    def _end_call(self) -> str | None:
        """Leave the call state, returning the call text written so far."""
        text = "".join(self._call) if self._call is not None else None
        self._call = None
        self._call_chars = 0
        self._scanner = None
        return text
