"""Reasoning kept apart, and the stop check's promises, through a whole turn against the real weather server:
a reasoning block is a span of its own and never the answer, a call inside one is not run (unless asked),
two calls in one piece are both run, a fence left open at the end of the turn is read once, a call the token
cap cuts off is said, never dropped silently."""

from __future__ import annotations

import json

import pytest
from conftest import WEATHER, Recorder

from decodeloop.decode.bundle import ModelBundle
from decodeloop.formats.calls.formats import THINK
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.formats.lab import CharTokenizer, LabChat
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy
from decodeloop.ui.trace import TraceView

QUESTION = "What's the weather in Polson, MT?"
ASKED = "<|user|>" + QUESTION + "<|assistant|>"
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}</tool_call>'
RESULT = "humidity 53%, wind 21 mph SE<|assistant|>"


def run(table: dict[str, str], **config) -> tuple[Recorder, object, Harness]:
    tokenizer = CharTokenizer()
    syntax = JsonSyntax(reasoning=THINK)
    bundle = ModelBundle("table", tokenizer, LabChat(tokenizer, syntax), syntax, model=TableModel(tokenizer, table))
    events = Recorder()
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        harness = Harness(bundle, Sampler(), router, events, config=TurnConfig(**config), policy=Policy.off())
        result = harness.run(QUESTION)
    return events, result, harness


def test_reasoning_is_a_span_of_its_own_and_never_the_answer():
    events, result, harness = run(
        {
            ASKED: "<think>The user wants Polson.</think>" + CALL + "<|eos|>",
            RESULT: "<think>33 and overcast.</think>It is 33°F in Polson.<|eos|>",
        }
    )
    assert result.answer == "It is 33°F in Polson."
    [done] = events.of("done")
    assert done.reasoning == "The user wants Polson.\n33 and overcast."
    assert json.loads(json.dumps(done.to_json()))["reasoning"] == done.reasoning
    context, tokenizer = harness.context, harness.tokenizer
    thought = [tokenizer.decode(context.ids[s.start : s.end]) for s in context.spans() if s.source == "reasoning"]
    assert thought == ["<think>The user wants Polson.</think>", "<think>33 and overcast.</think>"]
    tokens = events.of("token")
    assert "".join(t.reasoning for t in tokens) == "The user wants Polson.33 and overcast."
    assert not any(t.delta and t.in_reasoning for t in tokens)
    assert [c.name for c in events.of("tool_call")] == ["get_weather"]


def test_the_trace_shows_reasoning_apart_from_the_answer(capsys):
    events, _, _ = run({ASKED: "<think>No tool needed.</think>Hello.<|eos|>"})
    view = TraceView(color=False)
    for event in events:
        view(event)
    out = capsys.readouterr().out
    assert "reasoning: No tool needed." in out and "answer: Hello." in out
    assert "· reasoning" in out  # the token lines say which tokens were reasoning


def test_a_call_inside_reasoning_is_not_run_and_said():
    events, result, _ = run({ASKED: "<think>maybe " + CALL + "?</think>I cannot tell.<|eos|>"})
    assert result.answer == "I cannot tell." and not events.of("tool_call") and result.tool_calls == 0
    notices = [n.message for n in events.of("notice") if n.source == "calls"]
    assert any("inside its reasoning" in m and "not run" in m for m in notices), notices


def test_a_call_inside_reasoning_runs_when_asked():
    events, result, _ = run(
        {ASKED: "<think>maybe " + CALL + "</think><|eos|>", RESULT: "It is 33°F.<|eos|>"},
        calls_in_reasoning="run",
    )
    assert [c.name for c in events.of("tool_call")] == ["get_weather"] and result.answer == "It is 33°F."


def test_a_fence_left_open_at_the_end_of_the_turn_is_read_once_and_runs():
    fenced = '```json\n{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}\n<|eos|>'
    events, result, _ = run({ASKED: fenced, RESULT: "It is 33°F.<|eos|>"}, call_shapes="lenient")
    assert not events.of("tool_error"), [e.message for e in events.of("tool_error")]
    [call] = events.of("tool_call")
    assert call.shape == "fenced_json" and result.answer == "It is 33°F."


@pytest.mark.parametrize("cap", [30, 60])
def test_a_call_the_token_cap_cuts_off_is_said(cap):
    events, result, _ = run({ASKED: "Let me look. " + CALL + "<|eos|>"}, max_tokens=cap)
    assert result.reason == "max_tokens" and not events.of("tool_call")
    notices = [n.message for n in events.of("notice") if n.source == "calls"]
    assert any(f"token cap (max_tokens {cap}) cut off a call" in m for m in notices), notices
    assert "tool_call" not in result.answer  # the half-written call is never the answer's text
