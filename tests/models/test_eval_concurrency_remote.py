"""eval --concurrency against an engine that samples for itself: the replay server (tests/servers/openai_replay.py).

The server answers every stream from a fixed script, a few milliseconds per
token, and counts how many streams were open at once; each worker's MCP round
trips go to its own weather server process.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import asdict

from conftest import ROOT, WEATHER

from decodeloop.decode.bundle import ModelBundle
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.lab import CharTokenizer, LabChat
from decodeloop.harness import Harness
from decodeloop.lab.corpus import Episode
from decodeloop.lab.evaluate import evaluate, evaluate_concurrently, serial_reason
from decodeloop.models.openai.engine import OpenAIEngine
from decodeloop.models.openai.wire import Endpoint
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers

TOK = CharTokenizer()
REPLIES = ["[call get_weather city=Polson state=MT]", "It is 33°F and overcast in Polson.<|eos|>"]
EPISODES = [
    Episode(
        f"Weather in Polson, MT? ({i})",
        "get_weather",
        {"city": "Polson", "state": "MT"},
        "",
        "",
        "",
        ["33°F", "overcast"],
    )
    for i in range(12)
]


@contextlib.contextmanager
def replay(tmp_path, delay: float):
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "replies": [
                    {"ids": ids, "texts": [TOK.decode([i]) for i in ids]} for ids in map(TOK.encode_markup, REPLIES)
                ]
            }
        )
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            os.path.join(ROOT, "tests", "servers", "openai_replay.py"),
            str(script),
            "--delay",
            str(delay),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield f"http://127.0.0.1:{int(proc.stdout.readline().split()[-1])}"
    finally:
        proc.kill()
        proc.wait()


def stats(url: str) -> dict:
    with urllib.request.urlopen(url + "/stats", timeout=30) as response:
        return json.load(response)


def bundle_at(url: str) -> ModelBundle:
    chat, syntax = LabChat(TOK, CompactSyntax()), CompactSyntax()
    endpoint = Endpoint(url + "/v1", timeout=60)
    return ModelBundle(
        "openai:replay",
        TOK,
        chat,
        syntax,
        make_engine=lambda sampler, processors: OpenAIEngine(
            endpoint, "scripted", TOK, sampler=sampler, stop_ids=chat.stop_ids
        ),
    )


def content(outcome) -> dict:
    return {k: v for k, v in asdict(outcome).items() if k != "seconds"}


def test_episodes_against_a_remote_engine_stream_at_once_and_count_as_one_at_a_time(tmp_path):
    with replay(tmp_path, delay=0.01) as url:
        bundle = bundle_at(url)
        assert serial_reason(bundle) is None
        with start_stdio_servers([WEATHER], None, options=ClientOptions(timeout=60)) as router:
            one, serial = evaluate(lambda emit: Harness(bundle, Sampler(), router, emit), EPISODES)
        # one at a time, but a stream the harness hung up on (at the call's end) may still be finishing
        assert stats(url)["max_in_flight"] <= 2

        @contextlib.contextmanager
        def worker(emit):
            with start_stdio_servers([WEATHER], None, options=ClientOptions(timeout=60)) as own:
                yield Harness(bundle, Sampler(), own, emit)

        many, concurrent = evaluate_concurrently(worker, EPISODES, 4)
        seen = stats(url)
    assert [content(o) for o in concurrent] == [content(o) for o in serial]
    assert all(o.answered and o.copied_values and o.correct_arguments == 1 for o in concurrent)
    assert seen["requests"] == 2 * 2 * len(EPISODES)  # a call and an answer per episode, both runs
    assert seen["max_in_flight"] >= 3  # the workers' requests were not made one at a time
    assert (many.calls, many.answered) == (one.calls, one.answered)
