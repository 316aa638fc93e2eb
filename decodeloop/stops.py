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

Call delimiters can be special tokens: with `opener_id` / `closer_id` a call
opens and closes on those ids (compared by id, as `<tool_call>` is one token
in several vocabularies); text that merely spells them is never a delimiter,
since `encode` never yields a special id.

Several calls in one message: by default the turn stops as soon as a call is
closed. With `collect_calls` (the JSON syntax's default: Hermes- and
Qwen-style models write parallel calls as consecutive `<tool_call>` blocks)
the message goes on: whitespace after a call is swallowed, another opener
starts the next call, and the end of the message (an end-of-turn id, other
text, a stop string or the cap) stops the turn with every call collected.
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
    calls: tuple[str, ...]  # for "tool_call": each call's whole span, opener through closer
    held: str  # text held back: it may be the start of a stop string or of the call opener
    in_call: bool  # this token's text belongs to a tool call the model is writing
    count: int  # tokens checked so far in this turn
    ended: bool = False  # the model closed its message itself with an end-of-turn id

    @property
    def call_text(self) -> str | None:
        """The last call of a "tool_call" verdict (the only one unless calls are collected)."""
        return self.calls[-1] if self.calls else None


_NO_CALLS: tuple[str, ...] = ()


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
        opener_id: int | None = None,
        closer_id: int | None = None,
        closer: str = "",
        collect_calls: bool = False,
    ) -> None:
        if isinstance(stop_strings, str):
            raise ValueError(f"stop_strings must be a sequence of strings, not the string {stop_strings!r}")
        if any(s == "" for s in stop_strings):
            raise ValueError("stop strings must be non-empty: an empty stop string would match before any text")
        if opener == "":
            raise ValueError("the call opener must be a non-empty string (or None for no tool calls)")
        if opener_id is not None and opener is None:
            raise ValueError("an opener id needs the opener's text (what the call span starts with)")
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
        self.opener_id = opener_id
        self.closer_id = closer_id
        self.closer = closer                  # text of the closer, when the closer is an id
        self.collect_calls = collect_calls

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
        self._calls: list[str] = []  # calls closed in this message, when collecting

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
        self._calls = []
        self._end_call()

    def check(self, token: int, piece: str) -> Verdict:
        """Account for one generated token whose decoded text is `piece` ("" for a partial character)."""
        self.count += 1
        if token in self.eos_ids:
            if self._call is not None:
                # The model ended mid-call; hand over what it wrote so the parser can report it unclosed.
                return Verdict("tool_call", "", self._collected(self._end_call()), "", True, self.count, True)
            if self._calls:
                return Verdict("tool_call", "", self._collected(None), "", False, self.count, True)
            delta, self._held = self._held, ""  # held text turned out not to be a stop string
            return Verdict("eos", delta, _NO_CALLS, "", False, self.count, True)
        if self._call is not None:
            if token == self.closer_id:
                verdict = self._extend_call(piece + self.closer, "", closing=True)
            else:
                verdict = self._extend_call(piece, "")
        elif token == self.opener_id and token is not None:
            verdict = self._open_call(self._held, "")
        else:
            verdict = self._scan_text(piece)
        if verdict.reason is None and self.count >= self.max_tokens:
            if self._calls:
                verdict.reason, verdict.calls = "tool_call", self._collected(None)
                return verdict
            verdict.reason = "max_tokens"
            verdict.delta += self._held
            verdict.held = self._held = ""
            if self._call is not None:
                self._end_call()  # a half-written call is dropped, never shown as text
        return verdict

    def _collected(self, last: str | None) -> tuple[str, ...]:
        """Every call of this message (with `last`, if any), and forget them."""
        calls = tuple(self._calls) + ((last,) if last is not None else ())
        self._calls = []
        return calls

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
            if self._calls:
                if buf[:cut].strip():  # text after the message's calls ends it: run them
                    self._held = ""
                    return Verdict("tool_call", "", self._collected(None), "", False, self.count)
                return Verdict(None, "", _NO_CALLS, self._held, False, self.count)  # whitespace between calls
            return Verdict(None, buf[:cut], _NO_CALLS, self._held, False, self.count)

        self._held = ""
        if not is_call:
            if self._calls:  # a stop string after the message's calls: run them
                return Verdict("tool_call", "", self._collected(None), "", False, self.count)
            return Verdict("stop_sequence", buf[:best_start], _NO_CALLS, "", False, self.count)
        # The opener: text before it is released, text after it starts the call.
        return self._open_call(buf[:best_start], buf[best_end:])

    def _open_call(self, before: str, after: str) -> Verdict:
        """A call opens: `before` is text ahead of the opener, `after` the start of the call."""
        self._held = ""
        if self._calls and before.strip():
            # text between calls ends the message: run the calls written so far
            return Verdict("tool_call", "", self._collected(None), "", False, self.count)
        delta = "" if self._calls else before   # whitespace between calls is not shown
        self._call = [self.opener]
        self._call_chars = len(self.opener)
        self._scanner = self._scanner_factory()
        return self._extend_call(after, delta)

    def _extend_call(self, piece: str, delta: str, closing: bool = False) -> Verdict:
        """Inside a call: feed the scanner until it reports the closer."""
        close = self._scanner.feed(piece) if piece else None
        if close is None and closing:
            close = len(piece)  # the closer id closes the call whatever the scanner thinks
        if close is not None:
            self._call.append(piece[:close])  # text after the closer is dropped
            call = self._end_call()
            if self.collect_calls:
                self._calls.append(call)
                return Verdict(None, delta, _NO_CALLS, "", True, self.count)
            return Verdict("tool_call", delta, (call,), "", True, self.count)
        self._call.append(piece)
        self._call_chars += len(piece)
        if self._call_chars > self.max_call_chars:
            # Hand over the over-long text; the parser rejects it with a message for the model.
            return Verdict("tool_call", delta, self._collected(self._end_call()), "", True, self.count)
        return Verdict(None, delta, _NO_CALLS, "", True, self.count)

    def _end_call(self) -> str | None:
        """Leave the call state, returning the call text written so far."""
        text = "".join(self._call) if self._call is not None else None
        self._call = None
        self._call_chars = 0
        self._scanner = None
        return text
