"""Tiny Llamas that vLLM's CPU backend can serve: the tests' tiny tokenizer, head_dim 64.

`python tests/tiny_vllm.py DIR` saves a seeded random one; `python
tests/tiny_vllm.py --scripted DIR` saves one whose weights are set by hand so
that, greedy, it calls get_weather for Polson, MT and then answers (see
`build_scripted_model`). Nothing is downloaded. vLLM's CPU attention needs a
head size it has kernels for, so the heads are 64 wide, unlike tiny_hf's 16.
"""

from __future__ import annotations

import os
import sys


def build_model(directory: str, seed: int = 0) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from tiny_hf import EMBEDDING, build_tokenizer

    build_tokenizer(directory)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=EMBEDDING,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=True,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # bigger weights than the initializer's, so greedy choices are not near-ties
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.2)
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=[2, 0], pad_token_id=0)
    model.save_pretrained(directory)


CALL = "[call get_weather city=Polson state=MT]"
ANSWER = "It is cold."


def build_scripted_model(directory: str) -> None:
    """A Llama wired by hand: greedy, it writes CALL (compact syntax), and after the tool's result, ANSWER.

    The tokenizer is the tests' tiny one plus `<tool_response>`, an added token
    that the chat format's markup puts in the context only with a tool result.
    The residual stream holds a one-hot of the current token (for the few tokens
    the script uses) and a constant. Layer 0 has two heads: one attends to
    `<tool_response>` wherever it is (query and key in the rotary pair that turns
    slowest) and writes a flag; the other attends to the previous position
    (its key is its query turned one position on, in every rotary pair) and
    writes a one-hot of the previous token. Everything else in the layers is
    zero. The output layer reads the current token, the previous one and the
    flag: each token of the script has one successor, except "=", whose
    successor depends on the key before it; after "assistant\n" the model opens
    the call without the flag and answers with it.
    """
    import math

    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tiny_hf

    tiny_hf.build_tokenizer(directory, added=(*tiny_hf.ADDED, "<tool_response>", "</tool_response>"))
    tok = AutoTokenizer.from_pretrained(directory)
    [newline], flag_token = tok.encode("\n"), tok.convert_tokens_to_ids("<tool_response>")
    end = tok.convert_tokens_to_ids("<|im_end|>")
    call, answer = tok.encode(CALL), tok.encode(ANSWER)
    script = [newline, *call, end]
    chain = list(zip(script, script[1:])) + list(zip(answer, answer[1:] + [end]))
    by_pair = {(call[i - 1], call[i]): call[i + 1] for i in range(1, len(call) - 1)}
    used = sorted({newline, flag_token, end, *call, *answer})
    hidden, const, flag, prev = 128, 126, 127, 64
    assert len(used) < 60
    slot = {t: i for i, t in enumerate(used)}
    theta = 10000.0

    config = LlamaConfig(
        vocab_size=tiny_hf.EMBEDDING,
        hidden_size=hidden,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        rope_theta=theta,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for layer in model.model.layers:
            layer.input_layernorm.weight.fill_(1.0)
            layer.post_attention_layernorm.weight.fill_(1.0)
        model.model.norm.weight.fill_(1.0)
        emb = model.model.embed_tokens.weight  # [vocab, hidden]
        emb[:, const] = 1.0
        for t, i in slot.items():
            emb[t, i] = 1.0
        attn = model.model.layers[0].self_attn
        # the normed residual's set entries are 8 (2 of 128 set); a score is q.k / 8
        # head 0, rotary pair (31, 63), the slowest (under 0.2 rad over 1,500 positions): <tool_response> -> flag
        attn.q_proj.weight[31, const] = 2.0 / 8
        attn.k_proj.weight[31, slot[flag_token]] = 80.0 / 8  # score 2*80/8 = 20 on <tool_response>, else 0
        attn.v_proj.weight[0, slot[flag_token]] = 1.0 / 8
        attn.o_proj.weight[flag, 0] = 1.0
        # head 1: every pair's query (c, 0), its key the query turned by one position's angle; the scores
        # c^2/8 * sum_i cos((n - m + 1) w_i) peak at the previous position
        c = 13.0
        for i in range(32):
            w = theta ** (-i / 32)
            attn.q_proj.weight[64 + i, const] = c / 8
            attn.k_proj.weight[64 + i, const] = c * math.cos(w) / 8
            attn.k_proj.weight[64 + 32 + i, const] = c * math.sin(w) / 8
        for t, i in slot.items():
            attn.v_proj.weight[64 + i, i] = 1.0 / 8
            attn.o_proj.weight[prev + i, 64 + i] = 1.0
        head = model.lm_head.weight  # [vocab, hidden]
        for a, b in chain:  # each token of the script to its successor
            if not (a == newline and b == call[0]):
                head[b, slot[a]] += 40.0
        for (before, a), b in by_pair.items():  # "=": the key before it decides
            head[b, prev + slot[before]] += 20.0
        head[call[0], slot[newline]] += 20.0  # after "\n": the call, unless the flag is set
        head[call[0], flag] -= 40.0
        head[answer[0], slot[newline]] += 10.0  # ... then the answer (15 alone never beats a 40)
        head[answer[0], flag] += 15.0
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=[2, 0], pad_token_id=0)
    model.save_pretrained(directory)


if __name__ == "__main__":
    if sys.argv[1] == "--scripted":
        build_scripted_model(sys.argv[2])
    else:
        build_model(sys.argv[1])
