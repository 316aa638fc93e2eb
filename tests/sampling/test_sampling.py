"""Sampler: greedy, temperature, top-k, top-p, exact distributions, seeded draws, bad input."""

import math
import random
from collections import Counter

import pytest

from decodeloop.sampling import Sampler, softmax, top_tokens

NAN = float("nan")
INF = float("inf")


def reference_softmax(logits, temperature=1.0):
    """Plain textbook softmax in exact-ish arithmetic (fsum), for comparison."""
    top = max(logits)
    weights = [math.exp((x - top) / temperature) for x in logits]
    total = math.fsum(weights)
    return [w / total for w in weights]


def as_dict(pairs):
    return dict(pairs)


def random_logits(seed, n=261, scale=3.0):
    rng = random.Random(seed)
    return [rng.gauss(0.0, scale) for _ in range(n)]


# --- greedy -----------------------------------------------------------------


def test_greedy_picks_argmax():
    logits = [0.1, 2.5, -1.0, 2.4]
    assert Sampler().sample(logits) == 1
    assert Sampler(temperature=0).distribution(logits) == [(1, 1.0)]


def test_greedy_ties_go_to_lowest_id():
    assert Sampler().sample([1.0, 3.0, 0.0, 3.0, 3.0]) == 1


def test_greedy_ignores_masked_tokens():
    assert Sampler().sample([-INF, -INF, -5.0, -INF]) == 2


def test_greedy_on_full_vocabulary_matches_max():
    logits = random_logits(1)
    assert Sampler().sample(logits) == max(range(len(logits)), key=logits.__getitem__)


def test_accepts_any_sequence():
    assert Sampler().sample((0.0, 1.0, 0.5)) == 1
    assert Sampler(temperature=1.0, seed=0).sample((0.0, 1.0, 0.5)) in (0, 1, 2)


# --- exact distributions -----------------------------------------------------


@pytest.mark.parametrize("temperature", [0.25, 0.5, 1.0, 1.7, 10.0])
def test_temperature_scaling_gives_exact_softmax(temperature):
    logits = [1.0, 2.0, 3.0, -0.5, 0.0]
    dist = Sampler(temperature=temperature).distribution(logits)
    expected = reference_softmax(logits, temperature)
    assert len(dist) == len(logits)
    for token, prob in dist:
        assert prob == pytest.approx(expected[token], rel=1e-12)
    probs = [p for _, p in dist]
    assert probs == sorted(probs, reverse=True)
    assert math.fsum(probs) == pytest.approx(1.0, abs=1e-12)


