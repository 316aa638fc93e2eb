#!/usr/bin/env python3
"""What --constrain costs per token at a real BPE vocabulary: decodeloop's TokenMatcher beside llguidance.

SmolLM2-135M-Instruct (49,152 tokens) or Qwen2.5-Coder-0.5B-Instruct (151,936; --gguf) (the real model, greedy,
CPU) answers held-out lab questions with --constrain required
in the JSON syntax; the processor is timed on every token inside a call (advance the grammar, say whether the
mask overrode the model, apply the mask to the model's torch logits). Two passes over the same questions on
one processor: cold (every grammar state's mask is built when first met) and warm (memoized). Then the same
calls' tokens are replayed through llguidance (pip install llguidance; a Rust JSON-schema and Lark engine),
its grammar the same tools' schemas between `<tool_call>` and `</tool_call>`: per token, the bitmask is
computed and applied to the same kind of logits (torch float32, 49,152). Grammar set-up is reported apart.

Run: DECODELOOP_SMOLLM2=models/SmolLM2-135M-Instruct.Q4_1.gguf python3 bench/constrain_bpe.py [--questions N]
     python3 bench/constrain_bpe.py --gguf models/qwen2.5-coder-0.5b-instruct.gguf
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import provenance
from constrain import Timed, lab_tools, stats

from decodeloop.constrain.processor import CallConstraint
from decodeloop.decode.context import Context
from decodeloop.decode.loop import generate
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.tokenizer import StreamDecoder
from decodeloop.sampling import Sampler
from decodeloop.sampling.processors import ProcessorState


def run_pass(bundle, timed, tools, questions) -> list[list[int]]:
    """One greedy turn per question; the token ids of each call written after its opener."""
    engine = bundle.engine(Sampler(temperature=0.0), [timed])
    syntax, tokenizer = bundle.syntax, bundle.tokenizer
    # the opener and the closer, where the vocabulary has each as one special token
    delimiters = {i: text for i, text in [(bundle.opener_id, syntax.opener), (bundle.closer_id, syntax.closer)]}
    delimiters.pop(None, None)
    bodies = []
    for question in questions:
        stops = Stops(
            syntax,
            eos_ids=set(bundle.chat.stop_ids),
            settings=StopSettings(max_tokens=120, collect_calls=False),
            specials=delimiters,
        )
        context = Context()
        for ids, source in bundle.chat.start(tools, question):
            context.extend(ids, source)
        state = ProcessorState(context=context.ids, generated=len(context))
        start = len(context)
        generate(engine, stops, context, StreamDecoder(tokenizer), tokenizer, lambda e: None, [], state, detail=False)
        written = context.ids[start:]
        opener = tokenizer.encode(syntax.opener)
        if written[: len(opener)] == opener:
            bodies.append(written[len(opener) :])
    return bodies


def llguidance_rows(bundle, tools, bodies, path: str):
    try:
        import llguidance
        import llguidance.hf
        import llguidance.torch as lt
        import torch
        from transformers import AutoTokenizer
    except ImportError as e:
        return None, f"llguidance not measured ({e.name} is not installed: pip install llguidance)"
    directory, name = os.path.split(os.path.abspath(path))
    hf = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    lltok = llguidance.hf.from_tokenizer(hf, n_vocab=bundle.tokenizer.vocab_size)
    schema = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": t.input_schema},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ],
        "x-guidance": {"whitespace_flexible": True},
    }  # as decodeloop's grammar, whitespace between tokens
    lark = f'start: ws call ws "</tool_call>"\nws: | /[ \\t\\r\\n]+/\ncall: %json {json.dumps(schema)}\n'
    grammar = llguidance.LLMatcher.grammar_from_lark(lark)
    setup, per_token, consumed, refused = [], [], 0, 0
    bitmask = lt.allocate_token_bitmask(1, lltok.vocab_size)
    logits = torch.zeros(1, bundle.tokenizer.vocab_size)
    for body in bodies:
        started = time.perf_counter()
        matcher = llguidance.LLMatcher(lltok, grammar)
        setup.append(time.perf_counter() - started)
        if matcher.is_error():
            return None, f"llguidance refused the grammar: {matcher.get_error()}"
        for token in body:
            started = time.perf_counter()
            lt.fill_next_token_bitmask(matcher, bitmask, 0)
            out = logits.clone()
            lt.apply_token_bitmask_inplace(out, bitmask)
            per_token.append(time.perf_counter() - started)
            if not matcher.consume_token(token):
                refused += 1
                break
            consumed += 1
            if matcher.is_stopped() or (matcher.is_accepting() and token == body[-1]):
                break
    return (setup, per_token, consumed, refused), None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=8, help="held-out questions per pass (default: 8)")
    parser.add_argument(
        "--gguf", default=os.environ.get("DECODELOOP_SMOLLM2"), help="the model's .gguf (default: $DECODELOOP_SMOLLM2)"
    )
    args = parser.parse_args()
    path = args.gguf
    if not path or not os.path.exists(path):
        sys.exit("name a model's .gguf with --gguf or DECODELOOP_SMOLLM2 (decodeloop fetch smollm2 fetches one)")
    print(provenance.header())

    from decodeloop.lab.corpus import episodes
    from decodeloop.registry import load_model

    started = time.perf_counter()
    bundle = load_model("hf:" + path)
    tools = [SimpleNamespace(name=t.name, description=t.description, input_schema=t.input_schema) for t in lab_tools()]
    questions = [e.user for e in episodes(0, args.questions, "heldout")]
    notices = []
    started = time.perf_counter()
    constraint = CallConstraint(bundle, lambda: tools, mode="required", emit=notices.append)
    build = time.perf_counter() - started
    timed = Timed(constraint)
    rows = []
    for label in ("cold", "warm"):
        timed.inside, timed.free = [], []
        bodies = run_pass(bundle, timed, tools, questions)
        rows.append((f"decodeloop TokenMatcher, {label}", len(bodies), *stats(timed.inside)))
    measured, why = llguidance_rows(bundle, tools, bodies, path)

    vocab = bundle.tokenizer.vocab_size
    print(
        f"µs per constrained token at a {vocab:,}-token vocabulary ({os.path.basename(path)}, torch float32 logits "
        f"on CPU), {len(questions)} held-out questions, JSON syntax, --constrain required"
    )
    print()
    print("| engine | calls | constrained tokens | median | p90 | p99 | max |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, calls, n, median, p90, p99, top in rows:
        print(f"| {name} | {calls} | {n:,} | {median:.1f} | {p90:.1f} | {p99:.1f} | {top:,.0f} |")
    if measured is not None:
        setup, per_token, consumed, refused = measured
        n, median, p90, p99, top = stats(per_token)
        print(
            f"| llguidance {getattr(sys.modules.get('llguidance'), '__version__', '')}, same tokens | "
            f"{len(bodies)} | {n:,} | {median:.1f} | {p90:.1f} | {p99:.1f} | {top:,.0f} |"
        )
        print()
        print(
            f"set-up: TokenMatcher (token table, once per model) {build * 1e3:.0f} ms, grammar states "
            f"{constraint.matcher.grammar.size:,}; llguidance matcher per call median "
            f"{statistics.median(setup) * 1e3:.2f} ms; llguidance consumed {consumed} tokens, refused {refused}"
        )
    else:
        print()
        print(why)
        print(f"set-up: TokenMatcher {build * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
