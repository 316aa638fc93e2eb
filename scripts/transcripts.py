"""The transcripts in the README and docs/, made again from the commands that print them.

A transcript block is a fenced block right after a marker line:

    <!-- transcript: decode_loop.py "What's the weather in Polson, MT?"; elide 8-37 46-133 -->

The command is a lab script (or `-m decodeloop ...`) run as `python3 -S` from the
repository's root with NO_COLOR set; `elide A-B` replaces the trace lines of
tokens A to B with one line saying so. Run as

    python3 scripts/transcripts.py           # rewrite every marked block from its command's output
    python3 scripts/transcripts.py --check   # exit 1, naming each block that drifted

Durations (`0.01s`) and absolute paths are scrubbed before comparing, so a
transcript drifts only when what the program prints changes.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = re.compile(
    r"^<!-- transcript: (?P<command>.+?)(?:; elide (?P<elide>[\d\- ]+))? -->\n```\n(?P<body>.*?)^```$", re.S | re.M
)
TOKEN_LINE = re.compile(r"^\s*(\d+) │")
DURATION = re.compile(r"\b\d+\.\d+s\b")


def documents() -> list[str]:
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md")
    )


def output(command: str) -> str:
    env = {**os.environ, "NO_COLOR": "1"}
    p = subprocess.run(
        [sys.executable, "-S", *shlex.split(command)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    if p.returncode not in (0, 4):
        raise SystemExit(f"transcripts: `{command}` exited {p.returncode}:\n{p.stderr[-2000:]}")
    return p.stdout


def elided(text: str, spans: list[tuple[int, int]]) -> str:
    """The trace with each span of tokens, from its first token's line to its last's (and the lines under
    that), replaced by one line saying so."""
    out: list[str] = []
    inside: tuple[int, int] | None = None
    for line in text.splitlines():
        match = TOKEN_LINE.match(line)
        n = int(match.group(1)) if match else None
        if n is not None:
            inside = next((s for s in spans if s[0] <= n <= s[1]), None)
            if inside is not None and n == inside[0]:
                out.append(f"   [... tokens {inside[0]}–{inside[1]} elided from this copy ...]")
        if inside is None:
            out.append(line)
    return "\n".join(out) + "\n"


def scrubbed(text: str) -> str:
    return DURATION.sub("N.NNs", text.replace(ROOT, "<repo>"))


def made(command: str, elide: str | None) -> str:
    spans = [tuple(int(n) for n in span.split("-")) for span in (elide or "").split()]
    return elided(output(command), spans).replace(ROOT, "<repo>")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of rewriting; exit 1 on drift")
    args = parser.parse_args()
    drifted = []
    for path in documents():
        text = open(path, encoding="utf-8").read()

        def replace(match: re.Match) -> str:
            new = made(match.group("command"), match.group("elide"))
            if scrubbed(new) != scrubbed(match.group("body")):
                drifted.append(f"{os.path.relpath(path, ROOT)}: {match.group('command')}")
            return match.group(0).replace(match.group("body"), new)

        rewritten = MARKER.sub(replace, text)
        if not args.check and rewritten != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(rewritten)
    for name in drifted:
        print(f"{'drifted' if args.check else 'rewritten'}: {name}")
    return 1 if args.check and drifted else 0


if __name__ == "__main__":
    sys.exit(main())