def test_temperature_on_full_vocabulary():
    logits = random_logits(2)
    dist = as_dict(Sampler(temperature=0.8).distribution(logits))
    expected = reference_softmax(logits, 0.8)
    for token, p in enumerate(expected):
        assert dist.get(token, 0.0) == pytest.approx(p, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("k", [1, 2, 5, 40, 260])
@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_top_k_keeps_k_highest_renormalised(k, temperature):
    logits = random_logits(3)
    dist = Sampler(temperature=temperature, top_k=k).distribution(logits)
    kept = sorted(range(len(logits)), key=lambda i: -logits[i])[:k]
    assert sorted(t for t, _ in dist) == sorted(kept)
    full = reference_softmax(logits, temperature)
    mass = math.fsum(full[i] for i in kept)
    for token, prob in dist:
        assert prob == pytest.approx(full[token] / mass, rel=1e-9)


def test_top_k_ties_at_the_boundary_keep_lowest_ids():
    logits = [0.0, 1.0, 2.0, 1.0, 1.0, 1.0]
    dist = Sampler(temperature=1.0, top_k=3).distribution(logits)
    assert [t for t, _ in dist] == [2, 1, 3]


def test_top_k_at_least_vocab_is_off():
    logits = [0.3, 0.1, 0.2]
    assert Sampler(temperature=1.0, top_k=3).distribution(logits) == Sampler(temperature=1.0).distribution(logits)
    assert Sampler(temperature=1.0, top_k=99).distribution(logits) == Sampler(temperature=1.0).distribution(logits)


def logits_for(probs):
    return [math.log(p) for p in probs]


def test_top_p_keeps_smallest_set_reaching_p():
    logits = logits_for([0.1, 0.4, 0.2, 0.3])
    dist = Sampler(temperature=1.0, top_p=0.65).distribution(logits)
    assert [t for t, _ in dist] == [1, 3]  # 0.4 < 0.65 <= 0.4 + 0.3
    assert dist[0][1] == pytest.approx(0.4 / 0.7, rel=1e-12)
    assert dist[1][1] == pytest.approx(0.3 / 0.7, rel=1e-12)


def test_top_p_boundary_hit_exactly_stops_there():
    # Four equal tokens: mass 0.25 each, exactly representable.
    dist = Sampler(temperature=1.0, top_p=0.5).distribution([0.0, 0.0, 0.0, 0.0])
    assert dist == [(0, 0.5), (1, 0.5)]
    # Through logarithms, where the rounded cumulative mass lands a hair below
    # 0.8 (and 10/13): the boundary must still count as reached.
    dist = Sampler(temperature=1.0, top_p=0.8).distribution(logits_for([0.2, 0.35, 0.45]))
    assert [t for t, _ in dist] == [2, 1]
    dist = Sampler(temperature=1.0, top_p=10 / 13).distribution(logits_for([3 / 13, 4 / 13, 6 / 13]))
    assert [t for t, _ in dist] == [2, 1]
    dist = Sampler(temperature=1.0, top_p=0.8).distribution(logits_for([0.5, 0.3, 0.2]))
    assert [t for t, _ in dist] == [0, 1]


def test_top_p_just_above_boundary_takes_one_more():
    logits = logits_for([0.5, 0.3, 0.2])
    dist = Sampler(temperature=1.0, top_p=0.80001).distribution(logits)
    assert [t for t, _ in dist] == [0, 1, 2]


@pytest.mark.parametrize("top_p", [1e-9, 0.01, 0.4])
def test_top_p_always_keeps_at_least_one_token(top_p):
    logits = logits_for([0.1, 0.45, 0.45])
    dist = Sampler(temperature=1.0, top_p=top_p).distribution(logits)
    assert dist == [(1, 1.0)]  # tie between 1 and 2: lowest id first
    assert Sampler(temperature=1.0, top_p=top_p, seed=4).sample(logits) == 1


@pytest.mark.parametrize("top_p", [0.3, 0.6, 0.9, 0.99])
def test_top_p_on_full_vocabulary_matches_reference(top_p):
    logits = random_logits(5)
    dist = Sampler(temperature=0.8, top_p=top_p).distribution(logits)
    full = reference_softmax(logits, 0.8)
    order = sorted(range(len(full)), key=lambda i: (-full[i], i))
    mass, kept = 0.0, []
    for i in order:
        kept.append(i)
        mass += full[i]
        if mass >= top_p:
            break
    assert [t for t, _ in dist] == kept
    total = math.fsum(full[i] for i in kept)
    for token, prob in dist:
        assert prob == pytest.approx(full[token] / total, rel=1e-9)


def test_top_p_on_flat_distribution():
    dist = Sampler(temperature=1.0, top_p=0.1).distribution([0.0] * 100)
    assert [t for t, _ in dist] == list(range(10))


def test_top_k_then_top_p():
    logits = logits_for([0.05, 0.35, 0.1, 0.25, 0.25])
    # top-k 3 keeps 0.35, 0.25, 0.25 (mass 0.85); renormalised 0.41, 0.29, 0.29.
    dist = Sampler(temperature=1.0, top_k=3, top_p=0.6).distribution(logits)
    assert [t for t, _ in dist] == [1, 3]
    assert dist[0][1] == pytest.approx(0.35 / 0.6, rel=1e-12)


def test_masked_tokens_have_zero_probability():
    logits = [0.0, -INF, 1.0, -INF]
    for sampler in (Sampler(temperature=1.0), Sampler(temperature=1.0, top_k=3), Sampler(temperature=1.0, top_p=0.99)):
        dist = sampler.distribution(logits)
        assert {t for t, _ in dist} == {0, 2}
        assert {sampler.sample(logits) for _ in range(200)} <= {0, 2}


@pytest.mark.parametrize(
    "logits, temperature",
    [
        ([800.0, 799.0, 790.0], 1.0),  # exp would overflow without shifting
        ([2.0, 1.0, 0.0], 0.001),  # so would 2 / 0.001
        ([-900.0, -901.0, -950.0], 1.0),  # exp would underflow to zero
        ([1e308, 1e308, 0.0], 1.0),  # the sum of the logits overflows
    ],
)
def test_extreme_logits_are_handled_stably(logits, temperature):
    dist = as_dict(Sampler(temperature=temperature).distribution(logits))
    expected = reference_softmax(logits, temperature)
    for token, p in enumerate(expected):
        assert dist.get(token, 0.0) == pytest.approx(p, rel=1e-9, abs=1e-300)
    assert Sampler(temperature=temperature, seed=0).sample(logits) in dist


# --- empirical frequencies ---------------------------------------------------


def assert_frequencies_match(sampler, logits, draws=20_000):
    """Every token's frequency within 4.5 standard errors of its probability, nothing outside the support."""
    dist = sampler.distribution(logits)
    counts = Counter(sampler.sample(logits) for _ in range(draws))
    support = {t for t, _ in dist}
    assert set(counts) <= support
    for token, p in dist:
        standard_error = math.sqrt(p * (1.0 - p) / draws)
        assert abs(counts[token] / draws - p) <= 4.5 * standard_error + 1e-12, (token, p, counts[token])
    # Chi-square over tokens with an expected count of at least 5, as a whole-distribution check.
    cells = [(counts[t], p * draws) for t, p in dist if p * draws >= 5]
    chi2 = sum((observed - expected) ** 2 / expected for observed, expected in cells)
    dof = max(len(cells) - 1, 1)
    assert chi2 < dof + 6 * math.sqrt(2 * dof)  # far beyond the 99.9th percentile


@pytest.mark.parametrize(
    "settings",
    [
        dict(temperature=1.0),
        dict(temperature=0.7),
        dict(temperature=1.3, top_k=5),
        dict(temperature=1.0, top_p=0.8),
        dict(temperature=0.9, top_k=8, top_p=0.7),
    ],
)
def test_empirical_frequencies_match_distribution(settings):
    logits = random_logits(6, n=12, scale=1.0)
    assert_frequencies_match(Sampler(seed=1234, **settings), logits)


def test_empirical_frequencies_on_full_vocabulary():
    logits = random_logits(7, n=261, scale=2.0)
    assert_frequencies_match(Sampler(temperature=1.0, top_p=0.5, seed=99), logits)


# --- reproducibility ---------------------------------------------------------


@pytest.mark.parametrize(
    "settings", [dict(temperature=1.0), dict(temperature=0.8, top_k=10), dict(temperature=0.8, top_p=0.9)]
)
def test_same_seed_same_samples(settings):
    logits = random_logits(8, n=50, scale=1.0)
    a, b = Sampler(seed=42, **settings), Sampler(seed=42, **settings)
    seq_a = [a.sample(logits) for _ in range(200)]
    seq_b = [b.sample(logits) for _ in range(200)]
    assert seq_a == seq_b
    c = Sampler(seed=43, **settings)
    assert [c.sample(logits) for _ in range(200)] != seq_a


def test_samplers_do_not_share_a_generator():
    logits = random_logits(9, n=50, scale=1.0)
    a, b = Sampler(temperature=1.0, seed=5), Sampler(temperature=1.0, seed=5)
    random.seed(0)  # the global generator must not matter
    seq_a = [a.sample(logits) for _ in range(50)]
    random.random()
    seq_b = [b.sample(logits) for _ in range(50)]
    assert seq_a == seq_b


# --- invalid input -----------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(temperature=-0.1), "temperature"),
        (dict(temperature=NAN), "temperature"),
        (dict(temperature=INF), "temperature"),
        (dict(temperature=1e-320), "temperature"),
        (dict(top_k=-1), "top_k"),
        (dict(top_k=2.5), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
        (dict(top_p=NAN), "top_p"),
    ],
)
def test_invalid_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Sampler(**kwargs)


