#!/usr/bin/env python3
"""The viewer on a 100k-token trace: page size, load and one step in headless Chromium.

The trace is a real turn: the table model calls get_weather on the bundled weather server, then
writes an answer of about 100,000 tokens (the weather sentence over and over); every event goes
into the page as `decodeloop run --html` would write it. The page is loaded in the system Chromium
(DevTools protocol, tests/cdp.py) RUNS times; load is the time from navigation to the page's
ready mark (measured by the page: performance.now() when its script has rendered the first step),
and a step is one key press (→, ←, t for the next call, End, Home): the key handler's own time (it
renders synchronously) and the time to the next frame painted, medians of STEPS presses. Run: python3 bench/viewer.py [--tokens N] [--screenshots DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import provenance
from cdp import Browser, find_chromium

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.servers import command
from decodeloop.servers.weather import get_weather
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.ui.html import HtmlView

QUESTION = "What's the weather in Polson, MT?"
SENTENCE = "It's 33°F and overcast in Polson, MT right now, with 53% humidity and a 21 mph wind from the SE. "

STEP = """new Promise(done => {
  const t0 = performance.now();
  document.dispatchEvent(new KeyboardEvent('keydown', {key: %r, bubbles: true}));
  const handled = performance.now() - t0;       // the handler: the step panel, call sequence, context, rows
  requestAnimationFrame(() => setTimeout(() => done([handled, performance.now() - t0]), 0));
})"""


def trace(path: str, tokens: int) -> tuple[int, float]:
    """Run the turn into an HtmlView; the number of tokens it generated and the seconds writing the page took."""
    tokenizer = CharTokenizer()
    answer = SENTENCE * (tokens // len(tokenizer.encode(SENTENCE)) + 1)
    answer = tokenizer.decode(tokenizer.encode(answer)[: tokens - 40])
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson state=MT]",
        "<|tool|>" + get_weather("Polson", "MT")[0] + "<|assistant|>": answer + "<|eos|>",
    }
    view = HtmlView(path, {"title": f"bench: a {tokens:,}-token turn", "model": "table", "temperature": 0})
    with start_stdio_servers([command("weather")], view, options=ClientOptions(timeout=30)) as router:
        result = Harness(
            lab_bundle(TableModel(tokenizer, table), tokenizer),
            Sampler(),
            router,
            view,
            config=TurnConfig(max_tokens=tokens + 100),
        ).run(QUESTION)
    t0 = time.perf_counter()
    view.write()
    return result.tokens, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="page loads (best is reported)")
    parser.add_argument("--steps", type=int, default=20, help="key presses of each kind (median is reported)")
    parser.add_argument("--screenshots", metavar="DIR", help="also save screenshots of the weather turn there")
    args = parser.parse_args()
    binary = find_chromium()
    if not binary:
        print(
            "bench/viewer.py: needs chromium (apt-get install chromium, or DECODELOOP_CHROMIUM=path)", file=sys.stderr
        )
        return 1
    print(provenance.header())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.html")
        t0 = time.perf_counter()
        generated, written = trace(path, args.tokens)
        made = time.perf_counter() - t0
        size = os.path.getsize(path)
        print(
            f"trace: {generated:,} tokens, run in {made - written:.1f} s; page written in {written:.1f} s, "
            f"{size / 1e6:.1f} MB"
        )
        with Browser(binary) as b:
            loads, walls = [], []
            for _ in range(args.runs):
                b.call("Page.navigate", url="about:blank")
                t0 = time.perf_counter()
                b.open(path)
                walls.append(time.perf_counter() - t0)
                loads.append(float(b.evaluate("document.body.dataset.readyMs")))
            print(
                f"load: {min(loads):,.0f} ms to the first step rendered (best of {args.runs}; "
                f"{min(walls) * 1000:,.0f} ms from navigate to ready as the driver saw it)"
            )
            assert b.errors() == [], b.errors()
            for key, what in (
                ("ArrowRight", "→ one event"),
                ("ArrowLeft", "← one event"),
                ("t", "t next call"),
                ("End", "End"),
                ("Home", "Home"),
            ):
                handled, painted = [], []
                for _ in range(args.steps):
                    h, p = b.evaluate(STEP % key)
                    handled.append(h)
                    painted.append(p)
                    if key in ("End", "Home", "t"):
                        b.evaluate(STEP % ("Home" if key != "Home" else "End"))
                print(
                    f"step {what:<14} handler {statistics.median(handled):5.1f} ms, to the next frame "
                    f"{statistics.median(painted):5.1f} ms (medians of {args.steps}; max {max(painted):.1f})"
                )
            t0 = time.perf_counter()
            found = b.evaluate(
                "(() => { const s = document.getElementById('search'); s.value = 'humidity'; "
                "const t0 = performance.now(); s.dispatchEvent(new Event('input')); "
                "return [performance.now() - t0, document.getElementById('found').textContent]; })()"
            )
            print(f"search 'humidity': {found[0]:,.0f} ms, {found[1]}")
            assert b.errors() == [], b.errors()
        if args.screenshots:
            shots(binary, args.screenshots)
    return 0


def shots(binary: str, folder: str) -> None:
    """Screenshots of the weather turn's page: the first token's four steps, the call sequence."""
    import subprocess

    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "weather.html")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "decodeloop",
                "run",
                "--quiet",
                "--temperature",
                "0.7",
                "--seed",
                "3",
                "--html",
                page,
                QUESTION,
            ],
            check=True,
            cwd=ROOT,
            capture_output=True,
        )
        with Browser(binary, width=1400, height=820) as b:
            b.open(page)
            b.key("ArrowRight")  # the first token: the prompt's prefill, '[' held back
            b.screenshot(os.path.join(folder, "viewer-token.png"))
            b.key("t")  # the call, then on to the span it injected
            while b.evaluate("document.getElementById('step-title').textContent") != "Event: inject":
                b.key("ArrowRight")
            b.screenshot(os.path.join(folder, "viewer-call.png"))
    print(f"screenshots in {folder}")


if __name__ == "__main__":
    sys.exit(main())
