"""Jump-forward: where the call grammar leaves no choice, its tokens are appended without a forward each and the
next forward computes them together. Greedy output is token for token the output without it; fewer forwards.
Real engines: the lab transformer (numpy, shipped weights) and a tiny transformers Llama; real servers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import tiny_hf
from conftest import WEATHER
from test_constrain import lab_tools
from test_constrain_bpe import PIECES, PieceTokenizer

from decodeloop.constrain.processor import CallConstraint, forced_text
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.harness import Harness, TurnConfig
from decodeloop.registry import load_model
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers

QUESTION = "What's the weather in Polson, MT?"


def turn(bundle, jump: bool, question: str = QUESTION, mode: str = "required", max_tokens: int = 120):
    events = []
    with start_stdio_servers([WEATHER], events.append, options=ClientOptions(timeout=10)) as router:
        harness = Harness(
            bundle, Sampler(), router, events.append, config=TurnConfig(constrain=mode, max_tokens=max_tokens)
        )
        harness.constraint.jump_forward = jump
        result = harness.run(question)
    tokens = [e for e in events if getattr(e, "kind", "") == "token"]
    return result, tokens


def forwards(tokens) -> int:
    return sum(1 for t in tokens if t.computed > 0)


def test_forced_text_follows_the_grammar_with_json_spacing():
    tokenizer = PieceTokenizer(PIECES)
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=JsonSyntax(), opener_id=None, closer_id=None)
    weather = [t for t in lab_tools() if t.name == "get_weather"]
    constraint = CallConstraint(bundle, lambda: weather, mode="calls")
    grammar = constraint.matcher.grammar
    state = constraint.matcher.begin()
    assert forced_text(grammar, state, json=True, closer="</tool_call>") == '{"name": "get_weather", "arguments": {"'
    for byte in b'{"name":"get_weather","arguments":{"city":"Polson","state":"MT"}}':
        state = grammar.advance(state, byte)
    assert forced_text(grammar, state, json=True, closer="</tool_call>") == ""  # the closer is the model's


def test_the_lab_transformer_writes_the_same_tokens_with_fewer_forwards():
    bundle = load_model("transformer")
    for question in (QUESTION, "How's the weather in Burlington, VT?"):
        slow, slow_tokens = turn(bundle, jump=False, question=question)
        fast, fast_tokens = turn(bundle, jump=True, question=question)
        assert [t.id for t in fast_tokens] == [t.id for t in slow_tokens]
        assert fast.answer == slow.answer and fast.tool_calls == slow.tool_calls == 1
        jumped = [t for t in fast_tokens if getattr(t, "forced", False)]
        assert jumped and all(t.computed == 0 for t in jumped)
        assert forwards(fast_tokens) == forwards(slow_tokens) - len(jumped)
        # the forward after a run computes the run with it, in one call
        after = fast_tokens[fast_tokens.index(jumped[-1]) + 1]
        assert after.computed >= 2


@pytest.fixture(scope="module")
def tiny_bundle(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    directory = str(tmp_path_factory.mktemp("tiny_llama_jump"))
    tiny_hf.build_model(directory)
    return load_model("hf:" + directory)


def test_a_transformers_model_writes_the_same_tokens_with_fewer_forwards(tiny_bundle):
    slow, slow_tokens = turn(tiny_bundle, jump=False, max_tokens=80)
    fast, fast_tokens = turn(tiny_bundle, jump=True, max_tokens=80)
    assert [t.id for t in fast_tokens] == [t.id for t in slow_tokens]
    assert (fast.answer, fast.reason, fast.tool_calls) == (slow.answer, slow.reason, slow.tool_calls)
    jumped = sum(1 for t in fast_tokens if getattr(t, "forced", False))
    assert jumped > 0 and forwards(fast_tokens) == forwards(slow_tokens) - jumped
    assert any(t.to_json().get("forced") for t in fast_tokens)