SAMPLERS = [
    Sampler(),
    Sampler(temperature=1.0),
    Sampler(temperature=0.5),
    Sampler(temperature=1.0, top_k=2),
    Sampler(temperature=1.0, top_p=0.5),
    Sampler(temperature=1.0, top_k=2, top_p=0.5),
]


@pytest.mark.parametrize("sampler", SAMPLERS, ids=repr)
@pytest.mark.parametrize(
    "logits, message",
    [
        ([0.0, NAN, 1.0], "NaN"),
        ([NAN, 0.0, 1.0], "NaN"),
        ([0.0, 1.0, NAN], "NaN"),
        ([NAN, -INF, INF], "NaN"),
        ([-INF, -INF, -INF], "-inf"),
        ([0.0, INF, 1.0], r"\+inf"),
        ([], "empty"),
    ],
)
def test_bad_logits_raise_clearly(sampler, logits, message):
    with pytest.raises(ValueError, match=message):
        sampler.sample(logits)
    with pytest.raises(ValueError, match=message):
        sampler.distribution(logits)


@pytest.mark.parametrize("logits", [[0.0, NAN], [-INF, -INF], [INF, 0.0]])
def test_bad_logits_raise_in_module_functions(logits):
    with pytest.raises(ValueError):
        softmax(logits)
    with pytest.raises(ValueError):
        top_tokens(logits, 2)


