"""The tool surface a server can make the harness render: capped per server in tools, and in tokens for all of
them, against the model's context when it is known. Real server processes (tests/servers/wide.py: 3,000
tools of 3,900 characters each, every one within the per-tool caps; the bundled weather server)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, WEATHER

from decodeloop.decode.bundle import lab_bundle
from decodeloop.errors import ToolSurfaceError
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.startup import ClientOptions, start_servers
from decodeloop.trust.policy import Policy

WIDE = [sys.executable, os.path.join(ROOT, "tests", "servers", "wide.py")]


def wide(*args: str, name: str = "wide") -> ServerSpec:
    return ServerSpec(name, command=[*WIDE, "--name", name, *args], transport="stdio")


def harness(router, events, table=None, **config):
    tokenizer = CharTokenizer()
    return Harness(
        lab_bundle(TableModel(tokenizer, table or {}), tokenizer),
        Sampler(),
        router,
        events,
        policy=Policy.off(),
        config=TurnConfig(**config),
    )


def test_a_server_offers_at_most_max_tools_tools(events):
    with start_servers([wide("--description-chars", "40")], events, options=ClientOptions(timeout=60)) as router:
        assert list(router.tools) == [f"tool{n:04d}" for n in range(128)]
        assert [n.message for n in events.of("notice")] == [
            "lists 3,000 tools; the first 128 it could offer are taken, the other 2,872 are not (--max-tools 128)"
        ]
    events.clear()
    with start_servers(
        [wide("--tools", "20", "--description-chars", "40")], events, options=ClientOptions(timeout=60, max_tools=5)
    ) as router:
        assert len(router.tools) == 5 and "the other 15 are not (--max-tools 5)" in events.of("notice")[0].message


def test_tools_over_the_token_cap_are_refused_naming_the_servers(events):
    specs = [ServerSpec("weather", command=WEATHER, transport="stdio"), wide()]
    with start_servers(specs, events, options=ClientOptions(timeout=60)) as router:
        with pytest.raises(ToolSurfaceError) as refused:
            harness(router, events)
    message = str(refused.value)
    assert (
        message.startswith("the tools' descriptions take ") and "over the cap of 16,384 (--max-tool-tokens)" in message
    )
    # largest first, each with its tokens and its tools (the lab tokenizer: a token a character)
    assert message.index("wide ") < message.index("weather ") and " in 128 tools" in message
    assert " in 2 tools" in message and message.endswith("offer fewer with --max-tools, or leave a server out")


def test_within_the_caps_the_tools_are_rendered(events):
    with start_servers(
        [wide("--tools", "3", "--description-chars", "100")], events, options=ClientOptions(timeout=60)
    ) as router:
        h = harness(router, events, table={"<|user|>Q<|assistant|>": "A<|eos|>"}, max_tool_tokens=1_000)
        assert h.run("Q").answer == "A" and len(h.tools) == 3
        with pytest.raises(ToolSurfaceError, match="take 728 tokens of the prompt, over the cap of 300 "):
            harness(router, events, max_tool_tokens=300)


def test_a_prompt_that_cannot_fit_the_models_context_is_refused(events):
    with start_servers(
        [wide("--tools", "5", "--description-chars", "200")], events, options=ClientOptions(timeout=60)
    ) as router:
        tokenizer = CharTokenizer()
        bundle = lab_bundle(TableModel(tokenizer, {}), tokenizer)
        bundle.context_length = 1_000
        with pytest.raises(ToolSurfaceError) as refused:
            Harness(bundle, Sampler(), router, events, policy=Policy.off())
        message = str(refused.value)
        assert "and the turn may write 256 more (--max-tokens): over the model's context of 1,000 tokens" in message
        assert "The tools take 1,526: wide 1,526 tokens" in message and " in 5 tools" in message
        bundle.context_length = 10_000
        Harness(bundle, Sampler(), router, events, policy=Policy.off())  # fits


def test_tools_that_grow_past_the_cap_mid_session_are_refused_for_the_next_conversation(events):
    table = {
        "<|user|>grow<|assistant|>": "[call grow]",
        "tools now<|assistant|>": "grown<|eos|>",
        "<|user|>Q<|assistant|>": "A<|eos|>",
    }
    spec = wide("--tools", "2", "--description-chars", "100", "--grow-to", "100")
    with start_servers([spec], events, options=ClientOptions(timeout=60)) as router:
        h = harness(router, events, table=table, max_tool_tokens=2_000)
        assert h.run("grow").answer == "grown"
        h.reset()
        with pytest.raises(ToolSurfaceError, match="over the cap of 2,000"):
            h.run("Q")
        assert len(h.tools) == 3 and h.context is None  # the conversation never started on them
        with pytest.raises(ToolSurfaceError):  # and the next one is refused too
            h.run("Q")


def test_the_cli_refuses_before_the_model_runs():
    p = subprocess.run(
        [sys.executable, "-m", "decodeloop", "run", "--model", "table", "--mcp", " ".join(WIDE), "hello"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("decodeloop: cannot start: the tools' descriptions take ")
    assert "(--max-tool-tokens): wide" in p.stderr or "(--max-tool-tokens): wide_py" in p.stderr, p.stderr
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "decodeloop",
            "run",
            "--model",
            "table",
            "--mcp",
            " ".join(WIDE),
            "--max-tools",
            "0",
            "hello",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert p.returncode == 2 and "argument --max-tools: expected a whole number from 1" in p.stderr
