"""The decode loop: what happens per token. Start reading here.

`generate` is the whole of it: the engine's step (for a local model: forward,
logits processors, sample), append, stop check, and an event saying what
happened, until a stop condition fires. The conversation around it (tool calls
dispatched, their results injected, the next user turn) is `Harness`
(harness.py). Nothing here knows which model or engine is running.
"""

from __future__ import annotations

from decodeloop.decode.context import MODEL, REASONING, Context
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
    thought: list[str] | None = None,
    limit: int | None = None,
) -> Verdict:
    """Generate tokens into `context` until a stop condition fires, or `limit` tokens were written (then the
    verdict's reason is None: paused, and a later call goes on with the same stop check).

    Text safe to show the user is appended to `shown` as it is released, reasoning to `thought`; the tokens
    of a reasoning block are a span of their own (`reasoning`) in the context.
    """
    ids = context.ids
    # the names used per token, bound once: this loop's own cost is what bench/loop_overhead.py measures
    step_of, append, check, piece, label = engine.step, ids.append, stops.check, decoder.piece, tokenizer.token_text
    conditions = stops.conditions
    track = engine.uses_state
    reasons = bool(stops.reasoning)  # a model that writes reasoning blocks: their tokens get their own span
    source = REASONING if reasons and stops.in_reasoning else MODEL
    context.open(source)
    lengths: list[int] = []  # the text lengths of the latest tokens, to find those that began a marker
    specials = stops.specials
    # which distribution the probabilities are of (the sampler's settings), set on every token event
    probs_at = tuple(engine.probs_at.items()) if detail else ()
    left = -1 if limit is None else limit  # tokens until a pause; -1 counts down forever
    if left == 0:
        raise ValueError("a segment's limit is at least one token")
    try:
        while True:
            step = step_of(ids, state)  # 1-2. forward + sample (or the engine's next token)
            token = step.token
            append(token)  # 3. append it to the context
            thinking = reasons and stops.in_reasoning
            text = piece(token)
            verdict = check(token, text)  # 4. stop check, incremental
            if reasons:  # the tokens that open a block, those inside it and the one that closes it
                wrote = REASONING if thinking or verdict.in_reasoning or verdict.reasoning else MODEL
                back, chars = 0, verdict.opened
                while chars > 0 and back < len(lengths):  # the earlier tokens that spelled the opener
                    back += 1
                    chars -= lengths[-back]
                if wrote != source or back:
                    context.relabel_from(len(ids) - 1 - back, wrote)
                    source = wrote
                lengths = [*lengths[-15:], len(specials.get(token, text))]
            if track:
                state.step = verdict.count
                state.in_call = verdict.in_call
                state.alternate = stops.alternate
                state.call = stops.call_span
            top: list | None = None
            top_ids: list[int] | None = None
            prob = None
            if detail:
                prob, ranked = engine.explain(step, 3)
                top, top_ids = [[label(t), p] for t, p in ranked], [t for t, _ in ranked]
            event = Token(
                index=verdict.count,
                id=token,
                text=label(token),
                prob=prob,
                top=top,
                computed=step.computed,
                cached=step.cached,
                context=len(ids),
                delta=verdict.delta,
                held=verdict.held,
                in_call=verdict.in_call,
                checks=conditions,
                stop=verdict.reason,
                top_ids=top_ids,
            )
            masked = step.masked
            if masked is not None:  # --constrain: the grammar ruled out the model's first choice
                event.masked, event.masked_id, event.allowed = label(masked[0]), masked[0], masked[1]
            elif step.forced:  # jump-forward: no forward for this token
                event.forced = True
            for name, value in probs_at:
                setattr(event, name, value)
            if reasons:
                event.reasoning, event.in_reasoning = verdict.reasoning, verdict.in_reasoning
                if verdict.reasoning and thought is not None:
                    thought.append(verdict.reasoning)
            emit(event)
            if verdict.delta:
                shown.append(verdict.delta)
            if verdict.notice is not None:  # text that looked like a call in another shape, and why it is not
                emit(Notice(source="near_miss", message=verdict.notice))
            for warning in verdict.warnings:  # a call cut off, a call written inside reasoning, ...
                emit(Notice(source="calls", message=warning))
            left -= 1
            if verdict.reason is not None or left == 0:
                return verdict
    finally:
        engine.stop()  # an engine that streams closes its stream: the harness decides when to stop
