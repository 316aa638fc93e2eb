#!/usr/bin/env python3
"""Episodes in flight against one remote engine: throughput, and the harness's own cost.

Part (a), with --vllm URL --tokenizer DIR (scripts/vllm-serve serves a tiny Llama
wired to call get_weather, then answer): episodes per second at K = 1, 8 and 32 episodes in flight
(evaluate_concurrently, each worker with its own MCP servers, started before the
clock), beside the server's own token throughput from its /metrics counters
(vllm:prompt_tokens_total, vllm:generation_tokens_total) over the same interval.

Part (b), always: the harness alone, against tests/servers/openai_replay.py, a
server process that answers from a fixed script over the lab tokenizer at once:
  - µs of harness CPU (this process, every thread: loop, HTTP stream, MCP client)
    per streamed token: the slope between episodes of 50 and 400 streamed tokens;
  - µs per tool round trip: episodes of 4 calls to the weather server, less
    their tokens and their episode at the costs just measured;
  - how many episodes in flight one harness process sustains: the server sleeps
    --delay seconds before each token of each stream (an engine that decodes every
    stream at the same rate however many are in flight), so the ideal episodes
    per second grow as K; the harness is the bottleneck where the measured rate
    falls below it while this process's CPU nears one core (the GIL).

Run: python3 bench/remote_scale.py [--vllm http://127.0.0.1:8765/v1 --tokenizer DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import provenance

from decodeloop.decode.bundle import ModelBundle
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.lab import CharTokenizer, LabChat
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.corpus import Episode, lab_server_commands
from decodeloop.lab.corpus import episodes as lab_episodes
from decodeloop.lab.evaluate import evaluate_concurrently
from decodeloop.models.openai.engine import OpenAIEngine
from decodeloop.models.openai.wire import Endpoint
from decodeloop.sampling import Sampler
from decodeloop.servers import command
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy

REPLAY = os.path.join(ROOT, "tests", "servers", "openai_replay.py")
TOK = CharTokenizer()


# -- the scripted server -----------------------------------------------------------------------------


@contextlib.contextmanager
def replay_server(replies: list[str], delay: float = 0.0):
    """The replay server in its own process, serving `replies` (lab markup); yields its base URL."""
    script = {
        "replies": [{"ids": ids, "texts": [TOK.decode([i]) for i in ids]} for ids in map(TOK.encode_markup, replies)]
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(script, f)
    proc = subprocess.Popen([sys.executable, REPLAY, f.name, "--delay", str(delay)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        replay_server.pid = proc.pid
        yield f"http://127.0.0.1:{int(line.split()[-1])}"
    finally:
        proc.kill()
        proc.wait()
        os.unlink(f.name)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of another process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def lab_bundle_at(url: str) -> ModelBundle:
    tokenizer, syntax = TOK, CompactSyntax()
    chat = LabChat(tokenizer, syntax)
    endpoint = Endpoint(url + "/v1", timeout=600)
    return ModelBundle(
        "openai:replay",
        tokenizer,
        chat,
        syntax,
        make_engine=lambda sampler, processors: OpenAIEngine(
            endpoint, "scripted", tokenizer, sampler=sampler, stop_ids=chat.stop_ids, max_tokens=4096, top=0
        ),
    )


@contextlib.contextmanager
def workers(bundle, k: int, servers: list[list[str]], max_tokens: int = 4096):
    """k harnesses, each with its own MCP servers, started before the clock; yields open_worker for evaluate."""
    with contextlib.ExitStack() as stack:
        routers = [
            stack.enter_context(start_stdio_servers(servers, None, options=ClientOptions(timeout=120)))
            for _ in range(k)
        ]
        free = list(routers)

        @contextlib.contextmanager
        def open_worker(emit):
            router = free.pop()
            # policy off: the calls run, as the CLI runs the bundled servers' read-only tools (it trusts them)
            yield Harness(
                bundle,
                Sampler(),
                router,
                emit,
                config=TurnConfig(max_tokens=max_tokens, max_repeats=10),
                policy=Policy.off(),
            )

        yield open_worker


def run(bundle, episodes: list, k: int, servers: list[list[str]], max_tokens: int = 4096) -> dict:
    with workers(bundle, k, servers, max_tokens) as open_worker:
        cpu = time.process_time()
        summary, outcomes = evaluate_concurrently(open_worker, episodes, k)
        cpu = time.process_time() - cpu
    return {
        "k": k,
        "episodes": len(episodes),
        "wall": summary.wall_seconds,
        "cpu": cpu,
        "tokens": sum(o.tokens for o in outcomes),
        "calls": sum(o.calls for o in outcomes),
        "eps": len(episodes) / summary.wall_seconds,
        "outcomes": outcomes,
    }


QUESTION = Episode("Weather in Polson, MT?", "get_weather", {"city": "Polson", "state": "MT"}, "", "", "", [])


def harness_cost(repeats: int) -> list[tuple[str, str]]:
    weather = [command("weather")]
    filler = "It is cold and overcast in Polson with a wind from the south east. "
    rows, per = [], {}
    for n in (50, 400):
        answer = (filler * 10)[: n - 1] + "<|eos|>"
        with replay_server([answer]) as url:
            r = run(lab_bundle_at(url), [QUESTION] * repeats, 1, weather)
        per[n] = r
        assert r["tokens"] == n * repeats, (r["tokens"], n * repeats)
    slope = (per[400]["cpu"] - per[50]["cpu"]) / (per[400]["tokens"] - per[50]["tokens"])
    episode = per[50]["cpu"] / repeats - 50 * slope
    calls = [f"[call get_weather city=Town{c} state=MT]" for c in "ABCD"]
    with replay_server([*calls, "Cold.<|eos|>"]) as url:
        r = run(lab_bundle_at(url), [QUESTION] * repeats, 1, weather)
    assert r["calls"] == 4 * repeats, r["calls"]
    round_trip = (r["cpu"] - repeats * episode - r["tokens"] * slope) / r["calls"]
    rows.append(("harness CPU per streamed token", f"{slope * 1e6:,.0f} µs"))
    rows.append(("harness CPU per episode (reset, prompt, first request)", f"{episode * 1e6:,.0f} µs"))
    rows.append(("harness CPU per tool round trip (MCP call, result, new request)", f"{round_trip * 1e6:,.0f} µs"))
    rows.append(("  (episode of 4 calls: wall per episode)", f"{r['wall'] / repeats * 1e3:,.1f} ms"))
    return rows


def saturation(ks: list[int], delay: float, per_k: int) -> list[tuple]:
    weather = [command("weather")]
    answer = "It is 33°F and overcast in Polson, with wind from the south east.<|eos|>"
    out, base = [], None
    with replay_server(["[call get_weather city=Polson state=MT]", answer], delay) as url:
        bundle = lab_bundle_at(url)
        for k in ks:
            server = cpu_seconds(replay_server.pid)
            r = run(bundle, [QUESTION] * max(per_k, 2 * k), k, weather)
            server = cpu_seconds(replay_server.pid) - server  # includes the idle wait while servers start
            base = base or r["eps"]
            out.append(
                (
                    k,
                    r["eps"],
                    base * k,
                    r["eps"] / (base * k),
                    r["cpu"] / r["wall"],
                    r["tokens"] / r["wall"],
                    server / r["wall"],
                )
            )
    return out


# -- vLLM ----------------------------------------------------------------------------------------------


def metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url.removesuffix("/v1").rstrip("/") + "/metrics", timeout=60) as response:
        text = response.read().decode()
    found = {}
    for name in (
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
        "vllm:iteration_tokens_total_sum",
        "vllm:iteration_tokens_total_count",
        "vllm:inter_token_latency_seconds_sum",
        "vllm:inter_token_latency_seconds_count",
        "vllm:time_to_first_token_seconds_sum",
        "vllm:time_to_first_token_seconds_count",
    ):
        values = [float(v) for v in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)]
        found[name] = sum(values)
    return found


def vllm_rows(url: str, tokenizer: str, ks: list[int], per_k: int, max_tokens: int, syntax: str | None) -> list[tuple]:
    from decodeloop.registry import load_model

    bundle = load_model(
        "openai:" + url, model="tiny", tokenizer_path=tokenizer, max_tokens=max_tokens, timeout=600, syntax=syntax
    )
    held_out = lab_episodes(0, max(per_k, 2 * max(ks)), "heldout")
    out = []
    for k in ks:
        eps = held_out[: max(per_k, 2 * k)]
        with workers(bundle, k, lab_server_commands(), max_tokens) as open_worker:
            before, cpu = metrics(url), time.process_time()
            summary, outcomes = evaluate_concurrently(open_worker, eps, k)
            cpu, after = time.process_time() - cpu, metrics(url)
        wall = summary.wall_seconds
        gen = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
        prompt = after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"]
        hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
        queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
        d = {name: after[name] - before[name] for name in after}
        steps = d["vllm:iteration_tokens_total_count"]
        itl = d["vllm:inter_token_latency_seconds_sum"] / max(d["vllm:inter_token_latency_seconds_count"], 1)
        ttft = d["vllm:time_to_first_token_seconds_sum"] / max(d["vllm:time_to_first_token_seconds_count"], 1)
        out.append(
            (
                k,
                len(eps),
                sum(o.calls for o in outcomes),
                len(eps) / wall,
                gen / wall,
                prompt / wall,
                hits / queries if queries else 0.0,
                sum(o.tokens for o in outcomes) / wall,
                cpu / wall,
                steps / wall,
                d["vllm:iteration_tokens_total_sum"] / max(steps, 1),
                itl * 1e3,
                ttft * 1e3,
                os.getloadavg()[0],
            )
        )
    return out


def table(header: list[str], rows: list[tuple], formats: list[str]) -> str:
    cells = [[f.format(v) for f, v in zip(formats, row)] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    lines = [
        "| " + " | ".join(h.rjust(w) for h, w in zip(header, widths)) + " |",
        "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|",
    ]
    lines += ["| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", help="vLLM's base URL (http://127.0.0.1:PORT/v1); part (a) runs only with it")
    parser.add_argument("--tokenizer", help="the model directory the vLLM server serves")
    parser.add_argument(
        "--syntax",
        default="compact",
        help="part (a): the call syntax the served model writes (default: compact, as scripts/vllm-serve's model does)",
    )
    parser.add_argument("--ks", default="1,8,32", help="part (a): episodes in flight (default: 1,8,32)")
    parser.add_argument("--vllm-episodes", type=int, default=32, help="part (a): episodes per K, at least 2K")
    parser.add_argument("--max-tokens", type=int, default=32, help="part (a): token cap per turn")
    parser.add_argument("--repeats", type=int, default=20, help="part (b): episodes per cost measurement")
    parser.add_argument("--delay", type=float, default=0.002, help="part (b): the scripted engine's seconds per token")
    parser.add_argument("--only-vllm", action="store_true", help="part (a) only")
    parser.add_argument("--saturation-ks", default="1,4,16,32,64", help="part (b): episodes in flight")
    parser.add_argument("--saturation-episodes", type=int, default=64, help="part (b): episodes per K, at least 2K")
    args = parser.parse_args()
    print(provenance.header())
    print(
        f"# remote_scale: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start; the harness, "
        "its MCP servers and the engine share them\n"
    )
    if args.vllm:
        ks = [int(k) for k in args.ks.split(",")]
        rows = vllm_rows(args.vllm, args.tokenizer, ks, args.vllm_episodes, args.max_tokens, args.syntax)
        print(
            f"## (a) vLLM CPU server, {os.path.basename(args.tokenizer.rstrip('/'))}, "
            f"--max-tokens {args.max_tokens} per turn\n"
        )
        print(
            table(
                [
                    "K",
                    "episodes",
                    "tool calls",
                    "episodes/s",
                    "server gen tok/s",
                    "server prompt tok/s",
                    "prefix hit rate",
                    "harness tok/s (usage)",
                    "harness CPU (cores)",
                    "engine steps/s",
                    "tokens/step",
                    "inter-token ms",
                    "first token ms",
                    "load avg",
                ],
                rows,
                [
                    "{}",
                    "{}",
                    "{}",
                    "{:.2f}",
                    "{:.0f}",
                    "{:.0f}",
                    "{:.0%}",
                    "{:.0f}",
                    "{:.2f}",
                    "{:.1f}",
                    "{:.1f}",
                    "{:.0f}",
                    "{:.0f}",
                    "{:.1f}",
                ],
            )
        )
        print(f"\nK=8 / K=1 episodes/s: {rows[ks.index(8)][3] / rows[0][3]:.2f}x" if 8 in ks else "")
        print()
    if args.only_vllm:
        return
    print("## (b) the harness's own cost, against the replay server (lab tokenizer, one process each)\n")
    for name, value in harness_cost(args.repeats):
        print(f"  {name:<66} {value}")
    print(f"\n## (b) episodes in flight, the scripted engine at {args.delay * 1e3:g} ms per token per stream\n")
    ks = [int(k) for k in args.saturation_ks.split(",")]
    print(
        table(
            [
                "K",
                "episodes/s",
                "ideal (K x K=1)",
                "efficiency",
                "harness CPU (cores)",
                "tokens/s",
                "scripted server CPU (cores)",
            ],
            saturation(ks, args.delay, args.saturation_episodes),
            ["{}", "{:.1f}", "{:.1f}", "{:.0%}", "{:.2f}", "{:,.0f}", "{:.2f}"],
        )
    )


if __name__ == "__main__":
    main()
