"""SmolLM2-135M-Instruct through the whole harness: the slow tier (`.ci/smollm2` fetches the model).

Runs only when DECODELOOP_SMOLLM2 names the .gguf (scripts/fetch-smollm2 makes it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, WEATHER

from decodeloop.tools.startup import ClientOptions

SMOLLM2 = os.environ.get("DECODELOOP_SMOLLM2")
pytestmark = [
    pytest.mark.smollm2,
    pytest.mark.skipif(not SMOLLM2, reason="set DECODELOOP_SMOLLM2 to SmolLM2-135M-Instruct's .gguf file"),
]
QUESTION = "What's the weather in Polson, MT?"


@pytest.fixture(scope="module")
def smol():
    from decodeloop.registry import load_model

    return load_model("hf:" + SMOLLM2)


def test_greedy_tokens_equal_a_bare_torch_loop(smol):
    import torch
    from transformers import DynamicCache

    from decodeloop.decode.engine import LocalEngine
    from decodeloop.sampling import Sampler

    prompt = [t for ids, _ in smol.chat.start([], QUESTION) for t in ids]
    smol.model.reset()
    engine, context = LocalEngine(smol.model, Sampler()), list(prompt)
    for _ in range(30):
        context.append(engine.step(context, None).token)
    ours = context[len(prompt) :]
    model, cache, ids, theirs = smol.model.model, DynamicCache(config=smol.model.model.config), prompt, []
    with torch.inference_mode():
        for _ in range(30):
            out = model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True)
            ids = [int(out.logits[0, -1].argmax())]
            theirs += ids
    assert ours == theirs


def test_a_conversation_prefills_only_each_new_turn(smol, events):
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import ClientOptions, start_stdio_servers
    from decodeloop.trust.policy import Policy

    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=30)) as router:
        chat = Harness(smol, Sampler(), router, events, config=TurnConfig(max_tokens=60), policy=Policy.off())
        first = chat.run(QUESTION)
        events.clear()
        second = chat.run("And in Boise, ID?")
    assert first.answer and second.answer
    assert second.context[: len(first.context)] == first.context
    [prompt] = events.of("prompt")
    # the template's suffix for the new user turn: after the model's own <|im_end|>, only new markup and text
    assert prompt.text.startswith("\n<|im_start|>user\nAnd in Boise, ID?<|im_end|>\n<|im_start|>assistant\n")
    assert [s[2] for s in prompt.spans] == ["chat", "user", "chat"]
    first_token = events.of("token")[0]
    assert first_token.computed == prompt.tokens + 1 and first_token.cached == len(first.context) - 1


def test_decodeloop_run_with_smollm2_from_the_command_line():
    from decodeloop.formats.chat_template import TOOL_INSTRUCTION

    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "decodeloop",
            "run",
            "--json",
            "--max-tokens",
            "60",
            "--model",
            "hf:" + SMOLLM2,
            QUESTION,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr
    assert "Converting" not in p.stderr  # no progress bars in a pipe
    events = [json.loads(line) for line in p.stdout.splitlines()]
    [prompt] = [e for e in events if e["event"] == "prompt"]
    # the template's default preamble, the harness's instruction on using tools (no --system), then the tools
    system = "<|im_start|>system\nYou are a helpful assistant.\n\n" + TOOL_INSTRUCTION + "\n\n# Tools"
    assert prompt["text"].startswith(system)
    assert '"name": "get_weather"' in prompt["text"] and prompt["text"].endswith("<|im_start|>assistant\n")
    [done] = [e for e in events if e["event"] == "done"]
    assert done["reason"] in ("eos", "max_tokens") and done["tokens"] >= 1
    notices = [e for e in events if e["event"] == "notice" and e["source"].startswith("hf:")]
    assert notices and "vocab 49152" in notices[0]["message"]


def test_constrained_required_makes_smollm2_call_the_tool_and_answer_from_the_result(smol, events):
    # unconstrained it never writes a call and invents the weather; with the opener forced and the call masked
    # it writes a valid get_weather call for the city asked about, then answers from the server's result
    from decodeloop.constrain.token_matcher import TokenMatcher
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import start_stdio_servers
    from decodeloop.trust.policy import Policy

    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=30)) as router:
        free = Harness(smol, Sampler(), router, events, config=TurnConfig(max_tokens=80), policy=Policy.off()).run(
            QUESTION
        )
        assert free.tool_calls == 0
        events.clear()
        chat = Harness(
            smol,
            Sampler(),
            router,
            events,
            config=TurnConfig(max_tokens=120, constrain="required"),
            policy=Policy.off(),
        )
        result = chat.run(QUESTION)
    assert isinstance(chat.constraint.matcher, TokenMatcher)
    [call] = events.of("tool_call")
    assert call.name == "get_weather" and call.arguments == {"city": "Polson", "state": "MT"}
    assert not events.of("tool_error")
    assert "33°F" in result.answer
    assert events.of("token")[0].masked is not None  # the forced opener overrode the model's first token
