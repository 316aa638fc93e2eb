"""One user turn as the small public steps a caller can take one at a time: `Turn`.

    turn = harness.begin("What's the weather in Polson, MT?")   # render: the message into the context
    while True:
        verdict = turn.generate()            # run a segment: the model writes until a stop fires
        if verdict.reason != "tool_call":
            break
        outcomes = turn.dispatch(verdict)    # decide and call: the policy (and its masked re-run), the servers
        if not turn.inject(verdict, outcomes):   # the results into the context (or the turn gives up)
            break
    result = turn.finish()                   # the Done event and the TurnResult

`Harness.run` is that loop. A caller (the studio, a test) may stop before `dispatch` and look at the calls,
change the outcomes before `inject`, or `rewind(position)` the context (and with it every engine's cache, which
serves the longest common prefix) to go another way from there. Every step emits its events as `run` does.
Nothing here knows which model or engine is running; the harness owns the conversation the turn belongs to.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from decodeloop.decode.context import Context
from decodeloop.decode.segment import Segment
from decodeloop.decode.stops import Verdict
from decodeloop.events import Done, Inject, Notice, PromptAppended, Rewind, Stop
from decodeloop.formats.calls.shapes import DESCRIBED
from decodeloop.formats.chat import Attachment, ToolReply, WrittenCalls
from decodeloop.tools.dispatch import NEEDS_EVIDENCE, Outcome, dispatch_all
from decodeloop.tools.turn import DispatchState
from decodeloop.trust.admit import admit_result, admit_tool

if TYPE_CHECKING:
    from decodeloop.harness import Harness


@dataclass
class TurnResult:
    """What a turn came to: its answer, why it ended, the tokens it wrote and the calls it made, the error it gave
    up with, and the conversation's context after it."""

    answer: str
    reason: str
    tokens: int
    tool_calls: int
    error: str | None = None
    context: list[int] = field(default_factory=list, repr=False)


@dataclass
class _Mark:
    """Where a segment began, and what the turn had done by then: a rewind goes back to the latest one."""

    start: int  # its first position in the context
    tokens: int  # the turn's tokens before it
    answer: int  # len(Turn.answer) before it
    reasoning: int  # len(Turn.reasoning) before it (and before the line break that opens its reasoning)
    calls: int
    state: tuple  # DispatchState.snapshot()
    held: bool  # held to text (--on-repeat answer)
    end: int | None = None  # where its message ended, once it did


