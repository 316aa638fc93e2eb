"""The remote engine against vLLM's OpenAI-compatible server on the CPU: the vLLM tier (`.ci/vllm` starts it).

Runs only when DECODELOOP_VLLM is the server's base URL (http://127.0.0.1:PORT/v1)
and DECODELOOP_VLLM_TOKENIZER the model directory it serves (tests/tiny_vllm.py:
a random tiny Llama, served as "tiny" with prefix caching, prompt-token details
and blocks of DECODELOOP_VLLM_BLOCK tokens, 32 unless set: the CPU backend takes
multiples of 32). The model's weights are random, so its turns end at the token cap; what is checked is the wire: the
context goes out as token ids, every streamed token comes back as an id and is
appended as that id, and after the harness inserts a span (the next user
message, as a tool result would be) the server's prefix cache serves
everything before it.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest
from conftest import WEATHER

VLLM = os.environ.get("DECODELOOP_VLLM")
TOKENIZER = os.environ.get("DECODELOOP_VLLM_TOKENIZER")
BLOCK = int(os.environ.get("DECODELOOP_VLLM_BLOCK", "32"))
pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not (VLLM and TOKENIZER),
                                 reason="set DECODELOOP_VLLM (base URL) and DECODELOOP_VLLM_TOKENIZER (model dir)")]


def _bundle(max_tokens: int = 24):
    from decodeloop.models import load_model

    return load_model("openai:" + VLLM, model="tiny", tokenizer_path=TOKENIZER, max_tokens=max_tokens, timeout=120)


def _complete(prompt: list[int], n: int) -> list[int]:
    """The same request made by hand, not streamed: the server's own greedy ids for a prompt of ids."""
    body = json.dumps({"model": "tiny", "prompt": prompt, "max_tokens": n, "temperature": 0,
                       "return_token_ids": True, "skip_special_tokens": False}).encode()
    request = urllib.request.Request(VLLM.rstrip("/") + "/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        choice = json.load(response)["choices"][0]
    return choice["token_ids"]


def test_a_conversation_goes_out_as_ids_comes_back_as_ids_and_the_cache_serves_the_prefix(events):
    from decodeloop.loop import Harness, TurnConfig
    from decodeloop.router import start_stdio_servers
    from decodeloop.sampling import Sampler

    bundle = _bundle()
    with start_stdio_servers([WEATHER], events, timeout=60) as router:
        harness = Harness(bundle, Sampler(), router, events, config=TurnConfig(max_tokens=24))
        first = harness.run("What's the weather in Polson, MT?")
        after_first = list(first.context)
        second = harness.run("And in Boise, ID?")
    requests = events.of("request")
    assert len(requests) >= 2 and all(r.sent == "ids" for r in requests)
    notes = [n.message for n in events.of("notice") if n.source == "openai"]
    assert notes == []   # the server's prompt ids and counts agree with the context's
    # the tokens appended are the server's own: the same prompt by hand gives the same greedy ids
    prompt_len = requests[0].prompt
    generated = after_first[prompt_len:prompt_len + requests[0].generated]
    assert generated and _complete(after_first[:prompt_len], len(generated)) == generated
    # the second turn's request: everything before the inserted user message came from the cache, in whole
    # blocks (vLLM caches whole blocks; the last token streamed was never run through the model)
    last = requests[-1]
    assert second.context[:len(after_first)] == after_first
    before_insert = prompt_len + requests[0].generated
    assert last.cached is not None and last.server_prompt == last.prompt > before_insert
    assert (before_insert - 1) // BLOCK * BLOCK <= last.cached <= before_insert


def test_eval_with_concurrency_against_vllm_counts_the_same_as_one_at_a_time():
    import subprocess
    import sys

    from conftest import ROOT

    def run(k: int) -> dict:
        p = subprocess.run([sys.executable, "-m", "decodeloop", "eval", "--model", "openai:" + VLLM,
                            "--engine-model", "tiny", "--tokenizer", TOKENIZER, "--episodes", "6",
                            "--max-tokens", "16", "--json", "--concurrency", str(k)],
                           cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    one, four = run(1), run(4)
    timing = ("tokens_per_second", "wall_seconds", "concurrency")
    assert four["concurrency"] == 4
    assert {k: v for k, v in one.items() if k not in timing} == {k: v for k, v in four.items() if k not in timing}
