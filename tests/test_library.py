"""The library API as the README shows it: a bundle, servers from an mcpServers file, a conversation."""

from __future__ import annotations

import json
import sys


def test_readme_library_example(tmp_path):
    config = tmp_path / "servers.json"
    config.write_text(
        json.dumps(
            {"mcpServers": {"weather": {"command": sys.executable, "args": ["-m", "decodeloop.servers.weather"]}}}
        )
    )

    # -- as in the README --
    from decodeloop import Harness, Sampler, load_config, load_model, start_servers

    bundle = load_model("table")
    seen = []
    with start_servers(load_config(str(config))) as router:
        chat = Harness(bundle, Sampler(), router, emit=seen.append)  # every event, as it happens
        first = chat.run("What's the weather in Polson, MT?")
        second = chat.run("And tomorrow?")  # the same conversation
    # -- end --

    assert first.answer.startswith("It's 33°F and overcast in Polson, MT")
    assert second.answer == "Sorry, I only know how to look up the weather in Polson, MT."
    assert second.context[: len(first.context)] == first.context
    kinds = [e.kind for e in seen]
    assert kinds.count("done") == 2 and kinds.count("tool_call") == 1 and kinds[0] == "prompt"
    # the events arrived while the turn ran: the call's events come before the first turn's done
    assert kinds.index("tool_result") < kinds.index("done")


def test_unknown_names_are_attribute_errors():
    import pytest

    import decodeloop

    assert decodeloop.Harness.__name__ == "Harness"
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = decodeloop.NoSuchThing


def test_the_readme_block_runs_as_written():
    # the README's library block, byte for byte, in a fresh interpreter from the repository's root
    import os
    import re
    import subprocess

    from conftest import ROOT

    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = readme[readme.index("## The library") :]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    p = subprocess.run([sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("prompt ") and "tool_call" in lines[0]
    assert lines[0].endswith(
        "It's 33°F and overcast in Polson, MT right now, with 53% humidity and a 21 mph wind from the SE."
    )
    assert lines[1].endswith("done Sorry, I only know how to look up the weather in Polson, MT.")


def test_every_exported_name_resolves():
    import decodeloop

    for name in decodeloop.__all__:
        assert getattr(decodeloop, name) is not None, name
