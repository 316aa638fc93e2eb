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

Alternate call shapes (formats/calls/shapes.py: a ```json block, bare JSON, `<function=...>`, ...)
are watched too when `alternates` are given. One opens only where a call can begin (the
start of the message, or after the model's own text ended a line); its span is held back
while it is written and read once it closes: a call when it names a tool that exists
(`known`) with arguments that parse, else released as the text it was, with a `notice`
when it looked like a near miss. `Verdict.shapes` names each call's shape.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from decodeloop.formats.calls.shapes import CANONICAL, NotACall, Shape, mentions_tool, read

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
    shapes: tuple[str, ...] = ()  # for "tool_call": each call's shape (formats/calls/shapes.py), beside `calls`
    notice: str | None = None  # something the model wrote looked like a call but is text (why)

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
        alternates: Sequence[Shape] = (),
        known: Callable[[str], bool] | None = None,
        shape: str = CANONICAL,
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
        self.closer = closer  # text of the closer, when the closer is an id
        self.collect_calls = collect_calls
        self.alternates = tuple(alternates) if opener is not None else ()
        self.known = known or (lambda name: False)
        self.shape = shape  # the canonical shape's name, for Verdict.shapes
        self._longer = {
            a: [b for b in self.alternates if b.opener != a.opener and b.opener.startswith(a.opener)]
            for a in self.alternates
        }

        watched = (
            self.stop_strings + ((opener,) if opener is not None else ()) + tuple(a.opener for a in self.alternates)
        )
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
        self._shapes: list[str] = []  # the shape of each of them
        self._alt: Shape | None = None  # an alternate shape being written (not yet known to be a call)
        self._alt_text = ""
        self._alt_scanner: Any = None  # the alternate shape's scanner (formats/calls/shapes.py)
        self._blank = True  # the message so far is whitespace and calls only
        self._line_start = True  # the message's text so far ends a line (or is blank)

    @property
    def held(self) -> str:
        """Text currently held back from the user."""
        return self._held

    @property
    def alternate(self) -> Shape | None:
        """The alternate shape whose span is being written (not yet read) once its body has begun as a call to
        a tool that exists (`{"name": "get_weather"`), or None: where --constrain's lazy triggers start the
        grammar. Not sooner: a model that means a tool that does not exist is not bent into one that does."""
        if self._alt is None:
            return None
        name = self._alt_scanner.named
        return self._alt if name is not None and self.known(name) else None

    @property
    def in_call(self) -> bool:
        """Whether the model is in the middle of writing a tool call."""
        return self._call is not None

    def new_segment(self) -> None:
        """Start afresh after a tool result was injected; the token count (per turn) is kept."""
        self._held = ""
        self._calls, self._shapes = [], []
        self._end_call()
        self._alt, self._alt_text, self._alt_scanner = None, "", None
        self._blank = self._line_start = True

    def check(self, token: int, piece: str) -> Verdict:
        """Account for one generated token whose decoded text is `piece` ("" for a partial character)."""
        self.count += 1
        if token in self.eos_ids:
            if self._call is not None:
                # The model ended mid-call; hand over what it wrote so the parser can report it unclosed.
                return self._verdict_calls(self._end_call(), self.shape, True, in_call=True)
            if self._alt is not None:
                return self._alt_at_end()
            if self._calls:
                return self._verdict_calls(None, None, True)
            delta, self._held = self._held, ""  # held text turned out not to be a stop string
            return Verdict("eos", delta, _NO_CALLS, "", False, self.count, True)
        if self._alt is not None:
            verdict = self._extend_alt(piece, "")
        elif self._call is not None:
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
                verdict.reason = "tool_call"
                verdict.calls, verdict.shapes = self._collected(None, None)
                return verdict
            verdict.reason = "max_tokens"
            verdict.delta += self._held + self._alt_text  # an alternate not yet read is text
            verdict.held = self._held = ""
            self._alt, self._alt_text, self._alt_scanner = None, "", None
            if self._call is not None:
                self._end_call()  # a half-written call is dropped, never shown as text
        return verdict

    def _collected(self, last: str | None, shape: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Every call of this message (with `last`, if any) and their shapes, and forget them."""
        calls = tuple(self._calls) + ((last,) if last is not None else ())
        shapes = tuple(self._shapes) + ((shape,) if last is not None and shape is not None else ())
        self._calls, self._shapes = [], []
        return calls, shapes

    def _verdict_calls(
        self, last: str | None, shape: str | None, ended: bool = False, delta: str = "", in_call: bool = False
    ) -> Verdict:
        """A "tool_call" verdict with every call of the message."""
        calls, shapes = self._collected(last, shape)
        return Verdict("tool_call", delta, calls, "", in_call, self.count, ended, shapes)

    def _scan_text(self, piece: str) -> Verdict:
        """Normal text: release what cannot start a watched string, hold back the rest."""
        buf = self._held + piece
        # Find the watched string completed first; ties go to the earlier start,
        # then to stop strings (checked first, and only a strictly earlier one replaces).
        best_end = best_start = len(buf) + 1
        found = is_call = False
        alternate = None
        for stop in self.stop_strings:
            start = buf.find(stop)
            if start >= 0 and (start + len(stop), start) < (best_end, best_start):
                best_end, best_start, found = start + len(stop), start, True
        if self.opener is not None:
            start = buf.find(self.opener)
            if start >= 0 and (start + len(self.opener), start) < (best_end, best_start):
                best_end, best_start, found, is_call = start + len(self.opener), start, True, True
        for shape in self.alternates:
            if shape.message_start and not self._blank:
                continue
            start = self._find_alternate(buf, shape)
            if start >= 0 and (start + len(shape.opener), start) < (best_end, best_start):
                best_end, best_start, found, is_call = start + len(shape.opener), start, True, True
                alternate = shape
        if alternate is not None:
            # "[" may be the start of "[TOOL_CALLS]": the longer opener wins where it is written, and text
            # that may still become it is held
            tail = buf[best_start:]
            for longer in self._longer[alternate]:
                if tail.startswith(longer.opener):
                    alternate, best_end = longer, best_start + len(longer.opener)
                    break
                if longer.opener.startswith(tail):
                    self._consumed(buf[:best_start])
                    self._held = tail
                    return Verdict(None, buf[:best_start], _NO_CALLS, tail, False, self.count)

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
                    return self._verdict_calls(None, None)
                return Verdict(None, "", _NO_CALLS, self._held, False, self.count)  # whitespace between calls
            self._consumed(buf[:cut])
            return Verdict(None, buf[:cut], _NO_CALLS, self._held, False, self.count)

        self._held = ""
        if not is_call:
            if self._calls:  # a stop string after the message's calls: run them
                return self._verdict_calls(None, None)
            return Verdict("stop_sequence", buf[:best_start], _NO_CALLS, "", False, self.count)
        if alternate is not None:
            return self._open_alternate(alternate, buf[:best_start], buf[best_end:])
        # The opener: text before it is released, text after it starts the call.
        return self._open_call(buf[:best_start], buf[best_end:])

    def _find_alternate(self, buf: str, shape: Shape) -> int:
        """Where the alternate's opener first stands in `buf` at a place a call can begin, or -1."""
        opener = shape.opener
        start = buf.find(opener)
        while start >= 0:
            before = buf[:start]
            if shape.message_start:
                if not before.strip():
                    return start
            else:
                line = before.rfind("\n")
                if not before[line + 1 :].strip(" \t") and (line >= 0 or self._line_start):
                    return start
            start = buf.find(opener, start + 1)
        return -1

    def _consumed(self, text: str) -> None:
        """Keep track of where the message's text stands: still blank, at the start of a line."""
        if text:
            if text.strip():
                self._blank = False
            body = text.rstrip(" \t")
            self._line_start = body.endswith("\n") or (not body and self._line_start)

    def _open_call(self, before: str, after: str) -> Verdict:
        """A call opens: `before` is text ahead of the opener, `after` the start of the call."""
        self._held = ""
        if self._calls and before.strip():
            # text between calls ends the message: run the calls written so far
            return self._verdict_calls(None, None)
        delta = "" if self._calls else before  # whitespace between calls is not shown
        self._consumed(delta)
        assert self.opener is not None and self._scanner_factory is not None  # only a watched opener opens a call
        self._call = [self.opener]
        self._call_chars = len(self.opener)
        self._scanner = self._scanner_factory()
        return self._extend_call(after, delta)

    def _extend_call(self, piece: str, delta: str, closing: bool = False) -> Verdict:
        """Inside a call: feed the scanner until it reports the closer."""
        written, scanner = self._call, self._scanner
        assert written is not None and scanner is not None  # inside a call
        close = scanner.feed(piece) if piece else None
        if close is None and closing:
            close = len(piece)  # the closer id closes the call whatever the scanner thinks
        if close is not None:
            written.append(piece[:close])  # text after the closer is dropped
            call = "".join(written)
            self._end_call()
            self._line_start = True
            if self.collect_calls:
                self._calls.append(call)
                self._shapes.append(self.shape)
                return Verdict(None, delta, _NO_CALLS, "", True, self.count)
            return self._verdict_calls(call, self.shape, delta=delta, in_call=True)
        written.append(piece)
        self._call_chars += len(piece)
        if self._call_chars > self.max_call_chars:
            # Hand over the over-long text; the parser rejects it with a message for the model.
            return self._verdict_calls(self._end_call(), self.shape, delta=delta, in_call=True)
        return Verdict(None, delta, _NO_CALLS, "", True, self.count)

    def _open_alternate(self, shape: Shape, before: str, after: str) -> Verdict:
        """An alternate's opener where a call can begin: hold its span back until it can be read."""
        if self._calls and before.strip():
            return self._verdict_calls(None, None)
        delta = "" if self._calls else before
        self._consumed(delta)
        self._alt, self._alt_text, self._alt_scanner = shape, shape.opener, shape.scanner()
        return self._extend_alt(after, delta)

    def _extend_alt(self, piece: str, delta: str) -> Verdict:
        """Inside an alternate's span: feed its scanner; once it ends, a call or text again."""
        end = self._alt_scanner.feed(piece) if piece else None
        if end is None:
            self._alt_text += piece
            if len(self._alt_text) > self.max_call_chars:  # too long for a call: it was text
                span, self._alt, self._alt_text = self._alt_text, None, ""
                return self._release(span, "", delta, None)
            return Verdict(None, delta, _NO_CALLS, self._alt_text, False, self.count)
        shape, span, rest = self._alt, self._alt_text + piece[:end], piece[end:]
        assert shape is not None  # inside an alternate's span
        abandoned = self._alt_scanner.abandoned
        self._alt, self._alt_text, self._alt_scanner = None, "", None
        if abandoned:
            return self._release(span, rest, delta, None)
        try:
            texts = read(shape, span, self.known)
        except NotACall as e:
            return self._release(span, rest, delta, self._near_miss(shape, span, e))
        self._line_start = True
        if self.collect_calls:  # what follows in this piece may be whitespace, text or the next call
            self._calls.extend(texts)
            self._shapes.extend([shape.name] * len(texts))
            verdict = self._scan_text(rest)
            verdict.delta = delta + verdict.delta
            return verdict
        self._calls.extend(texts[:-1])
        self._shapes.extend([shape.name] * (len(texts) - 1))
        return self._verdict_calls(texts[-1], shape.name, delta=delta)

    def _alt_at_end(self) -> Verdict:
        """The message ended inside an alternate: a call if what was written reads as one, else text."""
        shape, span = self._alt, self._alt_text
        assert shape is not None  # the message ended inside an alternate's span
        self._alt, self._alt_text, self._alt_scanner = None, "", None
        try:
            texts = read(shape, span, self.known, closed=False)
        except NotACall as e:
            notice = self._near_miss(shape, span, e)
            if self._calls:
                verdict = self._verdict_calls(None, None, True)
            else:
                delta, self._held = self._held + span, ""
                verdict = Verdict("eos", delta, _NO_CALLS, "", False, self.count, True)
            verdict.notice = notice
            return verdict
        self._calls.extend(texts)
        self._shapes.extend([shape.name] * len(texts))
        return self._verdict_calls(None, None, True)

    def _release(self, span: str, rest: str, delta: str, notice: str | None) -> Verdict:
        """An alternate's span that is not a call: text again; the rest of the piece is scanned as text."""
        if self._calls and span.strip():
            verdict = self._verdict_calls(None, None)  # text after the message's calls ends it
        else:
            self._consumed(span)
            verdict = self._scan_text(rest)
            verdict.delta = delta + span + verdict.delta
        verdict.notice = notice
        return verdict

    def _near_miss(self, shape: Shape, span: str, error: NotACall) -> str | None:
        """A note for text that looked like a call (it names a tool, or is a whole call to a tool that does not
        exist), or None for ordinary text."""
        if error.unknown:
            return f"text written as a call in {shape.name} is not one: {error}; it stays text"
        tool = error.near_miss or (mentions_tool(span, self.known) if error.broken else "")
        if not tool:
            return None
        return f"text that looks like a call to {tool} written as {shape.name} is not one ({error}); it stays text"

    def _end_call(self) -> str | None:
        """Leave the call state, returning the call text written so far."""
        text = "".join(self._call) if self._call is not None else None
        self._call = None
        self._call_chars = 0
        self._scanner = None
        return text
