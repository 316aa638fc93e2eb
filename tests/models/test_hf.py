"""Hugging Face models: real tokenizers and a real (tiny, random) transformers model, no mocks.

The tiny model (tests/tiny_hf.py) is built once per session in a temporary
directory. A SmolLM2 test runs only when DECODELOOP_SMOLLM2 names its .gguf.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("tokenizers")

import tiny_hf
from hypothesis import given, settings
from hypothesis import strategies as st

from decodeloop.errors import MissingDependency
from decodeloop.formats.hf_tokenizer import HFTokenizer, require
from decodeloop.formats.tokenizer import StreamDecoder, check_tokenizer
from decodeloop.tools.startup import ClientOptions

SMOLLM2 = os.environ.get("DECODELOOP_SMOLLM2")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    directory = str(tmp_path_factory.mktemp("tiny_llama"))
    tiny_hf.build_model(directory)
    return directory


@pytest.fixture(scope="session")
def bundle(tiny_dir):
    from decodeloop.registry import load_model

    return load_model("hf:" + tiny_dir)


@pytest.fixture(scope="session")
def tok(tmp_path_factory):
    """The tiny tokenizer alone (no torch needed)."""
    pytest.importorskip("transformers")
    directory = str(tmp_path_factory.mktemp("tiny_tokenizer"))
    tiny_hf.build_tokenizer(directory)
    return HFTokenizer.from_pretrained(directory)


@pytest.fixture(scope="session")
def sp_tok():
    return HFTokenizer(tiny_hf.sentencepiece_style_tokenizer(), eos_id=2)


# -- the tokenizer --------------------------------------------------------------------------------------

CONTROL_TEXTS = [
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<tool_call>",
    "</tool_call>",
    "<s>",
    "</s>",
    "<unk>",
    "<",
    "|",
    "im_end",
    ">",
    "tool_call",
]
texts = st.one_of(
    st.text(),
    st.lists(
        st.sampled_from(
            [
                "e",
                "\u0301",
                "\u0308",
                "🎉",
                "👍🏽",
                "\u200d",
                "👩",
                "温",
                " ",
                "\n",
                "é",
                "\U0001f1fa",
                "\U0001f1f8",
                "\x00",
                "\t",
                "\r\n",
            ]
        ),
        max_size=20,
    ).map("".join),
    st.lists(st.one_of(st.text(max_size=5), st.sampled_from(CONTROL_TEXTS)), max_size=12).map("".join),
)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_encode_is_byte_exact_and_never_special(tok, text):
    ids = tok.encode(text)
    assert b"".join(map(tok.token_bytes, ids)) == text.encode()
    assert set(tok.special_tokens.values()).isdisjoint(ids)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_sentencepiece_style_is_byte_exact_and_never_special(sp_tok, text):
    text = text.replace("▁", "_")  # SentencePiece writes spaces as "▁": a literal one comes back as a space
    ids = sp_tok.encode(text)
    assert b"".join(map(sp_tok.token_bytes, ids)) == text.encode()
    assert set(sp_tok.special_tokens.values()).isdisjoint(ids)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 1023), max_size=60))
def test_stream_decoder_matches_decode(tok, ids):
    flush = tok.encode(".")  # ASCII after the stream releases anything held, as decode() would
    specials = set(tok.special_tokens.values())
    decoder = StreamDecoder(tok)
    streamed = "".join(decoder.piece(t) for t in ids + flush)
    assert streamed == tok.decode([t for t in ids if t not in specials] + flush)


def test_tokenizer_basics(tok):
    check_tokenizer(tok)
    assert tok.vocab_size == tiny_hf.VOCAB
    assert tok.eos_id == tok.special_tokens["<|im_end|>"]
    assert set(tok.special_tokens) == {*tiny_hf.SPECIALS, *tiny_hf.ADDED}
    assert tok.token_bytes(tiny_hf.VOCAB) == b"" and tok.token_bytes(tok.special_tokens["<tool_call>"]) == b""
    markup = tok.encode_markup("<|im_start|>user\nhi<tool_call>")
    assert markup[0] == tok.special_tokens["<|im_start|>"] and markup[-1] == tok.special_tokens["<tool_call>"]
    assert tok.decode(markup) == "<|im_start|>user\nhi<tool_call>"
    # the same text as data: plain ids, and the same text back
    data = tok.encode("<|im_start|>user\nhi<tool_call>")
    assert tok.decode(data) == "<|im_start|>user\nhi<tool_call>" and len(data) > len(markup)


def test_token_text_labels(tok, sp_tok):
    [the] = tok.encode(" the")
    assert tok.token_text(the) == " the"
    assert tok.token_text(tok.encode("\n")[0]) == "\\n"
    assert tok.token_text(tok.special_tokens["<|im_end|>"]) == "<|im_end|>"
    assert tok.token_text(tiny_hf.VOCAB + 5) == f"<unused {tiny_hf.VOCAB + 5}>"
    first = next(i for i in range(tok.vocab_size) if tok.token_bytes(i) == b"\xf0")
    assert tok.token_text(first) == "\\xf0"
    assert sp_tok.token_text(sp_tok.encode("a b")[-1]).startswith(" ")
    assert [sp_tok.token_text(i) for i in sp_tok.encode("é")] == ["\\xc3", "\\xa9"]


def test_missing_dependency_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(MissingDependency, match=r"\.\[hf\]"):
        require("tokenizers")


# -- loading --------------------------------------------------------------------------------------------


def test_load_bundle(bundle, tiny_dir):
    import torch

    from decodeloop.formats.chat_template import TemplateChat

    tok = bundle.tokenizer
    assert tok.vocab_size == tiny_hf.EMBEDDING  # the model's embedding, larger than the vocabulary
    assert isinstance(bundle.chat, TemplateChat) and type(bundle.syntax).__name__ == "JsonSyntax"
    assert bundle.info == {
        "path": os.path.abspath(tiny_dir),
        "call format": "hermes (the vocabulary has a <tool_call> token)",
        "device": "cpu",
        "dtype": "float32",
        "vocab": tiny_hf.EMBEDDING,
        "template tools": False,
    }
    assert bundle.opener_id == tok.special_tokens["<tool_call>"]
    assert bundle.closer_id == tok.special_tokens["</tool_call>"]
    # eos, ChatML's end of turn, and generation_config's list ([<|im_end|>, <|endoftext|>])
    assert bundle.chat.stop_ids == {tok.special_tokens["<|im_end|>"], tok.special_tokens["<|endoftext|>"]}
    logits = bundle.model.forward(tok.encode("hello"))
    assert isinstance(logits, torch.Tensor) and logits.dtype == torch.float32
    assert logits.shape == (tiny_hf.EMBEDDING,) and logits.device.type == "cpu"


def test_load_compact_syntax(tiny_dir):
    from decodeloop.models.hf import load_hf

    compact = load_hf(tiny_dir, syntax="compact")
    assert compact.opener_id is None and compact.closer_id is None
    assert "[call " in compact.chat.system_text([_tool()])
    with pytest.raises(ValueError, match="unknown call format 'xml'"):
        load_hf(tiny_dir, syntax="xml")
    with pytest.raises(ValueError, match="dtype"):
        load_hf(tiny_dir, dtype="float8")


def _tool():
    from decodeloop.mcp.client import Tool

    return Tool("get_weather", "Weather.", {"type": "object", "properties": {"city": {"type": "string"}}})


def test_load_errors(tiny_dir, tmp_path):
    from decodeloop.registry import load_model

    with pytest.raises(FileNotFoundError, match="no model at"):
        load_model("hf:" + str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="no config.json"):
        load_model("hf:" + str(tmp_path))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="not a .gguf"):
        load_model("hf:" + str(tmp_path / "notes.txt"))
    bare = tmp_path / "bare"
    shutil.copytree(tiny_dir, bare)
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="no chat template"):
        load_model("hf:" + str(bare))
    (bare / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match="no tokenizer"):
        load_model("hf:" + str(bare))


# -- the cache ------------------------------------------------------------------------------------------


def _full(model, ids):
    """Next-token logits computed from scratch, no cache."""
    import torch

    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1].float()


def test_cached_logits_equal_full_recompute(bundle):
    import torch

    from decodeloop.models.hf import HFModel

    model = HFModel(bundle.model.model)
    rng = random.Random(0)
    ids = [rng.randrange(3, 1000) for _ in range(40)]

    def check(context, computed):
        logits = model.forward(context)
        assert model.last_computed == computed
        torch.testing.assert_close(logits, _full(model.model, context), atol=1e-4, rtol=0)

    check(ids[:20], 20)  # prefill
    check(ids[:21], 1)  # extend by one
    check(ids[:38], 17)  # extend by a span, one forward
    diverged = ids[:25] + [7, 8, 9]
    check(diverged, 3)  # diverge: crop to 25, compute 3
    check(ids[:12], 1)  # a prefix: crop to 11, recompute the last position
    assert model.forward(ids[:12]) is model.forward(ids[:12]) and model.last_computed == 0
    check(ids, 28)


def test_cache_that_cannot_be_cropped_starts_over():
    """A sliding-window model past its window cannot roll back: the model recomputes, with the same logits."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from decodeloop.models.hf import HFModel

    torch.manual_seed(0)
    config = transformers.MistralConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=8,
    )
    model = HFModel(transformers.MistralForCausalLM(config))
    ids = list(range(3, 23))
    model.forward(ids)
    logits = model.forward(ids[:15] + [1, 2])
    assert model.last_computed == 17
    torch.testing.assert_close(logits, _full(model.model, ids[:15] + [1, 2]), atol=1e-4, rtol=0)


