"""The trace's probabilities are those of the distribution each token was drawn from.

`Sampler.explain` is checked against `Sampler.distribution` (the exact distribution
`sample` draws from) on lists, numpy arrays and torch tensors, with every filter;
at T = 0 it is the model's softmax at temperature 1. Token events, the terminal
trace and JSON Lines of real runs carry the sampling settings beside them.
"""

from __future__ import annotations

import io
import json
import math
import random

import pytest
from conftest import WEATHER
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import decodeloop.sampling.torch_backend as torch_backend
from decodeloop.harness import Harness, TurnConfig
from decodeloop.registry import load_model
from decodeloop.sampling import Sampler, explain
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.ui.jsonl import JsonlView
from decodeloop.ui.trace import TraceView

np = pytest.importorskip("numpy")

KINDS = ["list", "numpy", "torch", "torch-device-kernels"]
grid_logits = st.lists(st.integers(-640, 640).map(lambda k: k / 64.0), min_size=2, max_size=120)
sampler_settings = st.fixed_dictionaries(
    dict(
        temperature=st.sampled_from([0.3, 0.7, 1.0, 1.6]),
        top_k=st.one_of(st.just(0), st.integers(1, 130)),
        top_p=st.one_of(st.just(1.0), st.floats(0.05, 1.0)),
        min_p=st.one_of(st.just(0.0), st.floats(0.0, 1.0)),
    )
)


def as_kind(values, kind, dtype="float64"):
    if kind == "list":
        return list(values)
    if kind == "numpy":
        return np.asarray(values, dtype=dtype)
    torch = pytest.importorskip("torch")
    return torch.tensor(values, dtype=getattr(torch, dtype))


def cut_is_clear(values, temperature, top_k, top_p, min_p, rel=1e-9):
    """False when a top-p or min-p cut lies within rounding of a token (either side is then right)."""
    top = max(values)
    weights = [math.exp((v - top) / temperature) for v in values]
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))[: top_k or None]
    total, cum = math.fsum(weights[i] for i in order), 0.0
    for i in order:
        cum += weights[i]
        if top_p < 1.0 and abs(cum - top_p * total) <= rel * total:
            return False
        if min_p > 0.0 and abs(weights[i] - min_p) <= rel:
            return False
    return True


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.filter_too_much])
@given(values=grid_logits, config=sampler_settings, kind=st.sampled_from(KINDS), pick=st.integers(0, 10**6))
def test_explain_is_the_distribution_sample_draws_from(values, config, kind, pick):
    assume(cut_is_clear(values, **config))
    sampler = Sampler(seed=3, **config)
    dist = sampler.distribution(values)  # the reference: what `sample` draws from, exactly
    probs = dict(dist)
    token = pick % len(values)  # any token: a cut one has probability 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch_backend, "_CPU_VIA_NUMPY", kind != "torch-device-kernels")
        x = as_kind(values, kind)
        drawn = sampler.sample(x)
        prob, top = sampler.explain(x, token, 3)  # from what the draw kept
        again, top_again = Sampler(seed=3, **config).explain(as_kind(values, kind), token, 3)  # afresh
    assert drawn in probs
    # the draw's weights are a cumulative sum: tiny probabilities hold to 1e-12
    assert prob == pytest.approx(probs.get(token, 0.0), rel=1e-9, abs=1e-12)
    assert again == pytest.approx(probs.get(token, 0.0), rel=1e-9, abs=1e-300)
    for got in (top, top_again):
        assert [t for t, _ in got] == [t for t, _ in dist[:3]]
        for (_, p), (_, q) in zip(got, dist):
            assert p == pytest.approx(q, rel=1e-9, abs=1e-12)
        assert all(type(t) is int and type(p) is float for t, p in got)
    assert type(prob) is float and type(again) is float


@pytest.mark.parametrize("kind", ["numpy", "torch", "torch-device-kernels"])
@pytest.mark.parametrize(
    "config",
    [
        dict(temperature=0.8),
        dict(temperature=0.8, top_p=0.9),
        dict(temperature=0.7, top_k=50),
        dict(temperature=1.3, min_p=0.05),
        dict(temperature=0.5, top_k=200, top_p=0.8, min_p=0.01),
    ],
)
def test_explain_at_real_vocabularies(kind, config, monkeypatch):
    monkeypatch.setattr(torch_backend, "_CPU_VIA_NUMPY", kind != "torch-device-kernels")
    values = (np.random.default_rng(7).standard_normal(49_152) * 3.0).astype(np.float32)
    sampler = Sampler(seed=1, **config)
    x = as_kind(values, kind, "float32")
    token = sampler.sample(x)
    dist = sampler.distribution(x)
    # from what the draw kept, and afresh (another sampler, which drew nothing)
    for prob, top in (sampler.explain(x, token, 3), Sampler(seed=1, **config).explain(x, token, 3)):
        assert prob == pytest.approx(dict(dist)[token], rel=1e-5)
        assert [t for t, _ in top] == [t for t, _ in dist[:3]]
        for (_, p), (_, q) in zip(top, dist):
            assert p == pytest.approx(q, rel=1e-5)


