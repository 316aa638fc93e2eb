#!/usr/bin/env python3
"""Jump-forward: the forwards it saves and the tokens/s of a call, on real models, with it on and off.

Each model answers the same held-out lab questions (decodeloop.lab.corpus, split heldout) with
--constrain required, greedy, against the bundled servers, twice in one process: with jump-forward (the
tokens the call grammar forces are appended without a forward each) and without. Per run: forwards,
tokens written inside calls, how many were forced, the seconds spent on the calls' tokens and their
tokens/s; and whether the two runs wrote the same tokens (they must: greedy output is token-identical).

    python3 bench/jump_forward.py --gguf models/qwen2.5-coder-0.5b-instruct.gguf [--questions 10]
    python3 bench/jump_forward.py --model transformer
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import provenance

from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.corpus import episodes
from decodeloop.registry import default_servers, load_model
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy


def run(bundle, questions, jump: bool, servers, max_tokens: int):
    """Every question once; (tokens of each turn, forwards, call tokens, forced tokens, seconds in calls)."""
    ids, forwards, in_call, forced, call_seconds = [], 0, 0, 0, 0.0
    for question in questions:
        events, stamps = [], []

        def emit(event, events=events, stamps=stamps):
            events.append(event)
            stamps.append(time.perf_counter())

        with start_stdio_servers(servers, lambda e: None, options=ClientOptions(timeout=60)) as router:
            # policy off: the calls run, as the CLI runs the bundled servers' read-only tools (it trusts them)
            harness = Harness(
                bundle,
                Sampler(),
                router,
                emit,
                policy=Policy.off(),
                config=TurnConfig(constrain="required", max_tokens=max_tokens, detail=False),
            )
            harness.constraint.jump_forward = jump
            harness.run(question)
        tokens = [(e, t) for e, t in zip(events, stamps) if e.kind == "token"]
        ids.append([e.id for e, _ in tokens])
        forwards += sum(1 for e, _ in tokens if e.computed > 0)
        for (_prev, t0), (e, t1) in zip(tokens, tokens[1:]):
            if e.in_call:  # the seconds from the token before to this one: what this call token cost
                in_call += 1
                forced += bool(getattr(e, "forced", False))
                call_seconds += t1 - t0
    return ids, forwards, in_call, forced, call_seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gguf", action="append", default=[], help="a .gguf to run through hf: (repeatable)")
    parser.add_argument("--model", action="append", default=[], help="a model spec (e.g. transformer)")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    specs = args.model + ["hf:" + path for path in args.gguf]
    if not specs:
        parser.error("name a model: --gguf PATH or --model SPEC")
    print(provenance.header())
    questions = [e.user for e in episodes(0, args.questions, split="heldout")]
    print(f"{len(questions)} held-out questions, --constrain required, greedy\n")
    print("| model | jump-forward | forwards | call tokens | forced | s in calls | call tokens/s | same tokens |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for spec in specs:
        bundle = load_model(spec)
        servers = default_servers(spec)
        name = os.path.basename(spec.removeprefix("hf:"))
        off = run(bundle, questions, False, servers, args.max_tokens)
        on = run(bundle, questions, True, servers, args.max_tokens)
        same = "yes" if on[0] == off[0] else "NO"
        for label, (_, fwd, calls, forced, secs) in (("off", off), ("on", on)):
            print(f"| {name} | {label} | {fwd} | {calls} | {forced} | {secs:.2f} | {calls / secs:.1f} | {same} |")
        print(
            f"| {name} | saved | {off[1] - on[1]} ({(off[1] - on[1]) / off[1]:.1%}) | | | "
            f"{off[4] - on[4]:.2f} | x{(on[2] / on[4]) / (off[2] / off[4]):.2f} | |"
        )


if __name__ == "__main__":
    main()
