"""Logits processors: HF's repetition penalty exactly, bias, forced tokens, never mutating the input."""

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decodeloop.sampling import Sampler, explain
from decodeloop.sampling.processors import ForcedTokens, LogitBias, ProcessorState, RepetitionPenalty, apply, force

INF = float("inf")


def random_logits(seed, n=300, scale=3.0):
    rng = random.Random(seed)
    return [rng.gauss(0.0, scale) for _ in range(n)]


def as_kind(values, kind, dtype="float32"):
    """The same logits as a list, a numpy array or a torch tensor."""
    if kind == "list":
        return list(values)
    if kind == "numpy":
        return np.asarray(values, dtype=dtype)
    torch = pytest.importorskip("torch")
    return torch.tensor(values, dtype=getattr(torch, dtype))


def to_list(logits):
    if isinstance(logits, list):
        return logits
    return logits.tolist()


def snapshot(logits):
    if isinstance(logits, list):
        return list(logits)
    return logits.clone() if hasattr(logits, "clone") else logits.copy()


def same(a, b):
    """Bitwise-equal values (NaN equal to NaN), any kind."""
    a, b = to_list(a), to_list(b)
    return len(a) == len(b) and all(x == y or (x != x and y != y) for x, y in zip(a, b))


KINDS = ["list", "numpy", "torch"]


def state(context, generated=0, step=None, in_call=False):
    return ProcessorState(
        context=list(context),
        generated=generated,
        step=len(context) - generated if step is None else step,
        in_call=in_call,
    )


# --- repetition penalty ----------------------------------------------------------


def hf_repetition_penalty(scores, turn_tokens, penalty):
    """transformers' own processor, on a batch of one."""
    torch = pytest.importorskip("torch")
    logits_process = pytest.importorskip("transformers.generation.logits_process")
    processor = logits_process.RepetitionPenaltyLogitsProcessor(penalty=penalty)
    input_ids = torch.tensor([turn_tokens], dtype=torch.long)
    return processor(input_ids, scores.unsqueeze(0).clone())[0]