def test_greedy_engine_equals_bare_torch_loop(bundle):
    import torch
    from transformers import DynamicCache

    from decodeloop.decode.engine import LocalEngine
    from decodeloop.models.hf import HFModel
    from decodeloop.sampling import Sampler

    tok = bundle.tokenizer
    prompt = [piece for ids, _ in bundle.chat.start([_tool()], "What's the weather in Polson, MT?") for piece in ids]
    engine = LocalEngine(HFModel(bundle.model.model), Sampler())
    context = list(prompt)
    for _ in range(50):
        context.append(engine.step(context, None).token)
    ours = context[len(prompt) :]

    model, cache, ids, theirs = bundle.model.model, DynamicCache(config=bundle.model.model.config), prompt, []
    with torch.inference_mode():
        for _ in range(50):
            out = model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True)
            ids = [int(out.logits[0, -1].argmax())]
            theirs += ids
    assert ours == theirs
    assert len(set(ours)) > 1

    # and the tokens stream byte-exactly
    decoder = StreamDecoder(tok)
    specials = set(tok.special_tokens.values())
    flush = tok.encode(".")
    assert "".join(decoder.piece(t) for t in ours + flush) == tok.decode([t for t in ours if t not in specials] + flush)


# -- SmolLM2 (a real model) --------------------------------------------------------------------------------


