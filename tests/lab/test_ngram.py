"""The n-gram model: exact Witten-Bell probabilities, no zeros, the cache contract, and the
error path it exercises through the real harness."""

import json
import math
import subprocess
import sys

import pytest
from conftest import ROOT

from decodeloop.formats.lab import CharTokenizer
from decodeloop.lab.ngram import NgramModel
from decodeloop.lab.train.ngram import count

V = CharTokenizer.vocab_size


def probs(model, text):
    return [math.exp(x) for x in model.logits_after([ord(c) for c in text])]


def test_witten_bell_by_hand():
    # tokens as characters: "abab" with order 2 counts the events a->b, b->a, a->b
    model = NgramModel(count(["abab"], 2), V)
    p = probs(model, "a")
    # order 0 (no context): b 2 times, a once; 2 distinct, 3 events -> lambda = 2/5
    p0 = {w: (c + 2 / V) / (3 + 2) for w, c in {"a": 1, "b": 2}.items()}
    # order 1, context "a": b twice; 1 distinct -> P = (2 + 1 * P0(b)) / 3
    assert p[ord("b")] == pytest.approx((2 + p0["b"]) / 3)
    assert p[ord("a")] == pytest.approx((0 + p0["a"]) / 3)
    assert p[ord("z")] == pytest.approx((2 / V / 5) / 3)
    assert sum(p) == pytest.approx(1.0)


def test_unseen_context_backs_off_and_nothing_is_impossible():
    model = NgramModel(count(["hello world"], 4), V)
    for context in ("hel", "zzz", "", "o w"):
        p = probs(model, context)
        assert sum(p) == pytest.approx(1.0) and min(p) > 0


def test_trained_model_is_a_distribution_everywhere():
    tokenizer = CharTokenizer()
    model = NgramModel.trained(tokenizer, order=6, episodes=200)
    context = tokenizer.encode_markup("<|user|>What's the weather in Polson, MT?<|assistant|>[call get_")
    p = [math.exp(x) for x in model.forward(context)]
    assert sum(p) == pytest.approx(1.0) and min(p) > 0
    # the corpus's tools are what follows "[call get_" most
    best = max(range(V), key=p.__getitem__)
    assert tokenizer.token_text(best) in ("w", "f", "t")


def test_cache_contract():
    tokenizer = CharTokenizer()
    model = NgramModel.trained(tokenizer, order=5, episodes=100)
    fresh = NgramModel(model.counts, V)
    context = tokenizer.encode("What's the weather")
    model.forward(context)
    assert model.last_computed == len(context)
    assert model.forward(context + [70]) == fresh.forward(context + [70])
    assert model.last_computed == 1


def run_ngram_script(*args):
    p = subprocess.run(
        [sys.executable, "-S", "decode_loop_ngram.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert p.returncode in (0, 3, 4), p.stderr  # answered, gave up, or the token cap
    return p, [json.loads(line) for line in p.stdout.splitlines()]


def test_error_path_end_to_end_with_order_4():
    """Parse error -> error tool message -> retry -> an outcome, with the documented default seed."""
    _, events = run_ngram_script("--order", "4", "--json")
    stops = [e["reason"] for e in events if e["event"] == "stop"]
    errors = [e for e in events if e["event"] == "tool_error"]
    injects = [e for e in events if e["event"] == "inject"]
    assert errors and errors[0]["stage"] == "parse"
    assert injects[0]["text"] == "<|tool|>error: " + errors[0]["message"] + "<|assistant|>"
    # the model wrote another call after the error: the retry
    assert stops.count("tool_call") >= 2
    assert events[-1]["event"] == "done" and events[-1]["reason"] in ("eos", "max_tokens", "max_retries")


def test_high_order_writes_well_formed_calls():
    _, events = run_ngram_script("--order", "12", "--json", "--temperature", "0")
    calls = [e for e in events if e["event"] == "tool_call"]
    assert calls and calls[0]["name"] in ("get_weather", "get_forecast", "get_time_zone", "convert")


def test_trace_shows_the_malformed_call_and_the_message():
    p = subprocess.run(
        [sys.executable, "-S", "decode_loop_ngram.py", "--order", "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert '✗ parse error in "[call' in p.stdout and "the model is told: error: " in p.stdout


def test_order_0_is_refused_not_run_as_order_8():
    for order in ("0", "-1"):
        p = subprocess.run(
            [sys.executable, "-S", "decode_loop_ngram.py", "--order", order],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (
            p.returncode == 2
            and "argument --order: expected a whole number from 1 to 32" in p.stderr
            and p.stdout == ""
        )


def test_the_trace_says_what_the_ngrams_cached_count_is():
    p = subprocess.run(
        [sys.executable, "-S", "decode_loop_ngram.py", "--order", "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    [note] = [line for line in p.stdout.splitlines() if line.startswith("· ngram:")]
    assert "no KV cache" in note and "reads the last 3 tokens" in note and "did not re-read" in note
    quiet = subprocess.run(
        [sys.executable, "-S", "decode_loop_ngram.py", "--order", "4", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "KV cache" not in quiet.stdout + quiet.stderr