@pytest.mark.parametrize("penalty", [1.3, 0.7, 2.0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_repetition_penalty_equals_transformers_exactly(penalty, dtype):
    torch = pytest.importorskip("torch")
    vocab = 1000
    logits = random_logits(1, vocab)
    prompt = [5, 17, 17, 900]
    turn = [3, 3, 17, 42, 999, 0, 42, 500]
    st_ = state(prompt + turn, generated=len(prompt))
    scores = torch.tensor(logits, dtype=getattr(torch, dtype))
    expected = hf_repetition_penalty(scores, turn, penalty)
    got = RepetitionPenalty(penalty)(scores, st_)
    assert torch.equal(got, expected)
    # numpy gives the same numbers in the same dtype; the list path is float64 arithmetic
    got_np = RepetitionPenalty(penalty)(np.asarray(logits, dtype=dtype), st_)
    assert got_np.dtype == np.dtype(dtype)
    assert np.array_equal(got_np, expected.numpy())
    if dtype == "float64":
        assert RepetitionPenalty(penalty)(list(logits), st_) == expected.tolist()


def test_repetition_penalty_semantics_by_hand():
    logits = [2.0, -2.0, 0.0, 4.0, -1.0]
    out = RepetitionPenalty(2.0)(logits, state([0, 3, 1, 4, 0, 2], generated=2))
    # generated this turn: 1, 4, 0, 2; token 3 is prompt only
    assert out == [1.0, -4.0, 0.0, 4.0, -2.0]


def test_repetition_penalty_counts_each_token_once_and_only_this_turn():
    logits = [8.0, 8.0, 8.0]
    out = RepetitionPenalty(2.0)(logits, state([1, 1, 2, 2, 2, 2], generated=2))
    assert out == [8.0, 8.0, 4.0]


@pytest.mark.parametrize("kind", KINDS)
def test_repetition_penalty_off_or_nothing_generated_returns_input(kind):
    logits = as_kind(random_logits(2, 50), kind)
    assert RepetitionPenalty(1.0)(logits, state([1, 2, 3])) is logits
    assert RepetitionPenalty(1.5)(logits, state([1, 2, 3], generated=3)) is logits


def test_repetition_penalty_skips_ids_past_the_vocabulary():
    torch = pytest.importorskip("torch")
    logits = random_logits(3, 10)
    scores = torch.tensor(logits)
    turn = [2, 12, 9]  # 12: an embedding row with no logit
    expected = hf_repetition_penalty(scores, turn, 1.5)
    assert torch.equal(RepetitionPenalty(1.5)(scores, state(turn)), expected)


@pytest.mark.parametrize("penalty", [0.0, -1.0, float("nan"), INF])
def test_repetition_penalty_rejects_bad_penalties(penalty):
    with pytest.raises(ValueError, match="penalty"):
        RepetitionPenalty(penalty)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    logits=st.lists(st.floats(-30, 30, width=32), min_size=1, max_size=80),
    context=st.lists(st.integers(0, 79), max_size=40),
    generated=st.integers(0, 40),
    penalty=st.floats(0.1, 5.0),
)
def test_repetition_penalty_agrees_across_kinds(logits, context, generated, penalty):
    torch = pytest.importorskip("torch")
    st_ = state(context, generated=min(generated, len(context)))
    reference = RepetitionPenalty(penalty)(list(logits), st_)  # float64 arithmetic
    for dtype in ("float64", "float32"):
        a = np.asarray(logits, dtype=dtype)
        t = torch.tensor(logits, dtype=getattr(torch, dtype))
        got_np, got_t = RepetitionPenalty(penalty)(a, st_), RepetitionPenalty(penalty)(t, st_)
        assert np.array_equal(got_np, got_t.numpy())
        if dtype == "float64":
            assert got_np.tolist() == reference


# --- bias and forced tokens ----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_logit_bias_adds_and_bans(kind):
    logits = as_kind([0.0, 1.0, 2.0, 3.0], kind, "float64")
    out = LogitBias({0: 5.0, 3: -INF})(logits, state([]))
    assert to_list(out) == [5.0, 1.0, 2.0, -INF]
    assert Sampler().sample(out) == 0
    assert LogitBias({})(logits, state([])) is logits


def test_logit_bias_keeps_dtype_and_device():
    torch = pytest.importorskip("torch")
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        logits = torch.zeros(5, dtype=dtype)
        out = LogitBias({1: 0.5})(logits, state([]))
        assert out.dtype == dtype and out.device == logits.device and out[1].item() == 0.5
    out = LogitBias({1: 0.5})(np.zeros(5, dtype=np.float16), state([]))
    assert out.dtype == np.float16 and out[1] == 0.5


@pytest.mark.parametrize("bias", [{-1: 1.0}, {1.5: 1.0}, {1: float("nan")}, {1: INF}])
def test_logit_bias_rejects_bad_entries(bias):
    with pytest.raises(ValueError):
        LogitBias(bias)


@pytest.mark.parametrize("kind", KINDS)
def test_force_leaves_one_token(kind):
    logits = as_kind(random_logits(4, 100), kind)
    out = force(logits, 37)
    values = to_list(out)
    assert values[37] == 0.0 and all(v == -INF for i, v in enumerate(values) if i != 37)
    assert Sampler().sample(out) == 37
    assert Sampler(temperature=1.5, top_p=0.5, seed=1).sample(out) == 37
    prob, top = explain(out, 37)
    assert prob == 1.0 and top[0] == (37, 1.0)


@pytest.mark.parametrize("token", [-1, 100, 2.0, True])
def test_force_rejects_ids_outside_the_vocabulary(token):
    with pytest.raises(ValueError, match="force"):
        force([0.0] * 100, token)


def test_forced_tokens_by_step():
    processor = ForcedTokens([4, 2])
    logits = random_logits(5, 10)
    assert Sampler().sample(processor(logits, state([9, 9], generated=2, step=0))) == 4
    assert Sampler().sample(processor(logits, state([9, 9, 4], generated=2, step=1))) == 2
    assert processor(logits, state([9, 9, 4, 2], generated=2, step=2)) is logits


# --- apply and the no-mutation contract ---------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_apply_with_no_processors_returns_the_same_object(kind):
    logits = as_kind(random_logits(6, 20), kind)
    assert apply([], logits, state([1])) is logits
    assert apply((), logits, state([1])) is logits


def test_apply_runs_in_order():
    logits = [1.0, 1.0, 1.0]
    st_ = state([1])
    bias_then_penalty = apply([LogitBias({1: 1.0}), RepetitionPenalty(2.0)], logits, st_)
    penalty_then_bias = apply([RepetitionPenalty(2.0), LogitBias({1: 1.0})], logits, st_)
    assert bias_then_penalty == [1.0, 1.0, 1.0]
    assert penalty_then_bias == [1.0, 1.5, 1.0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_processors_never_mutate_their_input(kind, dtype):
    logits = as_kind(random_logits(7, 200), kind, dtype)
    before = snapshot(logits)
    st_ = state([1, 2, 3, 2, 150, 199], generated=1, step=0)
    processors = [RepetitionPenalty(1.8), LogitBias({0: 2.0, 150: -INF}), ForcedTokens([3])]
    for processor in processors:
        out = processor(logits, st_)
        assert out is not logits
        assert type(out) is type(logits)
        assert same(logits, before)
    out = apply(processors, logits, st_)
    assert same(logits, before)
    assert Sampler().sample(out) == 3


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_processors_leave_a_read_only_array_alone(kind):
    # a model's cached logits may be a read-only view: anything that wrote to it would raise
    logits = as_kind(random_logits(8, 64), kind)
    if kind == "numpy":
        logits.flags.writeable = False
    st_ = state([1, 2, 3], generated=0)
    out = apply([RepetitionPenalty(1.3), LogitBias({5: 1.0})], logits, st_)
    assert not same(out, logits)


def test_processor_state_turn_tokens():
    st_ = ProcessorState(context=[1, 2, 3, 4], generated=2, in_call=True, step=2)
    assert st_.turn_tokens == [3, 4]
    assert math.isclose(RepetitionPenalty(2.0)([2.0] * 5, st_)[3], 1.0)