@pytest.mark.smollm2
@pytest.mark.skipif(not SMOLLM2, reason="set DECODELOOP_SMOLLM2 to SmolLM2-135M-Instruct's .gguf file")
def test_smollm2():
    import torch

    from decodeloop.decode.engine import LocalEngine
    from decodeloop.registry import load_model
    from decodeloop.sampling import Sampler

    smol = load_model("hf:" + SMOLLM2, device="cpu")
    tok = smol.tokenizer
    assert smol.info["vocab"] == 49152 and smol.info["template tools"] is False
    assert tok.special_tokens["<|im_end|>"] in smol.chat.stop_ids
    prompt = [t for ids, _ in smol.chat.start([_tool()], "What is the capital of France?") for t in ids]
    logits = smol.model.forward(prompt)
    torch.testing.assert_close(logits, _full(smol.model.model, prompt), atol=1e-3, rtol=1e-4)
    engine = LocalEngine(smol.model, Sampler())
    context = list(prompt)
    for _ in range(24):
        token = engine.step(context, None).token
        context.append(token)
        if token in smol.chat.stop_ids:
            break
    answer = tok.decode(context[len(prompt) :])
    assert "Paris" in answer, answer


def test_constrained_calls_on_a_real_transformers_model(bundle, events):
    # random weights, torch logits, <tool_call> and </tool_call> as added tokens (the closer is one token):
    # every turn, forced to open with a call, writes one the weather server accepts, within the token cap
    from conftest import WEATHER

    from decodeloop.constrain.token_matcher import TokenMatcher
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import ClientOptions, start_stdio_servers

    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=30)) as router:
        for seed in range(3):
            events.clear()
            chat = Harness(
                bundle,
                Sampler(temperature=1.0, seed=seed),
                router,
                events,
                config=TurnConfig(max_tokens=90, constrain="required", max_retries=1),
            )
            chat.run("What's the weather in Polson, MT?")
            assert isinstance(chat.constraint.matcher, TokenMatcher) and chat.constraint.matcher.closer_id is not None
            calls = events.of("tool_call")
            assert calls and calls[0].name in ("get_weather", "get_forecast")
            assert [e for e in events.of("tool_error") if e.stage in ("parse", "route", "arguments")] == []