# --- softmax and top_tokens ---------------------------------------------------


def test_softmax_is_stable_and_normalised():
    probs = softmax([1000.0, 1001.0, -INF])
    assert probs[2] == 0.0
    assert probs[1] == pytest.approx(1 / (1 + math.exp(-1)), rel=1e-12)
    assert math.fsum(probs) == pytest.approx(1.0)


def test_top_tokens_matches_softmax():
    logits = random_logits(10)
    probs = reference_softmax(logits)
    expected = sorted(range(len(logits)), key=lambda i: -probs[i])[:3]
    top = top_tokens(logits, 3)
    assert [t for t, _ in top] == expected
    for token, p in top:
        assert p == pytest.approx(probs[token], rel=1e-9)


def test_top_tokens_edge_cases():
    assert top_tokens([0.0, 1.0, 1.0], 2) == [
        (1, pytest.approx(0.4223, abs=1e-4)),
        (2, pytest.approx(0.4223, abs=1e-4)),
    ]
    assert [t for t, _ in top_tokens([0.0, 1.0], 5)] == [1, 0]
    assert top_tokens([0.0, 1.0], 0) == []
    big = top_tokens([1000.0, 999.0], 1)
    assert big[0][0] == 0 and big[0][1] == pytest.approx(1 / (1 + math.exp(-1)))


# --- the list path's tokens are frozen -------------------------------------------


GOLDEN = [
    (
        dict(temperature=1.0),
        [75, 36, 163, 36, 147, 88, 16, 124, 16, 115, 29, 36, 108, 163, 36, 36, 163, 235, 163, 89, 268, 16, 163, 48],
    ),
    (
        dict(temperature=0.7),
        [36, 36, 163, 36, 163, 88, 36, 163, 16, 120, 36, 36, 120, 163, 36, 36, 163, 163, 163, 115, 186, 36, 163, 36],
    ),
    (
        dict(temperature=0.8, top_k=10),
        [
            163,
            163,
            36,
            163,
            36,
            163,
            163,
            36,
            163,
            163,
            163,
            163,
            163,
            16,
            163,
            163,
            36,
            115,
            36,
            163,
            186,
            163,
            120,
            163,
        ],
    ),
    (
        dict(temperature=0.8, top_p=0.9),
        [
            163,
            163,
            36,
            163,
            36,
            163,
            163,
            36,
            163,
            163,
            163,
            163,
            163,
            120,
            163,
            163,
            36,
            83,
            36,
            163,
            89,
            163,
            88,
            163,
        ],
    ),
    (
        dict(temperature=1.2, top_k=20, top_p=0.8),
        [163, 163, 16, 163, 36, 163, 163, 36, 163, 36, 163, 163, 36, 88, 163, 163, 36, 154, 36, 36, 186, 163, 88, 163],
    ),
]


@pytest.mark.parametrize("settings, tokens", GOLDEN, ids=[str(s) for s, _ in GOLDEN])
def test_list_path_gives_the_tokens_it_always_has(settings, tokens):
    # the lab's golden transcripts depend on these: a list and a seed must keep giving the same tokens
    logits = random_logits(11, n=300, scale=2.0)
    sampler = Sampler(seed=7, **settings)
    assert [sampler.sample(logits) for _ in range(24)] == tokens


# --- min-p -------------------------------------------------------------------------


def test_min_p_keeps_tokens_at_least_min_p_times_the_top():
    logits = logits_for([0.5, 0.1, 0.2, 0.15, 0.05])
    dist = Sampler(temperature=1.0, min_p=0.25).distribution(logits)
    assert [t for t, _ in dist] == [0, 2, 3]  # 0.1 and 0.05 < 0.25 * 0.5
    for token, prob in dist:
        assert prob == pytest.approx([0.5, 0.1, 0.2, 0.15, 0.05][token] / 0.85, rel=1e-12)


def test_min_p_comes_after_top_k_and_top_p():
    logits = logits_for([0.5, 0.1, 0.2, 0.15, 0.05])
    # top-p 0.6 keeps 0.5 and 0.2; min-p 0.5 then drops 0.2 (< 0.5 * 0.5)
    assert Sampler(temperature=1.0, top_p=0.6, min_p=0.5).distribution(logits) == [(0, 1.0)]
    assert [t for t, _ in Sampler(temperature=1.0, top_k=2, min_p=0.3).distribution(logits)] == [0, 2]
    # at temperature 2 the weights are square roots: top-p 0.6 needs 0.71, 0.45 and 0.39 (of 2.08),
    # and min-p 0.6 keeps those at least 0.6 * 0.71 = 0.42
    assert [t for t, _ in Sampler(temperature=2.0, top_p=0.6).distribution(logits)] == [0, 2, 3]
    assert [t for t, _ in Sampler(temperature=2.0, top_p=0.6, min_p=0.6).distribution(logits)] == [0, 2]


