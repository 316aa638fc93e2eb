#!/usr/bin/env python3
"""Startup of the real models: from the command to the first token, cold and warm, in fresh processes.

Every figure comes from a new process, as a user's command is one:

    import torch + transformers   `python -c "import torch, transformers"` and the model classes
    SHA-256 of the .gguf          reading the whole file (what the conversion cache's key costs when the
                                  hash is not remembered) and the remembered hash
    cold                          `decodeloop run --json --max-tokens 1 --model hf:FILE.gguf QUESTION` with
                                  DECODELOOP_CACHE pointing at an empty folder: the GGUF is de-quantized
                                  and the conversion written to the cache
    warm                          the same command again: the conversion cache is loaded

"First token" is the time from starting the command to reading the first `token` event of its JSON
Lines; the command's whole run (it stops after that token) and the CPU time it used (the command and
the MCP servers it started: on a busy machine the wall-clock times grow, the CPU time much less) are
shown beside it. The MCP servers start and the prompt is prefilled in both. Warm runs: the median of
--repeats.

    .venv/bin/python bench/startup.py [--repeats 3] [--models smollm2,qwen] [--threads N] [--python .venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {
    "smollm2": ("SmolLM2-135M-Instruct Q4_1", os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")),
    "qwen": ("Qwen2.5-Coder-0.5B-Instruct", os.path.join(ROOT, "models", "qwen2.5-coder-0.5b-instruct.gguf")),
}
QUESTION = "What's the weather in Polson, MT?"


def first_token(python: str, gguf: str, cache: str, threads: int | None) -> tuple[float, float, float, str]:
    """(seconds to the first token event, seconds to the end of the command, its CPU seconds (its own, its
    MCP servers' and every other process it waited for), how the weights were loaded)."""
    env = {**os.environ, "DECODELOOP_CACHE": cache, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ROOT}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)  # torch's intra-op threads
    start = time.perf_counter()
    process = subprocess.Popen(
        [python, "-m", "decodeloop", "run", "--json", "--max-tokens", "1", "--model", "hf:" + gguf, QUESTION],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first, weights = None, "?"
    for line in process.stdout:
        event = json.loads(line)
        if event["event"] == "notice" and "weights " in event.get("message", ""):
            weights = event["message"].split("weights ", 1)[1].split(" ")[0]  # "converted" or "loaded"
        if event["event"] == "token" and first is None:
            first = time.perf_counter() - start
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0 or first is None:
        sys.exit(f"decodeloop run failed ({process.returncode}): {stderr.strip()[-2000:]}")
    if stderr.strip():
        print(f"(stderr of the run, which should be empty: {stderr.strip()[:300]!r})", file=sys.stderr)
    return first, time.perf_counter() - start, usage.ru_utime + usage.ru_stime, weights


def import_seconds(python: str) -> float:
    code = (
        "import time; t = time.perf_counter(); import torch, transformers; "
        "from transformers import AutoModelForCausalLM, AutoTokenizer; print(time.perf_counter() - t)"
    )
    return float(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)


def hash_seconds(python: str, gguf: str, cache: str) -> tuple[float, float]:
    """(seconds to hash the file with no remembered hash, seconds with it), each in a fresh process."""
    code = (
        "import sys, time; from decodeloop.models.gguf_cache import file_sha256; "
        "t = time.perf_counter(); file_sha256(sys.argv[1]); print(time.perf_counter() - t)"
    )
    env = {**os.environ, "DECODELOOP_CACHE": cache, "PYTHONPATH": ROOT}

    def run():
        return float(
            subprocess.run(
                [python, "-c", code, gguf],
                capture_output=True,
                text=True,
                check=True,
                env=env,
                cwd=ROOT,
            ).stdout
        )

    return run(), run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="warm runs per model; the median counts (default: 3)")
    parser.add_argument("--models", default="smollm2,qwen", help="which: smollm2, qwen (default: both)")
    parser.add_argument("--python", default=sys.executable, help="the Python with the hf extra (default: this one)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="OMP_NUM_THREADS for the runs: torch's threads (default: torch's, one per core)",
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    for name in names:
        if name not in MODELS:
            sys.exit(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
        if not os.path.exists(MODELS[name][1]):
            sys.exit(
                f"no {MODELS[name][1]}: run `decodeloop fetch {'smollm2' if name == 'smollm2' else 'qwen2.5-coder-0.5b'}`"
            )
    print(provenance.header())
    print(
        f"{os.cpu_count()} CPUs, torch threads {args.threads or 'default'}, "
        f"load average {os.getloadavg()[0]:.1f} at the start; "
        f"import torch + transformers: {import_seconds(args.python):.1f} s\n"
    )
    print(
        "| model | .gguf | SHA-256: read / remembered | cold: first token (whole run, CPU) | "
        f"warm: first token (whole run, CPU), median of {args.repeats} |"
    )
    print("|---|---:|---:|---:|---:|")
    for name in names:
        label, gguf = MODELS[name]
        cache = tempfile.mkdtemp(prefix="decodeloop-startup-")
        try:
            read, remembered = hash_seconds(args.python, gguf, cache)
            shutil.rmtree(cache)
            os.makedirs(cache)  # cold: nothing cached, not even the hash
            cold = first_token(args.python, gguf, cache, args.threads)
            assert cold[3] == "converted", cold
            warm = [first_token(args.python, gguf, cache, args.threads) for _ in range(args.repeats)]
            assert all(w[3] == "loaded" for w in warm), warm
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        size = os.path.getsize(gguf) / 1e6
        median = [statistics.median(w[i] for w in warm) for i in range(3)]
        print(
            f"| {label} | {size:,.0f} MB | {read:.2f} s / {remembered:.3f} s | "
            f"{cold[0]:.1f} s ({cold[1]:.1f} s, {cold[2]:.1f} s) | "
            f"{median[0]:.1f} s ({median[1]:.1f} s, {median[2]:.1f} s) |",
            flush=True,
        )
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
