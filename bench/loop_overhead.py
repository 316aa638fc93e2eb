#!/usr/bin/env python3
"""Harness time per token, excluding the forward pass, at contexts of 1k, 10k and 100k tokens.

The model here costs a constant: its forward returns precomputed logits that spell
a looping text full of near-misses for the stop strings and the call opener, so
the hold-back paths run. For each token we time from the end of one forward to
the start of the next: sampling, append, stop check and the event, which is
everything the harness does per token. Run: python3 bench/loop_overhead.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import provenance

from decodeloop.decode.context import Context
from decodeloop.decode.engine import LocalEngine
from decodeloop.decode.loop import generate
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.lab import CharTokenizer
from decodeloop.formats.tokenizer import StreamDecoder
from decodeloop.sampling import Sampler
from decodeloop.sampling.processors import ProcessorState
from decodeloop.ui.jsonl import JsonlView

TEXT = "It is 61°F in Polson [cal. Use it well.\n\nUse the [c rest. "
STOP_STRINGS = ("\n\nUser:", "</answer>")


class ConstantCostModel:
    """forward() returns the next precomputed logits; it records when each call starts and ends."""

    name = "constant"

    def __init__(self, tokenizer: CharTokenizer) -> None:
        self.vocab_size = tokenizer.vocab_size
        self.last_computed = 1
        self.table = []
        for token in tokenizer.encode(TEXT):
            logits = [0.0] * self.vocab_size
            logits[token] = 8.0
            self.table.append(logits)
        self.calls = 0
        self.entered: list[float] = []
        self.left: list[float] = []

    def forward(self, context):
        self.entered.append(time.perf_counter())
        logits = self.table[self.calls % len(self.table)]
        self.calls += 1
        self.left.append(time.perf_counter())
        return logits


def measure(context_len: int, tokens: int, sampler_args: dict, detail: bool, emit) -> list[float]:
    tokenizer = CharTokenizer()
    model = ConstantCostModel(tokenizer)
    stops = Stops(
        CompactSyntax(), eos_ids={tokenizer.eos_id}, settings=StopSettings(stop_strings=STOP_STRINGS, max_tokens=tokens)
    )
    context = Context()
    context.extend(tokenizer.encode("lorem ipsum dolor " * (context_len // 18 + 1))[:context_len], "user")
    engine = LocalEngine(model, Sampler(**sampler_args))
    generate(
        engine,
        stops,
        context,
        StreamDecoder(tokenizer),
        tokenizer,
        emit,
        [],
        ProcessorState(context=context.ids, generated=len(context)),
        detail,
    )
    # harness time for token i: from the end of forward i to the start of forward i+1
    return [(model.entered[i + 1] - model.left[i]) * 1e6 for i in range(len(model.left) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20_000, help="tokens generated per measurement")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(provenance.header())

    devnull = open(os.devnull, "w")
    configs = [
        ("greedy, answer only", {"temperature": 0.0}, False, lambda e: None),
        ("greedy, trace detail", {"temperature": 0.0}, True, lambda e: None),
        ("T=0.8 top-p 0.9", {"temperature": 0.8, "top_p": 0.9, "seed": 1}, False, lambda e: None),
        ("T=0.8 top-p 0.9, trace detail", {"temperature": 0.8, "top_p": 0.9, "seed": 1}, True, lambda e: None),
        ("greedy, JSONL to /dev/null", {"temperature": 0.0}, True, JsonlView(devnull)),
    ]
    contexts = (1_000, 10_000, 100_000)
    print(
        f"harness µs per token, excluding forward (median of {args.tokens:,} tokens, best of "
        f"{args.repeats} runs; p90 in brackets)\n"
    )
    header = f"| {'configuration':<30} |" + "".join(f" {f'{n // 1000}k ctx':>16} |" for n in contexts) + " 100k/1k |"
    print(header)
    print("|" + "-" * 32 + "|" + ("-" * 18 + "|") * len(contexts) + "---------|")
    for name, sampler_args, detail, emit in configs:
        # repeats outermost, so a noisy moment on a shared machine hits every context alike
        runs: dict[int, list[list[float]]] = {n: [] for n in contexts}
        for _ in range(args.repeats):
            for n in contexts:
                runs[n].append(measure(n, args.tokens, sampler_args, detail, emit))
        cells, medians = [], []
        for n in contexts:
            best = min(runs[n], key=statistics.median)
            medians.append(statistics.median(best))
            cells.append(f"{medians[-1]:7.2f} [{statistics.quantiles(best, n=10)[-1]:6.2f}]")
        print(f"| {name:<30} |" + "".join(f" {c:>16} |" for c in cells) + f" {medians[-1] / medians[0]:6.2f}x |")


if __name__ == "__main__":
    main()
