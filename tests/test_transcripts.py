"""The transcripts the README and docs/ show are what the programs print today (scripts/transcripts.py)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_every_marked_transcript_is_what_its_command_prints():
    p = subprocess.run(
        [sys.executable, "scripts/transcripts.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, "run python3 scripts/transcripts.py:\n" + p.stdout + p.stderr


def test_a_drifted_transcript_is_named(tmp_path):
    # the checker itself can fail: a block edited by hand is reported
    sys.path.insert(0, f"{ROOT}/scripts")
    import transcripts

    good = transcripts.made("decode_loop.py", "8-37 46-133")
    assert "[... tokens 8–37 elided from this copy ...]" in good and "  46 │" not in good and " 134 │" in good
    assert transcripts.scrubbed(good) != transcripts.scrubbed(good.replace("stop: eos", "stop: cap"))
    assert transcripts.scrubbed(good.replace("0.01s", "9.99s")) == transcripts.scrubbed(good)
