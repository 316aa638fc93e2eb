"""A turn as steps (turn.py): render, generate, dispatch, inject, rewind, finish, taken one at a time by a caller,
as `Harness.run` takes them. Real table models (their cache counts positions as a transformer's does) and the
real weather server."""

from __future__ import annotations

import dataclasses
import math

import pytest
from conftest import WEATHER, Recorder
from test_answer import TwoMinds

from decodeloop.decode.bundle import ModelBundle, lab_bundle
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.formats.lab import ASSISTANT, EOS, TOOL, USER, CharTokenizer, LabChat
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy

QUESTION = "What's the weather in Polson, MT?"
RESULT = "Polson, MT: 33°F, overcast, humidity 53%, wind 21 mph SE"
OTHER = "Polson, MT: 80°F, sunny"
CALL = "[call get_weather city=Polson state=MT]"
CALL_JSON = '<tool_call>{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}</tool_call>'
TABLE = {
    USER + QUESTION + ASSISTANT: "Let me look. " + CALL,
    TOOL + RESULT + ASSISTANT: "It is 33°F and overcast." + EOS,
    TOOL + OTHER + ASSISTANT: "It is 80°F and sunny." + EOS,
}


def harness(events, router, table=TABLE, **config):
    tokenizer = CharTokenizer()
    bundle = lab_bundle(TableModel(tokenizer, table), tokenizer)
    return Harness(bundle, Sampler(), router, events, config=TurnConfig(**config), policy=Policy.off())


def calls_sent(events) -> int:
    return len([e for e in events.of("rpc") if e.direction == "send" and e.message.get("method") == "tools/call"])


def summary(events) -> list:
    """The events' kinds and what they carry, but the turn's wall time."""
    return [(e.kind, {k: v for k, v in dataclasses.asdict(e).items() if k != "seconds"}) for e in events]


def test_the_steps_taken_one_at_a_time_are_what_run_does():
    runs = []
    for by_steps in (False, True):
        events = Recorder()
        with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
            events.clear()
            h = harness(events, router)
            if by_steps:
                turn = h.begin(QUESTION)
                verdict = turn.generate()
                while verdict.reason == "tool_call" and turn.inject(verdict, turn.dispatch(verdict)):
                    verdict = turn.generate()
                result = turn.finish()
            else:
                result = h.run(QUESTION)
        rpc = [e for e in events if e.kind == "rpc"]  # ids and timing of the wire aside, the calls are the same
        runs.append((result.answer, result.context, summary([e for e in events if e.kind != "rpc"]), len(rpc)))
    assert runs[0] == runs[1]
    assert runs[0][0] == "Let me look. It is 33°F and overcast."


def test_a_caller_sees_the_calls_before_any_server_does(events):
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        turn = harness(events, router).begin(QUESTION)
        verdict = turn.generate()
        assert verdict.reason == "tool_call"
        [parsed] = verdict.parsed
        assert (parsed.call.name, parsed.call.arguments) == ("get_weather", {"city": "Polson", "state": "MT"})
        assert calls_sent(events) == 0 and "".join(turn.answer) == "Let me look. "
        [outcome] = turn.dispatch(verdict)
        assert calls_sent(events) == 1 and outcome.text == RESULT and not outcome.is_error


def test_outcomes_changed_before_inject_are_what_the_model_reads(events):
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        turn = harness(events, router).begin(QUESTION)
        verdict = turn.generate()
        outcomes = [dataclasses.replace(o, text=OTHER) for o in turn.dispatch(verdict)]
        assert turn.inject(verdict, outcomes)
        assert turn.generate().reason == "eos"
        result = turn.finish()
    assert result.answer == "Let me look. It is 80°F and sunny."
    assert OTHER in CharTokenizer().decode(result.context)


def test_rewound_to_where_the_calls_ended_the_turn_dispatches_them_again_and_computes_only_what_follows(events):
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = harness(events, router)
        turn = h.begin(QUESTION)
        first = turn.generate()
        end = len(h.context)  # where the call message ended
        turn.inject(first, turn.dispatch(first))
        turn.generate()
        done = turn.finish()
        assert done.answer == "Let me look. It is 33°F and overcast." and calls_sent(events) == 1

        again = turn.rewind(end)
        assert again is not None and again.reason == "tool_call" and len(h.context) == end
        assert [p.call.name for p in again.parsed] == ["get_weather"]
        assert (turn.tokens, turn.calls, "".join(turn.answer)) == (first.count, 1, "Let me look. ")
        # the call's result is no longer in the context: the same call runs again, not as a repeat
        outcomes = [dataclasses.replace(o, text=OTHER) for o in turn.dispatch(again)]
        assert calls_sent(events) == 2 and not [e for e in events.of("tool_error") if e.stage == "repeat"]
        turn.inject(again, outcomes)
        injected = len(h.context) - end
        events.clear()
        turn.generate()
        result = turn.finish()
    assert result.answer == "Let me look. It is 80°F and sunny."
    # the cache held the first answer's context: the new forward computes the other result's tokens (those
    # after where it departs from the old one), and the position after them
    token = events.of("token")[0]
    old = CharTokenizer().encode_markup(TOOL + RESULT)
    new = CharTokenizer().encode_markup(TOOL + OTHER)
    same = next(i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b)
    assert token.cached == end + same and token.computed == injected - same


