"""A tiny random Llama that vLLM's CPU backend can serve: the tests' tiny tokenizer, head_dim 64.

`python tests/tiny_vllm.py DIR` saves it (tokenizer, chat template, config,
seeded random weights); nothing is downloaded. vLLM's CPU attention needs a
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
    config = LlamaConfig(vocab_size=EMBEDDING, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=True,
                         torch_dtype="float32")
    model = LlamaForCausalLM(config)
    with torch.no_grad():   # bigger weights than the initializer's, so greedy choices are not near-ties
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.2)
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=[2, 0], pad_token_id=0)
    model.save_pretrained(directory)


if __name__ == "__main__":
    build_model(sys.argv[1])
