"""A server's schema cannot make the harness spin: `pattern` is checked in linear time (never by Python's
backtracking `re`), and a check that anyOf branches and $refs would multiply stops at a step budget. Real
turns against a real server process (tests/servers/hostile.py: `match`, `shaped`, `branching`, `lookahead`)."""

from __future__ import annotations

import os
import random
import re
import sys

import pytest
from conftest import ROOT

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness
from decodeloop.lab.table import TableModel
from decodeloop.patterns import regex
from decodeloop.sampling import Sampler
from decodeloop.schema import MAX_SCHEMA_STEPS, check_value, validate_arguments
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.startup import ClientOptions, start_servers

HOSTILE = [sys.executable, os.path.join(ROOT, "tests", "servers", "hostile.py")]
SLOW_VALUE = "a" * 40 + "!"  # ^(a+)+$ against this takes Python's re about 2**40 steps


def run_call(events, call: str):
    """One turn whose model writes `call` and then "Done.", against the hostile server."""
    tokenizer = CharTokenizer()
    table = {"<|user|>Go.<|assistant|>": call, "<|assistant|>": "Done.<|eos|>"}
    specs = [ServerSpec("hostile", command=HOSTILE, transport="stdio")]
    with start_servers(specs, events, options=ClientOptions(timeout=30)) as router:
        return Harness(lab_bundle(TableModel(tokenizer, table), tokenizer), Sampler(), router, events).run("Go.")


def sent(events) -> list[str]:
    return [
        e.message["params"]["name"]
        for e in events.of("rpc")
        if e.direction == "send" and e.message.get("method") == "tools/call"
    ]


def test_a_backtracking_pattern_in_an_input_schema_is_checked_at_once(events):
    result = run_call(events, f'[call match text="{SLOW_VALUE}"]')
    [error] = events.of("tool_error")
    assert error.stage == "arguments" and 'argument "text" must match the pattern ^(a+)+$' in error.message
    assert sent(events) == [] and result.answer == "Done."
    events.clear()
    run_call(events, '[call match text="aaaa"]')
    assert sent(events) == ["match"] and events.of("tool_result")[0].text == "aaaa"


def test_a_backtracking_pattern_in_an_output_schema_is_checked_at_once(events):
    run_call(events, "[call shaped]")
    [error] = events.of("tool_error")
    assert "returned structuredContent that breaks its outputSchema" in error.message
    assert "$.v must match ^(a+)+$" in error.message


def test_a_schema_whose_branches_multiply_is_refused_at_the_step_budget(events):
    run_call(events, "[call branching v=zz]")
    [error] = events.of("tool_error")
    assert error.stage == "arguments" and "could not be checked" in error.message
    assert f"more than {MAX_SCHEMA_STEPS:,} steps" in error.message and sent(events) == []


def test_a_pattern_the_harness_does_not_read_is_named_at_start_and_left_to_the_server(events):
    run_call(events, "[call lookahead text=yy]")
    [note] = [n for n in events.of("notice") if "patterns not checked" in n.message]
    assert note.message.startswith("tool lookahead: patterns not checked by the harness")
    assert '"text" ("a lookahead' in note.message
    assert sent(events) == ["lookahead"]  # not refused: the server enforces what it declares


def test_check_value_and_validate_arguments_stop_at_the_budget_without_a_server():
    levels = 30
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(levels)}
    defs[f"d{levels}"] = {"type": "integer"}
    schema = {"type": "object", "properties": {"v": {"$ref": "#/$defs/d0"}}, "$defs": defs}
    [problem] = check_value({"v": "zz"}, schema)
    assert problem.startswith("$ could not be checked") and "steps" in problem
    with pytest.raises(Exception, match="could not be checked"):
        validate_arguments("t", {"v": "zz"}, schema)
    # a JSON value that fits the first branch at every level costs one path, not every path
    assert validate_arguments("t", {"v": 5}, schema) == {"v": 5} and check_value({"v": 5}, schema) == []


PATTERNS = [
    r"^(a+)+$",
    r"^[a-z]+\d{2,3}$",
    r"ab|cd",
    r"^\w+@\w+\.com$",
    r"^\s*$",
    r"\D\W\S",
    r"^a.c$",
    r"[^\d\s]x",
    r"^$",
    r"",
    r"x*",
    r"^(?:ab)+\Z",
    r"^\d+$",
    r"colou?r",
    r"^[A-Z]{2}-\d{4}$",
    r"^(a|aa)+$",
    r"[\u0660-\u0669]",
    r"^.{2,4}$",
    r"^(?P<w>\w)(?#c)\w*$",
    r"a{,2}b",
]
ALPHABET = "abcdxyz019 \n_@.-ABZ\u0663\u00e9\u2003\U0001d7d8\t"


def test_search_gives_re_search_s_answer():
    rng = random.Random(7)
    for pattern in PATTERNS:
        for _ in range(400):
            text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))
            if rng.random() < 0.3:
                text = rng.choice(["aaa", "ab12", "ab123", "abc", "ab", "xx@yy.com", "cd"]) + rng.choice(
                    ["", "\n", "\n\n", "!"]
                )
            assert regex.search(pattern, text) == (re.search(pattern, text) is not None), (pattern, text)


def test_search_is_linear_where_re_backtracks_and_names_what_it_does_not_read():
    assert regex.search(r"^(a+)+$", "a" * 100_000 + "!") is False
    assert regex.search(r"^(a|aa)+$", "a" * 50_000) is True
    for pattern, reason in [
        (r"(?=a)", "a lookahead"),
        (r"(a)\1", "a backreference"),
        ("(", "Python cannot"),
        ("a" * 5000, "characters long"),
    ]:
        with pytest.raises(regex.Unsupported, match=reason):
            regex.search(pattern, "a")


def test_a_value_past_the_step_budget_is_refused_with_the_reason():
    # hundreds of NFA states live at every character, and a new automaton state at almost every one
    rng = random.Random(3)
    text = "".join(rng.choice("ab") for _ in range(20_000))
    with pytest.raises(regex.TooCostly, match="20,000 characters against it took more than 2,000,000 steps"):
        regex.search("^[ab]*a[ab]{500}$", text)


def test_compiled_patterns_are_kept_within_a_bound():
    # a long session meets a server's patterns as they come and go: the caches keep the recent ones only
    for n in range(regex._PATTERNS_KEPT + 50):
        regex.compile_pattern(f"^x{n}$")
        regex.search(f"^y{n}$", f"y{n}")
    assert len(regex._CACHE) <= regex._PATTERNS_KEPT and len(regex._SEARCHERS) <= regex._PATTERNS_KEPT
    assert regex.compile_pattern("^x0$") is regex.compile_pattern("^x0$")  # compiled again, then kept
