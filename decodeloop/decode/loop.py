"""The decode loop: what happens per token. Start reading here.

`generate` is the whole of it: the engine's step (for a local model: forward,
logits processors, sample), append, stop check, and an event saying what
happened, until a stop condition fires. The conversation around it (tool calls
dispatched, their results injected, the next user turn) is `Harness`
(harness.py). Nothing here knows which model or engine is running.
"""

from __future__ import annotations

from decodeloop.decode.context import MODEL, Context
from decodeloop.decode.stops import Stops, Verdict
from decodeloop.events import Emit, Notice, Token
from decodeloop.formats.tokenizer import StreamDecoder
from decodeloop.sampling.processors import ProcessorState


def generate(
    engine,
    stops: Stops,
    context: Context,
    decoder: StreamDecoder,
    tokenizer,
    emit: Emit,
    shown: list[str],
    state: ProcessorState,
    detail: bool = True,
) -> Verdict:
    """Generate tokens into `context` until a stop condition fires.

    Text safe to show the user is appended to `shown` as it is released.
    """
    ids = context.ids
    context.open(MODEL)
    # the names used per token, bound once: this loop's own cost is what bench/loop_overhead.py measures
    step_of, append, check, piece, label = engine.step, ids.append, stops.check, decoder.piece, tokenizer.token_text
    conditions = stops.conditions
    track = engine.uses_state
    # which distribution the probabilities are of (the sampler's settings), set on every token event
    probs_at = tuple(engine.probs_at.items()) if detail else ()
    try:
        while True:
            step = step_of(ids, state)  # 1-2. forward + sample (or the engine's next token)
            token = step.token
            append(token)  # 3. append it to the context
            verdict = check(token, piece(token))  # 4. stop check, incremental
            if track:
                state.step = verdict.count
                state.in_call = verdict.in_call
                state.alternate = stops.alternate
            if detail:
                prob, top = engine.explain(step, 3)
                top = [[label(t), p] for t, p in top]
            else:
                prob = top = None
            event = Token(
                verdict.count,
                token,
                label(token),
                prob,
                top,
                step.computed,
                step.cached,
                len(ids),
                verdict.delta,
                verdict.held,
                verdict.in_call,
                conditions,
                verdict.reason,
            )
            masked = step.masked
            if masked is not None:  # --constrain: the grammar ruled out the model's first choice
                event.masked, event.masked_id, event.allowed = label(masked[0]), masked[0], masked[1]
            elif step.forced:  # jump-forward: no forward for this token
                event.forced = True
            for name, value in probs_at:
                setattr(event, name, value)
            emit(event)
            if verdict.delta:
                shown.append(verdict.delta)
            if verdict.notice is not None:  # text that looked like a call in another shape, and why it is not
                emit(Notice("near_miss", verdict.notice))
            if verdict.reason is not None:
                return verdict
    finally:
        engine.stop()  # an engine that streams closes its stream: the harness decides when to stop