def test_min_p_one_keeps_only_the_top_and_its_ties():
    assert Sampler(temperature=1.0, min_p=1.0).distribution([0.0, 2.0, 1.0, 2.0]) == [(1, 0.5), (3, 0.5)]


@pytest.mark.parametrize("kwargs", [dict(min_p=-0.1), dict(min_p=1.5), dict(min_p=NAN)])
def test_invalid_min_p_raises(kwargs):
    with pytest.raises(ValueError, match="min_p"):
        Sampler(**kwargs)


def test_min_p_frequencies():
    logits = random_logits(12, n=40, scale=1.5)
    assert_frequencies_match(Sampler(temperature=0.9, min_p=0.1, seed=5), logits)


# --- arrays: numpy and torch -----------------------------------------------------------
#
# Three ways in: a numpy array, a CPU tensor (read through a numpy view, drawing from a
# torch.Generator), and a tensor through the device kernels that a GPU runs, forced on the CPU.

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import decodeloop.sampling.torch_backend as torch_backend
from decodeloop.sampling import explain

ARRAY_KINDS = ["numpy", "torch", "torch-device-kernels"]


@pytest.fixture(params=ARRAY_KINDS)
def kind(request, monkeypatch):
    if request.param.startswith("torch"):
        pytest.importorskip("torch")
    monkeypatch.setattr(torch_backend, "_CPU_VIA_NUMPY", request.param != "torch-device-kernels")
    return request.param


def as_array(values, kind, dtype="float64"):
    if kind == "numpy":
        return np.asarray(values, dtype=dtype)
    import torch

    return torch.tensor(values, dtype=getattr(torch, dtype))


def kept(dist):
    return [t for t, _ in dist]


def assert_same_distribution(got, expected, rel):
    assert kept(got) == kept(expected)
    for (_, p), (_, q) in zip(got, expected):
        assert p == pytest.approx(q, rel=rel, abs=1e-300)


def assert_close_distribution(got, expected, rel):
    """float32 weights: near-equal weights may round equal (then lowest id first) and a token
    within rounding of the cut may fall on either side; everything else must agree."""
    got_d, expected_d = dict(got), dict(expected)
    edge = min(expected_d.values())
    for token in set(got_d) ^ set(expected_d):
        assert expected_d.get(token, got_d.get(token)) <= edge * (1 + 10 * rel), token
    for token in set(got_d) & set(expected_d):
        assert got_d[token] == pytest.approx(expected_d[token], rel=rel * (1 + len(got_d) ** 0.5))
    probs = [p for _, p in got]
    assert probs == sorted(probs, reverse=True)


def boundaries_clear(values, temperature, top_k, top_p, min_p, rel):
    """False when a top-p or min-p cut lies within `rel` of a token: rounding could move it."""
    top = max(values)
    weights = [math.exp((v - top) / temperature) if v > -INF else 0.0 for v in values]
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    if top_k:
        order = order[:top_k]
    total = math.fsum(weights[i] for i in order)
    if top_p < 1.0:
        cum = 0.0
        for i in order:
            cum += weights[i]
            if abs(cum - top_p * total) <= rel * total:
                return False
    return not (min_p > 0.0 and any(abs(weights[i] - min_p) <= rel for i in order))


# Logits on a grid of 1/64: exact in float32 and float64 alike, distinct values far apart
# (so no rounding can reorder them), and plenty of exact ties.
grid_logits = st.lists(
    st.one_of(st.integers(-640, 640).map(lambda k: k / 64.0), st.just(-INF)), min_size=1, max_size=120
).filter(lambda xs: max(xs) > -INF)
sampler_settings = st.fixed_dictionaries(
    dict(
        temperature=st.sampled_from([0.3, 0.7, 1.0, 1.6]),
        top_k=st.one_of(st.just(0), st.integers(1, 130)),
        top_p=st.one_of(st.just(1.0), st.floats(0.05, 1.0)),
        min_p=st.one_of(st.just(0.0), st.floats(0.0, 1.0)),
    )
)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    values=grid_logits,
    config=sampler_settings,
    kind=st.sampled_from(ARRAY_KINDS),
    dtype=st.sampled_from(["float64", "float32"]),
)
def test_array_kept_set_equals_list_path(values, config, kind, dtype):
    if kind.startswith("torch"):
        pytest.importorskip("torch")
    rel = 1e-9 if dtype == "float64" else 1e-4
    assume(boundaries_clear(values, rel=rel, **config))
    sampler = Sampler(**config)
    expected = sampler.distribution(values)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch_backend, "_CPU_VIA_NUMPY", kind != "torch-device-kernels")
        got = sampler.distribution(as_array(values, kind, dtype))
        assert_same_distribution(got, expected, rel=1e-9 if dtype == "float64" else 1e-5)
        token = Sampler(seed=1, **config).sample(as_array(values, kind, dtype))
        assert token in set(kept(expected))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(values=grid_logits, kind=st.sampled_from(ARRAY_KINDS), dtype=st.sampled_from(["float64", "float32"]))