def test_rewound_into_a_call_the_stop_check_reads_it_again_and_the_model_finishes_it(events):
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = harness(events, router)
        turn = h.begin(QUESTION)
        start = len(h.context)
        turn.generate()
        whole = list(h.context.ids)
        inside = start + len("Let me look. [call get_we")
        assert turn.rewind(inside) is None  # the message goes on from there
        assert "".join(turn.answer) == "Let me look. " and turn.tokens == inside - start
        events.clear()
        verdict = turn.generate()
    # read from the middle of the call on, the stop check knows it is inside one: the same call, closed
    assert verdict.reason == "tool_call" and [p.call.arguments for p in verdict.parsed] == [
        {"city": "Polson", "state": "MT"}
    ]
    assert h.context.ids == whole and verdict.count == len(whole) - start
    first = events.of("token")[0]
    assert (first.cached, first.computed) == (inside - 1, 1)  # the cache held it all: one position recomputed
    assert all(t.in_call for t in events.of("token"))


def test_a_rewind_outside_what_the_model_wrote_is_refused_with_the_positions(events):
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = harness(events, router)
        turn = h.begin(QUESTION)
        start = len(h.context)
        verdict = turn.generate()
        end = len(h.context)
        turn.inject(verdict, turn.dispatch(verdict))
        after = len(h.context)
        with pytest.raises(ValueError, match=rf"inside what the harness injected \({end}\.\.{after}\)"):
            turn.rewind(end + 3)
        with pytest.raises(ValueError, match=rf"outside {start}\.\.{after}"):
            turn.rewind(start - 1)
        with pytest.raises(ValueError, match="outside"):
            turn.rewind(after + 1)
        assert len(h.context) == after  # nothing was cut
        assert turn.rewind(after) is None  # the next segment's start: nothing to read again
        assert turn.generate().reason == "eos"


def test_rewound_into_a_constrained_call_the_grammar_follows_it_again():
    # a model whose first choice misspells the tool: the grammar masks it and the second choice is written;
    # cut back into the name, the grammar must pick the call up from its text in the context, or the
    # misspelling gets through
    good = '<tool_call>{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}</tool_call>'
    bad = '<tool_call>{"name": "get_wether", "arguments": {"city": "Polson", "state": "MT"}}</tool_call>'
    table = {USER + QUESTION + ASSISTANT: (bad + EOS, good + EOS), TOOL + RESULT + ASSISTANT: ("Cold.", "Cold.")}
    tokenizer, syntax = CharTokenizer(), JsonSyntax()
    bundle = ModelBundle("two-minds", tokenizer, LabChat(tokenizer, syntax), syntax, model=TwoMinds(tokenizer, table))
    events = Recorder()
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = Harness(
            bundle, Sampler(), router, events, config=TurnConfig(constrain="calls", max_tokens=400), policy=None
        )
        turn = h.begin(QUESTION)
        start = len(h.context)
        verdict = turn.generate()
        assert [p.call.name for p in verdict.parsed] == ["get_weather"]
        assert turn.rewind(start + len('<tool_call>{"name": "get_we')) is None
        verdict = turn.generate()
    assert [p.call.name for p in verdict.parsed] == ["get_weather"]
    assert tokenizer.decode(h.context.ids[start:]).startswith(good)


def test_a_paused_segment_goes_on_where_it_stopped(events):
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = harness(events, router)
        turn = h.begin(QUESTION)
        start = len(h.context)
        paused = turn.generate(limit=5)
        assert paused.reason is None and len(h.context) == start + 5 and not events.of("stop")
        assert "".join(turn.answer) + paused.held == "Let m"
        one = turn.generate(limit=1)
        assert one.reason is None and len(h.context) == start + 6
        verdict = turn.generate()
        assert verdict.reason == "tool_call" and [e.reason for e in events.of("stop")] == ["tool_call"]
        turn.inject(verdict, turn.dispatch(verdict))
        turn.generate()
        paused_run = turn.finish()
        h.reset()
        whole = h.run(QUESTION)
    assert paused_run.answer == whole.answer and paused_run.context == whole.context
    with pytest.raises(ValueError, match="the turn is over"):
        turn.generate()


def test_a_token_taken_by_hand_forks_the_turn_and_its_event_says_how_likely_it_was():
    # the model's first choice is a call, its second an answer: take the answer's first token instead
    answer = "It is cold, I think." + EOS
    table = {USER + QUESTION + ASSISTANT: (CALL_JSON + EOS, answer)}
    tokenizer, syntax = CharTokenizer(), JsonSyntax()
    bundle = ModelBundle("two-minds", tokenizer, LabChat(tokenizer, syntax), syntax, model=TwoMinds(tokenizer, table))
    events = Recorder()
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = Harness(bundle, Sampler(), router, events, config=TurnConfig(max_tokens=400), policy=None)
        turn = h.begin(QUESTION)
        start = len(h.context)
        assert turn.generate().reason == "tool_call"
        assert turn.rewind(start) is None and len(h.context) == start
        events.clear()
        taken = turn.take(tokenizer.encode("I")[0])
        assert taken.reason is None and h.context.ids[-1] == tokenizer.encode("I")[0]
        [event] = events.of("token")
        # logits 9 (the call's "<"), 8 ("I"), 0 for the rest: the chosen token's softmax probability
        rest = tokenizer.vocab_size - 2
        assert event.prob == pytest.approx(math.exp(8) / (math.exp(9) + math.exp(8) + rest))
        assert event.top[0][0] == "<" and (event.cached, event.computed) == (start - 1, 1)
        assert turn.generate().reason == "eos"
        result = turn.finish()
    assert result.answer == "It is cold, I think." and result.tool_calls == 0
    assert calls_sent(events) == 0  # the fork never reached the server


def test_a_token_cannot_be_chosen_outside_the_vocabulary(events):
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        turn = harness(events, router).begin(QUESTION)
        with pytest.raises(ValueError, match="not in the vocabulary"):
            turn.take(10**6)
