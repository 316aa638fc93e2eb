"""Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, as shipped) through llama.cpp in this process (`gguf:`), the model the
README's real-model block runs: it calls, reads the result and answers. The llama.cpp tier (`.ci/llamacpp`
fetches it with `decodeloop fetch qwen2.5-coder-1.5b`).

Runs only when DECODELOOP_QWEN15 names the .gguf and llama-cpp-python is installed. Greedy, with the bundled
servers: the history in the template's form (the call written back as the template renders `tool_calls`, its
arguments a JSON string), the harness's tool instruction, and the answer that follows the result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

QWEN15 = os.environ.get("DECODELOOP_QWEN15")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.qwen15,
    pytest.mark.skipif(
        not QWEN15, reason="set DECODELOOP_QWEN15 to Qwen2.5-Coder-1.5B-Instruct's .gguf (.ci/llamacpp)"
    ),
]
QUESTION = "What's the weather in Polson, MT?"


def run(*args: str, question: str = QUESTION) -> tuple[int, list[dict], str]:
    pytest.importorskip("llama_cpp")
    proc = subprocess.run(
        [sys.executable, "-m", "decodeloop", "run", "--model", "gguf:" + QWEN15, "--json", *args, question],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=1800,
    )
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["event"] == kind]


def test_the_model_calls_reads_the_result_and_answers_with_its_values():
    code, events, stderr = run()
    assert code == 0, stderr[-2000:]
    [call] = of(events, "tool_call")
    assert (call["name"], call["arguments"]) == ("get_weather", {"city": "Polson", "state": "MT"})
    [result] = of(events, "tool_result")
    assert result["text"] == "Polson, MT: 33°F, overcast, humidity 53%, wind 21 mph SE"
    [rewrite] = of(events, "rewrite")  # the call written back as the template renders it, the cache rewound
    assert '"arguments": "{\\"city\\": \\"Polson\\"' in rewrite["rendered"]
    [inject] = of(events, "inject")
    assert inject["text"].startswith("<tool_call>\n") and inject["computed"] == inject["tokens"]
    [done] = of(events, "done")
    assert done["reason"] == "eos" and "33°F" in done["answer"] and "overcast" in done["answer"]
    [prompt] = of(events, "prompt")
    assert "answer the user from that result" in prompt["text"]  # the harness's tool instruction (TOOL_INSTRUCTION)


def test_as_written_the_history_keeps_the_fence_and_the_next_message_is_held_to_text():
    code, events, stderr = run("--history", "as-written")
    assert code == 0, stderr[-2000:]
    assert not of(events, "rewrite")
    inject = of(events, "inject")[0]["text"]  # the results after the message as the model wrote it
    assert "<tool_response>" in inject and not inject.startswith("<tool_call>")
    [done] = of(events, "done")
    assert done["reason"] == "eos" and done["answer"]  # an answer, whatever the model did after the result
