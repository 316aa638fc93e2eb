"""What a learner meets first, run as a learner runs it: the lab scripts' help, their examples and errors."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
from conftest import ROOT

from decodeloop.registry import load_model


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-S", *args], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60
    )


def examples(script: str) -> list[list[str]]:
    """The example command lines of a script's --help, split as a shell would."""
    text = run(script, "--help").stdout
    lines = text.split("\nexamples:\n", 1)[1].splitlines()
    return [shlex.split(line.split(" | ")[0]) for line in lines if line.strip()]


def test_a_scripts_help_examples_run_as_written_without_installing():
    found = examples("decode_loop.py")
    assert found and all(argv[:2] == ["python3", "decode_loop.py"] for argv in found)  # never `decodeloop run`
    for argv in found[:2] + [a for a in found if "ngram" in a]:
        argv = [a for a in argv[2:] if a != "--step"]  # --step waits for keys: the rest as written
        p = run("decode_loop.py", "-q", *argv)
        assert p.returncode == 0 and p.stdout.strip(), (argv, p.stderr)
    assert examples("decode_loop_ngram.py")[0][:2] == ["python3", "decode_loop_ngram.py"]


def test_sampling_errors_name_the_flag_the_user_typed():
    for flag, value, message in (
        ("--top-p", "2", "argument --top-p: expected a number above 0, at most 1 (1 is off), got '2'"),
        ("--min-p", "-1", "argument --min-p: expected a number from 0 (off) to 1, got '-1'"),
        ("--top-k", "-1", "argument --top-k: expected a whole number from 0 (off) to 1,000,000,000, got '-1'"),
        ("--temperature", "-1", "argument --temperature: expected a finite number, 0 (greedy) or more, got '-1'"),
    ):
        p = run("decode_loop.py", flag, value)
        assert p.returncode == 2 and p.stderr.startswith("usage: decode_loop.py [-h]"), p.stderr[:100]
        assert p.stderr.splitlines()[-1].startswith(f"decode_loop.py: error: {message}"), p.stderr


def test_an_order_of_0_is_refused_not_taken_for_the_default():
    with pytest.raises(ValueError, match="at least 1"):
        load_model("ngram", order=0)
    p = run("decode_loop_ngram.py", "--order", "0")
    assert p.returncode == 2 and p.stderr.splitlines()[-1] == (
        "decode_loop_ngram.py: error: argument --order: expected a whole number from 1 to 32, got '0'"
    )


def test_step_frames_of_the_ngram_do_not_call_its_prefix_a_cache():
    p = run("decode_loop_ngram.py", "--order", "4", "--step", "--max-tokens", "3", stdin="\n\n")
    assert p.returncode in (0, 4), p.stderr
    frames = [line for line in p.stdout.splitlines() if line.startswith("1 forward")]
    assert frames[1] == (
        "1 forward  1 position(s) new since the last forward; 1496 of common prefix not re-read "
        "(no KV cache: the n-gram reads only its last ORDER-1 tokens)"
    )
    assert "served from the cache" not in p.stdout
    p = run("decode_loop.py", "--step", "--max-tokens", "2", stdin="\n")
    assert "1 forward  computed 1 position(s) (one new position); 886 served from the cache" in p.stdout


def test_the_byte_legend_lists_only_the_bytes_of_a_broken_character():
    from decodeloop.ui.legend import ByteLegend

    legend = ByteLegend()
    assert legend("\\xdb") is None
    assert legend("<|eos|>") == (
        "↳ '\\xdb': bytes, not characters: UTF-8 writes a character outside ASCII as 2 "
        "to 4 bytes, and these do not make a whole one, so the text shows \ufffd (U+FFFD) "
        "in its place"
    )
    legend = ByteLegend()  # a lead byte and one that cannot follow it: both are the broken bytes
    assert legend("\\xe2") is None and legend("\\xc2").startswith("↳ '\\xe2' '\\xc2': bytes, not characters")
    # the table model at T = 1 writes such a byte and then ends its message: the trace names the byte alone
    p = run("decode_loop.py", "--temperature", "1", "--seed", "3")
    assert p.returncode == 0, p.stderr
    assert "↳ '\\xdb': bytes, not characters:" in p.stdout and "'<|eos|>': bytes" not in p.stdout
