#!/usr/bin/env python3
"""Which history, instruction and repeat rule make a real model answer: measured on the lab's held-out questions.

Each row runs the same held-out episodes (`decodeloop eval`'s: each a conversation of its own, greedy, the
bundled servers) through one model, loaded once, with one choice changed:

    as written / template, string / template, object   how the model's call is kept in the history (--history;
                                                        the template's tool_calls with arguments as a JSON
                                                        string or an object), the repeat guard strict
    no instruction                                      --system "You are a helpful assistant." (the preamble
                                                        without the harness's instruction for tools)
    hold after 0 / 1 repeats                            --on-repeat answer, the next message held to text at
                                                        the first repeat, or after one told the guard's message

and prints calls, correct tool, correct arguments, answered and value copy (the answer holds the result's
values), as docs/real-models.md reports them.

    .venv/bin/python bench/answer_choices.py --model gguf:models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
        --episodes 50 [--rows as-written,string,object,bare,hold0,hold1] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

# row -> (what it is, the chat's arguments form, TurnConfig changes, the system prompt or None for the default)
ROWS = {
    "as-written": ("as written", "string", {"history": "as-written", "on_repeat": "stop"}, None),
    "string": ("template, arguments a JSON string", "string", {"history": "template", "on_repeat": "stop"}, None),
    "object": ("template, arguments an object", "object", {"history": "template", "on_repeat": "stop"}, None),
    "bare": ("template (string), no instruction", "string", {"history": "template", "on_repeat": "stop"}, "plain"),
    "hold0": (
        "template (string), held at the first repeat",
        "string",
        {"on_repeat": "answer", "answer_after": 0},
        None,
    ),
    "hold1": ("template (string), held after one", "string", {"on_repeat": "answer", "answer_after": 1}, None),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--form", choices=("string", "object"), help="the arguments form of the hold rows")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import provenance

    from decodeloop.formats.lab import PREAMBLE
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.lab.corpus import episodes, lab_server_commands
    from decodeloop.lab.evaluate import evaluate
    from decodeloop.registry import load_model
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import ClientOptions, start_stdio_servers
    from decodeloop.trust.policy import Policy

    print(provenance.header())
    bundle = load_model(args.model)
    held_out = episodes(0, args.episodes, "heldout")
    results = []
    print(f"{args.model}, {len(held_out)} held-out episodes, greedy, --max-tokens {args.max_tokens}\n")
    print(
        "| history, instruction, repeats | calls | correct tool | correct arguments | answered | value copy | s/episode |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in args.rows.split(","):
        what, form, changes, system = ROWS[row]
        if args.form and row.startswith("hold"):
            form = args.form
            what = what.replace("(string)", f"({form})")
        bundle.chat.arguments = form
        config = dataclasses.replace(TurnConfig(max_tokens=args.max_tokens), **changes)
        prompt = PREAMBLE if system == "plain" else None
        started = time.perf_counter()
        with contextlib.ExitStack() as stack:
            servers = start_stdio_servers(
                lab_server_commands(False), lambda event: None, options=ClientOptions(timeout=60)
            )
            router = stack.enter_context(servers)

            def make(emit, router=router, config=config, prompt=prompt):  # the lab's own servers: every call runs
                return Harness(bundle, Sampler(), router, emit, config=config, system=prompt, policy=Policy.off())

            summary, _ = evaluate(make, held_out)
        seconds = (time.perf_counter() - started) / len(held_out)
        n = summary.episodes
        copied = round(summary.value_copy_rate * n)
        line = (
            f"| {what} | {summary.calls} | {summary.correct_tool_rate:.0%} | {summary.correct_arguments_rate:.0%} "
            f"| {summary.answered}/{n} | {copied}/{n} | {seconds:.1f} |"
        )
        print(line, flush=True)
        results.append({"row": row, "what": what, **dataclasses.asdict(summary), "seconds_per_episode": seconds})
    if args.json:
        print(json.dumps({"model": args.model, "rows": results, **provenance.record()}))


if __name__ == "__main__":
    main()
