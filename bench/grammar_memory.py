#!/usr/bin/env python3
"""Memory of --constrain over many tool sets in one process, as `decodeloop eval` over BFCL entries runs it.

Each BFCL entry brings its own functions, so every entry compiles a call grammar of its own. This drives the
real `CallConstraint` (required mode, JSON syntax, Qwen2.5's 151,936-token vocabulary, only its tokenizer
loaded) over N distinct BFCL tool sets: for each, a valid call to its first function is written token by token
through the processor with numpy logits of the vocabulary's size, so the masks of its states are built as in a
real turn (the free strings' broad masks included). After every so many tool sets it prints the process's
RSS (VmRSS from /proc/self/status), the memoized masks alive and the grammars whose states still hold masks.

    --mode shared   one processor; the tools change under it (the router's version moves), as in one harness
    --mode fresh    a new processor per tool set (a new harness per entry), held in a reference cycle as a
                    Harness holds its processor; the previous one is dropped
    --no-gc         the cycle collector off: a process that holds a model has so many long-lived objects that
                    its full collections come rarely, so memory must not wait for them

Run: python3 bench/grammar_memory.py [--sets 200] [--mode shared|fresh] [--gguf models/qwen2.5-...gguf]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import provenance

from decodeloop.constrain import token_matcher as token_grammar
from decodeloop.constrain.processor import CallConstraint
from decodeloop.sampling.processors import ProcessorState
from decodeloop.schema import TYPE_ALIASES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GGUF = os.path.join(ROOT, "models", "qwen2.5-coder-0.5b-instruct.gguf")
BFCL = "/tmp/bfcl/x/bfcl_eval/data"
FILES = [
    "BFCL_v4_multiple.json",
    "BFCL_v4_live_multiple.json",
    "BFCL_v4_simple_python.json",
    "BFCL_v4_parallel_multiple.json",
]
STEPS = 48  # tokens of each call walked through the processor (a call rarely has more)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def tool_sets(directory: str, count: int) -> list[list[SimpleNamespace]]:
    """`count` distinct BFCL tool sets (by their functions' JSON), each as tools with name and input_schema."""
    seen, out = set(), []
    for name in FILES:
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                functions = json.loads(line)["function"]
                key = json.dumps(functions, sort_keys=True)
                if key in seen:
                    continue
                seen.add(key)
                out.append(
                    [SimpleNamespace(name=fn["name"], input_schema=fn.get("parameters") or {}) for fn in functions]
                )
                if len(out) == count:
                    return out
    raise SystemExit(f"only {len(out)} distinct tool sets in {directory} ({', '.join(FILES)})")


def example(schema: dict):
    """A value the schema takes (its required keys only), written long where it is a free string."""
    kind = schema.get("type")
    kind = TYPE_ALIASES.get(kind, kind) if isinstance(kind, str) else kind
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if kind == "integer":
        return 3
    if kind == "number":
        return 2.5
    if kind == "boolean":
        return True
    if kind == "array":
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {"type": "string"}
        return [example(items)]
    if kind == "object":
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        return {key: example(properties.get(key) or {}) for key in schema.get("required") or [] if key in properties}
    return "San Francisco, CA, near the bay"


def call_tokens(bundle, tool) -> list[int]:
    """The tokens of a call to `tool` after its opener, closer included."""
    body = json.dumps({"name": tool.name, "arguments": example(tool.input_schema)})
    ids = bundle.tokenizer.encode("\n" + body + "\n")
    closer = [bundle.closer_id] if bundle.closer_id is not None else bundle.tokenizer.encode(bundle.syntax.closer)
    return ids + closer


def drive(constraint: CallConstraint, bundle, tool, vocab: int, rng) -> tuple[int, int]:
    """Write one call through the processor (forced opener, then the call's tokens): (tokens masked, of them
    the call's own token allowed by the mask)."""
    prompt = bundle.tokenizer.encode("user: call a tool")
    context = list(prompt)
    logits = rng.standard_normal(vocab).astype(np.float32)
    constraint(logits, ProcessorState(context, len(prompt), False, 0))  # the forced opener
    context += constraint.opener_ids
    masked = allowed = 0
    for token in call_tokens(bundle, tool)[:STEPS]:
        step = len(context) - len(prompt)
        out = constraint(logits, ProcessorState(context, len(prompt), True, step))
        if constraint._closed:
            break
        masked += 1
        allowed += bool(np.isfinite(out[token]))
        context.append(token)
    return masked, allowed


def live_masks() -> int:
    """Memoized token masks alive, counted over every grammar state the garbage collector tracks."""
    from decodeloop.constrain.grammar.bytes import ByteState

    return sum(1 for obj in gc.get_objects() if type(obj) is ByteState and "tokens" in obj.masks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", type=int, default=200)
    parser.add_argument("--mode", choices=["shared", "fresh"], default="shared")
    parser.add_argument("--gguf", default=GGUF)
    parser.add_argument("--bfcl", default=BFCL)
    parser.add_argument("--no-gc", action="store_true", help="run with the cycle collector off")
    args = parser.parse_args()
    print(provenance.header())

    from decodeloop.models.hf import load_tokenizer

    started = time.perf_counter()
    bundle = load_tokenizer(args.gguf)
    vocab = max(bundle.tokenizer.vocab_size, 151936)
    sets = tool_sets(args.bfcl, args.sets)
    print(
        f"tokenizer: {bundle.tokenizer.vocab_size:,} tokens, logits of {vocab:,} "
        f"(loaded in {time.perf_counter() - started:.0f} s); {len(sets)} BFCL tool sets; mode {args.mode}; "
        f"mask budget {token_grammar.MASK_MEMORY >> 20} MB for the process"
    )
    print(f"RSS with the tokenizer loaded: {rss_mb():,.0f} MB")
    rng = np.random.default_rng(0)
    if args.no_gc:
        gc.disable()
    current = {"tools": sets[0], "version": 0}
    notices: list = []

    class Holder:
        """What a Harness is to its processor: the processor asks it for the tools, and it holds the processor."""

        def tools(self):
            return current["tools"]

    def make():
        holder = Holder()
        holder.constraint = CallConstraint(
            bundle, holder.tools, mode="required", emit=notices.append, version=lambda: current["version"]
        )
        return holder.constraint

    constraint = make()
    checkpoints = {1, 10, 25, 50, 100, 150, 200, args.sets}
    print(f"{'tool sets':>9} {'RSS MB':>8} {'masks alive':>11} {'mask MB':>8} {'s':>6}")
    t0 = time.perf_counter()
    masked = allowed = 0
    for n, tools in enumerate(sets, 1):
        current["tools"], current["version"] = tools, n
        if args.mode == "fresh" and n > 1:
            constraint = make()
        done = drive(constraint, bundle, tools[0], vocab, rng)
        masked, allowed = masked + done[0], allowed + done[1]
        if n in checkpoints:
            print(
                f"{n:>9} {rss_mb():>8,.0f} {live_masks():>11} {token_grammar.MASKS.bytes / 2**20:>8.1f} "
                f"{time.perf_counter() - t0:>6.0f}",
                flush=True,
            )
    gc.collect()
    print(f"after gc.collect(): RSS {rss_mb():,.0f} MB, masks alive {live_masks()}")
    print(f"{masked:,} tokens masked; the mask allowed the call's own token at {allowed:,} of them")


if __name__ == "__main__":
    main()
