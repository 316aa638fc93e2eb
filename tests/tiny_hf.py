"""A tiny Hugging Face model for tests: real tokenizer, real transformers model, random weights.

`build_tokenizer(dir)` trains a byte-level BPE tokenizer in-process with
`tokenizers` on a few KB of generated text (about 1,000 tokens), with ChatML's
special tokens and `<tool_call>` / `</tool_call>` as non-special added tokens
(as in Qwen vocabularies), and saves it with SmolLM2's ChatML chat template.
`build_model(dir)` adds a seeded, randomly initialised Llama (hidden 64, 2
layers, 4 heads of 16) whose embedding is larger than the vocabulary, as real
models' often are. Nothing is downloaded. The fixtures in test_hf.py and
test_chat_template.py build each once per session.
"""

from __future__ import annotations

import random

# SmolLM2-135M-Instruct's chat template, as its GGUF file carries it.
CHATML_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<tool_call>", "</tool_call>"]
VOCAB = 1000
EMBEDDING = 1024  # larger than the tokenizer's vocabulary, as in Qwen or Llama checkpoints

_WORDS = [
    "the",
    "weather",
    "in",
    "Polson",
    "is",
    "overcast",
    "and",
    "cold",
    "with",
    "wind",
    "from",
    "the",
    "south",
    "east",
    "at",
    "twenty",
    "miles",
    "per",
    "hour",
    "what",
    "is",
    "the",
    "forecast",
    "for",
    "Burlington",
    "tomorrow",
    "it",
    "will",
    "rain",
    "in",
    "the",
    "morning",
    "and",
    "clear",
    "up",
    "later",
    "call",
    "a",
    "tool",
    "with",
    "a",
    "city",
    "and",
    "a",
    "state",
    "then",
    "answer",
    "the",
    "user",
    "with",
    "the",
    "temperature",
    "and",
    "conditions",
    "you",
    "are",
    "a",
    "helpful",
    "assistant",
    "you",
    "can",
    "use",
    "the",
    "tools",
    "below",
    "humidity",
    "percent",
    "degrees",
    "Fahrenheit",
]


def corpus(seed: int = 0, lines: int = 400) -> list[str]:
    """A few KB of text: sentences, JSON tool calls and results, numbers, some non-ASCII."""
    rng = random.Random(seed)
    syllables = [a + b for a in "bcdfghklmnprstvwz" for b in ("a", "e", "i", "o", "u", "ar", "en", "is")]
    made_up = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(300)]
    out = []
    for i in range(lines):
        words = " ".join(rng.choice(_WORDS if rng.random() < 0.6 else made_up) for _ in range(rng.randint(4, 14)))
        out.append(words.capitalize() + ".")
        if i % 4 == 0:
            out.append('{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}')
        if i % 5 == 0:
            out.append(
                f"Polson, MT: {rng.randint(-10, 99)}°F, overcast, humidity {rng.randint(1, 99)}%, "
                f"wind {rng.randint(0, 40)} mph SE"
            )
        if i % 7 == 0:
            out.append("Café naïve — déjà vu: 温度 🌧️ ok\n\tindented\r\n")
    return out


def build_tokenizer(directory: str, added: tuple[str, ...] = tuple(ADDED)) -> None:
    """Train and save the tiny tokenizer (tokenizer.json, tokenizer_config.json with the template); `added`: its
    added tokens (a call format's markers)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB - len(added),
        special_tokens=SPECIALS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    tokenizer.add_tokens(list(added))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
    )
    fast.chat_template = CHATML_TEMPLATE
    fast.save_pretrained(directory)


def build_model(directory: str, seed: int = 0, added: tuple[str, ...] = tuple(ADDED)) -> None:
    """The tiny tokenizer (with `added` tokens) and a seeded random Llama, saved as a model directory."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    build_tokenizer(directory, added)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=EMBEDDING,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=4096,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    # Bigger weights than the initializer's, so greedy choices are not near-ties.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.2)
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=[2, 0], pad_token_id=0)
    model.save_pretrained(directory)


def sentencepiece_style_tokenizer():
    """A SentencePiece-style BPE (Metaspace "▁", `<0xNN>` byte fallback, Llama-2-like), trained in-process.

    Returns a `tokenizers.Tokenizer`; its alphabet is ASCII, so every other
    character goes through the byte-fallback tokens.
    """
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(byte_fallback=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    alphabet = [chr(c) for c in range(32, 127)] + ["▁"]
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=["<unk>", "<s>", "</s>"],
        show_progress=False,
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet),
    )
    tokenizer.train_from_iterator([line.encode("ascii", "ignore").decode() for line in corpus()], trainer)
    data = json.loads(tokenizer.to_str())
    vocab = data["model"]["vocab"]
    for b in range(256):  # the byte-fallback pieces are ordinary vocabulary entries, as in Llama 2
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    tokenizer = Tokenizer.from_str(json.dumps(data))
    tokenizer.add_tokens(["<tool_call>", "</tool_call>"])
    return tokenizer
