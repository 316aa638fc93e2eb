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
    assert top_tokens([0.0, 1.0, 1.0], 2) == [(1, pytest.approx(0.4223, abs=1e-4)), (2, pytest.approx(0.4223, abs=1e-4))]
    assert [t for t, _ in top_tokens([0.0, 1.0], 5)] == [1, 0]
    assert top_tokens([0.0, 1.0], 0) == []
    big = top_tokens([1000.0, 999.0], 1)
    assert big[0][0] == 0 and big[0][1] == pytest.approx(1 / (1 + math.exp(-1)))
