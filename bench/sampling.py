"""Microseconds per sampling call on real vocabulary sizes: list, numpy and torch (CPU) logits.

    python3 bench/sampling.py                 # the table (about a minute)
    python3 bench/sampling.py --calls 200     # fewer calls per run
    python3 bench/sampling.py --pool 1        # logits already in cache

Logits are random normal N(0, 3) float32, about the spread of a real model's. Each
cell is the median time of one call over `--calls` calls, best of 3 runs; the calls
cycle through `--pool` different arrays (8 by default: no CPU cache holds them all at
the larger vocabulary; `--pool 1` measures logits already in cache).
torch runs on one thread (torch.set_num_threads(1)); numpy's elementwise work is
single-threaded anyway. The list path runs only at 49,152: it is the lab models'
path, for vocabularies of a few hundred. `explain top-3` is what the trace
computes per token when sampling is greedy (the model's softmax at temperature 1); the
`sample + explain` rows are a token's draw and the trace's probabilities of the
distribution it was drawn from, which reuse what the draw kept (compare them with the
plain draw above). The last row is one bare
exp over the logits: the softmax total needs it, so no sampling setting that needs the
total (top-p, plain temperature, explain) can be faster.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import provenance

from decodeloop.sampling import Sampler, explain

VOCABS = (49_152, 151_936)
CASES = [
    ("greedy", dict()),
    ("T 0.8 + top-p 0.9", dict(temperature=0.8, top_p=0.9)),
    ("T 0.8 + top-k 50", dict(temperature=0.8, top_k=50)),
    ("T 0.8 + min-p 0.05", dict(temperature=0.8, min_p=0.05)),
    ("explain top-3", None),
    ("T 0.8: sample + explain (the trace)", ("trace", dict(temperature=0.8))),
    ("T 0.8 + top-p 0.9: sample + explain", ("trace", dict(temperature=0.8, top_p=0.9))),
    ("T 0.8 + top-k 50: sample + explain", ("trace", dict(temperature=0.8, top_k=50))),
    ("T 0.8 (plain sample, for the row above)", dict(temperature=0.8)),
    ("(floor: one exp over the vocabulary)", "exp"),
]


def median_us(fn, pool, calls: int) -> float:
    """Median of per-call times over `calls` calls, in µs."""
    times = []
    for i in range(calls):
        logits = pool[i % len(pool)]
        start = time.perf_counter()
        fn(logits)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def bench(calls: int, pool: int = 8, runs: int = 3) -> list[list[str]]:
    import numpy as np

    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None

    rng = np.random.default_rng(0)
    pools = {}
    for vocab in VOCABS:
        arrays = [(rng.standard_normal(vocab) * 3.0).astype(np.float32) for _ in range(pool)]
        pools[("numpy", vocab)] = arrays
        if vocab == VOCABS[0]:
            pools[("list", vocab)] = [a.tolist() for a in arrays[:2]]
        if torch is not None:
            pools[("torch", vocab)] = [torch.from_numpy(a.copy()) for a in arrays]

    columns = [("list", VOCABS[0])] + [(kind, v) for v in VOCABS for kind in ("numpy", "torch") if (kind, v) in pools]
    cells = {}
    for name, settings in CASES:
        for kind, vocab in columns:
            if settings is None:
                fn = lambda logits: explain(logits, 7, 3)  # noqa: E731
            elif isinstance(settings, tuple):  # what a token costs with the trace: the draw, then explain
                fn = lambda logits, s=Sampler(seed=0, **settings[1]): s.explain(logits, s.sample(logits), 3)  # noqa: E731
            elif settings == "exp":
                if kind == "list":
                    continue
                fn = np.exp if kind == "numpy" else torch.exp
            else:
                fn = Sampler(seed=0, **settings).sample
            fn(pools[(kind, vocab)][0])  # warm up (imports, generators)
            cells[(name, kind, vocab)] = fn
    # The runs go round every cell in turn, so a burst of load elsewhere spoils one run of
    # a few cells rather than every run of one.
    best = {}
    for _ in range(runs):
        for (name, kind, vocab), fn in cells.items():
            n = max(calls // 20, 5) if kind == "list" else calls
            us = median_us(fn, pools[(kind, vocab)], n)
            best[(name, kind, vocab)] = min(us, best.get((name, kind, vocab), us))
    rows = []
    for name, _ in CASES:
        row = [name]
        for kind, vocab in columns:
            us = best.get((name, kind, vocab))
            row.append("" if us is None else f"{us:,.0f}")
        rows.append(row)
    header = ["case"] + [f"{kind} {vocab:,}" for kind, vocab in columns]
    return [header] + rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per cell and run (default: 1000)")
    parser.add_argument("--runs", type=int, default=3, help="runs; each cell shows its best (default: 3)")
    parser.add_argument(
        "--pool",
        type=int,
        default=8,
        help="distinct logits arrays cycled through (default: 8, about 5 MB at 151,936: out of "
        "L2; 1 keeps them in cache, as logits the model has just written would be)",
    )
    args = parser.parse_args()
    print(provenance.header())
    table = bench(args.calls, max(args.pool, 1), max(args.runs, 1))
    print(
        f"µs per call (median of {args.calls:,} calls, best of {args.runs} runs), one thread, "
        f"{args.pool} logits arrays in turn\n"
    )
    print("| " + " | ".join(table[0]) + " |")
    print("|---|" + "---:|" * (len(table[0]) - 1))
    for row in table[1:]:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
