"""The transcripts in the README and docs/, made again from the commands that print them.

A transcript block is a fenced block right after a marker line:

    <!-- transcript: decode_loop.py "What's the weather in Polson, MT?"; elide 8-37 46-133 -->

The command, run from the repository's root with NO_COLOR set, is one of

    decode_loop.py ARGS                 a lab script, run as `python3 -S` (the standard library only)
    python3 SCRIPT.py ARGS              a script that needs the installed packages (numpy, torch)
    decodeloop ARGS                     the command line, as `python3 -m decodeloop`
    printf 'TEXT' | decodeloop ARGS     the same, with TEXT (backslash escapes read) on its standard input

and these options follow it, each after a `; `:

    elide A-B ...    the trace lines of tokens A to B become one line saying so
    lines A-B ...    lines A to B of the output (counted from 1) become one line saying so
    omit rpc         each run of JSON-RPC lines (`  → `, `  ← `) becomes one line saying so
    omit prompt      the prompt's lines (`  │ `) become one line saying so
    needs smollm2    runs only when DECODELOOP_SMOLLM2 names the model's .gguf (the .ci/smollm2 tier);
    needs qwen       likewise DECODELOOP_QWEN; the command's models/NAME.gguf is replaced by that path
    needs qwen15     likewise DECODELOOP_QWEN15 (the .ci/llamacpp tier: the 1.5B model through llama.cpp)

A block whose model is not there is skipped, and the skip is printed with the tier that runs it. Run as

    python3 scripts/transcripts.py           # rewrite every marked block from its command's output
    python3 scripts/transcripts.py --check   # exit 1, naming each block that drifted

Durations (`0.01s`), absolute paths (the repository's, the home directory's), the conversion cache's
place, whether that load converted the model or read the conversion, and a long value cut short
(`"path …… (278 chars)"`, cut at a length that counts those paths) are scrubbed before comparing, so a
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
MARKER = re.compile(r"^<!-- transcript: (?P<spec>.+?) -->\n```\n(?P<body>.*?)^```$", re.S | re.M)
TOKEN_LINE = re.compile(r"^\s*(\d+) │")
DURATION = re.compile(r"\b\d+\.\d+s\b")
FIRST_LOAD, LATER_LOAD = "weights converted from GGUF and cached at", "weights loaded from the conversion cache"
TRUNCATED = re.compile(r'"[^"\n]*… \(\d+ chars\)"')
OMIT = {
    "rpc": (("  → ", "  ← "), "JSON-RPC lines"),
    "prompt": (("  │ ",), "lines of the prompt"),
}
# needs NAME: the environment variable naming the model's file, and the tier that sets it
NEEDS = {
    "smollm2": ("DECODELOOP_SMOLLM2", ".ci/smollm2"),
    "qwen": ("DECODELOOP_QWEN", ".ci/smollm2"),
    "qwen15": ("DECODELOOP_QWEN15", ".ci/llamacpp"),
}


def documents() -> list[str]:
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md")
    )


def parse(spec: str) -> tuple[str, dict[str, str]]:
    """The command and its options ({"elide": "8-37 46-133", ...}) of a marker's text."""
    command, *rest = re.split(r"; (?=[a-z]+ )", spec)
    options = {}
    for option in rest:
        name, _, value = option.partition(" ")
        if name not in ("elide", "lines", "omit", "needs"):
            raise SystemExit(f"transcripts: unknown option {option!r} in {spec!r}")
        options[name] = value
    return command, options


def model_path(options: dict[str, str]) -> str | None:
    """The model file the block needs (from its variable), "" when it needs none, None when it is absent."""
    if "needs" not in options:
        return ""
    variable, _ = NEEDS[options["needs"]]
    path = os.environ.get(variable, "")
    return path if path and os.path.isfile(path) else None


def argv(command: str, model: str = "") -> tuple[list[str], str | None]:
    """The command's argv and its standard input."""
    stdin = None
    words = shlex.split(command)
    if words[0] == "printf" and "|" in words:
        stdin = words[1].encode().decode("unicode_escape")
        words = words[words.index("|") + 1 :]
    if model:
        words = [re.sub(r"models/[^/\s]+\.gguf", model, word) for word in words]
    if words[0] == "decodeloop":
        return [sys.executable, "-m", "decodeloop", *words[1:]], stdin
    if words[0] == "python3":
        return [sys.executable, *words[1:]], stdin
    return [sys.executable, "-S", *words], stdin


