"""Qwen2.5-Coder-0.5B-Instruct, a model trained to call tools, through the whole harness: the slow tier
(`.ci/smollm2` fetches it with `decodeloop fetch qwen2.5-coder-0.5b`).

Runs only when DECODELOOP_QWEN names the .gguf. Asked about the weather with the bundled servers, greedy, the
model writes its call as JSON outside the template's tags (bare, or in a ```json block, as the system prompt
sways it); the harness reads it as a call (--call-shapes lenient, the default) and the server answers it. With
--call-shapes strict the same text is printed as the answer. This model seldom answers from the result: it
writes more calls until the token cap (the 1.5B model's tier, .ci/llamacpp, has the turn that answers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, WEATHER

QWEN = os.environ.get("DECODELOOP_QWEN")
pytestmark = [
    pytest.mark.qwen,
    pytest.mark.skipif(not QWEN, reason="set DECODELOOP_QWEN to Qwen2.5-Coder-0.5B-Instruct's .gguf file"),
]
QUESTION = "What's the weather in Polson, MT?"


def run(*args: str) -> tuple[int, list[dict], str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "decodeloop",
            "run",
            "--model",
            "hf:" + QWEN,
            "--json",
            "--max-tokens",
            "160",
            *args,
            QUESTION,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=1800,
    )
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def test_qwen_calls_the_tool_in_its_own_shape_and_the_server_answers():
    _code, events, stderr = run()
    calls = [e for e in events if e["event"] == "tool_call"]
    assert calls, stderr[-2000:]
    first = calls[0]
    assert first["name"] == "get_weather" and first["arguments"] == {"city": "Polson", "state": "MT"}
    assert first["shape"] in ("fenced_json", "bare_json", "tool_call")
    [result, *_] = [e for e in events if e["event"] == "tool_result"]
    assert not result["is_error"] and "Polson, MT" in result["text"]
    done = events[-1]
    assert done["event"] == "done" and done["tool_calls"] >= 1
    # the turn ends in a defined way: an answer, the repeat guard, or the cap on a model that keeps calling
    assert done["reason"] in ("eos", "repeated_call", "max_tokens")
    if done["reason"] != "max_tokens":  # a finished message is never a call printed as the answer
        assert not done["answer"].lstrip().startswith(("```", "{"))
    assert "Traceback" not in stderr


def test_strict_prints_the_call_as_the_answer():
    _code, events, _ = run("--call-shapes", "strict")
    done = events[-1]
    assert done["tool_calls"] == 0 and "get_weather" in done["answer"]


def test_qwen_answers_from_a_result_with_the_call_forced():
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.registry import load_model
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import ClientOptions, start_stdio_servers
    from decodeloop.trust.policy import Policy

    bundle = load_model("hf:" + QWEN)
    events = []
    with start_stdio_servers([WEATHER], events.append, options=ClientOptions(timeout=30)) as router:
        result = Harness(
            bundle,
            Sampler(),
            router,
            events.append,
            # the strict repeat guard: this model writes its call again and again, and the guard ends the turn
            config=TurnConfig(constrain="required", max_tokens=160, on_repeat="stop"),
            policy=Policy.off(),
        ).run(QUESTION)
    calls = [e for e in events if e.kind == "tool_call"]
    assert calls and calls[0].shape == "tool_call" and calls[0].arguments == {"city": "Polson", "state": "MT"}
    assert result.reason in ("eos", "repeated_call")
    forced = [e for e in events if e.kind == "token" and getattr(e, "forced", False)]
    assert forced  # jump-forward ran over the forced part of the call
