"""The remote engine against vLLM's OpenAI-compatible server on the CPU: the vLLM tier (`.ci/vllm` starts it).

Runs only when DECODELOOP_VLLM is the server's base URL (http://127.0.0.1:PORT/v1)
and DECODELOOP_VLLM_TOKENIZER the model directory it serves: tests/tiny_vllm.py
--scripted, a tiny Llama wired by hand to call get_weather for Polson, MT (in
the compact call syntax) and then answer "It is cold.", served as "tiny" with
prefix caching, prompt-token details and blocks of DECODELOOP_VLLM_BLOCK tokens
(32 unless set: the CPU backend takes multiples of 32). The tool call goes to the real weather server.
Checked: the context goes out as token ids, every streamed token comes back as
an id and is appended as that id, and after the tool call the server's prefix
cache serves everything before the span the harness inserted.
"""

from __future__ import annotations

import json
import os
import urllib.request
import uuid

import pytest
from conftest import WEATHER

VLLM = os.environ.get("DECODELOOP_VLLM")
TOKENIZER = os.environ.get("DECODELOOP_VLLM_TOKENIZER")
BLOCK = int(os.environ.get("DECODELOOP_VLLM_BLOCK", "32"))
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not (VLLM and TOKENIZER), reason="set DECODELOOP_VLLM (base URL) and DECODELOOP_VLLM_TOKENIZER (model dir)"
    ),
]


def _bundle(max_tokens: int):
    from decodeloop.registry import load_model

    return load_model(
        "openai:" + VLLM, model="tiny", tokenizer_path=TOKENIZER, max_tokens=max_tokens, timeout=120, syntax="compact"
    )


def _complete(prompt: list[int], n: int) -> list[int]:
    """The same request made by hand, not streamed: the server's own greedy ids for a prompt of ids."""
    body = json.dumps(
        {
            "model": "tiny",
            "prompt": prompt,
            "max_tokens": n,
            "temperature": 0,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
    ).encode()
    request = urllib.request.Request(VLLM.rstrip("/") + "/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        choice = json.load(response)["choices"][0]
    return choice["token_ids"]


def test_a_tool_call_goes_out_as_ids_comes_back_as_ids_and_the_cache_serves_the_prefix(events):
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import ClientOptions, start_stdio_servers
    from decodeloop.trust.policy import Policy

    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=60)) as router:
        # a system prompt no earlier run sent: the server's cache holds nothing of this conversation yet
        system = f"You are a helpful assistant ({uuid.uuid4().hex})."
        harness = Harness(
            _bundle(64), Sampler(), router, events, config=TurnConfig(max_tokens=64), system=system, policy=Policy.off()
        )
        result = harness.run("What's the weather in Polson, MT?")
    [call] = events.of("tool_call")
    assert (call.name, call.arguments) == ("get_weather", {"city": "Polson", "state": "MT"})
    [answer] = events.of("tool_result")
    assert not answer.is_error and answer.text.startswith("Polson, MT: ")
    assert result.reason == "eos" and result.answer.strip() == "It is cold."
    first, second = events.of("request")
    assert first.sent == second.sent == "ids"
    assert [n.message for n in events.of("notice") if n.source == "openai"] == []  # ids and counts agree
    context = list(result.context)
    # the call's tokens are the server's own: the same prompt asked by hand gives the same greedy ids
    generated = context[first.prompt : first.prompt + first.generated]
    assert len(generated) == first.generated >= 3 and _complete(context[: first.prompt], len(generated)) == generated
    # the request after the tool call: the server read the whole context, and its cache served everything
    # before the inserted span in whole blocks (the last token streamed was never run through the model),
    # and nothing of the span itself
    before_insert = first.prompt + first.generated
    assert second.server_prompt == second.prompt > before_insert
    assert first.cached in (None, 0)
    assert second.cached is not None and (before_insert - 1) // BLOCK * BLOCK <= second.cached <= before_insert


def test_eval_with_concurrency_against_vllm_counts_the_same_as_one_at_a_time():
    import subprocess
    import sys

    from conftest import ROOT

    def run(k: int) -> dict:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "decodeloop",
                "eval",
                "--model",
                "openai:" + VLLM,
                "--engine-model",
                "tiny",
                "--tokenizer",
                TOKENIZER,
                "--episodes",
                "6",
                "--max-tokens",
                "64",
                "--syntax",
                "compact",
                "--json",
                "--concurrency",
                str(k),
                # a generous bound on each silence: this test counts outcomes, it does not time the engine
                "--timeout",
                "600",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert p.returncode == 0, p.stderr
        summary = json.loads(p.stdout)
        # the script answers every episode: anything else is the engine's or the harness's failure, said here
        assert summary["ended"] == {"eos": 6}, (k, summary["ended"], p.stderr[-2000:])
        return summary

    one, four = run(1), run(4)
    timing = ("tokens_per_second", "wall_seconds", "concurrency")
    assert four["concurrency"] == 4 and one["calls"] == 6  # each episode called get_weather once
    assert {k: v for k, v in one.items() if k not in timing} == {k: v for k, v in four.items() if k not in timing}
