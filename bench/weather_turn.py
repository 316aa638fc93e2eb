#!/usr/bin/env python3
"""The README's weather turn, prompt to answer, through decodeloop and through what a user would pick instead.

One question ("What's the weather in Polson, MT?"), the bundled servers' tools, greedy, one .gguf file as
shipped, each side in a fresh process of its own, one after the other in one run:

    decodeloop gguf:      `decodeloop run --json --model gguf:FILE QUESTION`: llama.cpp in the process, the
                          harness's loop, the call read as it streams, the server called, the history written
                          back in the template's form (the cache rewound to the call, only the new span
                          computed) and the answer
    llama-cpp-python      the two requests a user of llama-cpp-python makes with `create_chat_completion`
                          (stream=True): the question with the tools; then, the call read from the reply
                          (the model writes it as text the library leaves in `content`, so it is read here
                          with decodeloop's parser, as the user must read it somehow) and run on the same
                          server, the question again with the call as `tool_calls` (arguments a JSON string)
                          and the result as a `tool` message. Both requests carry the harness's instruction
                          as the system message (decodeloop writes it after the template's default preamble)

Columns: the prompt's tokens, the prefill rate (the first request's prompt over the time to its first
token), the decode rate (the generated tokens after the first of each request, over the time they took),
command to first token, command to answer, the tokens generated in the turn and peak RSS (the process's own, from
wait4). The ratios are decodeloop's time over the peer's. decodeloop's prefill and decode figures come from
the timestamps its JSON Lines arrive at; the peer's from its stream's chunks.

    .venv/bin/python bench/weather_turn.py [--model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf]
        [--repeats 1] [--json]

Both sides run llama.cpp with llama-cpp-python's defaults (n_ctx 4096, its default thread count).

Needs the llamacpp extra (llama-cpp-python) in the Python that runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUESTION = "What's the weather in Polson, MT?"
DEFAULT_MODEL = os.path.join(ROOT, "models", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")

# The peer's side, run as `python -c PEER MODEL QUESTION ROOT`: prints one JSON object of timestamps
# (seconds since its start) and counts.
PEER = r"""
import json, sys, time
t0 = time.monotonic()
sys.path.insert(0, sys.argv[3])
from decodeloop.decode.parse import parse_output
from decodeloop.formats.chat_template import TOOL_INSTRUCTION
from decodeloop.formats.calls.base import tool_schema
from decodeloop.registry import default_servers
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from llama_cpp import Llama

model, question = sys.argv[1], sys.argv[2]
out = {}
with start_stdio_servers(default_servers("gguf:" + model), lambda event: None, ClientOptions(timeout=60)) as router:
    tools = [tool_schema(t) for t in router.tools.values()]
    llm = Llama(model_path=model, n_ctx=4096, verbose=False)
    out["loaded"] = time.monotonic() - t0

    def request(messages):
        start = time.monotonic()
        first, pieces, chunks = None, [], 0
        for chunk in llm.create_chat_completion(messages=messages, tools=tools, temperature=0.0, stream=True,
                                                max_tokens=400):
            delta = chunk["choices"][0]["delta"]
            text = delta.get("content") or ""
            if text or delta.get("tool_calls"):
                chunks += 1
                if first is None:
                    first = time.monotonic()
                pieces.append(text)
        end = time.monotonic()
        return "".join(pieces), start, first or end, end, chunks

    messages = [{"role": "system", "content": TOOL_INSTRUCTION}, {"role": "user", "content": question}]
    text, start1, first1, end1, n1 = request(messages)
    prompt1 = llm.n_tokens - n1
    parsed = parse_output(text, tools, format="hermes", lenient=True)
    calls = [c for c in parsed.calls if c.call is not None]
    out.update(first_token=first1 - t0, prompt=prompt1, prefill=prompt1 / (first1 - start1),
               call_text=text, calls=len(calls))
    replies = []
    tool_calls = []
    for n, parsed_call in enumerate(calls):
        call = parsed_call.call
        result = router.call(call.name, dict(call.arguments), timeout=60)
        tool_calls.append({"id": f"call_{n}", "type": "function",
                           "function": {"name": call.name, "arguments": json.dumps(call.arguments)}})
        replies.append({"role": "tool", "tool_call_id": f"call_{n}", "content": result.text()})
    if calls:
        messages += [{"role": "assistant", "content": "", "tool_calls": tool_calls}, *replies]
        answer, start2, first2, end2, n2 = request(messages)
    else:
        answer, start2, first2, end2, n2 = text, end1, end1, end1, 0
    decode_tokens = max(n1 - 1, 0) + max(n2 - 1, 0)
    decode_time = (end1 - first1) + (end2 - first2)
    out.update(answer=answer.strip(), answered=time.monotonic() - t0, tokens=n1 + n2,
               decode=decode_tokens / decode_time if decode_time > 0 else None)
