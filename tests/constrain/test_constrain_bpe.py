"""--constrain on vocabularies whose tokens span several bytes (TokenMatcher): every mask equals walking each
token through the byte grammar, every constrained call parses and validates (hypothesis over random schemas,
random vocabularies and random logits), a closer that is a special token, and the cap that closes a call."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_constrain import check_call, constrained_turn, lab_tools, tool_schemas

from decodeloop.constrain.grammar.bytes import CLOSER_TOKEN
from decodeloop.constrain.matchers import matcher_for
from decodeloop.constrain.processor import CallConstraint
from decodeloop.constrain.token_matcher import TokenMatcher
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.sampling.processors import ProcessorState

EOS, CLOSER = 0, 1
# pieces that cross the grammar's boundaries: opener and value, key and colon, string end and comma
PIECES = [
    '{"',
    '":',
    ' "',
    '",',
    '"}',
    "}}",
    "}\n",
    '>{"',
    "<tool_call>",
    "</tool_call>",
    "</tool_call>\n",
    "tool",
    "_call",
    "name",
    "arguments",
    "get_",
    "weather",
    "city",
    "state",
    " MT",
    "Pol",
    "son",
    "é",
    "°F",
    "[call ",
    "call",
    " city=",
    "=",
    "]",
    "]\n",
    "12",
    "-3",
    "0.",
    "true",
    "null",
    "e+",
    "\\n",
    '\\"',
    '""',
    '":"',
    "tool_",
    "_0",
    "_1",
    "_2",
    "ab",
    '"a"',
    ": [",
    "], ",
    "{}",
    '"}}',
    '"}}\n</',
    "tool_call>",
    '\n{"name": "',
]
ALPHABET = '{}[]":, =_abcdxyz0123456789.-<>/\\né°'


class PieceTokenizer:
    """A byte-level BPE-like vocabulary: an end-of-sequence token, optionally a closer token, every byte, and pieces
    (longest match first when encoding); enough of the Tokenizer protocol for the loop."""

    def __init__(self, pieces, closer_token: bool = False) -> None:
        self.table = [b"", b""] + [bytes((b,)) for b in range(256)]
        seen = set(self.table)
        for piece in pieces:
            data = piece.encode("utf-8") if isinstance(piece, str) else piece
            if data not in seen:
                seen.add(data)
                self.table.append(data)
        self.vocab_size = len(self.table)
        self.eos_id = EOS
        self.special_tokens = {"<eos>": EOS, **({"</tool_call>": CLOSER} if closer_token else {})}
        self._longest = max(len(b) for b in self.table)
        self._ids = {b: i for i, b in enumerate(self.table) if b}

    def encode(self, text: str) -> list[int]:
        data, out, i = text.encode("utf-8"), [], 0
        while i < len(data):
            for n in range(min(self._longest, len(data) - i), 0, -1):
                token = self._ids.get(data[i : i + n])
                if token is not None:
                    out.append(token)
                    i += n
                    break
        return out

    def token_bytes(self, token: int) -> bytes:
        return self.table[token] if 0 <= token < self.vocab_size else b""

    def token_text(self, token: int) -> str:
        return {EOS: "<eos>", CLOSER: "</tool_call>"}.get(token) or self.table[token].decode("utf-8", "replace")

    def decode(self, ids) -> str:
        return b"".join(self.table[i] for i in ids).decode("utf-8", "replace")


def brute_force_mask(matcher: TokenMatcher, state) -> list[bool]:
    """Each token's bytes walked through the grammar one at a time, in plain Python."""
    grammar, out = matcher.grammar, []
    for token in range(matcher.vocab):
        if token == matcher.closer_id:
            out.append(grammar.advance_char(state, CLOSER_TOKEN) is not None)
            continue
        data, st = matcher.token_bytes[token], state
        for byte in data:
            if st.final:
                break
            st = grammar.advance(st, byte)
            if st is None:
                break
        out.append(bool(data) and st is not None)
    return out


vocabularies = st.lists(st.text(alphabet=ALPHABET, min_size=2, max_size=7), max_size=60)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(tool_schemas, min_size=1, max_size=2),
    st.sampled_from(["compact", "json", "json_token"]),
    vocabularies,
    st.integers(0, 2**32),
)
def test_every_mask_equals_walking_each_token_through_the_grammar(schemas, syntax_name, extra, seed):
    closer_token = syntax_name == "json_token"
    syntax = CompactSyntax() if syntax_name == "compact" else JsonSyntax()
    tokenizer = PieceTokenizer(PIECES + extra, closer_token)
    matcher = TokenMatcher(tokenizer, closer_id=CLOSER if closer_token else None)
    tools = [type("Tool", (), {"name": f"tool_{i}", "input_schema": s}) for i, s in enumerate(schemas)]
    matcher.start(tools, syntax)
    state, rng = matcher.begin(), random.Random(seed)
    for _ in range(40):  # a random walk through allowed tokens, checking every state met
        if state is None or matcher.done(state):
            break
        mask = matcher.mask(state)
        assert mask.tolist() == brute_force_mask(matcher, state)
        allowed = np.flatnonzero(mask).tolist()
        assert allowed, "a state the grammar reached must allow some token"
        state = matcher.advance(state, rng.choice(allowed))


@settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(tool_schemas, min_size=1, max_size=3),
    st.sampled_from(["compact", "json", "json_token"]),
    vocabularies,
    st.integers(0, 2**32),
    st.sampled_from([0.0, 1.0, 2.0]),
)
def test_every_constrained_call_on_a_bpe_vocabulary_parses_and_validates(
    schemas, syntax_name, extra, seed, temperature
):
    closer_token = syntax_name == "json_token"
    syntax = CompactSyntax() if syntax_name == "compact" else JsonSyntax()
    tokenizer = PieceTokenizer(PIECES + extra, closer_token)
    tools = [type("Tool", (), {"name": f"tool_{i}", "input_schema": s}) for i, s in enumerate(schemas)]
    verdict, constraint, notices, _ = constrained_turn(
        tools,
        syntax,
        seed,
        temperature,
        max_tokens=400,
        tokenizer=tokenizer,
        closer_id=CLOSER if closer_token else None,
    )
    assert isinstance(constraint.matcher, TokenMatcher)
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


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.sampled_from(["compact", "json", "json_token"]), st.integers(0, 2**32), st.integers(60, 120))
def test_a_call_still_open_near_the_cap_is_closed_within_it(syntax_name, seed, cap):
    # random logits at a high temperature write free strings for ever; the shortest end is written in time
    closer_token = syntax_name == "json_token"
    syntax = CompactSyntax() if syntax_name == "compact" else JsonSyntax()
    tokenizer = PieceTokenizer(PIECES, closer_token)
    tools = lab_tools()
    verdict, _, _, tokens = constrained_turn(
        tools, syntax, seed, 3.0, max_tokens=cap, tokenizer=tokenizer, closer_id=CLOSER if closer_token else None
    )
    assert verdict.reason == "tool_call" and len(tokens) <= cap
    check_call(syntax, verdict.calls[0], {t.name: t.input_schema for t in tools})


def test_apply_keeps_the_logits_kind_and_forbids_ids_past_the_vocabulary():
    torch = pytest.importorskip("torch")
    tokenizer = PieceTokenizer(PIECES)
    matcher = matcher_for(tokenizer)
    assert isinstance(matcher, TokenMatcher)
    matcher.start(lab_tools(), JsonSyntax())
    state = matcher.advance_bytes(matcher.begin(), b'{"name": "get_')
    expected = np.flatnonzero(matcher.mask(state)).tolist()
    assert sorted(tokenizer.decode([t]) for t in expected) == ["f", "t", "w", "weather"]
    n = tokenizer.vocab_size + 24  # an output layer larger than the tokenizer, as in real models
    for logits in (
        np.zeros(n, dtype=np.float32),
        torch.zeros(n, dtype=torch.float32),
        torch.zeros(n, dtype=torch.bfloat16),
        [0.0] * n,
    ):
        before = list(logits) if type(logits) is list else logits.tolist()
        out, override = matcher.apply(logits, state)
        values = out if type(out) is list else out.tolist()
        assert [i for i, v in enumerate(values) if v != float("-inf")] == expected
        assert type(out) is type(logits) and (type(out) is list or out.dtype == logits.dtype)
        assert (list(logits) if type(logits) is list else logits.tolist()) == before
        assert override is not None and override[1] == len(expected)  # all zeros: argmax is id 0, ruled out


def test_an_opener_that_ends_inside_a_token_feeds_the_rest_to_the_grammar():
    tokenizer = PieceTokenizer(PIECES)
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=JsonSyntax(), opener_id=None, closer_id=None)
    constraint = CallConstraint(bundle, lab_tools, mode="calls")
    context = tokenizer.encode("ok <tool_call") + [tokenizer._ids[b'>{"']]
    state = ProcessorState(context, 0, True, len(context))
    out = constraint(np.zeros(tokenizer.vocab_size), state)
    allowed = {tokenizer.decode([t]) for t in np.flatnonzero(np.isfinite(out)).tolist()}
    # after '{"' the grammar forces 'name": "': its tokens as the tokenizer writes them, the first being 'name'
    assert allowed == {"name"} and constraint.forced(state) == tokenizer._ids[b"name"]
    constraint.jump_forward = False
    assert constraint.forced(state) is None
    # without the plan (its first token written otherwise) the grammar alone decides: "n" is allowed too
    constraint._plan = []
    out = constraint(np.zeros(tokenizer.vocab_size), state)
    allowed = {tokenizer.decode([t]) for t in np.flatnonzero(np.isfinite(out)).tolist()}
    assert "name" in allowed and "n" in allowed and '{"' not in allowed and " " not in allowed


def test_a_free_form_object_key_does_not_make_a_state_per_token():
    """Inside a key of a free-form object ({"type": "object"} with no properties, BFCL's `dict`), walking a large
    vocabulary makes a handful of grammar states, not one per prefix of every token."""
    rng = random.Random(0)
    words = {"".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(2, 12))) for _ in range(5000)}
    tokenizer = PieceTokenizer(PIECES + sorted(words))
    matcher = TokenMatcher(tokenizer)
    tools = [
        SimpleNamespace(
            name="average",
            input_schema={
                "type": "object",
                "properties": {"grades": {"type": "dict"}, "name": {"type": "string"}},
                "required": ["grades"],
            },
        )
    ]
    matcher.start(tools, JsonSyntax())
    state = matcher.advance_bytes(matcher.begin(), b'{"name": "average", "arguments": {"grades": {"')
    before = matcher.grammar.size
    assert matcher.mask(state).sum() > 1000  # any word may begin a free key
    assert matcher.grammar.size - before < 200