def test_greedy_equal_across_lists_and_arrays(values, kind, dtype):
    if kind.startswith("torch"):
        pytest.importorskip("torch")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch_backend, "_CPU_VIA_NUMPY", kind != "torch-device-kernels")
        assert Sampler().sample(as_array(values, kind, dtype)) == Sampler().sample(values)
        assert Sampler().distribution(as_array(values, kind, dtype)) == [(Sampler().sample(values), 1.0)]


def test_greedy_equal_on_random_real_vocabularies(kind):
    rng = np.random.default_rng(1)
    for vocab in (49_152, 151_936):
        x = (rng.standard_normal(vocab) * 3.0).astype(np.float32)
        x[[7, 90_000 % vocab]] = x.max() + 1.0  # a tie for the top: the lowest id wins
        expected = Sampler().sample(x.tolist())
        assert expected == 7
        assert Sampler().sample(as_array(x, kind, "float32")) == expected


@pytest.mark.parametrize("vocab", [49_152, 151_936])
@pytest.mark.parametrize(
    "config",
    [
        dict(temperature=0.8, top_p=0.9),
        dict(temperature=0.8, top_k=50),
        dict(temperature=0.8, top_k=50, top_p=0.9, min_p=0.05),
        dict(temperature=0.8, min_p=0.05),
        dict(temperature=1.5, top_p=0.8),  # flat: a nucleus of thousands, bigger than any first guess
        dict(temperature=0.3, top_p=0.95),  # peaked: a nucleus of a few tokens
    ],
    ids=str,
)
def test_array_kept_set_equals_list_path_on_real_vocabularies(vocab, config, kind):
    rng = np.random.default_rng(vocab)
    x = rng.standard_normal(vocab) * 3.0
    sampler = Sampler(**config)
    expected = sampler.distribution(x.tolist())
    assert_same_distribution(sampler.distribution(as_array(x, kind)), expected, rel=1e-9)
    # float32, as a model gives them: the same kept set, probabilities to float32 precision
    x32 = x.astype(np.float32)
    expected32 = sampler.distribution(x32.tolist())
    assert_close_distribution(sampler.distribution(as_array(x32, kind, "float32")), expected32, rel=1e-5)


@pytest.mark.parametrize("k", [1, 3, 50, 1000])
def test_top_k_with_ties_at_the_cut_keeps_the_lowest_ids(kind, k):
    # logits on a coarse grid, as bfloat16 gives them: many tokens tie at the k-th value
    rng = np.random.default_rng(k)
    values = (np.round(rng.standard_normal(151_936) * 12.0) / 4.0).tolist()
    sampler = Sampler(temperature=1.0, top_k=k)
    expected = sampler.distribution(values)
    assert len(expected) == k
    assert_same_distribution(sampler.distribution(as_array(values, kind)), expected, rel=1e-9)
    _prob, top = explain(as_array(values, kind), 0, min(k, 10))
    assert [t for t, _ in top] == [t for t, _ in explain(values, 0, min(k, 10))[1]]


def test_explain_on_mostly_masked_logits(kind):
    values = [-INF] * 60_000
    values[31_337] = 2.0
    values[5] = 1.0
    prob, top = explain(as_array(values, kind), 31_337, 3)
    assert prob == pytest.approx(1 / (1 + math.exp(-1)))
    assert [t for t, _ in top] == [31_337, 5, 0]  # then the lowest id among the masked
    assert top[2][1] == 0.0


@pytest.mark.parametrize(
    "config",
    [
        dict(temperature=1.0),
        dict(temperature=0.7, top_k=5),
        dict(temperature=1.0, top_p=0.8),
        dict(temperature=0.9, top_k=8, top_p=0.7, min_p=0.1),
        dict(temperature=1.2, min_p=0.2),
    ],
    ids=str,
)
def test_array_frequencies_match_distribution(config, kind):
    values = random_logits(6, n=12, scale=1.0)
    sampler = Sampler(seed=1234, **config)
    assert_frequencies_match(sampler, as_array(values, kind), draws=20_000 if kind != "torch-device-kernels" else 5_000)


