"""Server-controlled text at the trust boundary: caps that hold, safe terminal output, the
server's environment, definitions that change. Real server processes (tests/servers/hostile.py)."""

from __future__ import annotations

import io
import json
import os
import sys

from conftest import ROOT, WEATHER

from decodeloop.loop import Harness, TurnConfig
from decodeloop.mcp.client import Tool
from decodeloop.models import lab_bundle
from decodeloop.models.table import TableModel
from decodeloop.router import start_stdio_servers
from decodeloop.sampling import Sampler
from decodeloop.tokenize import CharTokenizer
from decodeloop.ui.jsonl import JsonlView
from decodeloop.untrusted import cap_strings, cap_tool, quoted, visible

HOSTILE = [sys.executable, os.path.join(ROOT, "tests", "servers", "hostile.py")]
QUESTION = "Go."


def run_turn(events, table, servers=(HOSTILE,), **config):
    tokenizer = CharTokenizer()
    with start_stdio_servers([list(s) for s in servers], events, timeout=30) as router:
        harness = Harness(lab_bundle(TableModel(tokenizer, table), tokenizer), Sampler(), router, events,
                          config=TurnConfig(**config))
        return harness.run(QUESTION)


# -- caps ------------------------------------------------------------------------------------------

def test_a_json_rpc_error_message_is_capped_like_a_result(events):
    table = {"<|user|>" + QUESTION + "<|assistant|>": "[call fail chars=100000]", "<|assistant|>": "Ok.<|eos|>"}
    run_turn(events, table, max_result_chars=1000)
    [error] = events.of("tool_error")
    assert error.stage == "call" and error.message.startswith("fail failed: EEEE")
    assert "error truncated: showing 1,000 of 100,0" in error.message and len(error.message) < 1100
    [inject] = events.of("inject")
    assert inject.tokens < 1200   # the model reads the cap, not the server's 100,000 characters


def test_a_long_tool_description_is_capped_in_the_prompt_with_a_notice(events):
    table = {"<|assistant|>": "Ok.<|eos|>"}
    run_turn(events, table, servers=([*HOSTILE, "--description-chars", "200000"],))
    [prompt] = events.of("prompt")
    assert "wordy" in prompt.tools and prompt.tokens < 10_000
    assert "description truncated: showing 4,000 of 200,000 characters" in prompt.text
    assert any("tool 'wordy': cut to 4,000 characters: description (200,000 characters)" in n.message
               for n in events.of("notice"))


def test_schema_text_is_capped_and_a_schema_too_big_is_refused():
    long = "d" * 10_000
    tool = Tool("t", "short", {"type": "object", "properties": {"a": {"type": "string", "description": long}}})
    capped, note = cap_tool(tool, max_description=100, max_schema=16_000)
    assert len(capped.input_schema["properties"]["a"]["description"]) < 200
    assert tool.input_schema["properties"]["a"]["description"] == long   # the original is not changed
    assert note == "tool 't': cut to 100 characters: inputSchema.properties.a.description (10,000 characters)"
    huge = Tool("h", "", {"type": "object", "properties": {"a": {"enum": ["x" * 20_000]}}})
    refused, why = cap_tool(huge, max_description=100, max_schema=16_000)
    assert refused is None and "refused: its inputSchema is 20,0" in why
    assert cap_tool(Tool("ok", "fine", {"type": "object"})) == (Tool("ok", "fine", {"type": "object"}), None)


def test_json_lines_carry_a_huge_result_capped_once_per_field(events):
    table = {"<|user|>" + QUESTION + "<|assistant|>": "[call big chars=2000000]", "<|assistant|>": "Ok.<|eos|>"}
    out = io.StringIO()
    view = JsonlView(out, max_chars=1000)

    def both(event):
        events(event)
        view(event)

    run_turn(both, table, max_result_chars=1000)
    text = out.getvalue()
    assert len(text.encode()) < 40_000      # not 2 MB twice
    lines = [json.loads(line) for line in text.splitlines()]
    [result] = [line for line in lines if line["event"] == "tool_result"]
    assert "text truncated: showing 1,000 of 2,000,000 characters" in result["content"][0]["text"]
    [response] = [line for line in lines if line["event"] == "rpc" and "result" in line["message"]
                  and "content" in line["message"]["result"]]
    assert "text truncated: showing 1,000 of 2,000,000 characters" in response["message"]["result"]["content"][0]["text"]
    # the events themselves keep what the server sent (the library's caller may want it)
    assert len(events.of("tool_result")[0].content[0]["text"]) == 2_000_000


def test_a_huge_notification_is_capped(events):
    table = {"<|user|>" + QUESTION + "<|assistant|>": "[call shout chars=100000]", "<|assistant|>": "Ok.<|eos|>"}
    run_turn(events, table)
    [log] = [n for n in events.of("notice") if n.message.startswith("log info")]
    assert len(log.message) < 4_100 and "notice truncated: showing 4,000 of 100,0" in log.message


def test_cap_strings_copies_and_keeps_short_strings():
    value = {"a": ["x" * 10, {"b": "y" * 30}], "n": 3}
    assert cap_strings(value, 20) == {"a": ["x" * 10, {"b": "y" * 20 + "\n[... text truncated: showing 20 of 30 "
                                                             "characters]"}], "n": 3}
    assert value["a"][1]["b"] == "y" * 30
