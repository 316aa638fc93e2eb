"""--json lines stay one line each for readers that split on U+2028 and U+2029 (JavaScript's, Python's
str.splitlines): a real server process (tests/servers/hostile.py `say`) returns text holding both."""

from __future__ import annotations

import io
import json
import os
import sys

from conftest import ROOT

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy
from decodeloop.ui.jsonl import JsonlView

HOSTILE = [sys.executable, os.path.join(ROOT, "tests", "servers", "hostile.py")]
TEXT = "one\u2028two\u2029three"


def test_line_and_paragraph_separators_are_escaped_in_json_lines():
    out = io.StringIO()
    view = JsonlView(out)
    tokenizer = CharTokenizer()
    table = {"<|user|>Go.<|assistant|>": f"[call say hex={TEXT.encode().hex()}]", "<|assistant|>": "Ok.<|eos|>"}
    with start_stdio_servers([HOSTILE], view, options=ClientOptions(timeout=30)) as router:
        Harness(lab_bundle(TableModel(tokenizer, table), tokenizer), Sampler(), router, view, policy=Policy.off()).run(
            "Go."
        )
    text = out.getvalue()
    assert "\u2028" not in text and "\u2029" not in text and "\\u2028" in text
    rows = [json.loads(line) for line in text.splitlines()]  # splitlines splits on both: each row still parses
    assert len(rows) == text.count("\n")
    [result] = [row for row in rows if row["event"] == "tool_result"]
    assert result["text"] == TEXT
