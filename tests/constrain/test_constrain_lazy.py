"""--constrain's lazy triggers: the call grammar starts at an alternate shape's opener too (formats/calls/shapes.py), so a
model that opens a ```json block, a <tools> tag or bare JSON is kept to a valid call and the shape is closed as
it opened. Random logits on a BPE-like vocabulary (hypothesis), and on SmolLM2's and Qwen2.5's real
vocabularies where their files are present."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_constrain import check_call, lab_tools, tool_schemas
from test_constrain_bpe import PIECES, PieceTokenizer

from decodeloop.constrain.processor import CallConstraint
from decodeloop.decode.context import Context
from decodeloop.decode.engine import LocalEngine
from decodeloop.decode.loop import generate
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.formats.calls.shapes import parse
from decodeloop.formats.tokenizer import StreamDecoder
from decodeloop.sampling import Sampler
from decodeloop.sampling.processors import ProcessorState, force

FENCE_PIECES = ["```", "```json", "json\n", "\n```", "```\n", "<tools>", "</tools>", "tools", "\n{"]
# the grammar starts once the model itself has begun a call to a tool that exists ({"name": "NAME"): before
# that it is free, so JSON data (`{"result": 3}`), a code block or a call to a tool that does not exist is
# never bent into a call
OPENINGS = {
    "fenced_json": '```json\n{"name": "%s"',
    "fenced": '```\n {"name":"%s"',
    "tools_tag": '<tools>{"name": "%s"',
    "bare_json": '{ "name" : "%s"',
}
CLOSINGS = {"fenced_json": "```", "fenced": "```", "tools_tag": "</tools>", "bare_json": "}"}


class NumpyRandomLogits:
    """Fresh random logits at every position, as a numpy array (as real models' are)."""

    name = "random"

    def __init__(self, seed: int, vocab: int, scale: float) -> None:
        self.rng = np.random.default_rng(seed)
        self.vocab, self.scale = vocab, scale
        self.last_computed = 1

    def forward(self, context):
        return (self.rng.standard_normal(self.vocab) * self.scale).astype(np.float32)


class Opening:
    """Forces the first tokens of the turn to spell `text` (a model that opens a shape)."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids

    def __call__(self, logits, state):
        return force(logits, self.ids[state.step]) if state.step < len(self.ids) else logits


def lazy_turn(
    tools, tokenizer, opening: str, seed: int, temperature: float, max_tokens: int = 400, mode: str = "calls"
):
    syntax = JsonSyntax()
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=syntax, opener_id=None, closer_id=None)
    notices = []
    constraint = CallConstraint(bundle, lambda: tools, mode=mode or "calls", emit=notices.append, max_tokens=max_tokens)
    model = NumpyRandomLogits(seed, tokenizer.vocab_size, 3.0)
    engine = LocalEngine(
        model,
        Sampler(temperature=temperature, seed=seed),
        [Opening(tokenizer.encode(opening))] + ([constraint] if mode else []),
    )
    names = {t.name for t in tools}
    stops = Stops(
        syntax,
        eos_ids={tokenizer.eos_id},
        settings=StopSettings(max_tokens=max_tokens, max_call_chars=10**6, collect_calls=False, lenient=True),
        known=names.__contains__,
    )
    context = Context()
    context.extend(tokenizer.encode("prompt"), "user")
    state = ProcessorState(context=context.ids, generated=len(context))
    tokens = []
    verdict = generate(
        engine, stops, context, StreamDecoder(tokenizer), tokenizer, tokens.append, [], state, detail=False
    )
    return verdict, constraint, tokens


def check_shaped(verdict, tools, shape):
    assert verdict.reason == "tool_call" and verdict.shapes == (shape,), verdict
    [text] = verdict.calls
    assert text.rstrip().endswith(CLOSINGS[shape]), text
    call = parse(shape, text)
    check_call(JsonSyntax(), JsonSyntax().render(call), {t.name: t.input_schema for t in tools})


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(tool_schemas, min_size=1, max_size=3),
    st.sampled_from(sorted(OPENINGS)),
    st.integers(0, 2**32),
    st.sampled_from([0.0, 1.0, 2.0]),
)
def test_a_call_opened_in_an_alternate_shape_is_kept_valid_and_closed_as_it_opened(schemas, shape, seed, temperature):
    tokenizer = PieceTokenizer(PIECES + FENCE_PIECES)
    tools = [SimpleNamespace(name=f"tool_{i}", input_schema=s) for i, s in enumerate(schemas)]
    verdict, constraint, _ = lazy_turn(tools, tokenizer, OPENINGS[shape] % tools[0].name, seed, temperature)
    if tools[0].name not in constraint.matcher.tools:
        return  # a schema nothing satisfies (minItems over maxItems) leaves its tool out, and the opening free
    if verdict.reason == "max_tokens":  # a free string written for ever, whose shortest end was not found
        return
    check_shaped(verdict, tools, shape)


def test_without_the_lazy_trigger_random_logits_break_the_same_fence():
    """The control: the same fence and logits with no constraint never give a call."""
    tokenizer = PieceTokenizer(PIECES + FENCE_PIECES)
    tools = lab_tools()
    syntax = JsonSyntax()
    calls = 0
    for seed in range(20):
        engine = LocalEngine(
            NumpyRandomLogits(seed, tokenizer.vocab_size, 3.0),
            Sampler(temperature=1.0, seed=seed),
            [Opening(tokenizer.encode('```json\n{"name": "get_weather"'))],
        )
        stops = Stops(
            syntax,
            eos_ids={tokenizer.eos_id},
            settings=StopSettings(max_tokens=200, collect_calls=False, lenient=True),
            known={t.name for t in tools}.__contains__,
        )
        context = Context()
        context.extend(tokenizer.encode("prompt"), "user")
        state = ProcessorState(context=context.ids, generated=len(context))
        verdict = generate(
            engine, stops, context, StreamDecoder(tokenizer), tokenizer, lambda e: None, [], state, detail=False
        )
        calls += "fenced_json" in verdict.shapes  # a valid call in the fence (random text may open others)
    assert calls == 0


class Preferring(NumpyRandomLogits):
    """Random logits with a strong lead for the next token of `ids` (a model that means to write them)."""

    def __init__(self, ids: list[int], prompt: int, vocab: int) -> None:
        super().__init__(0, vocab, 1.0)
        self.ids, self.prompt = ids, prompt

    def forward(self, context):
        logits = super().forward(context)
        at = len(context) - self.prompt
        if at < len(self.ids):
            logits[self.ids[at]] += 30.0
        return logits


def meaning(text: str, constrained: bool):
    """What a model that means to write `text` writes, with --constrain calls or without: (verdict, text, notices)."""
    tokenizer = PieceTokenizer(PIECES + FENCE_PIECES)
    tools = lab_tools()
    syntax = JsonSyntax()
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=syntax, opener_id=None, closer_id=None)
    context = Context()
    context.extend(tokenizer.encode("prompt"), "user")
    model = Preferring(tokenizer.encode(text) + [tokenizer.eos_id], len(context), tokenizer.vocab_size)
    constraint = CallConstraint(bundle, lambda: tools, mode="calls", max_tokens=100)
    engine = LocalEngine(model, Sampler(), [constraint] if constrained else [])
    stops = Stops(
        syntax,
        eos_ids={tokenizer.eos_id},
        settings=StopSettings(max_tokens=100, collect_calls=False, lenient=True),
        known={t.name for t in tools}.__contains__,
    )
    state = ProcessorState(context=context.ids, generated=len(context))
    events = []
    verdict = generate(
        engine, stops, context, StreamDecoder(tokenizer), tokenizer, events.append, [], state, detail=False
    )
    written = "".join(e.text for e in events if e.kind == "token" and e.id != tokenizer.eos_id)
    return verdict, written, [e.message for e in events if e.kind == "notice"]


def test_a_block_that_names_a_tool_that_does_not_exist_is_left_to_the_model():
    """A model that means a tool that does not exist is not bent into one that does (on BFCL's irrelevance
    questions Qwen2.5 writes such blocks): with the grammar on, it writes what it writes without."""
    meant = '```json\n{"name": "get_area", "arguments": {"base": 10}}\n```'
    free, free_text, free_notices = meaning(meant, False)
    calls, calls_text, calls_notices = meaning(meant, True)
    assert (free.reason, free.calls, free_text) == ("eos", (), meant)
    assert (calls.reason, calls.calls, calls_text) == ("eos", (), meant)
    assert ["'get_area' is not a tool" in n for n in calls_notices] == [True] and calls_notices == free_notices


def test_a_block_that_names_a_tool_that_exists_is_kept_to_a_valid_call():
    meant = '```json\n{"name": "get_weather", "arguments": {"town": 10}}\n```'
    free, _, _ = meaning(meant, False)
    calls, text, _ = meaning(meant, True)
    assert free.reason == "tool_call" and '"town"' in free.calls[0]  # a call, whose arguments do not validate
    assert calls.reason == "tool_call" and calls.shapes == ("fenced_json",) and '"town"' not in text, text
    check_shaped(calls, lab_tools(), "fenced_json")


def test_a_fenced_call_near_the_cap_is_closed_within_it():
    tokenizer = PieceTokenizer(PIECES + FENCE_PIECES)
    tools = lab_tools()
    for seed in range(10):
        verdict, _, tokens = lazy_turn(tools, tokenizer, '```json\n{"name": "get_weather"', seed, 3.0, max_tokens=90)
        assert len(tokens) <= 90
        check_shaped(verdict, tools, "fenced_json")


@pytest.mark.parametrize(
    "env",
    [
        pytest.param("DECODELOOP_SMOLLM2", marks=pytest.mark.smollm2),
        pytest.param("DECODELOOP_QWEN", marks=pytest.mark.qwen),
    ],
)
def test_lazy_triggers_on_real_vocabularies(env):
    path = os.environ.get(env)
    if not path:
        pytest.skip(f"set {env} to the model's .gguf file")
    from decodeloop.models.hf import load_tokenizer

    tokenizer = load_tokenizer(path).tokenizer
    tools = lab_tools()
    for seed, shape in enumerate(sorted(OPENINGS)):
        verdict, _constraint, _ = lazy_turn(
            tools, tokenizer, OPENINGS[shape] % "get_forecast", seed, 1.0, max_tokens=200
        )
        check_shaped(verdict, tools, shape)
    if env == "DECODELOOP_QWEN":
        assert tokenizer.vocab_size >= 151_643