def output(command: str, model: str = "") -> str:
    env = {**os.environ, "NO_COLOR": "1"}
    args, stdin = argv(command, model)
    p = subprocess.run(args, cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=600)
    if p.returncode not in (0, 4):
        raise SystemExit(f"transcripts: `{command}` exited {p.returncode}:\n{p.stderr[-2000:]}")
    return p.stdout


def spans(text: str | None) -> list[tuple[int, int]]:
    return [tuple(int(n) for n in span.split("-")) for span in (text or "").split()]  # type: ignore[misc]


def elided(text: str, tokens: list[tuple[int, int]], lines=(), omit=()) -> str:
    """The trace with each span of tokens (from its first token's line to its last's, and the lines under
    that), each span of lines, and each run of lines of an omitted kind replaced by one line saying so."""
    out: list[str] = []
    inside: tuple[int, int] | None = None
    omitting = None
    for number, line in enumerate(text.splitlines(), 1):
        cut = next((s for s in lines if s[0] <= number <= s[1]), None)
        if cut is not None:
            if number == cut[0]:
                out.append(f"   [... lines {cut[0]}–{cut[1]} elided from this copy ...]")
            continue
        match = TOKEN_LINE.match(line)
        n = int(match.group(1)) if match else None
        if n is not None:
            inside = next((s for s in tokens if s[0] <= n <= s[1]), None)
            if inside is not None and n == inside[0]:
                out.append(f"   [... tokens {inside[0]}–{inside[1]} elided from this copy ...]")
        if inside is not None:
            continue
        kind = next((k for k in omit if line.startswith(OMIT[k][0])), None)
        if kind is not None:
            if omitting is None or omitting[0] != kind:
                omitting = [kind, 0, len(out)]
                out.append("")
            omitting[1] += 1
            out[omitting[2]] = f"   [... {omitting[1]} {OMIT[kind][1]} omitted from this copy ...]"
            continue
        omitting = None
        out.append(line)
    return "\n".join(out) + "\n"


def scrubbed(text: str) -> str:
    # a long value the trace cuts short is cut at a length that counts the real paths: compared without it
    text = TRUNCATED.sub('"… (N chars)"', text.replace(ROOT, "<repo>"))
    # a model's first load converts its .gguf, later ones read the conversion: the same run either way
    text = text.replace(FIRST_LOAD, LATER_LOAD)
    return DURATION.sub("N.NNs", text)


def made(command: str, elide: str | None = None, *, lines: str | None = None, omit: str = "", model: str = "") -> str:
    text = elided(output(command, model), spans(elide), spans(lines), omit.split())
    if model:  # the file named in the command, wherever the variable put it
        named = re.search(r"models/[^/\s]+\.gguf", command)
        text = text.replace(model, os.path.join(ROOT, named.group(0)) if named else model)
    cache = os.environ.get("DECODELOOP_CACHE")
    if cache:
        text = text.replace(cache, "~/.cache/decodeloop")
    text = text.replace(ROOT, "<repo>")
    home = os.path.expanduser("~")
    return text.replace(home + "/", "~/") if home != "/" else text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of rewriting; exit 1 on drift")
    parser.add_argument("--needs", help="only the blocks that need this model (smollm2, qwen, qwen15)")
    args = parser.parse_args()
    drifted, skipped = [], []
    for path in documents():
        text = open(path, encoding="utf-8").read()
        name = os.path.relpath(path, ROOT)

        def replace(match: re.Match, name=name) -> str:
            command, options = parse(match.group("spec"))
            if args.needs and options.get("needs") != args.needs:
                return match.group(0)
            model = model_path(options)
            if model is None:
                variable, tier = NEEDS[options["needs"]]
                skipped.append(f"{name}: {command} (needs {variable}; run by {tier})")
                return match.group(0)
            new = made(command, options.get("elide"), lines=options.get("lines"), omit=options.get("omit", ""),
                       model=model)  # fmt: skip
            if scrubbed(new) == scrubbed(match.group("body")):
                return match.group(0)  # only a duration or a path differs: left as it is
            drifted.append(f"{name}: {command}")
            start, end = match.span("body")  # by position: an empty body (a new block) is replaced too
            return match.group(0)[: start - match.start()] + new + match.group(0)[end - match.start() :]

        rewritten = MARKER.sub(replace, text)
        if not args.check and rewritten != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(rewritten)
    for entry in skipped:
        print(f"skipped: {entry}")
    for entry in drifted:
        print(f"{'drifted' if args.check else 'rewritten'}: {entry}")
    return 1 if args.check and drifted else 0


if __name__ == "__main__":
    sys.exit(main())
