#!/usr/bin/env python3
"""The transformer's KV cache: decoding with and without it, and resuming after a tool result.

1. Decoding: tokens per second when each forward computes only the new token
   (the cache serves the rest) against recomputing the whole context for every
   token, at contexts of 256 and 1024 tokens.
2. Resuming: after a k-token tool message the next forward computes the k+1 new
   positions (the message and the call's closing token); against recomputing the
   whole context. k = 16, 64, 256, after prior contexts of 128 and 1024 tokens.

Times are the best of several repeats (the machine is shared; the best is the
least disturbed). Run: python3 bench/kv_cache.py [--weights PATH] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import provenance

from decodeloop.formats.lab import CharTokenizer
from decodeloop.lab.corpus import episodes, system_prompt
from decodeloop.lab.transformer import DEFAULT_WEIGHTS, TransformerModel


def tokens(n: int) -> list[int]:
    """n tokens of real transcripts, one after another."""
    tokenizer, system, out = CharTokenizer(), system_prompt(), []
    for episode in episodes(0, 1 + n // 200):
        out += tokenizer.encode_markup(episode.markup(system))
    while len(out) < n:
        out += out
    return out[:n]


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def decode_rate(model, context: list[int], new: list[int], cached: bool) -> float:
    """Tokens per second over `new`, appended one at a time after `context`."""

    def run() -> None:
        model.reset()
        ctx = list(context)
        model.forward(ctx)
        started = time.perf_counter()
        for t in new:
            ctx.append(t)
            if not cached:
                model.reset()
            model.forward(ctx)
        run.seconds = time.perf_counter() - started

    times = []
    for _ in range(3):
        run()
        times.append(run.seconds)
    return len(new) / min(times)


def resume_ms(model, prior: list[int], injected: list[int], cached: bool, repeats: int) -> float:
    def run() -> None:
        if cached:
            model.reset()
            model.forward(prior)
            started = time.perf_counter()
            model.forward(prior + injected)
            run.seconds = time.perf_counter() - started
        else:
            model.reset()
            started = time.perf_counter()
            model.forward(prior + injected)
            run.seconds = time.perf_counter() - started

    times = []
    for _ in range(repeats):
        run()
        times.append(run.seconds)
    return 1000 * min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", default=DEFAULT_WEIGHTS)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(provenance.header())
    model = TransformerModel.load(args.weights)
    c = model.config
    data = tokens(4096)
    print(
        f"transformer: {c.n_layer} layers, {c.n_head} heads, d_model {c.d_model}, window {c.window}; "
        f"float32 numpy, one BLAS thread\n"
    )

    print("decoding, tokens per second (best of 3 runs)\n")
    print("| context | with the cache | recompute every token | speed-up |")
    print("|---------|----------------|-----------------------|----------|")
    for n in (256, 1024):
        fast = decode_rate(model, data[:n], data[n : n + 64], cached=True)
        slow = decode_rate(model, data[:n], data[n : n + 8], cached=False)
        print(f"| {n:7d} | {fast:14,.0f} | {slow:21,.1f} | {fast / slow:7.0f}x |")

    print(f"\nresuming after a k-token tool message, ms (best of {args.repeats})\n")
    print("| prior context | k   | prefill k+1 positions | per position | recompute all | speed-up |")
    print("|---------------|-----|-----------------------|--------------|---------------|----------|")
    for prior in (128, 1024):
        for k in (16, 64, 256):
            context, injected = data[:prior], data[prior : prior + k + 1]
            fast = resume_ms(model, context, injected, True, args.repeats)
            slow = resume_ms(model, context, injected, False, args.repeats)
            print(
                f"| {prior:13d} | {k:3d} | {fast:21.2f} | {fast / (k + 1):12.3f} | {slow:13.2f} | {slow / fast:7.1f}x |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
