#!/usr/bin/env python3
"""What --constrain costs per token: the processor's time (advance the grammar, say whether the mask overrode
the model, apply the mask), on the lab vocabulary of 261 tokens.

Calls are generated through the real loop (generate, Stops) and the processor is timed on every token.
Scenarios: the trained n-gram (order 8, temperature 0.7) on held-out questions in the compact syntax, with
--constrain calls, with its list logits and with the same logits as float32 numpy arrays (the transformer's
kind); and random logits on a nested JSON-syntax schema with --constrain required (so that every turn writes a
call). Each scenario runs twice on one processor: the first pass meets every grammar state for the first time
(cold: the state's mask is built then), the second finds most of them memoized (warm). `free` is a token
outside a call with the constraint on (required: the forced opener); with --constrain off there is no
processor at all. Run: python3 bench/constrain.py [--runs N] (the best run of each row is printed: a shared
machine's load spoils runs, not rows)
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import provenance

from decodeloop.constrain.processor import CallConstraint
from decodeloop.decode.context import Context
from decodeloop.decode.engine import LocalEngine
from decodeloop.decode.loop import generate
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.formats.chat import pieces_ids
from decodeloop.formats.lab import CharTokenizer, LabChat
from decodeloop.formats.tokenizer import StreamDecoder
from decodeloop.sampling import Sampler
from decodeloop.sampling.processors import ProcessorState

NESTED = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "maxLength": 24},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "sort": {"enum": ["asc", "desc"]},
        "filters": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "field": {"type": "string", "pattern": "^[a-z_]{1,12}$"},
                    "value": {
                        "anyOf": [
                            {"type": "number", "minimum": -100, "maximum": 100},
                            {"type": "string", "maxLength": 8},
                            {"type": "null"},
                        ]
                    },
                },
                "required": ["field", "value"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


class Timed:
    """The constraint, with the time of each call recorded by whether it was inside a call."""

    def __init__(self, constraint: CallConstraint) -> None:
        self.constraint = constraint
        self.inside: list[float] = []
        self.free: list[float] = []

    @property
    def override(self):
        return self.constraint.override

    def __call__(self, logits, state):
        started = time.perf_counter()
        out = self.constraint(logits, state)
        elapsed = time.perf_counter() - started
        (self.inside if state.in_call else self.free).append(elapsed)
        return out


class AsNumpy:
    """A model's list logits handed on as a float32 numpy array."""

    def __init__(self, model) -> None:
        import numpy as np

        self.model, self.np = model, np
        self.name = model.name

    @property
    def last_computed(self):
        return self.model.last_computed

    def forward(self, context):
        return self.np.asarray(self.model.forward(context), dtype=self.np.float32)


class RandomLogits:
    name = "random"
    last_computed = 1

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def forward(self, context):
        return [self.rng.gauss(0.0, 3.0) for _ in range(261)]


def lab_tools():
    from decodeloop.servers.timezone import INPUT as TIMEZONE
    from decodeloop.servers.units import INPUT as UNITS
    from decodeloop.servers.weather import FORECAST_INPUT, WEATHER_INPUT

    return [
        SimpleNamespace(name="get_weather", description="Current weather.", input_schema=WEATHER_INPUT),
        SimpleNamespace(name="get_forecast", description="Forecast.", input_schema=FORECAST_INPUT),
        SimpleNamespace(name="get_time_zone", description="Time zone.", input_schema=TIMEZONE),
        SimpleNamespace(name="convert", description="Convert units.", input_schema=UNITS),
    ]


def run_turns(timed: Timed, model, syntax, prompts, temperature: float, seed: int) -> int:
    tokenizer = CharTokenizer()
    engine = LocalEngine(model, Sampler(temperature=temperature, seed=seed), [timed])
    calls = 0
    for prompt in prompts:
        stops = Stops(syntax, eos_ids={tokenizer.eos_id}, settings=StopSettings(max_tokens=400, collect_calls=False))
        context = Context()
        context.extend(prompt, "user")
        state = ProcessorState(context=context.ids, generated=len(context))
        verdict = generate(
            engine, stops, context, StreamDecoder(tokenizer), tokenizer, lambda e: None, [], state, detail=False
        )
        calls += verdict.reason == "tool_call"
    return calls


def stats(times: list[float]) -> tuple:
    us = sorted(t * 1e6 for t in times)
    if not us:
        return (0, 0, 0, 0, 0)
    return (len(us), statistics.median(us), us[int(0.9 * (len(us) - 1))], us[int(0.99 * (len(us) - 1))], us[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=150, help="turns per pass (default: 150)")
    parser.add_argument("--order", type=int, default=8, help="n-gram order (default: 8)")
    parser.add_argument("--runs", type=int, default=3, help="runs of every row; the best is printed (default: 3)")
    args = parser.parse_args()
    print(provenance.header())

    from decodeloop.lab.corpus import episodes
    from decodeloop.lab.ngram import NgramModel

    tokenizer = CharTokenizer()
    compact = CompactSyntax()
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=compact, opener_id=None, closer_id=None)
    tools = lab_tools()
    chat = LabChat(tokenizer, compact)
    questions = [e.user for e in episodes(0, args.turns, "heldout")]
    prompts = [pieces_ids(chat.start(tools, q)) for q in questions]
    ngram = NgramModel.trained(tokenizer, args.order)

    scenarios = [
        (
            f"n-gram order {args.order}, lab tools, compact, calls",
            "list",
            lambda: ngram,
            compact,
            prompts,
            0.7,
            "calls",
        ),
        (
            f"n-gram order {args.order}, lab tools, compact, calls",
            "numpy float32",
            lambda: AsNumpy(ngram),
            compact,
            prompts,
            0.7,
            "calls",
        ),
        (
            "random logits, nested schema, JSON, required",
            "list",
            lambda: RandomLogits(1),
            JsonSyntax(),
            [tokenizer.encode("q") for _ in range(args.turns)],
            1.0,
            "required",
        ),
    ]
    best: dict = {}
    for _ in range(args.runs):
        for name, kind, make_model, syntax, turn_prompts, temperature, mode in scenarios:
            scenario_tools = tools if syntax is compact else [SimpleNamespace(name="search", input_schema=NESTED)]
            scenario_bundle = SimpleNamespace(tokenizer=tokenizer, syntax=syntax, opener_id=None, closer_id=None)
            timed = Timed(CallConstraint(scenario_bundle, lambda t=scenario_tools: t, mode=mode))
            for label in ("cold", "warm"):
                timed.inside, timed.free = [], []
                calls = run_turns(
                    timed, make_model(), syntax, turn_prompts, temperature, seed=0 if label == "cold" else 1
                )
                row = (
                    name,
                    kind,
                    label,
                    calls,
                    *stats(timed.inside),
                    statistics.median(timed.free) * 1e6 if timed.free else float("nan"),
                    timed.constraint.matcher.grammar.size,
                )
                key = (name, kind, label)
                if key not in best or row[5] < best[key][5]:
                    best[key] = row
    rows = list(best.values())
    del bundle

    print("µs per constrained token, the processor alone (advance + override check + mask), 261-token vocabulary")
    print()
    print(
        "| scenario | logits | pass | calls | constrained tokens | median | p90 | p99 | max | free token median "
        "| grammar states |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, kind, label, calls, n, median, p90, p99, top, free, size in rows:
        print(
            f"| {name} | {kind} | {label} | {calls} | {n:,} | {median:.1f} | {p90:.1f} | {p99:.1f} | {top:,.0f} | "
            f"{free:.2f} | {size:,} |"
        )


if __name__ == "__main__":
    main()
