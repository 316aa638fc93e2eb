"""The parser on its own (decode/parse.py): any engine's output, whole or streamed, as text or as token ids,
read by the decode loop's own stop check; docs/library.md's example as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

from decodeloop import OutputParser, get_format, parse_output
from decodeloop.formats.lab import CharTokenizer

TOOLS = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}}}}
OUTPUT = (
    "<think>Two cities.</think>Checking both.\n"
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo </tool_call>"}}</tool_call>'
)


def test_a_whole_output_gives_content_reasoning_and_calls():
    out = parse_output(OUTPUT, TOOLS, format=get_format("hermes"))
    assert (out.content, out.reasoning) == ("Checking both.", "Two cities.")
    assert [(c.name, c.arguments) for c in out.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Oslo </tool_call>"}),  # a closer inside a string is the string's text
    ]
    assert not out.errors and not out.notices


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, len(OUTPUT)])
def test_the_stream_gives_the_same_however_it_is_cut(size):
    parser = OutputParser(get_format("hermes"), TOOLS)
    for i in range(0, len(OUTPUT), size):
        parser.feed(OUTPUT[i : i + size])
    streamed = parser.finish()
    whole = parse_output(OUTPUT, TOOLS, format=get_format("hermes"))
    assert (streamed.content, streamed.reasoning, streamed.tool_calls) == (
        whole.content,
        whole.reasoning,
        whole.tool_calls,
    )


def test_token_ids_with_their_tokenizer():
    tokenizer = CharTokenizer()  # every byte a token: the markers are written as text, and still read
    out = parse_output(tokenizer.encode(OUTPUT), TOOLS, format=get_format("hermes"), tokenizer=tokenizer)
    assert out.reasoning == "Two cities." and len(out.tool_calls) == 2


def test_a_truncated_call_is_no_call_and_a_notice():
    out = parse_output(
        'Sure.<tool_call>{"name": "get_weather", "arguments": {"ci', TOOLS, format=get_format("hermes"), truncated=True
    )
    assert out.content == "Sure." and not out.calls
    assert out.notices and "token cap" in out.notices[0] and "cut off a call to get_weather" in out.notices[0]


def test_an_unclosed_call_at_the_end_is_an_error_the_model_would_read():
    out = parse_output('<tool_call>{"name": "get_weather", "arguments": {"ci', TOOLS, format=get_format("hermes"))
    [error] = out.errors
    assert (error.call is None and "unclosed" in str(error.error)) or "ends" in str(error.error)


def test_reasoning_opened_by_the_prompt():
    out = parse_output("still thinking</think>Done.", format=get_format("hermes"), reasoning_open=True)
    assert (out.reasoning, out.content) == ("still thinking", "Done.")


def test_the_library_pages_example_runs_as_written():
    page = open(os.path.join(ROOT, "docs", "library.md"), encoding="utf-8").read()
    section = page[page.index("## The parser on its own") :]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    p = subprocess.run([sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert p.stdout.splitlines() == [
        "Paris, so get_weather.",
        "get_weather {'city': 'Paris'}",
    ]


def test_a_format_is_named_by_its_name_too():
    by_name = parse_output(OUTPUT, TOOLS, format="hermes")
    assert by_name == parse_output(OUTPUT, TOOLS, format=get_format("hermes"))
    assert by_name.calls
    with pytest.raises(ValueError, match="unknown call format 'nope'"):
        OutputParser("nope", TOOLS)
