"""One segment of generation, set up in one place: the model writes from the context's end until a stop fires.

A turn is segments: the model writes until a call closes (or its message ends, or the cap), the harness runs
the calls and appends their results, and the next segment goes on from there. `Segment` owns what a segment
needs beside the engine and the context: the stop check (`Stops.for_turn`: the call format, the chat format's
stop ids and reasoning, the tokenizer's special tokens, the turn's settings), the stream decoder and the
logits processors' state. `run` is `generate` (loop.py) once; `again` readies the next segment of the same
turn. The conversation (harness.py), the policy's masked re-run and a server's sampling request (a nested
turn, client_features/local_sampling.py) all build their segments here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from decodeloop.decode.context import Context
from decodeloop.decode.loop import generate
from decodeloop.decode.stops import Stops, StopSettings, Verdict
from decodeloop.events import Emit
from decodeloop.formats.tokenizer import StreamDecoder
from decodeloop.sampling.processors import ProcessorState


@dataclass(frozen=True)
class SegmentSettings(StopSettings):
    """The turn's settings a segment reads: the stop check's (`StopSettings`), and what the events carry."""

    detail: bool = True  # probabilities in token events


class Segment:
    """The stop check, decoder and processor state of one turn's segments (see the module docstring)."""

    def __init__(
        self,
        tokenizer: Any,
        chat: Any,
        syntax: Any,
        settings: SegmentSettings,
        context: Context,
        *,
        tools: Mapping[str, Any] | None = None,
        known: Callable[[str], bool] | None = None,
    ) -> None:
        self.tokenizer, self.chat, self.settings = tokenizer, chat, settings
        self.stops = Stops.for_turn(syntax, tokenizer, chat, settings, tools=tools, known=known)
        self.decoder = StreamDecoder(tokenizer)
        self.state = ProcessorState(context=context.ids, generated=len(context))  # the turn starts here

    def run(
        self,
        engine: Any,
        context: Context,
        emit: Emit,
        shown: list[str] | None = None,
        thought: list[str] | None = None,
        limit: int | None = None,
    ) -> Verdict:
        """Generate into `context` until a stop fires (or `limit` tokens: a pause, reason None); released text to
        `shown`, reasoning to `thought`."""
        return generate(
            engine,
            self.stops,
            context,
            self.decoder,
            self.tokenizer,
            emit,
            [] if shown is None else shown,
            self.state,
            self.settings.detail,
            thought,
            limit,
        )

    def replay(self, ids: list[int], shown: list[str], thought: list[str] | None = None) -> Verdict | None:
        """Read tokens the context already holds, from this segment's start, through the stop check and the
        decoder as `run` would have, without the model: the state at their end (a rewound turn). Their shown
        text to `shown`, reasoning to `thought`; the verdict when the last of them ends the segment, else None.
        ValueError when an earlier one ends it (the tokens go past the segment)."""
        state, stops = self.state, self.stops
        for n, token in enumerate(ids):
            verdict = stops.check(token, self.decoder.piece(token))
            state.step, state.in_call, state.alternate, state.call = (
                verdict.count,
                verdict.in_call,
                stops.alternate,
                stops.call_span,
            )
            if verdict.delta:
                shown.append(verdict.delta)
            if verdict.reasoning and thought is not None:
                thought.append(verdict.reasoning)
            if verdict.reason is not None:
                if n != len(ids) - 1:
                    raise ValueError(f"the segment ends {len(ids) - 1 - n} token(s) before the position")
                return verdict
        return None

    def again(self) -> None:
        """The next segment of the turn (after results were appended, or the context was cut back)."""
        self.stops.new_segment(getattr(self.chat, "reasoning_open", False))
        self.decoder.reset()