def test_array_frequencies_on_a_large_vocabulary(kind):
    # drawn through per-block totals: most of the mass spread over 12,000 tokens
    rng = np.random.default_rng(3)
    values = rng.standard_normal(12_000) * 0.5
    values[:10] += 8.0  # ten heavy tokens, checked one by one; the rest checked as a whole
    x = as_array(values, kind)
    sampler = Sampler(temperature=1.0, seed=11)
    probs = dict(sampler.distribution(x))
    draws = 4_000 if kind == "torch-device-kernels" else 10_000
    counts = Counter(sampler.sample(x) for _ in range(draws))
    for token in range(10):
        p = probs[token]
        assert abs(counts[token] / draws - p) <= 4.5 * math.sqrt(p * (1 - p) / draws)
    rest = sum(probs[t] for t in range(10, 12_000))
    observed = sum(c for t, c in counts.items() if t >= 10) / draws
    assert abs(observed - rest) <= 4.5 * math.sqrt(rest * (1 - rest) / draws)


@pytest.mark.parametrize(
    "config",
    [
        dict(temperature=1.0),
        dict(temperature=0.8, top_k=10),
        dict(temperature=0.8, top_p=0.9),
        dict(temperature=0.8, min_p=0.05),
    ],
    ids=str,
)
def test_array_same_seed_same_tokens(config, kind):
    x = as_array(random_logits(8, n=5000, scale=1.0), kind, "float32")
    a, b = Sampler(seed=42, **config), Sampler(seed=42, **config)
    seq_a = [a.sample(x) for _ in range(40)]
    assert seq_a == [b.sample(x) for _ in range(40)]
    c = Sampler(seed=43, **config)
    assert [c.sample(x) for _ in range(40)] != seq_a


def test_array_draws_leave_the_list_generator_alone(kind):
    values = random_logits(9, n=50, scale=1.0)
    x = as_array(values, kind)
    plain, mixed = Sampler(temperature=1.0, seed=5), Sampler(temperature=1.0, seed=5)
    expected = [plain.sample(values) for _ in range(30)]
    got = []
    for _ in range(30):
        mixed.sample(x)
        got.append(mixed.sample(values))
    assert got == expected


def test_torch_draws_come_from_a_torch_generator_per_device():
    torch = pytest.importorskip("torch")
    x = torch.tensor(random_logits(10, n=100, scale=1.0))
    sampler = Sampler(temperature=1.0, seed=3)
    sampler.sample(x)
    ((device, generator),) = sampler._torch_rngs.items()
    assert device == x.device and isinstance(generator, torch.Generator)
    assert generator.initial_seed() == 3


def test_sampling_never_writes_to_the_logits(kind):
    x = as_array(random_logits(13, n=10_000), kind, "float32")
    before = x.clone() if hasattr(x, "clone") else x.copy()
    for config in (dict(), dict(temperature=0.8, top_p=0.9), dict(temperature=0.8, top_k=5, min_p=0.1)):
        Sampler(seed=0, **config).sample(x)
        Sampler(**config).distribution(x)
    explain(x, 3)
    assert (x == before).all()


def test_array_dtypes_and_layouts(kind):
    values = random_logits(14, n=300)
    expected = Sampler().sample(values)
    strided = as_array(values, kind, "float64")[::2]  # a view with a stride, not a copy
    assert Sampler().sample(strided) == Sampler().sample(values[::2])
    (prob, top), (ref_prob, ref_top) = explain(strided, 3, 2), explain(values[::2], 3, 2)
    assert prob == pytest.approx(ref_prob, rel=1e-12) and [t for t, _ in top] == [t for t, _ in ref_top]
    for dtype in ("float64", "float32", "float16"):
        x = as_array(values, kind, dtype)
        assert Sampler().sample(x) == expected
        assert Sampler(temperature=1.0, top_k=3, seed=0).sample(x) in set(
            kept(Sampler(temperature=1.0, top_k=3).distribution(values))
        )
    if kind != "numpy":
        import torch

        x = torch.tensor(values, dtype=torch.bfloat16)
        assert Sampler().sample(x) == Sampler().sample(x.float().tolist())


def reference_explain(values, token, n):
    """Full softmax in float64 and a full sort: the obvious way."""
    probs = reference_softmax(values)
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))[:n]
    return probs[token], [(i, probs[i]) for i in order]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("vocab", [50, 49_152, 151_936])