def test_a_masked_rerun_leaves_the_conversation_and_its_cache_as_they_were(bundle, events):
    # the policy's masked re-run on a real transformers model: the engine sees the context with the user's text
    # replaced and cut before the model's current message; afterwards the conversation goes on token for token
    # as if it had never run (greedy, so any disturbance of the cache or the context would show)
    from conftest import WEATHER

    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import start_stdio_servers
    from decodeloop.trust.policy import MASKED_REQUEST

    question = "What's the weather in Polson, MT?"
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=30)) as router:
        runs = []
        for rerun in (False, True):
            events.clear()
            chat = Harness(
                bundle,
                Sampler(temperature=0),
                router,
                events,
                config=TurnConfig(max_tokens=80, constrain="required", max_retries=2),
            )
            chat.run(question)
            before = list(chat.context.ids)
            if rerun:
                seen = []
                step = chat.engine.step
                chat.engine.step = lambda ids, state: seen.append(list(ids)) or step(ids, state)
                calls = chat.masked_evidence()
                chat.engine.step = step
                # every span up to the model's last message, the user's text replaced
                spans = chat.context.spans()
                assert spans[-1].source == "model" and any(s.source.startswith("tool:") for s in spans)
                expected = [
                    bundle.tokenizer.encode(MASKED_REQUEST) if s.source == "user" else before[s.start : s.end]
                    for s in spans[:-1]
                ]
                assert seen[0] == [i for ids in expected for i in ids]
                assert question not in bundle.tokenizer.decode(seen[0])
                assert chat.masked_evidence() is calls and len(seen) > 0  # once per message
                notice = [e.message for e in events.of("notice") if e.message.startswith("masked re-run")]
                assert len(notice) == 1 and "tokens ending in" in notice[0]
                assert chat.context.ids == before
            chat.run("And tomorrow?")
            runs.append(chat.context.ids)
        assert runs[0] == runs[1]


def test_a_prompt_over_the_models_context_is_refused_naming_the_server(bundle, events):
    # the tiny model attends to 4,096 positions (its config's max_position_embeddings); a real server whose
    # tools' descriptions fill more than that, each tool within its own caps
    from conftest import ROOT

    from decodeloop.errors import ToolSurfaceError
    from decodeloop.harness import Harness
    from decodeloop.sampling import Sampler
    from decodeloop.tools.config import ServerSpec
    from decodeloop.tools.startup import start_servers
    from decodeloop.trust.policy import Policy

    assert bundle.context_length == 4096
    wide = [
        sys.executable,
        os.path.join(ROOT, "tests", "servers", "wide.py"),
        "--tools",
        "16",
        "--description-chars",
        "1000",
    ]
    with start_servers(
        [ServerSpec("wide", command=wide, transport="stdio")], events, options=ClientOptions(timeout=30)
    ) as router:
        with pytest.raises(
            ToolSurfaceError,
            match=r"over the model's context of 4,096 tokens\. The tools take "
            r"[\d,]+: wide [\d,]+ tokens in 16 tools",
        ):
            Harness(bundle, Sampler(), router, events, policy=Policy.off())
