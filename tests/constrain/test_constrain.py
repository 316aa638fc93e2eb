"""--constrain: the guarantee (hypothesis over random schemas and random logits, through the real Stops, parser
and validator), the harness wiring, the trace and JSON Lines, required calls, and nothing at all when off."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import ROOT, WEATHER
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decodeloop.constrain.matchers import unsupported
from decodeloop.constrain.processor import CallConstraint
from decodeloop.decode.bundle import lab_bundle
from decodeloop.decode.context import Context
from decodeloop.decode.engine import LocalEngine
from decodeloop.decode.loop import generate
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.formats.lab import CharTokenizer
from decodeloop.formats.tokenizer import StreamDecoder
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.sampling.processors import ProcessorState
from decodeloop.schema import check_value, validate_arguments
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.ui.jsonl import JsonlView
from decodeloop.ui.trace import TraceView

QUESTION = "What's the weather in Polson, MT?"
RESULT = "Polson, MT: 33°F, overcast, humidity 53%, wind 21 mph SE"

# --- random schemas within the supported subset ---------------------------------------------------------

NAMES = ["a", "b", "city", "n-1", "x.y", "_k", "bad key", "é"]
PATTERNS = ["^[a-z]+$", "^[A-Z]{2}$", r"\d", "^(ab|cd)*$", "x", r"^\w+$", "^.{0,3}$", '^[^"]*$', "^-?[0-9]+$"]
MEMBERS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["a", "b c", "", "é", 'x"y', "[1]", "3", "true"]),
    st.booleans(),
    st.none(),
    st.floats(-2, 2, allow_nan=False).map(lambda x: round(x, 2)),
    st.just([1, "a"]),
    st.just({"k": 1}),
)
TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]


def bound(kind):
    return st.integers(-20, 20) if kind == "integer" else st.floats(-20, 20, allow_nan=False).map(lambda x: round(x, 1))


@st.composite
def leaf(draw):
    kind = draw(
        st.sampled_from(
            ["string", "string", "integer", "number", "boolean", "null", "enum", "const", "untyped", "typelist"]
        )
    )
    if kind == "string":
        schema = {"type": "string"}
        if draw(st.booleans()):
            schema["maxLength"] = draw(st.integers(0, 6))
        if draw(st.booleans()):
            schema["minLength"] = draw(st.integers(0, 3))
        if draw(st.integers(0, 3)) == 0:
            schema["pattern"] = draw(st.sampled_from(PATTERNS))
        return schema
    if kind in ("integer", "number"):
        schema = {"type": kind}
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if draw(st.integers(0, 2)) == 0:
                schema[key] = draw(bound(kind))
        return schema
    if kind in ("boolean", "null"):
        return {"type": kind}
    if kind == "enum":
        schema = {"enum": draw(st.lists(MEMBERS, min_size=1, max_size=4, unique_by=json.dumps))}
        if draw(st.booleans()):
            schema["type"] = draw(st.sampled_from(["string", "integer", "number"]))
        return schema
    if kind == "const":
        return {"const": draw(MEMBERS)}
    if kind == "typelist":
        return {"type": draw(st.lists(st.sampled_from(TYPES[:5]), min_size=1, max_size=3, unique=True)), "maxLength": 4}
    return {}


@st.composite
def obj(draw, child):
    names = draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True))
    schema = {"type": "object", "properties": {name: draw(child) for name in names}}
    schema["required"] = [n for n in names if draw(st.booleans())]
    extra = draw(st.sampled_from(["absent", False, True, "schema"]))
    if extra == "schema":
        schema["additionalProperties"] = draw(child)
    elif extra != "absent":
        schema["additionalProperties"] = extra
    return schema


def extend(child):
    array = st.builds(
        lambda items, low, high: {"type": "array", "items": items, "minItems": low, "maxItems": high},
        child,
        st.integers(0, 2),
        st.integers(1, 3),
    )
    any_of = st.lists(child, min_size=1, max_size=3).map(lambda branches: {"anyOf": branches})
    one_of = st.sampled_from(
        [
            ({"type": "string", "maxLength": 3}, {"type": "integer"}),
            ({"type": "boolean"}, {"type": "null"}),
            ({"enum": ["a", "b"]}, {"enum": ["c", 1]}),
        ]
    ).map(lambda b: {"oneOf": list(b)})
    all_of = st.builds(lambda x: {"allOf": [x, {"maxLength": 3, "minimum": -5}]}, child)
    # a string branch keeps a compact text a string, and the sibling maxLength then applies to it
    guarded = st.lists(child, min_size=1, max_size=3).map(lambda branches: {"anyOf": branches, "maxLength": 1})
    return st.one_of(array, obj(child), any_of, one_of, all_of, guarded)


values = st.recursive(leaf(), extend, max_leaves=5)


def with_top_level_any_of(schema):
    names = list(schema["properties"])[:2]
    return {**schema, "anyOf": [{"required": [name]} for name in names] or [{"maxProperties": 5}]}


def with_refs(schema, target):
    return {**schema, "$defs": {"D": target}, "properties": {**schema["properties"], "r": {"$ref": "#/$defs/D"}}}


LINKED = {
    "type": "object",
    "$defs": {
        "N": {
            "type": "object",
            "properties": {"v": {"type": "integer", "minimum": 0}, "next": {"$ref": "#/$defs/N"}},
            "required": ["v"],
            "additionalProperties": False,
        }
    },
    "properties": {"list": {"$ref": "#/$defs/N"}},
    "required": ["list"],
}
tool_schemas = st.one_of(
    obj(values),
    st.just({}),
    obj(values).map(with_top_level_any_of),
    st.builds(with_refs, obj(values), values),
    st.just(LINKED),
)


# --- the driver: the real generate, Stops, parser and validator --------------------------------------------


class RandomLogits:
    """A model whose logits are fresh random numbers at every position."""

    name = "random"

    def __init__(self, seed: int, vocab: int, scale: float) -> None:
        self.rng = random.Random(seed)
        self.vocab, self.scale = vocab, scale
        self.last_computed = 1

    def forward(self, context):
        return [self.rng.gauss(0.0, self.scale) for _ in range(self.vocab)]


def constrained_turn(
    tools,
    syntax,
    seed,
    temperature,
    mode="required",
    max_tokens=3000,
    logits_model=None,
    tokenizer=None,
    closer_id=None,
):
    tokenizer = tokenizer or CharTokenizer()
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=syntax, opener_id=None, closer_id=closer_id)
    notices = []
    constraint = CallConstraint(bundle, lambda: tools, mode=mode, emit=notices.append, max_tokens=max_tokens)
    model = logits_model or RandomLogits(seed, tokenizer.vocab_size, 3.0)
    engine = LocalEngine(model, Sampler(temperature=temperature, seed=seed), [constraint])
    stops = Stops(
        syntax,
        eos_ids={tokenizer.eos_id},
        settings=StopSettings(max_tokens=max_tokens, max_call_chars=10**6, collect_calls=False),
        specials=None if closer_id is None else {closer_id: syntax.closer},  # the closer as one special token
    )
    context = Context()
    context.extend(tokenizer.encode("prompt"), "user")
    state = ProcessorState(context=context.ids, generated=len(context))
    tokens = []
    verdict = generate(
        engine, stops, context, StreamDecoder(tokenizer), tokenizer, tokens.append, [], state, detail=False
    )
    return verdict, constraint, notices, tokens


def check_call(syntax, text, schemas):
    call = syntax.parse(text)
    schema = schemas[call.name]
    converted = validate_arguments(call.name, call.arguments, schema)
    assert check_value(converted, schema or {}) == [], (text, converted)
    return call


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(tool_schemas, min_size=1, max_size=3),
    st.sampled_from(["compact", "json"]),
    st.integers(0, 2**32),
    st.sampled_from([0.0, 1.0, 2.0]),
)
def test_every_constrained_call_parses_and_validates(schemas, syntax_name, seed, temperature):
    syntax = CompactSyntax() if syntax_name == "compact" else JsonSyntax()
    tools = [SimpleNamespace(name=f"tool_{i}", input_schema=s) for i, s in enumerate(schemas)]
    verdict, constraint, notices, _ = constrained_turn(tools, syntax, seed, temperature)
    if not constraint.matcher.tools:
        assert any("no tool can be called" in n.message for n in notices)
        return
    if verdict.reason == "max_tokens":
        # a model may write a free string or key for ever: near the cap the constraint writes the call's shortest
        # end; only where its search finds none (it tries closing characters, not the names of required keys)
        # does the cap cut the call
        assert constraint.matcher.finish(constraint._state) is None, verdict
        return
    assert verdict.reason == "tool_call", verdict
    check_call(syntax, verdict.calls[0], {t.name: t.input_schema for t in tools})


def lab_tools():
    from decodeloop.servers.timezone import INPUT as TIMEZONE
    from decodeloop.servers.units import INPUT as UNITS
    from decodeloop.servers.weather import FORECAST_INPUT, WEATHER_INPUT

    return [
        SimpleNamespace(name="get_weather", input_schema=WEATHER_INPUT),
        SimpleNamespace(name="get_forecast", input_schema=FORECAST_INPUT),
        SimpleNamespace(name="get_time_zone", input_schema=TIMEZONE),
        SimpleNamespace(name="convert", input_schema=UNITS),
    ]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(["compact", "json"]), st.integers(0, 2**32), st.sampled_from([0.0, 0.7, 1.5]))
def test_random_logits_on_the_lab_tools_always_write_valid_calls(syntax_name, seed, temperature):
    syntax = CompactSyntax() if syntax_name == "compact" else JsonSyntax()
    tools = lab_tools()
    verdict, _, _, _ = constrained_turn(tools, syntax, seed, temperature, max_tokens=20000)
    assert verdict.reason == "tool_call"
    check_call(syntax, verdict.calls[0], {t.name: t.input_schema for t in tools})


# --- the processor on its own ------------------------------------------------------------------------------


def test_free_outside_calls_and_no_change_to_the_logits_it_was_given():
    tokenizer = CharTokenizer()
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=CompactSyntax(), opener_id=None, closer_id=None)
    constraint = CallConstraint(bundle, lab_tools, mode="calls")
    logits = [0.0] * tokenizer.vocab_size
    ctx = tokenizer.encode("x [call ")
    assert constraint(logits, ProcessorState(ctx, 0, False, 1)) is logits  # not in a call: untouched
    for kind in ("list", "numpy", "torch"):
        if kind == "torch":
            torch = pytest.importorskip("torch")
            given_logits = torch.zeros(tokenizer.vocab_size, dtype=torch.float32)
        elif kind == "numpy":
            given_logits = np.zeros(tokenizer.vocab_size, dtype=np.float32)
        else:
            given_logits = list(logits)
        constraint(given_logits, ProcessorState(ctx, 0, False, 1))  # resets between calls
        out = constraint(given_logits, ProcessorState(ctx, 0, True, 2))
        values = out if kind == "list" else out.tolist()
        allowed = [i for i, v in enumerate(values) if v != float("-inf")]
        assert sorted(tokenizer.decode([i]) for i in allowed) == ["c", "g"]  # convert, get_...
        assert type(out) is type(given_logits) and (kind == "list" or out.dtype == given_logits.dtype)
        assert (given_logits if kind == "list" else given_logits.tolist()) == [0.0] * tokenizer.vocab_size
        assert constraint.override is None or constraint.override[1] == 2


def test_what_can_be_constrained():
    assert unsupported(CharTokenizer()) is None
    wide = SimpleNamespace(vocab_size=49152, token_bytes=lambda t: b"ab")
    assert unsupported(wide) is None  # a BPE vocabulary: TokenMatcher
    assert "token_bytes" in unsupported(SimpleNamespace(vocab_size=100))
    assert "special token" in unsupported(CharTokenizer(), None, closer_id=3)


def test_the_grammar_follows_the_tools_registered_now():
    tokenizer = CharTokenizer()
    tools = lab_tools()[:1]
    version = [0]
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=CompactSyntax(), opener_id=None, closer_id=None)
    notices = []
    constraint = CallConstraint(
        bundle, lambda: list(tools), mode="calls", emit=notices.append, version=lambda: version[0]
    )
    assert constraint.matcher.tools == ["get_weather"]
    tools.append(lab_tools()[3])
    version[0] += 1
    ctx = tokenizer.encode("[call ")
    out = constraint([0.0] * tokenizer.vocab_size, ProcessorState(ctx, 0, True, 6))
    assert constraint.matcher.tools == ["get_weather", "convert"]
    assert {tokenizer.decode([i]) for i, v in enumerate(out) if v == 0.0} == {"c", "g"}
    assert "get_weather, convert" in notices[-1].message


# --- through the harness -----------------------------------------------------------------------------------


def harness(events, table, router, **config):
    tokenizer = CharTokenizer()
    return Harness(
        lab_bundle(TableModel(tokenizer, table), tokenizer), Sampler(), router, events, config=TurnConfig(**config)
    )


def test_off_adds_nothing(events):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson state=MT]",
        "<|tool|>" + RESULT + "<|assistant|>": "33°F.<|eos|>",
    }
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = harness(events, table, router)
        h.run(QUESTION)
    # no call grammar: the one processor is the hold of --on-repeat answer, which does nothing until a repeat
    assert h.constraint is None and h.engine.processors == (h.hold,) and not h.hold.active
    assert not [n for n in events.of("notice") if n.source == "constrain"]
    out = io.StringIO()
    JsonlView(out)(events.of("token")[0])
    assert "masked" not in json.loads(out.getvalue())


def test_a_call_the_mask_corrects_shows_what_the_model_wanted(events):
    # the table writes "state MT": the grammar allows only "=" after the key, and the table picks up again
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson state MT]",
        "state=": "MT]",
        "<|tool|>" + RESULT + "<|assistant|>": "33°F.<|eos|>",
    }
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = harness(events, table, router, constrain="calls")
        result = h.run(QUESTION)
    assert result.answer == "33°F." and not events.of("tool_error")
    [call] = events.of("tool_call")
    assert call.arguments == {"city": "Polson", "state": "MT"}
    masked = [t for t in events.of("token") if t.masked is not None]
    assert [(t.masked, t.text, t.allowed) for t in masked] == [(" ", "=", 1)]
    assert "constrained to get_weather, get_forecast" in events.of("notice")[-1].message
    line = TraceView(io.StringIO(), color=False)._line(masked[0])
    assert line.endswith("⊘ ' ' masked → '=' (1 allowed)")
    out = io.StringIO()
    JsonlView(out)(masked[0])
    record = json.loads(out.getvalue())
    assert (record["masked"], record["masked_id"], record["allowed"]) == (" ", masked[0].masked_id, 1)


def test_required_opens_the_turn_with_a_call_then_leaves_the_model_free(events):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "I do not know.<|eos|>",
        "[call ": "get_weather city=Polson state=MT]",
        "<|tool|>" + RESULT + "<|assistant|>": "33°F.<|eos|>",
    }
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        free = harness(events, table, router).run(QUESTION)
        assert free.answer == "I do not know." and free.tool_calls == 0
        events.clear()
        forced = harness(events, table, router, constrain="required").run(QUESTION)
    assert forced.answer == "33°F." and forced.tool_calls == 1
    tokens = events.of("token")
    assert "".join(t.text for t in tokens[:6]) == "[call "
    assert tokens[0].masked == "I" and tokens[0].allowed == 1
    assert all(t.masked is None for t in tokens[6:])


def test_required_is_per_turn_and_a_bad_mode_is_refused(events):
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        with pytest.raises(ValueError, match="constrain"):
            harness(events, {"a": "b"}, router, constrain="sometimes")


def test_notices_at_start_up_name_what_is_not_enforced(events):
    tokenizer = CharTokenizer()
    tools = [
        SimpleNamespace(
            name="t",
            input_schema={
                "type": "object",
                "properties": {
                    "when": {"type": "string", "format": "date-time"},
                    "code": {"type": "string", "pattern": "(?=a)a"},
                },
            },
        )
    ]
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=CompactSyntax(), opener_id=None, closer_id=None)
    CallConstraint(bundle, lambda: tools, mode="calls", emit=events)
    messages = [n.message for n in events.of("notice")]
    assert any('argument "when"' in m and "format" in m for m in messages)
    assert any("lookahead" in m for m in messages)


def test_cli_constrain_runs_and_refuses_what_it_cannot_do():
    run = subprocess.run(
        [sys.executable, "-S", "decode_loop.py", "--constrain", "required", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and "33°F" in run.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "decodeloop", "run", "--model", "hf:nowhere", "--constrain", "calls", "hi"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 78 and "nowhere" in bad.stderr  # a BPE model is constrained too: it must exist


def test_ngram_calls_under_the_constraint_always_parse(events):
    from decodeloop.lab.corpus import lab_server_commands
    from decodeloop.registry import load_model

    bundle = load_model("ngram", order=4)
    with start_stdio_servers(lab_server_commands(), events, options=ClientOptions(timeout=10)) as router:
        h = Harness(bundle, Sampler(temperature=0.7, seed=2), router, events, config=TurnConfig(constrain="calls"))
        for question in (QUESTION, "Convert 12 km to mi.", "What time zone is Boise, ID in?"):
            h.reset()
            h.run(question)
    assert events.of("tool_call")
    assert [e for e in events.of("tool_error") if e.stage in ("parse", "route", "arguments")] == []


def test_eval_counts_the_tokens_the_grammar_overrode():
    from decodeloop.lab.corpus import Episode
    from decodeloop.lab.evaluate import evaluate

    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson state MT]",
        "state=": "MT]",
        "<|tool|>" + RESULT + "<|assistant|>": "33°F and overcast.<|eos|>",
    }
    episode = Episode(QUESTION, "get_weather", {"city": "Polson", "state": "MT"}, "", RESULT, "", ["33°F"])
    with start_stdio_servers([WEATHER], lambda e: None, options=ClientOptions(timeout=10)) as router:
        for constrain, masked, well_formed in (("off", 0, 0.0), ("calls", 1, 1.0)):
            summary, [outcome] = evaluate(lambda emit: harness(emit, table, router, constrain=constrain), [episode])
            assert (summary.masked_tokens, outcome.masked, summary.well_formed_rate) == (masked, masked, well_formed)
    assert ("tokens the call grammar overrode", "1") in summary.rows()