def test_explain_equals_a_full_sort(kind, dtype, vocab):
    if dtype == "bfloat16" and kind == "numpy":
        pytest.skip("numpy has no bfloat16")
    rng = np.random.default_rng(vocab)
    x = as_array(rng.standard_normal(vocab) * 3.0, kind, dtype)
    values = x.tolist() if kind == "numpy" else x.double().tolist()  # the values the array really holds
    for token, n in ((0, 3), (vocab - 1, 5), (vocab // 2, 1)):
        prob, top = explain(x, token, n)
        ref_prob, ref_top = reference_explain(values, token, n)
        rel = 1e-9 if dtype == "float64" else 1e-5
        assert prob == pytest.approx(ref_prob, rel=rel)
        assert [t for t, _ in top] == [t for t, _ in ref_top]  # bfloat16 and float16 have ties: lowest id first
        for (_, p), (_, q) in zip(top, ref_top):
            assert p == pytest.approx(q, rel=rel)
        assert all(type(t) is int and type(p) is float for t, p in top) and type(prob) is float


def test_explain_and_top_tokens_match_the_list_path(kind):
    values = random_logits(15, n=261)
    x = as_array(values, kind)
    prob, top = explain(x, 17, 4)
    ref_prob, ref_top = explain(values, 17, 4)
    assert prob == pytest.approx(ref_prob, rel=1e-12)
    assert [t for t, _ in top] == [t for t, _ in ref_top]
    assert [t for t, _ in top_tokens(x, 4)] == [t for t, _ in ref_top]
    assert top_tokens(x, 0) == []
    probs = softmax(x)
    assert type(probs) is type(x)
    assert probs.tolist() == pytest.approx(softmax(values), rel=1e-12)


def test_explain_handles_huge_and_tiny_logits(kind):
    for values in ([800.0, 799.0, 790.0], [-900.0, -901.0, -950.0], [1e30, 0.0, -1e30]):
        prob, top = explain(as_array(values, kind), 1, 2)
        ref_prob, ref_top = reference_explain(values, 1, 2)
        assert prob == pytest.approx(ref_prob, rel=1e-9, abs=1e-300)
        assert [t for t, _ in top] == [t for t, _ in ref_top]


BAD_ARRAYS = [
    ([0.0, NAN, 1.0], "NaN"),
    ([NAN, 0.0, 1.0], "NaN"),
    ([NAN, -INF, INF], "NaN"),
    ([-INF, -INF, -INF], "-inf"),
    ([0.0, INF, 1.0], r"\+inf"),
    ([], "empty"),
]


@pytest.mark.parametrize("sampler", SAMPLERS + [Sampler(temperature=1.0, min_p=0.1)], ids=repr)
@pytest.mark.parametrize("values, message", BAD_ARRAYS)
def test_bad_array_logits_raise_clearly(kind, sampler, values, message):
    for vocab_pad in (0, 20_000):  # small, and big enough for the grouped kernels
        if vocab_pad and not values:
            continue
        padded = values + [-INF] * vocab_pad if message == "-inf" else values + [0.0] * vocab_pad
        if message == "NaN" and vocab_pad:
            padded = [0.0] * vocab_pad + values  # the NaN far from the front
        x = as_array(padded, kind)
        with pytest.raises(ValueError, match=message):
            sampler.sample(x)
        with pytest.raises(ValueError, match=message):
            sampler.distribution(x)
        if message != "empty":
            with pytest.raises(ValueError, match=message):
                explain(x, 0)


def test_nan_position_is_reported(kind):
    x = as_array([0.0] * 30_000 + [NAN] + [1.0] * 10, kind)
    with pytest.raises(ValueError, match="first at token 30000"):
        Sampler(temperature=1.0, top_p=0.9).sample(x)


def test_array_shape_is_checked(kind):
    x = as_array([[0.0, 1.0], [1.0, 0.0]], kind)
    with pytest.raises(ValueError, match="1-D"):
        Sampler().sample(x)
    with pytest.raises(ValueError, match="1-D"):
        explain(x, 0)


def test_module_imports_with_the_standard_library_only():
    import subprocess
    import sys

    from conftest import ROOT as root

    code = (
        f"import sys; sys.path.insert(0, {root!r}); import decodeloop.sampling, decodeloop.sampling.processors; "
        "from decodeloop.sampling import Sampler; print(Sampler(temperature=1.0, seed=1).sample([0.0, 1.0]), "
        "'numpy' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[1:] == ["False", "False"]