class Turn:
    """One user turn of a harness's conversation, step by step (see the module docstring)."""

    def __init__(self, harness: Harness, user: str, attachments: Sequence[Attachment] = ()) -> None:
        self.harness = harness
        self.user, self.attachments = user, list(attachments)
        self.started = time.perf_counter()
        self.answer: list[str] = []  # the answer's text as released, segment by segment
        self.reasoning: list[str] = []
        self.reason = "eos"
        self.tokens = 0
        self.calls = 0
        self.error: str | None = None
        self.settled = 0  # context length at the last whole state: where an interrupted turn is cut back to
        self.generating = False  # inside generate, where every appended token is whole
        self.over = False
        self.verdict: Verdict | None = None  # the last segment's
        self.segment_at = 0  # where the last segment began in the context
        self._shown = self._thought = 0  # where the last segment's answer and reasoning began
        self.segment: Segment | None = None
        self.state: DispatchState | None = None
        self._held = False  # the last segment was held to text (--on-repeat answer)
        self._marks: list[_Mark] = []  # each segment's start, in order
        self._resume = False  # rewound into a segment: the next `generate` goes on with it

    @property
    def context(self) -> Context:
        context = self.harness.context
        assert context is not None  # rendered
        return context

    # -- 1. render --------------------------------------------------------------------------------------------

    def render(self) -> None:
        """The user's message into the context (a new conversation's system prompt and tools first)."""
        harness, emit = self.harness, self.harness.emit
        chat, markers = harness.chat, harness.markers
        extra = {"attachments": self.attachments} if self.attachments else {}
        if harness.context is None:
            harness.refresh_tools()  # tools a server changed are described from a new conversation on
            harness.context = Context()
            tools = [admit_tool(t, emit, markers) for t in harness.tools]
            text = admit_result(self.user, "the user's message", emit, markers).text
            pieces = chat.start(tools, text, harness.system, **extra)
        else:
            harness.router.refresh()
            self.settled = len(harness.context)
            text = admit_result(self.user, "the user's message", emit, markers).text
            pieces = chat.user_turn(text, harness.ended, **extra)
        context = self.context
        at = len(context)
        context.extend_pieces(pieces)
        self.settled = len(context)
        harness.chat_warnings()
        emit(
            PromptAppended(
                text=harness.tokenizer.decode(context.ids[at:]),
                tokens=len(context) - at,
                tools=[t.name for t in harness.tools],
                context=len(context),
                spans=[s.to_json() for s in context.spans(at)],
            )
        )
        self.segment = harness.segment(context)
        config = harness.config
        self.state = DispatchState(
            context,
            harness.tokenizer,
            emit,
            markers,
            harness.policy,
            None,
            config.max_result_chars,
            config.max_turn_result_chars,
        )

    # -- 2. run a segment ---------------------------------------------------------------------------------------

    def generate(self, limit: int | None = None) -> Verdict:
        """The model writes from the context's end until a stop fires (the Stop event says which), or for at
        most `limit` tokens: then, unless a stop fired, the verdict's reason is None (paused) and the next
        `generate` goes on with the same message."""
        harness, segment, context, state = self.harness, self.segment, self.context, self.state
        assert segment is not None and state is not None  # rendered
        if self.over:
            raise ValueError(f"the turn is over ({self.reason}): rewind it to go on")
        self._held = harness.hold is not None and harness.hold.active
        if not self._resume:
            if self._marks and self._marks[-1].start == len(context):  # the same start again (held to text)
                self._marks.pop()
            answer, reasoning = len(self.answer), len(self.reasoning)
            mark = _Mark(len(context), self.tokens, answer, reasoning, self.calls, state.snapshot(), self._held)
            self._marks.append(mark)
            self._open_reasoning()
        self._resume = False
        mark = self._marks[-1]
        self.segment_at, self._shown, self._thought = mark.start, mark.answer, mark.reasoning
        self.generating = True
        with harness.bundle.generating():
            verdict = segment.run(harness.engine, context, harness.emit, self.answer, self.reasoning, limit)
        self.generating = False
        if verdict.reason is None:  # paused: the message goes on at the next call
            self._resume, self.settled, self.tokens, self.verdict = True, len(context), verdict.count, verdict
            return verdict
        if harness.hold is not None:
            harness.hold.release()
        mark.end = len(context)
        self._ended(verdict)
        harness.emit(Stop(reason=self.reason))
        if self.reason == "tool_call":
            self._describe(verdict)
        return verdict

    def _open_reasoning(self) -> None:
        if self.reasoning and not self.reasoning[-1].endswith("\n"):
            self.reasoning.append("\n")  # each segment's reasoning on lines of its own

    def _ended(self, verdict: Verdict) -> None:
        """The segment's end: what the turn counts of it, and whether that ends the turn."""
        self.settled, self.tokens, self.verdict = len(self.context), verdict.count, verdict
        self.reason = verdict.reason or "eos"
        if self.reason == "tool_call":
            self.calls += len(verdict.calls)
        else:
            self.over = True
            self.harness.ended = verdict.ended and self.reason == "eos"

    def _describe(self, verdict: Verdict) -> None:
        """Say what was read as a call in an alternate shape, and why."""
        for shape in dict.fromkeys(verdict.shapes):
            if shape in DESCRIBED:
                self.harness.emit(
                    Notice(
                        source="calls",
                        message=f"read {DESCRIBED[shape]} as a call ({shape}): it names a tool that "
                        "exists and its arguments parse (--call-shapes lenient)",
                    )
                )

    def take(self, token: int) -> Verdict:
        """Append `token` as the model's next token instead of a sampled one (a fork, chosen by hand: rewind to
        where it goes first), with the forward and the stop check as for any token; the verdict as
        `generate(limit=1)`'s. ValueError for an engine that samples for itself."""
        choose = getattr(self.harness.engine, "choose", None)
        if choose is None:
            raise ValueError("this engine samples for itself: a token cannot be chosen for it")
        choose(token)
        return self.generate(limit=1)

    # -- 3. decide and call -------------------------------------------------------------------------------------

    def dispatch(self, verdict: Verdict) -> list[Outcome]:
        """The message's calls through the policy and to their servers, each an outcome (a result or an error).
        Where the policy's masked mode asks for it, the harness's masked re-run runs first (`masked_evidence`)."""
        harness, state = self.harness, self.state
        assert state is not None  # rendered
        state.round(len(verdict.calls))
        timeout = harness.config.timeout
        outcomes = dispatch_all(list(verdict.parsed), harness.router, state, timeout=timeout)
        if outcomes is NEEDS_EVIDENCE:
            state.masked = harness.masked_evidence()
            outcomes = dispatch_all(list(verdict.parsed), harness.router, state, timeout=timeout)
        assert isinstance(outcomes, list)  # the evidence is in: every call decided
        state.record(outcomes)
        harness.router.refresh()  # route the next call to a server's changed tools
        return outcomes

    def redo(self, verdict: Verdict, outcomes: list[Outcome]) -> list[Outcome]:
        """A round's outcomes had before, for a message written again (a branch taken back after a rewind):
        counted as `dispatch` counts them (the budget, the calls answered, the repeats), with no server called
        and no policy asked again, since they were decided when the round first ran."""
        state = self.state
        assert state is not None  # rendered
        if len(outcomes) != len(verdict.parsed):
            raise ValueError(f"{len(outcomes)} outcome(s) for a message of {len(verdict.parsed)} call(s)")
        state.round(len(verdict.calls))
        state.record(outcomes)
        return outcomes

    # -- 4. inject ----------------------------------------------------------------------------------------------

    def inject(self, verdict: Verdict, outcomes: list[Outcome]) -> bool:
        """The outcomes into the context as the chat format's tool messages (the message written back as the
        template renders its calls, where it can), ready for the next segment; or, after a call repeated once
        its result was in, that message dropped and the next held to text (--on-repeat answer). False when the
        turn gives up instead (the repeat guard, or too many failed rounds)."""
        harness, state, segment, context = self.harness, self.state, self.segment, self.context
        assert state is not None and segment is not None  # rendered
        config, emit, chat = harness.config, harness.emit, harness.chat
        repeated = [o.name or "a tool" for o in outcomes if o.stage == "repeat"]
        hold = repeated and config.on_repeat == "answer" and state.repeats > config.answer_after and not self._held
        if hold and harness.hold_to_text(self.segment_at, repeated):
            del self.answer[self._shown :], self.reasoning[self._thought :]
            segment.again()
            self.settled = len(context)
            return True
        if state.repeats >= config.max_repeats or state.failures >= config.max_retries:
            if state.repeats >= config.max_repeats:
                self.reason, what = "repeated_call", f"{state.repeats} calls repeated after their result"
            else:
                self.reason, what = "max_retries", f"{state.failures} consecutive failed tool calls"
            self.error = f"gave up after {what}; last error: {outcomes[-1].text}"
            emit(Stop(reason=self.reason))
            self.over = True
            harness.ended = False
            return False
        replies = [
            ToolReply(o.name or "", o.server, harness.syntax.render_result(o.text, o.is_error), o.is_error)
            for o in outcomes
        ]
        at = len(context)
        written = WrittenCalls(
            [p.call for p in verdict.parsed if p.call is not None],
            "".join(self.answer[self._shown :]).strip(),
            "".join(self.reasoning[self._thought :]).strip(),
        )
        parsed = len(written.calls) == len(verdict.parsed)
        rewrite = harness.rewrite(self.segment_at, replies, written, parsed)
        if rewrite is None:
            context.extend_pieces(chat.tool_results(replies, verdict.ended))
        else:  # the message written back: it is part of what was appended
            at = rewrite.at
        self.settled = len(context)
        harness.chat_warnings()
        segment.again()
        emit(
            Inject(
                text=harness.tokenizer.decode(context.ids[at:]),
                tokens=len(context) - at,
                context=len(context),
                spans=[s.to_json() for s in context.spans(at)],
                computed=None if rewrite is None else len(context) - rewrite.at - rewrite.kept,
            )
        )
        return True

    # -- going back, and the end --------------------------------------------------------------------------------

    def rewind(self, position: int) -> Verdict | None:
        """Cut the context back to `position`, anywhere the model wrote this turn or where a segment began, and
        take the turn back to that point: what it had shown and counted, the calls it had answered (a call
        after `position` may run again), the stop check's state as those tokens left it (read again, not
        sampled). Every engine's cache follows: the next forward computes only what comes after `position`.

        The verdict when the tokens up to `position` end a segment (a message that ended in calls: dispatch
        them, or anything else: the turn is over there); None when the next `generate` goes on writing.
        ValueError for a position before the turn's first segment, past the context's end, or inside a message
        the harness injected (rewind to its start, or to the next segment's)."""
        segment, state, context = self.segment, self.state, self.context
        assert segment is not None and state is not None  # rendered
        first = self._marks[0].start if self._marks else len(context)
        if not first <= position <= len(context):
            raise ValueError(f"a turn rewinds within itself: position {position} is outside {first}..{len(context)}")
        mark = next(m for m in reversed(self._marks) if m.start <= position) if self._marks else None
        if mark is None or (position == len(context) and mark.end is not None and position > mark.end):
            return None  # where the next segment begins: the context is as it was
        if mark.end is not None and position > mark.end:
            later = next((m.start for m in self._marks if m.start > position), len(context))
            raise ValueError(
                f"position {position} is inside what the harness injected ({mark.end}..{later}): rewind to "
                f"{mark.end}, where the model's message ended, or to {later}"
            )
        del self._marks[self._marks.index(mark) + 1 :]
        cut = len(context) - position
        context.truncate(position)
        state.restore(mark.state)
        del self.answer[mark.answer :], self.reasoning[mark.reasoning :]
        self._open_reasoning()
        self.calls, self.error, self.over = mark.calls, None, False
        segment.again()
        segment.stops.count = mark.tokens
        self.harness.rewound(mark.start, mark.held)
        self.harness.emit(Rewind(position=position, cut=cut))
        verdict = segment.replay(context.ids[mark.start : position], self.answer, self.reasoning)
        self.settled, self.tokens, self.segment_at = position, segment.stops.count, mark.start
        self._shown, self._thought = mark.answer, mark.reasoning
        if verdict is None:
            mark.end, self._resume, self.reason = None, True, "eos"
            return None
        mark.end = position
        self._ended(verdict)
        return verdict

    def interrupt(self) -> None:
        """Ctrl-C: the context cut back to its last whole state (every sampled token is; a half-injected
        message is not), and the turn ends "interrupted"."""
        harness = self.harness
        if harness.context is not None:
            harness.context.truncate(len(harness.context) if self.generating else self.settled)
            if self.settled == 0:
                harness.context = None
        self.reason, self.error = "interrupted", "interrupted by the user"
        harness.ended = False
        self.over = True
        harness.emit(Stop(reason="interrupted"))

    def finish(self) -> TurnResult:
        """The turn's Done event and result."""
        text = "".join(self.answer).strip()
        reasoning = "".join(self.reasoning).strip()
        seconds = round(time.perf_counter() - self.started, 4)
        harness = self.harness
        harness.emit(
            Done(
                answer=text,
                reason=self.reason,
                tokens=self.tokens,
                tool_calls=self.calls,
                error=self.error,
                seconds=seconds,
                reasoning=reasoning,
            )
        )
        ids = list(harness.context.ids) if harness.context is not None else []
        return TurnResult(text, self.reason, self.tokens, self.calls, self.error, ids)


def run(turn: Turn) -> TurnResult:
    """The steps in order until the turn is over: what `Harness.run` does."""
    try:
        turn.render()
        while True:
            verdict = turn.generate()
            if verdict.reason != "tool_call":
                break
            if not turn.inject(verdict, turn.dispatch(verdict)):
                break
    except KeyboardInterrupt:
        turn.interrupt()
    return turn.finish()


__all__ = ["Turn", "TurnResult", "run"]
