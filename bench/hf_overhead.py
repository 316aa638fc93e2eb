#!/usr/bin/env python3
"""Tokens per second on a Hugging Face model: a bare torch loop, model.generate(), and decodeloop.

Every row runs the same model, the same prompt and the same number of new tokens
(forced: nothing stops early), in one process, one after another, best of
--repeats. The rows:

    bare loop                a minimal torch loop: forward with the library's DynamicCache, sample, repeat
    generate()               transformers' model.generate(), the same cache implementation
    decodeloop answer-only   the decode loop (engine step, append, stop check, event) with no trace detail
    decodeloop trace detail  the same with each token's probability and its top-3 alternatives (the trace)

each greedy and at temperature 0.8 / top-p 0.9. Models: a tiny randomly initialised Llama with
SmolLM2's vocabulary (49,152; so the harness, not the model, dominates) and SmolLM2-135M-Instruct
itself (scripts/fetch-smollm2). One thread by default, as the figures in docs/benchmarks.md.

    python3 bench/hf_overhead.py [--tokens 200] [--device cpu|cuda] [--threads 1] [--gguf PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import provenance
import torch
from transformers import AutoTokenizer, DynamicCache, LlamaConfig, LlamaForCausalLM

from decodeloop.decode.context import Context
from decodeloop.decode.loop import generate as decodeloop_generate
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.tokenizer import StreamDecoder
from decodeloop.registry import load_model
from decodeloop.sampling import Sampler
from decodeloop.sampling.processors import ProcessorState

GGUF = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPT = "<|im_start|>user\nWhat's the weather in Polson, MT?<|im_end|>\n<|im_start|>assistant\n"
SETTINGS = (("greedy", dict(temperature=0.0)), ("T 0.8, top-p 0.9", dict(temperature=0.8, top_p=0.9)))


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@torch.inference_mode()
def bare_loop(model, prompt_ids: list[int], n: int, setting: dict, device: str) -> float:
    """The least a loop can do: forward over the cache, sample on the device, feed the token back."""
    generator = torch.Generator(device=device).manual_seed(0)
    cache = DynamicCache(config=model.config)
    ids = torch.tensor([prompt_ids], device=device)
    sync(device)
    started = time.perf_counter()
    for _ in range(n):
        logits = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits[0, -1]
        if setting["temperature"] == 0.0:
            token = torch.argmax(logits)
        else:
            probs = torch.softmax(logits.float() / setting["temperature"], -1)
            sorted_probs, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_probs, -1) - sorted_probs < setting["top_p"]
            sorted_probs = sorted_probs * keep
            token = order[torch.multinomial(sorted_probs, 1, generator=generator)][0]
        ids = token.view(1, 1)
    sync(device)
    return time.perf_counter() - started


@torch.inference_mode()
def hf_generate(model, prompt_ids: list[int], n: int, setting: dict, device: str) -> float:
    ids = torch.tensor([prompt_ids], device=device)
    kwargs = dict(
        max_new_tokens=n,
        min_new_tokens=n,
        do_sample=setting["temperature"] > 0,
        pad_token_id=0,
        cache_implementation="dynamic",
    )
    if setting["temperature"] > 0:
        kwargs.update(temperature=setting["temperature"], top_p=setting["top_p"], top_k=0)
    else:
        kwargs.update(temperature=None, top_p=None, top_k=None)
    torch.manual_seed(0)
    sync(device)
    started = time.perf_counter()
    out = model.generate(ids, **kwargs)
    sync(device)
    assert out.shape[1] == len(prompt_ids) + n
    return time.perf_counter() - started


def decodeloop_run(bundle, prompt_ids: list[int], n: int, setting: dict, detail: bool, device: str) -> float:
    """decodeloop's own loop over the bundle's engine: what a turn costs per token, no early stop."""
    bundle.model.reset()
    engine = bundle.engine(Sampler(seed=0, **setting))
    stops = Stops(eos_ids=(), settings=StopSettings(max_tokens=n))  # nothing stops it but the cap: n tokens
    context = Context()
    context.extend(prompt_ids, "user")
    state = ProcessorState(context=context.ids, generated=len(context))
    sync(device)
    started = time.perf_counter()
    decodeloop_generate(
        engine, stops, context, StreamDecoder(bundle.tokenizer), bundle.tokenizer, lambda event: None, [], state, detail
    )
    sync(device)
    assert len(context) == len(prompt_ids) + n
    return time.perf_counter() - started


def tiny_model_dir(tokenizer_source: str) -> str:
    """A randomly initialised Llama with SmolLM2's tokenizer and vocabulary, saved where load_model reads it."""
    out = tempfile.mkdtemp(prefix="decodeloop-bench-tiny-")
    tokenizer = AutoTokenizer.from_pretrained(
        os.path.dirname(tokenizer_source), gguf_file=os.path.basename(tokenizer_source)
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def measure(label: str, spec: str, n: int, repeats: int, device: str) -> list[tuple]:
    bundle = load_model(spec, device=device)
    model = bundle.model.model  # the transformers model under decodeloop's HFModel
    prompt_ids = bundle.tokenizer.encode_markup(PROMPT)
    rows = []
    for name, setting in SETTINGS:
        runners = {
            "bare loop": lambda: bare_loop(model, prompt_ids, n, setting, device),
            "generate()": lambda: hf_generate(model, prompt_ids, n, setting, device),
            "decodeloop answer-only": lambda: decodeloop_run(bundle, prompt_ids, n, setting, False, device),
            "decodeloop trace detail": lambda: decodeloop_run(bundle, prompt_ids, n, setting, True, device),
        }
        for run in runners.values():  # warm up every path once (allocations, kernels, caches)
            run()
        best = {key: min(run() for _ in range(repeats)) for key, run in runners.items()}
        bare = best["bare loop"] / n
        for key, seconds in best.items():
            per_token = seconds / n
            rows.append((label, name, key, n / seconds, (per_token - bare) * 1e6, best["generate()"] / seconds))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=200, help="new tokens per run (default: 200)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per row; the best counts (default: 3)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU (default: 1)")
    parser.add_argument("--gguf", default=GGUF, help="SmolLM2's .gguf (default: models/, from scripts/fetch-smollm2)")
    parser.add_argument("--skip-smollm2", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not os.path.exists(args.gguf):
        sys.exit(f"no {args.gguf}: run scripts/fetch-smollm2 first")
    print(provenance.header())
    rows = measure(
        "tiny Llama, vocab 49,152", "hf:" + tiny_model_dir(args.gguf), args.tokens, args.repeats, args.device
    )
    if not args.skip_smollm2:
        rows += measure("SmolLM2-135M-Instruct Q4_1", "hf:" + args.gguf, args.tokens, args.repeats, args.device)
    print(
        f"{args.tokens} new tokens per run, best of {args.repeats}, device {args.device}, "
        f"{torch.get_num_threads()} thread(s), torch {torch.__version__}\n"
    )
    print("| model | sampling | loop | tokens/s | µs/token over the bare loop | x generate() |")
    print("|---|---|---|---:|---:|---:|")
    for label, setting, loop, rate, over, ratio in rows:
        print(f"| {label} | {setting} | {loop} | {rate:,.0f} | {over:+,.0f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
