"""CanIToolCall's Qwen fixtures on their own token ids: the Qwen3 and Qwen3-Coder fixtures' ids are Qwen2.5's
vocabulary (Qwen2.5-Coder-0.5B's GGUF) but for Qwen3's <think> and </think>, so there the stream is the
model's very tokens, special ids and all, grouped by each of the suite's strategies. Runs in the model tier
(DECODELOOP_QWEN names the .gguf: .ci/smollm2)."""

from __future__ import annotations

import os
from functools import cache

import pytest
from canitoolcall.pytest_plugin import assert_conforms, assert_equivalent
from cit_replay import Qwen3Ids, format_name, replay_ids

QWEN = os.environ.get("DECODELOOP_QWEN")
pytestmark = [
    pytest.mark.qwen,
    pytest.mark.skipif(not QWEN, reason="set DECODELOOP_QWEN to Qwen2.5-Coder-0.5B-Instruct's .gguf file"),
]


@cache
def tokenizer() -> Qwen3Ids:
    from decodeloop.models.hf import load_tokenizer

    assert QWEN is not None
    return Qwen3Ids(load_tokenizer(QWEN).tokenizer)


def _gate(fixture) -> Qwen3Ids:
    if format_name(fixture) is None or not fixture.family.startswith("qwen3"):
        pytest.skip("not a Qwen fixture")
    ids = tokenizer()
    if not ids.shares(fixture):
        pytest.skip(f"{fixture.models[0]}'s vocabulary is not Qwen2.5's: read from its text instead")
    assert ids.decode(fixture.output_token_ids) == fixture.raw_output  # the ids are the text, exactly
    return ids


def test_the_ids_read_whole(canitoolcall_fixture):
    ids = _gate(canitoolcall_fixture)
    assert_conforms(canitoolcall_fixture, replay_ids(canitoolcall_fixture, ids), soft=True)


def test_the_ids_streamed(canitoolcall_fixture, canitoolcall_strategy):
    ids = _gate(canitoolcall_fixture)
    streamed = replay_ids(canitoolcall_fixture, ids, canitoolcall_strategy)
    assert_conforms(canitoolcall_fixture, streamed, soft=True)
    assert_equivalent(replay_ids(canitoolcall_fixture, ids), streamed)
