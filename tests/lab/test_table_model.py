"""The table model obeys the cache contract every model shares."""

import random

from decodeloop.decode.model import common_prefix_len
from decodeloop.formats.lab import CharTokenizer
from decodeloop.lab.table import TableModel

TABLE = {
    "<|user|>hi<|assistant|>": "hello there<|eos|>",
    "<|assistant|>": "what?<|eos|>",
    "there": " friend",
}


def fresh():
    t = CharTokenizer()
    return t, TableModel(t, TABLE)


def greedy(model, context, n):
    out = []
    for _ in range(n):
        logits = model.forward(context + out)
        token = max(range(len(logits)), key=logits.__getitem__)
        out.append(token)
        if token == 0:
            break
    return out


def test_follows_the_table_and_longest_key_wins():
    t, m = fresh()
    out = greedy(m, t.encode_markup("<|system|>x<|user|>hi<|assistant|>"), 40)
    # "there" is a key too: at the end of "hello there" its continuation takes over,
    # so the turn ends "hello there friend" without the first entry's <|eos|>
    assert t.decode(out) == "hello there friend<|eos|>"


def test_no_match_ends_the_turn():
    t, m = fresh()
    logits = m.forward(t.encode("nothing matches here"))
    assert max(range(len(logits)), key=logits.__getitem__) == t.eos_id


def test_cache_serves_prefix_and_computes_only_new_positions():
    t, m = fresh()
    ctx = t.encode_markup("<|user|>hi<|assistant|>hel")
    m.forward(ctx)
    assert m.last_computed == len(ctx)
    m.forward(ctx + t.encode("l"))
    assert m.last_computed == 1
    m.forward(ctx + t.encode("lo wor"))
    assert m.last_computed == 5  # "l" was already cached
    # divergence: the cache drops back to the common prefix
    m.forward(ctx[:-2] + t.encode("XYZ"))
    assert m.last_computed == 3
    # the same context again: nothing to compute
    m.forward(ctx[:-2] + t.encode("XYZ"))
    assert m.last_computed == 0
    # a strict prefix: the last position is recomputed
    m.forward(ctx[:4])
    assert m.last_computed == 1


def test_cached_logits_equal_full_recompute_on_random_contexts():
    t, cached = fresh()
    rng = random.Random(3)
    pieces = ["<|user|>hi<|assistant|>", "hello", " there", "x", "<|assistant|>", "wh", "at?"]
    ctx: list[int] = []
    for _ in range(200):
        if ctx and rng.random() < 0.3:
            ctx = ctx[: rng.randrange(len(ctx) + 1)]
        ctx = ctx + t.encode_markup(rng.choice(pieces))
        if not ctx:
            continue
        _, full = fresh()
        assert cached.forward(ctx) == full.forward(ctx)


def test_common_prefix_len():
    assert common_prefix_len([1, 2, 3], [1, 2, 3, 4]) == 3
    assert common_prefix_len([1, 2, 3], [1, 9, 3]) == 1
    assert common_prefix_len([], [1]) == 0
    rng = random.Random(0)
    for _ in range(500):
        a = [rng.randrange(3) for _ in range(rng.randrange(30))]
        b = a[: rng.randrange(len(a) + 1)] + [rng.randrange(3) for _ in range(rng.randrange(5))]
        expect = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        assert common_prefix_len(a, b) == expect
