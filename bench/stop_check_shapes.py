#!/usr/bin/env python3
"""What reading the other call shapes costs the stop check per token: --call-shapes strict beside lenient.

The same texts stream through `Stops.check` in pieces of 1-4 characters (as tokens cut text), JSON syntax,
collecting calls: prose with line breaks, inline code and brackets (near misses for every alternate's opener,
so the hold-back paths run), and prose that ends in a ```json call. Best of --repeats, one process.

    python3 bench/stop_check_shapes.py [--chars 200000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import provenance

from decodeloop.decode.stops import Stops
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.formats.calls.shapes import ALTERNATES

PROSE = (
    "It is 61°F in Polson, MT [see the forecast] with `wind` from the SE.\n"
    "A list: [1] clouds {mostly} and <b>rain</b> later; ``` is a fence.\n"
)
CALL = '```json\n{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}\n```'


def pieces(text: str, seed: int) -> list[str]:
    rng, out, i = random.Random(seed), [], 0
    while i < len(text):
        n = rng.randint(1, 4)
        out.append(text[i : i + n])
        i += n
    return out


def per_token(text_pieces: list[str], lenient: bool, repeats: int) -> float:
    syntax = JsonSyntax()
    best = float("inf")
    for _ in range(repeats):
        stops = Stops(
            eos_ids={0},
            opener=syntax.opener,
            scanner_factory=syntax.scanner,
            max_tokens=10**9,
            max_call_chars=10**6,
            collect_calls=True,
            alternates=ALTERNATES if lenient else (),
            known={"get_weather"}.__contains__,
        )
        check, again = stops.check, stops.new_segment
        started = time.perf_counter()
        for piece in text_pieces:
            if check(1, piece).reason is not None:  # a message ended (a call, in lenient): the next begins
                again()
        best = min(best, time.perf_counter() - started)
    return best / len(text_pieces) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(provenance.header())
    prose = (PROSE * (args.chars // len(PROSE) + 1))[: args.chars]
    rows = [
        ("prose, near misses", pieces(prose, 0)),
        ("messages: prose, then a ```json call", pieces(PROSE * 3 + CALL + "\n", 1) * 200),
    ]
    print("µs per token in Stops.check (JSON syntax, calls collected)\n")
    print("| text | tokens | strict | lenient | lenient / strict |")
    print("|---|---:|---:|---:|---:|")
    for name, text_pieces in rows:
        strict = per_token(text_pieces, False, args.repeats)
        lenient = per_token(text_pieces, True, args.repeats)
        print(f"| {name} | {len(text_pieces):,} | {strict:.2f} | {lenient:.2f} | x{lenient / strict:.2f} |")


if __name__ == "__main__":
    main()
