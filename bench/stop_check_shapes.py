#!/usr/bin/env python3
"""What the stop check costs per token: the JSON syntax strict beside lenient, against an earlier checkout, and
a row for every model family's call format.

The same texts stream through `Stops.check` in pieces of 1-4 characters (as tokens cut text), calls
collected: prose with line breaks, inline code and brackets (near misses for every alternate's opener, so the
hold-back paths run), and prose that ends in a ```json call. With `--baseline DIR` (a checkout of an earlier
commit) the same measurement runs there too, in a process of its own, and the table gives both. Then each
call format's own text: prose, then two calls as the format writes them (its `render`), its markers as the
special tokens they are. Best of --repeats.

    python3 bench/stop_check_shapes.py [--chars 200000] [--repeats 5] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


def json_rows(chars: int, repeats: int) -> list[tuple[str, int, float, float]]:
    """The JSON syntax's rows, strict and lenient: (text, tokens, µs strict, µs lenient). An earlier checkout
    (--baseline) runs it too: there Stops takes the oldest keywords."""
    from decodeloop.decode import stops as stops_module
    from decodeloop.decode.stops import Stops
    from decodeloop.formats.calls.json import JsonSyntax
    from decodeloop.formats.calls.shapes import ALTERNATES

    settings = getattr(stops_module, "StopSettings", None)  # None: a checkout older than StopSettings

    def make(syntax: JsonSyntax, lenient: bool) -> Stops:
        known = {"get_weather"}.__contains__
        if settings is None:
            return Stops(
                eos_ids={0},
                opener=syntax.opener,
                scanner_factory=syntax.scanner,
                max_tokens=10**9,
                max_call_chars=10**6,
                collect_calls=True,
                alternates=ALTERNATES if lenient else (),
                known=known,
            )
        turn = settings(max_tokens=10**9, max_call_chars=10**6, collect_calls=True, lenient=lenient)
        return Stops(syntax, eos_ids={0}, settings=turn, known=known)

    def per_token(text_pieces: list[str], lenient: bool) -> float:
        syntax = JsonSyntax()
        best = float("inf")
        for _ in range(repeats):
            stops = make(syntax, lenient)
            check, again = stops.check, stops.new_segment
            started = time.perf_counter()
            for piece in text_pieces:
                if check(1, piece).reason is not None:  # a message ended (a call, in lenient): the next begins
                    again()
            best = min(best, time.perf_counter() - started)
        return best / len(text_pieces) * 1e6

    prose = (PROSE * (chars // len(PROSE) + 1))[:chars]
    rows = [
        ("prose, near misses", pieces(prose, 0)),
        ("messages: prose, then a ```json call", pieces(PROSE * 3 + CALL + "\n", 1) * 200),
    ]
    return [(name, len(p), per_token(p, False), per_token(p, True)) for name, p in rows]


def format_row(name: str, chars: int, repeats: int) -> tuple[str, int, float, int]:
    """One call format's text: two calls as the format renders them, then prose, streamed through its stop check
    with its markers as special ids; (format, tokens, µs a token, calls read)."""
    from decodeloop.decode.parse import markers_of
    from decodeloop.decode.stops import Stops, StopSettings
    from decodeloop.formats.calls.base import Call
    from decodeloop.formats.calls.formats import get_format

    syntax = get_format(name)
    call = Call("get_weather", {"city": "Polson", "state": "MT"})
    message = syntax.render(call) + syntax.render(call) + "\n" + PROSE * 2  # the calls first: some formats read
    # a call only at the start of the message
    markers = markers_of(syntax)
    ids = {text: -2 - n for n, text in enumerate(markers)}
    split = re.compile("(" + "|".join(map(re.escape, markers)) + ")")
    units: list[tuple[int, str]] = []
    for n, part in enumerate(split.split(message)):
        if n % 2:
            units.append((ids[part], ""))
        else:
            units += [(-1, p) for p in pieces(part, n)]
    units.append((0, ""))  # the model's end of turn: the next message begins afresh
    stream = units * max(1, chars // len(message))
    best, calls = float("inf"), 0
    for _ in range(repeats):
        stops = Stops(
            syntax,
            eos_ids={0},
            settings=StopSettings(max_tokens=10**12, collect_calls=True),
            tools={"get_weather": {"type": "object"}},
            specials={i: text for text, i in ids.items()},
        )
        check, again, calls = stops.check, stops.new_segment, 0
        started = time.perf_counter()
        for token, piece in stream:
            verdict = check(token, piece)
            if verdict.reason is not None:
                calls += len(verdict.parsed)
                again()
        calls += len(stops.finish().parsed)
        best = min(best, time.perf_counter() - started)
    return name, len(stream), best / len(stream) * 1e6, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", metavar="DIR", help="a checkout of an earlier commit to measure beside this one")
    parser.add_argument("--rows-json", action="store_true", help=argparse.SUPPRESS)  # the baseline's own run
    args = parser.parse_args()
    if args.rows_json:
        print(json.dumps(json_rows(args.chars, args.repeats)))
        return
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import provenance

    print(provenance.header())
    rows = json_rows(args.chars, args.repeats)
    print("µs per token in Stops.check (JSON syntax, calls collected)\n")
    if args.baseline:
        code = (
            f"import sys, runpy; sys.path.insert(0, {os.path.abspath(args.baseline)!r}); "
            f"sys.argv = ['b', '--rows-json', '--chars', '{args.chars}', '--repeats', '{args.repeats}']; "
            f"runpy.run_path({os.path.abspath(__file__)!r}, run_name='__main__')"
        )
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        base = {name: (strict, lenient) for name, _, strict, lenient in json.loads(done.stdout)}
        commit = subprocess.run(
            ["git", "-C", args.baseline, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        print(f"| text | tokens | strict | lenient | lenient at {commit} | lenient now / then |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, n, strict, lenient in rows:
            print(
                f"| {name} | {n:,} | {strict:.2f} | {lenient:.2f} | {base[name][1]:.2f} | x{lenient / base[name][1]:.2f} |"
            )
    else:
        print("| text | tokens | strict | lenient | lenient / strict |")
        print("|---|---:|---:|---:|---:|")
        for name, n, strict, lenient in rows:
            print(f"| {name} | {n:,} | {strict:.2f} | {lenient:.2f} | x{lenient / strict:.2f} |")
    from decodeloop.formats.calls.formats import names

    print(
        "\nµs per token in Stops.check, each call format's own text (two calls, then prose; markers as special ids)\n"
    )
    print("| format | tokens | µs per token | calls read |")
    print("|---|---:|---:|---:|")
    for name in names():
        fmt, n, us, calls = format_row(name, args.chars // 4, args.repeats)
        print(f"| `{fmt}` | {n:,} | {us:.2f} | {calls:,} |")


if __name__ == "__main__":
    main()