print(json.dumps(out))
"""


def peak_rss(pid: int) -> tuple[int, int]:
    """Wait for `pid`: (exit status, its peak RSS in bytes)."""
    _, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024


def run_decodeloop(python: str, model: str) -> dict:
    """`decodeloop run --json` on the file, each JSON line timestamped as it arrives."""
    command = [python, "-m", "decodeloop", "run", "--json", "--model", "gguf:" + model, QUESTION]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    t0 = time.monotonic()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    lines: list[tuple[float, dict]] = [(time.monotonic() - t0, json.loads(line)) for line in proc.stdout]
    code, rss = peak_rss(proc.pid)
    proc.returncode = code
    if code != 0:
        raise SystemExit(f"decodeloop run exited {code}")
    tokens = [(t, e) for t, e in lines if e["event"] == "token"]
    prompt_at = next(t for t, e in lines if e["event"] == "prompt")
    prompt = next(e for _, e in lines if e["event"] == "prompt")["tokens"]
    done_at, done = next((t, e) for t, e in lines if e["event"] == "done")
    # decode: each step that computed one position, timed from the token before it
    steps = [b[0] - a[0] for a, b in zip(tokens, tokens[1:]) if b[1]["computed"] == 1]
    calls = [e for _, e in lines if e["event"] == "tool_call"]
    return {
        "first_token": tokens[0][0],
        "prompt": prompt,
        "prefill": prompt / (tokens[0][0] - prompt_at),
        "decode": len(steps) / sum(steps) if steps else None,
        "answered": done_at,
        "tokens": done["tokens"],
        "calls": len(calls),
        "answer": done["answer"].strip(),
        "rss": rss,
    }


def run_peer(python: str, model: str) -> dict:
    proc = subprocess.Popen(
        [python, "-c", PEER, model, QUESTION, ROOT],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    text = proc.stdout.read()
    code, rss = peak_rss(proc.pid)
    proc.returncode = code
    if code != 0 or not text.strip():
        raise SystemExit(f"the llama-cpp-python side exited {code}")
    return {**json.loads(text), "rss": rss}


def median(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  .venv/bin/python bench/weather_turn.py --repeats 3",
    )
    parser.add_argument("--model", default=DEFAULT_MODEL, help="the .gguf file (default: the 1.5B's)")
    parser.add_argument("--repeats", type=int, default=1, choices=range(1, 11), metavar="N", help="runs per side")
    parser.add_argument("--python", default=sys.executable, help="the Python with decodeloop and llama-cpp-python")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = parser.parse_args()
    if not os.path.isfile(args.model):
        parser.error(f"no such file: {args.model} (decodeloop fetch qwen2.5-coder-1.5b)")
    ours: list[dict] = []
    theirs: list[dict] = []
    for _ in range(args.repeats):  # alternated, so a busy spell of the machine falls on both
        ours.append(run_decodeloop(args.python, args.model))
        theirs.append(run_peer(args.python, args.model))
    if args.json:
        print(json.dumps({"decodeloop": ours, "llama-cpp-python": theirs}, indent=2))
        return
    print(provenance.header())
    print(f"{os.path.basename(args.model)}, {QUESTION!r}, greedy, median of {args.repeats}")
    print()
    header = ("", "prompt", "prefill tok/s", "decode tok/s", "to 1st token s", "to answer s", "tokens", "RSS MB")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, rows in (("decodeloop gguf:", ours), ("llama-cpp-python, 2 requests", theirs)):
        cells = [
            name,
            f"{median(rows, 'prompt'):.0f}",
            f"{median(rows, 'prefill'):.1f}",
            f"{median(rows, 'decode') or 0:.1f}",
            f"{median(rows, 'first_token'):.2f}",
            f"{median(rows, 'answered'):.2f}",
            f"{median(rows, 'tokens'):.0f}",
            f"{median(rows, 'rss') / 1e6:.0f}",
        ]
        print("| " + " | ".join(cells) + " |")
    print()
    for key, what in (("answered", "command to answer"), ("first_token", "command to first token")):
        print(f"{what}: decodeloop / llama-cpp-python = {median(ours, key) / median(theirs, key):.2f}")
    print(f"decode rate: decodeloop / llama-cpp-python = {median(ours, 'decode') / median(theirs, 'decode'):.2f}")
    print()
    print(f"decodeloop's answer ({ours[-1]['calls']} call(s)): {ours[-1]['answer']}")
    print(f"llama-cpp-python's answer ({theirs[-1]['calls']} call(s) read from its text): {theirs[-1]['answer']}")


if __name__ == "__main__":
    main()