def test_greedy_explains_the_model_at_temperature_1():
    rng = random.Random(4)
    values = [rng.gauss(0.0, 2.0) for _ in range(300)]
    ref_prob, ref_top = explain(values, 17, 3)
    for kind in ("list", "numpy"):
        prob, top = Sampler(temperature=0.0, top_k=5).explain(as_kind(values, kind), 17, 3)
        assert prob == pytest.approx(ref_prob, rel=1e-12)
        assert [t for t, _ in top] == [t for t, _ in ref_top]
        assert [p for _, p in top] == pytest.approx([p for _, p in ref_top], rel=1e-12)
    # at T > 0 the same logits give other probabilities: the ones sampled from
    hot, _ = Sampler(temperature=0.5).explain(values, 17, 3)
    assert hot != pytest.approx(ref_prob, rel=1e-3)


def test_settings_name_what_shapes_the_distribution():
    assert Sampler().settings() == {"temperature": 0.0}
    assert Sampler(temperature=0.0, top_k=5, top_p=0.5).settings() == {"temperature": 0.0}  # greedy ignores them
    assert Sampler(temperature=0.7).settings() == {"temperature": 0.7}
    assert Sampler(temperature=0.7, top_k=40, top_p=0.9, min_p=0.05).settings() == {
        "temperature": 0.7,
        "top_k": 40,
        "top_p": 0.9,
        "min_p": 0.05,
    }


def run_ngram(sampler, emit):
    """The lab n-gram (order 4) on the weather question: a real turn with a real server."""
    bundle = load_model("ngram", order=4)
    with start_stdio_servers([WEATHER], emit, options=ClientOptions(timeout=10)) as router:
        return Harness(bundle, sampler, router, emit, config=TurnConfig(max_tokens=60)).run(
            "What's the weather in Polson, MT?"
        )


def test_token_events_carry_the_temperature_and_its_probabilities(events):
    sampler = Sampler(temperature=0.7, seed=2)
    run_ngram(sampler, events)
    tokens = events.of("token")
    assert tokens and all(t.temperature == 0.7 and t.top_k is None and t.top_p is None for t in tokens)
    # an uncertain step: its probabilities are softmax(logits / 0.7), not softmax(logits)
    unsure = [t for t in tokens if t.prob < 0.9]
    assert unsure
    for t in tokens:
        assert sum(p for _, p in t.top) <= 1.0 + 1e-9
        assert any(text == t.text for text, _ in t.top) or t.prob <= t.top[-1][1]
    json_form = tokens[0].to_json()
    assert json_form["temperature"] == 0.7 and "top_k" not in json_form and "top_p" not in json_form


def test_the_probabilities_match_the_draws():
    # the same turn drawn again with other seeds: at each step, how often each token is drawn
    # agrees with the probabilities the event shows (a T = 1 softmax would not)
    bundle = load_model("ngram", order=4)
    model = bundle.model
    context = bundle.tokenizer.encode("[call get_")  # an uncertain step: weather, forecast or time zone
    logits = model.forward(context)
    sampler = Sampler(temperature=0.7, seed=5)
    _prob, top = sampler.explain(logits, 0, 3)
    counts: dict[int, int] = {}
    draws = 20_000
    for _ in range(draws):
        token = sampler.sample(logits)
        counts[token] = counts.get(token, 0) + 1
    for token, p in top:
        assert abs(counts.get(token, 0) / draws - p) < 5 * math.sqrt(p * (1 - p) / draws) + 1e-3
    cold = dict(explain(logits, 0, 3)[1])  # the T = 1 view disagrees with the draws by more than that
    first = top[0][0]
    assert abs(counts[first] / draws - cold[first]) > 5 * math.sqrt(cold[first] * (1 - cold[first]) / draws)


def test_the_trace_and_json_lines_say_which_distribution(events):
    out = io.StringIO()
    run_ngram(Sampler(temperature=0.7, top_k=5, seed=2), TraceView(out, color=False))
    text = out.getvalue()
    note = [line for line in text.splitlines() if line.startswith("p: ")]
    assert note == [
        "p: each token's probability in the distribution it was drawn from, softmax(logits / 0.7) "
        "cut to top-k 5 and renormalised over the tokens kept (a token cut has p 0)"
    ]
    assert text.index(note[0]) < text.index("   1 │ fwd")
    out = io.StringIO()
    run_ngram(Sampler(), TraceView(out, color=False))
    assert (
        "p: the model's probability of each token, softmax(logits) at temperature 1; sampling is greedy "
        "(T = 0): the most likely token is taken" in out.getvalue()
    )
    out = io.StringIO()
    run_ngram(Sampler(temperature=0.7, top_k=5, seed=2), JsonlView(out))
    tokens = [json.loads(line) for line in out.getvalue().splitlines() if '"event": "token"' in line]
    assert tokens and all(t["temperature"] == 0.7 and t["top_k"] == 5 and len(t["top"]) <= 3 for t in tokens)
    assert all("top_p" not in t and "min_p" not in t for t in tokens)
