"""The transcripts the README and docs/ show are what the programs print today (scripts/transcripts.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, f"{ROOT}/scripts")
import transcripts


def check(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "scripts/transcripts.py", "--check", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_every_marked_transcript_is_what_its_command_prints():
    # the blocks that need a real model are checked by the tier below; here they are named as skipped
    env = {k: "" for k in ("DECODELOOP_SMOLLM2", "DECODELOOP_QWEN", "DECODELOOP_QWEN15")}
    p = check(**env)
    assert p.returncode == 0, "run python3 scripts/transcripts.py:\n" + p.stdout + p.stderr
    assert "skipped: docs/models.md" in p.stdout and "run by .ci/smollm2" in p.stdout


def tier(needs: str, mark: pytest.MarkDecorator):
    variable, where = transcripts.NEEDS[needs]
    skip = pytest.mark.skipif(not os.environ.get(variable), reason=f"set {variable} ({where})")
    return pytest.param(needs, marks=[pytest.mark.slow, mark, skip], id=needs)


@pytest.mark.parametrize("needs", [tier("smollm2", pytest.mark.smollm2), tier("qwen15", pytest.mark.qwen15)])
def test_the_transcripts_of_a_real_model_are_what_it_prints(needs):
    p = check("--needs", needs)
    assert p.returncode == 0, f"run python3 scripts/transcripts.py --needs {needs}:\n" + p.stdout + p.stderr
    assert "skipped" not in p.stdout


def test_a_drifted_transcript_is_named():
    # the checker itself can fail: a block edited by hand is reported
    good = transcripts.made("decode_loop.py", "8-37 46-133")
    assert "[... tokens 8–37 elided from this copy ...]" in good and "  46 │" not in good and " 134 │" in good
    assert transcripts.scrubbed(good) != transcripts.scrubbed(good.replace("stop: eos", "stop: cap"))
    assert transcripts.scrubbed(good.replace("0.01s", "9.99s")) == transcripts.scrubbed(good)


def test_lines_and_kinds_of_lines_are_cut_with_a_line_saying_so():
    text = "  → a\n  ← b\n● weather\n  │ prompt\n  │ more\n   1 │ tok\n   2 │ tok\nlast\n"
    assert transcripts.elided(text, [], omit=["rpc", "prompt"]) == (
        "   [... 2 JSON-RPC lines omitted from this copy ...]\n● weather\n"
        "   [... 2 lines of the prompt omitted from this copy ...]\n   1 │ tok\n   2 │ tok\nlast\n"
    )
    assert transcripts.elided(text, [(2, 2)], [(1, 3)]) == (
        "   [... lines 1–3 elided from this copy ...]\n  │ prompt\n  │ more\n   1 │ tok\n"
        "   [... tokens 2–2 elided from this copy ...]\n"
    )
    assert transcripts.parse('decodeloop run "a; b"; elide 1-2; needs smollm2') == (
        'decodeloop run "a; b"',
        {"elide": "1-2", "needs": "smollm2"},
    )
    args, stdin = transcripts.argv(r'printf "a\nb\n" | decodeloop chat --model hf:models/X.gguf', "/m/X.gguf")
    assert args[1:] == ["-m", "decodeloop", "chat", "--model", "hf:/m/X.gguf"] and stdin == "a\nb\n"
