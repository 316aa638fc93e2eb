"""Memory across many tool sets in one process (eval over BFCL entries compiles a grammar per entry): the
memoized masks of every matcher stay within one budget, least recently used dropped first, and a grammar that
is replaced is freed at once, with the cycle collector off (a process holding a model rarely runs it)."""

from __future__ import annotations

import copy
import gc
import weakref
from types import SimpleNamespace

import numpy as np
import pytest
from test_constrain_bpe import PIECES, PieceTokenizer

from decodeloop.constrain import token_matcher as tokens
from decodeloop.constrain.grammar.bytes import ByteState
from decodeloop.constrain.processor import CallConstraint
from decodeloop.constrain.token_matcher import TokenMatcher
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.sampling.processors import ProcessorState

SETS = 30
CAP = 6  # masks the budget holds at this vocabulary (each also has an index array)


def tool_set(i: int) -> list:
    """A tool set of its own: its tool's name, keys and bounds differ from every other's."""
    schema = {
        "type": "dict",
        "properties": {
            f"key_{i}": {"type": "str", "maxLength": 40 + i},
            "n": {"type": "int", "minimum": -i, "maximum": 100 + i},
        },
        "required": [f"key_{i}", "n"],
    }
    return [SimpleNamespace(name=f"tool_{i}", input_schema=schema)]


def write_call(constraint: CallConstraint, tokenizer, i: int) -> None:
    """A valid call to tool_i, token by token through the processor, as a model would write it."""
    prompt = tokenizer.encode("prompt <tool_call>")
    body = tokenizer.encode(
        f'{{"name": "tool_{i}", "arguments": {{"key_{i}": "a city, a state", "n": 12}}}}</tool_call>'
    )
    context = list(prompt)
    constraint(np.zeros(tokenizer.vocab_size), ProcessorState(context[:-1], len(prompt) - 1, False, 0))  # free text
    for token in body:
        out = constraint(
            np.zeros(tokenizer.vocab_size, dtype=np.float32),
            ProcessorState(context, len(prompt) - 1, True, len(context) - len(prompt)),
        )
        assert np.isfinite(out[token]), tokenizer.decode([token])  # the call is valid: never masked
        context.append(token)
    constraint(np.zeros(tokenizer.vocab_size), ProcessorState(context, len(prompt) - 1, True, len(body)))
    assert constraint._closed  # the closer ended the call


def live_masks() -> int:
    return sum(1 for obj in gc.get_objects() if type(obj) is ByteState and "tokens" in obj.masks)


@pytest.fixture
def small_budget(monkeypatch):
    tokenizer = PieceTokenizer(PIECES)
    per_mask = tokenizer.vocab_size  # a bool per token
    monkeypatch.setattr(tokens, "MASK_MEMORY", CAP * per_mask)
    gc.collect()
    gc.disable()
    try:
        yield tokenizer
    finally:
        gc.enable()


@pytest.mark.parametrize("fresh", [False, True], ids=["one processor", "a processor per tool set"])
def test_masks_stay_within_the_budget_across_many_tool_sets(small_budget, fresh):
    tokenizer = small_budget
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=JsonSyntax(), opener_id=None, closer_id=None)
    current = {"tools": tool_set(0), "version": 0}

    class Holder:  # holds its processor in a cycle, as a Harness does
        def tools(self):
            return current["tools"]

    def make():
        holder = Holder()
        holder.constraint = CallConstraint(bundle, holder.tools, mode="calls", version=lambda: current["version"])
        return holder.constraint

    constraint = make()
    grammars, most = [], 0
    for i in range(SETS):
        current["tools"], current["version"] = tool_set(i), i
        if fresh and i:
            constraint = make()
        write_call(constraint, tokenizer, i)
        grammars.append(weakref.ref(constraint.matcher.grammar))
        most = max(most, live_masks())
    assert most <= CAP + 1, most  # the newest is kept even when it alone is over the budget
    assert len(tokens.MASKS) <= CAP + 1
    if not fresh:
        # each grammar replaced was freed when the next was compiled, without the cycle collector
        assert sum(ref() is not None for ref in grammars) == 1


def test_a_replaced_grammar_releases_its_masks_at_once():
    tokenizer = PieceTokenizer(PIECES)
    matcher = TokenMatcher(tokenizer)
    matcher.start(tool_set(1), JsonSyntax())
    state = matcher.advance_bytes(matcher.begin(), b'{"name": "tool_1", "arguments": {"key_1": "')
    matcher.mask(state)
    assert "tokens" in state.masks
    matcher.start(tool_set(2), JsonSyntax())
    assert "tokens" not in state.masks and not state.next


def test_a_copy_shares_the_vocabulary_and_never_frees_the_grammar_it_was_copied_from():
    tokenizer = PieceTokenizer(PIECES)
    matcher = TokenMatcher(tokenizer)
    assert TokenMatcher(tokenizer).matrix is matcher.matrix  # one set of tables per tokenizer
    matcher.start(tool_set(1), JsonSyntax())
    state = matcher.advance_bytes(matcher.begin(), b'{"name": "tool_1", "arguments": {"key_1": "')
    mask = matcher.mask(state).copy()
    other = copy.copy(matcher)
    assert other.grammar is None and other.matrix is matcher.matrix
    other.start(tool_set(2), JsonSyntax())
    assert "tokens" in state.masks and (matcher.mask(state) == mask).all()


def test_release_frees_a_matcher_done_with_at_once():
    tokenizer = PieceTokenizer(PIECES)
    matcher = TokenMatcher(tokenizer)
    matcher.start(tool_set(1), JsonSyntax())
    grammar = weakref.ref(matcher.grammar)
    state = matcher.advance_bytes(matcher.begin(), b'{"name": "tool_1", "arguments": {"key_1": "')
    matcher.mask(state)
    gc.disable()
    try:
        matcher.release()
        assert grammar() is None and "tokens" not in state.masks and matcher.begin() is None
    finally:
        gc.enable()


def test_the_memo_never_keeps_a_state_alive():
    tokenizer = PieceTokenizer(PIECES)
    matcher = TokenMatcher(tokenizer)
    matcher.start(tool_set(1), JsonSyntax())
    state = matcher.advance_bytes(matcher.begin(), b'{"name": "tool_1", "arguments": {"key_1": "')
    matcher.mask(state)
    held, kept = weakref.ref(state), len(tokens.MASKS)
    del matcher, state
    gc.collect()
    assert held() is None and len(tokens.MASKS) < kept
