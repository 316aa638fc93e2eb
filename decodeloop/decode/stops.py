"""Deciding, token by token, whether the model's turn should stop, and why.

Owns the stop conditions of one turn: end-of-sequence ids, stop strings, the
opening of a tool call (and, through a call scanner, its close), reasoning
blocks, and the token cap. `Stops.check` is called once per generated token
with that token's text and returns a `Verdict`: why to stop (or None), which
text is now safe to show the user, which is reasoning, and the calls the model
wrote, each read once (`ParsedCall`: the call, or the error the model is told).

Text is held back while it could still be the start of a stop string, of a
reasoning marker or of a call opener, so a stop string is never shown even in
part, and call syntax never leaks into the visible reply. The held text is at
most one character shorter than the longest watched string, and every check
looks only at that plus the new piece, so a check costs the same however long
the turn has been.

When several watched strings appear in the same piece, the one that is
completed first wins (ties: the one that started first, then stop strings
before reasoning markers before openers). That is exactly what a
one-character-per-token stream would see, and after a call closes the rest of
its piece is read as if it came next, so the outcome never depends on how the
text was cut into tokens.

Special tokens: `specials` maps their ids to their text. One whose text is a
marker of the call format (an opener, a reasoning marker) acts as that marker;
any other is not shown as text, except inside a call, where it is the call's
text: a `</tool_call>` id written inside a JSON string is part of the string,
and only the scanner, which follows the string, says where the call ends.

A `Stops` is built from three things: the call format (`syntax`: its shapes,
alternates, reasoning markers and defaults), the end-of-turn ids and special
tokens of the tokenizer and chat format, and what the turn decides
(`StopSettings`: the caps, stop strings, and how calls are read). `for_turn`
takes them as the harness holds them.

Call formats (formats/calls/base.py `CallShape`): a syntax names the shapes its
calls are written in (`syntax.shapes`: Hermes `<tool_call>`, DeepSeek's call
section, Mistral's `[TOOL_CALLS]`, ...), each with its opener, the scanner that
finds where the span ends while it is written, and how a whole span is read.

Several calls in one message: unless they are collected the turn stops as soon
as a call is closed. With `collect_calls` (the format's default, or the
settings': parallel calls written one after another) the message goes on:
whitespace after a call is swallowed, another opener starts the next call, and
the end of the message (an end-of-turn id, other text, a stop string or the
cap) stops the turn with every call collected. With `read_all` (the parser on
its own, decode/parse.py) nothing but the end of the output stops: calls are
collected and text around them is content.

Reasoning (the format's `reasoning`: pairs of markers such as `<think>`/`</think>`): a block
opens only where the message has no text yet (or is open from the start, when
the prompt opened it: `reasoning_open`) and runs to its closer (to the first of
their closers, for pairs that share an opener: a block the model may end by
beginning its answer's own marker instead); its text is
`Verdict.reasoning`, never the answer. A call written inside it is reasoning
text too, with a notice, unless `calls_in_reasoning` is "run".

Alternate call shapes (formats/calls/shapes.py: a ```json block, bare JSON, `<function=...>`, ...)
are watched too with `lenient` (the format's `alternates`). One opens only where a call can begin (the
start of the message, or after the model's own text ended a line); its span is held back
while it is written and read once it closes: a call when it names a tool that exists
(`known`) with arguments that parse, else released as the text it was, with a `notice`
when it looked like a near miss. `Verdict.shapes` names each call's shape.

Never silent: a call the token cap cuts off, or one longer than `max_call_chars`,
is a notice or an error the model reads, never dropped without a word. A span that
holds a message's text (`holds_text`: Harmony's messages) is bounded by the token cap
alone; one the cap cuts is read as cut: its text is kept, and its call is the notice.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from decodeloop.formats.calls.base import CallScanner, CallShape, ParsedCall, ParseError, SpanText
from decodeloop.formats.calls.shapes import NotACall, Shape, mentions_tool, read

DEFAULT_MAX_CALL_CHARS = 16_384  # one call's text, opener to closer (--max-call-chars)
CALLS_IN_REASONING = ("ignore", "run")


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
    parsed: tuple[ParsedCall, ...] = ()  # for "tool_call": each call as read, once (the call or its error)
    reasoning: str = ""  # reasoning text released by this token (never part of the answer)
    in_reasoning: bool = False  # this token's text belongs to a reasoning block
    warnings: tuple[str, ...] = ()  # what the check noticed and the user should hear (a call cut off, ...)
    opened: int = 0  # characters of a reasoning opener that earlier tokens wrote (their tokens are reasoning too)

    @property
    def call_text(self) -> str | None:
        """The last call of a "tool_call" verdict (the only one unless calls are collected)."""
        return self.calls[-1] if self.calls else None


_NO_CALLS: tuple[str, ...] = ()


def _check_calls_in_reasoning(value: str) -> None:
    if value not in CALLS_IN_REASONING:
        raise ValueError(f"calls_in_reasoning must be ignore or run, got {value!r}")


@dataclass(frozen=True)
class StopSettings:
    """What the turn decides about its stops; the call format gives the rest (`Stops`)."""

    max_tokens: int = 256  # across the turn's segments
    stop_strings: tuple[str, ...] = ()
    max_call_chars: int = DEFAULT_MAX_CALL_CHARS
    collect_calls: bool | None = None  # run every call of a message (None: the call format's default)
    lenient: bool = False  # also the format's alternate shapes, the ones real models write (formats/calls/shapes.py)
    calls_in_reasoning: str | None = None  # "ignore" or "run" (None: the call format's default)
    calls: bool = True  # False: no call is read (a nested turn offered no tools)
    read_all: bool = False  # the parser on its own (decode/parse.py): neither calls nor text around them end it

    def __post_init__(self) -> None:
        stop_strings = self.stop_strings
        if isinstance(stop_strings, str):
            raise ValueError(f"stop_strings must be a sequence of strings, not the string {stop_strings!r}")
        if any(s == "" for s in stop_strings):
            raise ValueError("stop strings must be non-empty: an empty stop string would match before any text")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens!r}")
        if self.max_call_chars < 1:
            raise ValueError(f"max_call_chars must be >= 1, got {self.max_call_chars!r}")
        if self.calls_in_reasoning:  # else the call format's default
            _check_calls_in_reasoning(self.calls_in_reasoning)
        object.__setattr__(self, "stop_strings", tuple(stop_strings))  # a list given is kept as a tuple


class Stops:
    """Incremental stop conditions for one turn of generation."""

    def __init__(
        self,
        syntax: Any = None,
        *,
        eos_ids: Collection[int],
        settings: StopSettings = StopSettings(),
        specials: Mapping[int, str] | None = None,
        reasoning_open: bool = False,
        tools: Mapping[str, Any] | None = None,
        known: Callable[[str], bool] | None = None,
    ) -> None:
        """`syntax`: the call format (its shapes, alternates, reasoning markers and defaults; None: no calls and
        no reasoning); `eos_ids`: the ids that end the turn; `settings`: what the turn decides; `specials`: the
        tokenizer's special tokens (id -> text); `reasoning_open`: the prompt opened a reasoning block; `tools`:
        each tool's inputSchema by name (what `known` defaults to, and typed values)."""
        reasoning = tuple(getattr(syntax, "reasoning", ()))
        if any(not a or not b for a, b in reasoning):
            raise ValueError("reasoning markers must be non-empty strings")
        shapes: tuple[CallShape, ...] = tuple(syntax.shapes) if syntax is not None and settings.calls else ()
        if any(not s.opener for s in shapes):
            raise ValueError("a call opener must be a non-empty string")
        collect = getattr(syntax, "collect_calls", False) if settings.collect_calls is None else settings.collect_calls
        calls_in_reasoning = str(settings.calls_in_reasoning or getattr(syntax, "calls_in_reasoning", "ignore"))
        _check_calls_in_reasoning(calls_in_reasoning)
        self.eos_ids = frozenset(eos_ids)
        self.stop_strings = tuple(dict.fromkeys(settings.stop_strings))  # dedupe, keep order
        self.max_tokens = settings.max_tokens
        self.max_call_chars = settings.max_call_chars
        self.collect_calls = collect or settings.read_all
        self.read_all = settings.read_all
        self.tools: Mapping[str, Any] = tools if tools is not None else {}  # name -> inputSchema, for typed values
        self.known = known or (self.tools.__contains__ if tools is not None else (lambda name: False))
        self.calls_in_reasoning = calls_in_reasoning
        self.reasoning = reasoning
        self._reasoning_at_start = reasoning_open and bool(self.reasoning)
        self.specials: Mapping[int, str] = specials or {}
        self.primary = shapes
        self.alternates: tuple[Shape, ...] = tuple(syntax.alternates) if shapes and settings.lenient else ()
        openers = [s.opener for s in self.primary] + [a.opener for a in self.alternates]
        self._longer = {
            o: [p for p in dict.fromkeys(openers) if p != o and p.startswith(o)] for o in dict.fromkeys(openers)
        }
        # the texts a special token may stand for and act as (anything else is not shown outside a call)
        self._markers = frozenset(
            [*openers, *(m for pair in self.reasoning for m in pair), *(m for s in self.primary for m in s.markers)]
        )

        watched = self.stop_strings + tuple(openers) + tuple(a for a, _ in self.reasoning)
        # Every proper prefix of a watched string: the only suffixes worth holding back.
        self._prefixes = frozenset(w[:i] for w in watched for i in range(1, len(w)))
        # Held text never reaches a whole watched string, so it is at most this long.
        self.max_held = max((len(w) for w in watched), default=1) - 1
        # what ends a block, by its first closer: the closers of every pair with its opener
        self._reasoning_ends = {
            closer: tuple(dict.fromkeys(c for o, c in self.reasoning if o == opener))
            for opener, closer in self.reasoning
        }
        # inside reasoning: its closers (and, when calls there run, the openers)
        self._reasoning_watch = {
            closer: (*ends, *(s.opener for s in self.primary)) if calls_in_reasoning == "run" else ends
            for closer, ends in self._reasoning_ends.items()
        }
        self._reasoning_prefixes = {
            closer: frozenset(w[:i] for w in watch for i in range(1, len(w)))
            for closer, watch in self._reasoning_watch.items()
        }

        self.conditions: tuple[str, ...] = tuple(
            name
            for name, on in (
                ("eos", bool(self.eos_ids)),
                ("stop_sequence", bool(self.stop_strings)),
                ("tool_call", bool(self.primary)),
                ("max_tokens", True),
            )
            if on
        )

        self.count = 0
        self._held = ""
        self._call: list[str] | None = None  # pieces of the call being written; None outside a call
        self._call_shape: CallShape | None = None
        self._opened = 0  # call spans opened in this turn (which one is being written, for --constrain)
        self._call_chars = 0
        self._scanner: CallScanner | None = None
        self._skipping = False  # read_all: a call over the cap is read on to its end, its text not kept
        self._calls: list[ParsedCall] = []  # calls closed in this message, when collecting
        self._alt: Shape | None = None  # an alternate shape being written (not yet known to be a call)
        self._alt_text = ""
        self._alt_scanner: Any = None  # the alternate shape's scanner (formats/calls/shapes.py)
        self._blank = True  # the message so far is whitespace and calls only
        self._line_start = True  # the message's text so far ends a line (or is blank)
        self._thinking: str | None = None  # inside reasoning: the closer that ends it
        self._thought_call = False  # a call opener was noticed inside this reasoning block
        self._reasoning_tail = ""  # the end of the reasoning text, for an opener split across pieces
        self._resume_reasoning: str | None = None  # a call written inside reasoning (run): where to go back
        self._warnings: list[str] = []
        self._start_message()

    @classmethod
    def for_turn(
        cls,
        syntax: Any,
        tokenizer: Any,
        chat: Any,
        settings: StopSettings,
        *,
        tools: Mapping[str, Any] | None = None,
        known: Callable[[str], bool] | None = None,
    ) -> Stops:
        """The stop check of a turn from its three parts: the call format (`syntax`: its shapes, alternates,
        reasoning markers and defaults), the tokenizer (its special tokens) and the chat format (its stop ids, and
        whether its generation prompt opened a reasoning block), with the turn's settings (segment.py's
        `SegmentSettings`)."""
        return cls(
            syntax,
            eos_ids=chat.stop_ids,
            settings=settings,
            specials={i: text for text, i in tokenizer.special_tokens.items()},
            reasoning_open=getattr(chat, "reasoning_open", False),
            tools=tools,
            known=known,
        )

    def _start_message(self) -> None:
        if self._reasoning_at_start:
            self._thinking = self.reasoning[0][1]

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
    def call_span(self) -> tuple[int, CallShape] | None:
        """The call span being written: (which span of the turn it is, from 1; its shape), or None outside one.
        For --constrain, which follows each span of a family's format by its shape, afresh for each."""
        if self._call is None or self._call_shape is None:
            return None
        return self._opened, self._call_shape

    @property
    def in_call(self) -> bool:
        """Whether the model is in the middle of writing a tool call."""
        return self._call is not None

    @property
    def in_reasoning(self) -> bool:
        """Whether the model is writing a reasoning block."""
        return self._thinking is not None and self._call is None

    def new_segment(self, reasoning_open: bool | None = None) -> None:
        """Start afresh after a tool result was injected; the token count (per turn) is kept. `reasoning_open`:
        the injected text left a reasoning block open (None: as at the start of the turn)."""
        self._held = ""
        self._calls = []
        self._end_call()
        self._alt, self._alt_text, self._alt_scanner = None, "", None
        self._blank = self._line_start = True
        self._thinking, self._thought_call, self._reasoning_tail, self._resume_reasoning = None, False, "", None
        self._warnings = []
        if reasoning_open is not None:
            self._reasoning_at_start = reasoning_open and bool(self.reasoning)
        self._start_message()

    # -- one token ---------------------------------------------------------------------------------------------

    def check(self, token: int, piece: str) -> Verdict:
        """Account for one generated token whose decoded text is `piece` ("" for a partial character)."""
        self.count += 1
        if token in self.eos_ids:
            return self._at_end(ended=True)
        special = self.specials.get(token)
        if special is not None:
            # inside a call (or a span held as one) a special token is the call's text; elsewhere only a marker
            # of the format counts, as that marker, and anything else is not shown
            inside = self._call is not None or self._alt is not None
            piece = special if inside or special in self._markers else ""
        verdict = self._feed(piece)
        if verdict.reason is None and self.count >= self.max_tokens:
            return self._at_cap(verdict)
        return verdict

    def finish(self, truncated: bool = False) -> Verdict:
        """The output ended without an end-of-turn id (the parser on its own): as the cap does when `truncated`
        (a call still open was cut off and is not a call), else as the model's end of turn does."""
        if truncated:
            return self._at_cap(
                Verdict(None, "", _NO_CALLS, self._held, self.in_call, self.count), "the token cap the output ended at"
            )
        return self._at_end(ended=False)

    def _feed(self, piece: str) -> Verdict:
        if self._alt is not None:
            return self._extend_alt(piece, "")
        if self._call is not None:
            return self._extend_call(piece, "")
        if self._thinking is not None:
            return self._scan_reasoning(piece, "")
        return self._scan_text(piece)

    def _at_end(self, ended: bool) -> Verdict:
        """The message ended (an end-of-turn id, or the end of the output)."""
        if self._call is not None:
            shape = self._call_shape
            assert shape is not None  # inside a call
            skipping = self._skipping
            text = self._end_call()
            if skipping:
                return self._verdict_calls([], ended, in_call=True)
            # the model ended mid-call: the parser reads what it wrote (a span that runs to the end is whole)
            calls, content, reasoning = self._read(shape, text or "", shape.to_end)
            if not calls and not self._calls:  # a span of text alone (a channel with no call)
                return Verdict(
                    "eos", content, _NO_CALLS, "", False, self.count, ended, reasoning=reasoning, **self._said()
                )
            verdict = self._verdict_calls(calls, ended, delta=content, in_call=True)
            verdict.reasoning = reasoning
            return verdict
        if self._alt is not None:
            return self._alt_at_end(ended)
        reasoning = ""
        if self._thinking is not None:
            reasoning, self._held, self._thinking = self._held, "", None
        if self._calls:
            verdict = self._verdict_calls([], ended)
            verdict.reasoning = reasoning
            return verdict
        delta, self._held = self._held, ""  # held text turned out not to be a stop string
        return Verdict("eos", delta, _NO_CALLS, "", False, self.count, ended, reasoning=reasoning, **self._said())

    def _at_cap(self, verdict: Verdict, cap: str = "") -> Verdict:
        """The token cap ended the turn: collected calls run, a half-written one is dropped with a notice."""
        cap = cap or f"the token cap (max_tokens {self.max_tokens})"
        if self._call is not None:
            shape, written = self._call_shape, "".join(self._call)
            self._end_call()
            cut_off = [self._describe(written)]
            if shape is not None and shape.holds_text:  # a message's span: its text stays, its call does not run
                cut, content, reasoning = self._read(shape, written, False)
                verdict.delta += content
                verdict.reasoning += reasoning
                cut_off = [f": {c.error}" if c.error is not None else " " + self._describe(c.text) for c in cut]
            else:
                cut_off = [" " + cut_off[0]]
            for what in cut_off:
                self._warn(f"{cap} cut off a call{what}")
        if self._alt is not None:
            name = self._alt_scanner.named
            if name is not None and self.known(name):  # it began as a call: cut off, never the answer's text
                self._warn(f"{cap} cut off a call to {name} written as {self._alt.name}; it is not run")
            else:
                verdict.delta += self._held + self._alt_text  # an alternate not yet read is text
                self._held = ""
            self._alt, self._alt_text, self._alt_scanner = None, "", None
        if self._thinking is not None:
            verdict.reasoning += self._held
            self._held, self._thinking = "", None
        verdict.warnings = tuple(self._warnings)
        self._warnings = []
        if self._calls:
            calls = self._collected([])
            verdict.reason = "tool_call"
            verdict.calls, verdict.shapes, verdict.parsed = tuple(c.text for c in calls), _shapes(calls), calls
            if self.read_all:  # else what is held after the calls is whitespace between them
                verdict.delta += self._held
            verdict.held = self._held = ""
            return verdict
        verdict.reason = "max_tokens"
        verdict.delta += self._held
        verdict.held = self._held = ""
        return verdict

    def _describe(self, written: str) -> str:
        name = mentions_tool(written, self.known)
        what = f"to {name}" if name else f"{written[:40]!r}"
        return f"{what} ({len(written):,} characters written); it is not run"

    def _warn(self, message: str) -> None:
        self._warnings.append(message)

    def _said(self) -> dict:
        """The warnings gathered since the last verdict, for the next one."""
        if not self._warnings:
            return {}
        warnings, self._warnings = tuple(self._warnings), []
        return {"warnings": warnings}

    # -- the verdicts ------------------------------------------------------------------------------------------

    def _collected(self, last: list[ParsedCall]) -> tuple[ParsedCall, ...]:
        """Every call of this message (with `last`), and forget them."""
        calls = (*self._calls, *last)
        self._calls = []
        return calls

    def _verdict_calls(
        self, last: list[ParsedCall], ended: bool = False, delta: str = "", in_call: bool = False
    ) -> Verdict:
        """A "tool_call" verdict with every call of the message."""
        calls = self._collected(last)
        texts = tuple(c.text for c in calls)
        return Verdict(
            "tool_call", delta, texts, "", in_call, self.count, ended, _shapes(calls), None, calls, **self._said()
        )

    def _read(self, shape: CallShape, span: str, closed: bool) -> tuple[list[ParsedCall], str, str]:
        """A whole span's calls (over the cap, one error that names the cap), and the content and reasoning
        text it holds besides them."""
        if len(span) > self.max_call_chars and not shape.holds_text:
            return [self._too_long(shape, span)], "", ""
        calls: list[ParsedCall] = []
        content: list[str] = []
        reasoning: list[str] = []
        for item in shape.read(span, closed, self.tools):
            if isinstance(item, SpanText):
                (reasoning if item.kind == "reasoning" else content).append(item.text)
            else:
                calls.append(item)
        return calls, "".join(content), "".join(reasoning)

    def _too_long(self, shape: CallShape, span: str) -> ParsedCall:
        error = ParseError(
            f"the call is longer than the {self.max_call_chars:,} characters a call may have (max_call_chars); "
            f"write a shorter one",
            self.max_call_chars,
        )
        return ParsedCall(span[: self.max_call_chars], shape.name, None, error)

    # -- text ---------------------------------------------------------------------------------------------------

    def _scan_text(self, piece: str, delta: str = "") -> Verdict:
        """Normal text: release what cannot start a watched string, hold back the rest."""
        buf = self._held + piece
        # Find the watched string completed first; ties go to the earlier start,
        # then to stop strings (checked first, and only a strictly earlier one replaces).
        best_end = best_start = len(buf) + 1
        kind = ""
        found: Any = None
        for stop in self.stop_strings:
            start = buf.find(stop)
            if start >= 0 and (start + len(stop), start) < (best_end, best_start):
                best_end, best_start, kind, found = start + len(stop), start, "stop", stop
        if self._blank and self.reasoning:
            for opener, closer in self.reasoning:
                start = buf.find(opener)
                if start >= 0 and not buf[:start].strip() and (start + len(opener), start) < (best_end, best_start):
                    best_end, best_start, kind, found = start + len(opener), start, "reasoning", closer
        for shape in self.primary:
            if shape.message_start and not self._blank:
                continue
            start = buf.find(shape.opener)
            if shape.message_start and start > 0 and buf[:start].strip():
                start = -1
            if start >= 0 and (start + len(shape.opener), start) < (best_end, best_start):
                best_end, best_start, kind, found = start + len(shape.opener), start, "call", shape
        for alt in self.alternates:
            if alt.message_start and not self._blank:
                continue
            start = self._find_alternate(buf, alt)
            if start >= 0 and (start + len(alt.opener), start) < (best_end, best_start):
                best_end, best_start, kind, found = start + len(alt.opener), start, "alternate", alt
        if kind in ("call", "alternate"):
            # "[" may be the start of "[TOOL_CALLS]": the longer opener wins where it is written, and text
            # that may still become it is held
            tail = buf[best_start:]
            for longer in self._longer[found.opener]:
                if tail.startswith(longer):
                    found = self._shape_for(longer)
                    kind = "call" if isinstance(found, CallShape) else "alternate"
                    best_end = best_start + len(longer)
                    break
                if longer.startswith(tail):
                    self._consumed(buf[:best_start])
                    self._held = tail
                    return Verdict(None, delta + buf[:best_start], _NO_CALLS, tail, False, self.count, **self._said())

        if not kind:
            keep = min(len(buf), self.max_held)
            prefixes = self._prefixes
            while keep and buf[-keep:] not in prefixes:
                keep -= 1
            cut = len(buf) - keep
            self._held = buf[cut:]
            if self._calls and not self.read_all:
                if buf[:cut].strip():  # text after the message's calls ends it: run them
                    self._held = ""
                    return self._verdict_calls([], delta=delta)
                return Verdict(None, delta, _NO_CALLS, self._held, False, self.count, **self._said())
            self._consumed(buf[:cut])
            return Verdict(None, delta + buf[:cut], _NO_CALLS, self._held, False, self.count, **self._said())

        self._held = ""
        if kind == "stop":
            if self._calls:  # a stop string after the message's calls: run them
                return self._verdict_calls([], delta=delta)
            return Verdict("stop_sequence", delta + buf[:best_start], _NO_CALLS, "", False, self.count, **self._said())
        if kind == "reasoning":
            delta += buf[:best_start]  # whitespace before the block
            self._consumed(buf[:best_start])
            self._thinking, self._thought_call, self._reasoning_tail = found, False, ""
            verdict = self._scan_reasoning(buf[best_end:], delta)
            verdict.opened = max(0, len(buf) - len(piece) - best_start)
            return verdict
        if kind == "alternate":
            return self._open_alternate(found, buf[:best_start], buf[best_end:], delta)
        # The opener: text before it is released, text after it starts the call.
        return self._open_call(found, buf[:best_start], buf[best_end:], delta)

    def _shape_for(self, opener: str) -> Any:
        for shape in self.primary:
            if shape.opener == opener:
                return shape
        return next(a for a in self.alternates if a.opener == opener)

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

    # -- reasoning ----------------------------------------------------------------------------------------------

    def _scan_reasoning(self, piece: str, delta: str) -> Verdict:
        """Inside a reasoning block: its text is reasoning, up to its closer; then text again."""
        closer = self._thinking
        assert closer is not None  # inside reasoning
        buf = self._held + piece
        found = [(at + len(c), at, c) for c in self._reasoning_ends[closer] if (at := buf.find(c)) >= 0]
        end, ending = min(found)[1:] if found else (-1, closer)  # the closer completed first
        best: tuple[int, int, CallShape | None] | None = (end + len(ending), end, None) if end >= 0 else None
        if self.calls_in_reasoning == "run":  # an opener completed first opens a call; reasoning goes on after it
            for shape in self.primary:
                start = buf.find(shape.opener)
                if start >= 0 and (best is None or (start + len(shape.opener), start) < best[:2]):
                    best = (start + len(shape.opener), start, shape)
        opened = best[2] if best is not None else None
        if best is not None and opened is not None:
            at, start = best[0], best[1]
            self._held, self._thinking, self._resume_reasoning = "", None, closer
            verdict = self._open_call(opened, "", buf[at:], delta, reasoning=True)
            verdict.reasoning = buf[:start] + verdict.reasoning
            return verdict
        self._notice_thought_call(buf if end < 0 else buf[:end])
        if end >= 0:
            reasoning, rest = buf[:end], buf[end + len(ending) :]
            self._held, self._thinking = "", None
            verdict = self._scan_text(rest, delta)
            verdict.reasoning = reasoning + verdict.reasoning
            return verdict
        keep = min(len(buf), max(map(len, self._reasoning_watch[closer])) - 1)
        prefixes = self._reasoning_prefixes[closer]
        while keep and buf[-keep:] not in prefixes:
            keep -= 1
        cut = len(buf) - keep
        self._held = buf[cut:]
        return Verdict(
            None,
            delta,
            _NO_CALLS,
            self._held,
            False,
            self.count,
            reasoning=buf[:cut],
            in_reasoning=True,
            **self._said(),
        )

    def _notice_thought_call(self, text: str) -> None:
        """A call opener inside reasoning is reasoning text: say so once per block."""
        if self._thought_call or not self.primary:
            return
        seen = self._reasoning_tail + text
        for shape in self.primary:
            if shape.opener in seen:
                self._thought_call = True
                self._warn(
                    f"the model wrote a call ({shape.opener}) inside its reasoning: reasoning is not run "
                    "(calls_in_reasoning ignore)"
                )
                return
        width = max(len(s.opener) for s in self.primary) - 1
        self._reasoning_tail = seen[-width:] if width else ""

    # -- calls --------------------------------------------------------------------------------------------------

    def _open_call(self, shape: CallShape, before: str, after: str, delta: str, reasoning: bool = False) -> Verdict:
        """A call opens: `before` is text ahead of the opener, `after` the start of the call."""
        self._held = ""
        if self._calls and before.strip() and not self.read_all:
            # text between calls ends the message: run the calls written so far
            return self._verdict_calls([], delta=delta)
        if not (self._calls and not self.read_all):
            delta += before  # whitespace between calls is not shown
        if not reasoning:
            self._consumed(before)
        self._call = [shape.opener]
        self._call_shape = shape
        self._opened += 1
        self._call_chars = len(shape.opener)
        self._scanner = shape.scanner()
        return self._extend_call(after, delta)

    def _extend_call(self, piece: str, delta: str) -> Verdict:
        """Inside a call: feed the scanner until it reports the closer."""
        written, scanner, shape = self._call, self._scanner, self._call_shape
        assert written is not None and scanner is not None and shape is not None  # inside a call
        close = scanner.feed(piece) if piece else None
        if close is not None:
            skipping = self._skipping
            if not skipping:
                written.append(piece[:close])
            span, rest = "".join(written), piece[close:]
            self._end_call()
            self._line_start = True
            calls, content, reasoning = ([], "", "") if skipping else self._read(shape, span, True)
            delta += content
            self._consumed(content)  # text a span gave back is the message's text: it is no longer blank
            resume = self._resume_reasoning
            if self.collect_calls or not calls:
                self._calls.extend(calls)
                if resume is not None:  # back inside the reasoning the call was written in
                    self._resume_reasoning, self._thinking = None, resume
                    verdict = self._scan_reasoning(rest, delta)
                else:
                    verdict = self._scan_text(rest, delta)  # whitespace, text or the next call
                    verdict.in_call = bool(calls)
                verdict.reasoning = reasoning + verdict.reasoning
                return verdict
            verdict = self._verdict_calls(calls, delta=delta, in_call=True)
            verdict.reasoning = reasoning
            return verdict
        self._call_chars += len(piece)
        if not self._skipping:
            written.append(piece)
        if self._call_chars > self.max_call_chars and not self._skipping and not shape.holds_text:
            # too long to be a call: the model is told, with the cap
            error = self._too_long(shape, "".join(written))
            if self.read_all:  # read on to its end, keeping nothing more
                self._calls.append(error)
                self._skipping = True
                return Verdict(None, delta, _NO_CALLS, "", True, self.count, **self._said())
            self._end_call()
            return self._verdict_calls([error], delta=delta, in_call=True)
        return Verdict(None, delta, _NO_CALLS, "", True, self.count, **self._said())

    # -- alternate shapes ---------------------------------------------------------------------------------------

    def _open_alternate(self, shape: Shape, before: str, after: str, delta: str) -> Verdict:
        """An alternate's opener where a call can begin: hold its span back until it can be read."""
        if self._calls and before.strip() and not self.read_all:
            return self._verdict_calls([], delta=delta)
        if not (self._calls and not self.read_all):
            delta += before
        self._consumed(before)
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
            return Verdict(None, delta, _NO_CALLS, self._alt_text, False, self.count, **self._said())
        shape, span, rest = self._alt, self._alt_text + piece[:end], piece[end:]
        assert shape is not None  # inside an alternate's span
        abandoned = self._alt_scanner.abandoned
        self._alt, self._alt_text, self._alt_scanner = None, "", None
        if abandoned:
            return self._release(span, rest, delta, None)
        try:
            found = read(shape, span, self.known)
        except NotACall as e:
            return self._release(span, rest, delta, self._near_miss(shape, span, e))
        self._line_start = True
        calls = [ParsedCall(text, shape.name, call) for text, call in found]
        if self.collect_calls:  # what follows in this piece may be whitespace, text or the next call
            self._calls.extend(calls)
            return self._scan_text(rest, delta)
        return self._verdict_calls(calls, delta=delta)

    def _alt_at_end(self, ended: bool) -> Verdict:
        """The message ended inside an alternate: a call if what was written reads as one, else text."""
        shape, span = self._alt, self._alt_text
        assert shape is not None  # the message ended inside an alternate's span
        self._alt, self._alt_text, self._alt_scanner = None, "", None
        try:
            found = read(shape, span, self.known, closed=False)
        except NotACall as e:
            notice = self._near_miss(shape, span, e)
            if self._calls:
                verdict = self._verdict_calls([], ended)
            else:
                delta, self._held = self._held + span, ""
                verdict = Verdict("eos", delta, _NO_CALLS, "", False, self.count, ended, **self._said())
            verdict.notice = notice
            return verdict
        return self._verdict_calls([ParsedCall(text, shape.name, call) for text, call in found], ended)

    def _release(self, span: str, rest: str, delta: str, notice: str | None) -> Verdict:
        """An alternate's span that is not a call: text again; the rest of the piece is scanned as text."""
        if self._calls and span.strip() and not self.read_all:
            verdict = self._verdict_calls([], delta=delta)  # text after the message's calls ends it
        else:
            self._consumed(span)
            verdict = self._scan_text(rest, delta + span)
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
        self._call_shape = None
        self._call_chars = 0
        self._scanner = None
        self._skipping = False
        return text


def _shapes(calls: Sequence[ParsedCall]) -> tuple[str, ...]:
    return tuple(c.shape for c in calls)
