"""Every shell block in the README and docs/ is run here or says why not.

The line right before a block that holds commands (```sh, ```bash, ```console, or an unlabelled block whose
first line is a command) is one of

    <!-- runs: tests/test_docs_commands.py -->                 run below, as written
    <!-- runs: tests/test_docs_commands.py; with --episodes 3 -->  the same with that option's value replaced
    <!-- runs: tests/test_docs_commands.py; exit 3 -->          the exit status it documents (default 0)
    <!-- illustrative: REASON -->                               not run here; REASON says why, and which
                                                                tier of .ci/ runs it, if one does

A block that runs is a bash script (a ```console block: its `$ ` lines, and what follows each is the output
it must print), run from a temporary folder that links to the repository's files, with `python3` and
`decodeloop` the Python running these tests and `.venv/bin/` read as that Python's environment. It must exit
with its status and print no Traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

SELF = "tests/test_docs_commands.py"
FENCE = re.compile(r"^( {0,3})(`{3,})([^`\n]*)$")
SHELL = {"sh", "bash", "shell", "console"}
COMMAND = re.compile(r"^(\$ |\.venv/bin/|\./|scripts/|python3? |decodeloop |[A-Z_]+=\S* |vllm |pip |printf )")
RUNS = re.compile(rf"^<!-- runs: {re.escape(SELF)}(?P<options>(?:; [^;]+?)*) -->$")
ILLUSTRATIVE = re.compile(r"^<!-- illustrative: (?P<reason>\S.*?) -->$")


def documents() -> list[str]:
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + [
        os.path.join(docs, n) for n in sorted(os.listdir(docs)) if n.endswith(".md")
    ]


def blocks() -> list[tuple[str, int, str, str, str]]:
    """(document, line, language, marker line, body) of every fenced block that holds commands."""
    found = []
    for path in documents():
        lines = open(path, encoding="utf-8").read().split("\n")
        i = 0
        while i < len(lines):
            match = FENCE.match(lines[i])
            if not match:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == match.group(2))
            language, body = match.group(3).strip(), "\n".join(lines[i + 1 : end])
            if language in SHELL or (not language and COMMAND.match(body)):
                found.append((os.path.relpath(path, ROOT), i + 1, language, lines[i - 1] if i else "", body))
            i = end + 1
    return found


BLOCKS = blocks()
RUN = [b for b in BLOCKS if RUNS.match(b[3])]


def test_every_shell_block_is_run_or_says_why_not():
    unmarked = [
        f"{doc}:{line}" for doc, line, _, marker, _ in BLOCKS if not (RUNS.match(marker) or ILLUSTRATIVE.match(marker))
    ]
    assert not unmarked, (
        f"a shell block needs `<!-- runs: {SELF} -->` or `<!-- illustrative: REASON -->` on the line before it:\n"
        + "\n".join(unmarked)
    )
    assert RUN, "no block is run"


def workdir(tmp_path) -> tuple[str, dict[str, str]]:
    """A folder linking to the repository's tracked top-level files, and the environment to run in."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in sorted({path.split("/")[0] for path in tracked.splitlines()}):
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    for name, line in (
        ("python3", f'exec {sys.executable} "$@"'),
        ("decodeloop", f'exec {sys.executable} -m decodeloop "$@"'),
    ):
        (bin_dir / name).write_text(f"#!/bin/sh\n{line}\n")
        (bin_dir / name).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": ROOT,
        "NO_COLOR": "1",
        "HF_HUB_OFFLINE": "1",
    }
    return str(tmp_path), env


def options(marker: str) -> tuple[dict[str, str], int]:
    """The replaced option values and the exit status of a runs marker."""
    replaced, status = {}, 0
    for option in filter(None, RUNS.match(marker).group("options").split("; ")):
        if option.startswith("with "):
            name, value = option[len("with ") :].split(" ", 1)
            replaced[name] = value
        elif option.startswith("exit "):
            status = int(option[len("exit ") :])
        else:
            raise AssertionError(f"unknown option {option!r} in {marker}")
    return replaced, status


def script(body: str, replaced: dict[str, str]) -> str:
    text = body.replace(".venv/bin/", "")
    for name, value in replaced.items():
        text, n = re.subn(rf"(?<=\s){re.escape(name)}\s+\S+", f"{name} {value}", text)
        assert n, f"{name} is not in the block"
    return text


def console(body: str) -> list[tuple[str, str]]:
    """The (command, output) pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    for line in body.split("\n"):
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs and pairs[-1][0].endswith("\\") and not pairs[-1][1]:
            pairs[-1] = (pairs[-1][0] + "\n" + line, [])
        else:
            assert pairs, "a console block starts with a `$ ` line"
            pairs[-1][1].append(line)
    return [(command, "\n".join(out)) for command, out in pairs]


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=[f"{b[0]}:{b[1]}" for b in RUN])
def test_a_block_marked_to_run_runs(block, tmp_path):
    doc, line, language, marker, body = block
    replaced, status = options(marker)
    cwd, env = workdir(tmp_path)
    steps = console(body) if language == "console" else [(body, None)]
    for command, expected in steps:
        p = subprocess.run(
            ["bash", "-o", "pipefail", "-ec", script(command, replaced)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        said = f"{doc}:{line}: `{command}`\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        assert p.returncode == status, f"exit {p.returncode}, documented {status}: {said}"
        assert "Traceback" not in p.stdout + p.stderr, said
        if expected is not None:
            assert p.stdout.rstrip("\n") == expected.rstrip("\n"), said


def test_the_checker_finds_an_unmarked_block(tmp_path, monkeypatch):
    # the checker itself can fail: a block with no marker is reported, one with a marker is not
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "```sh\npython3 decode_loop.py\n```\n\n<!-- illustrative: needs a GPU -->\n```\nvllm serve MODEL\n```\n"
        f"\n<!-- runs: {SELF}; with --episodes 3; exit 3 -->\n```console\n$ decodeloop eval --episodes 200\nok\n```\n"
        "\n```\nplain text, no command\n```\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    found = blocks()
    assert [(b[1], b[2]) for b in found] == [(1, "sh"), (6, ""), (11, "console")]
    assert [bool(RUNS.match(b[3]) or ILLUSTRATIVE.match(b[3])) for b in found] == [False, True, True]
    assert options(found[2][3]) == ({"--episodes": "3"}, 3)
    assert script("decodeloop eval --episodes 200", {"--episodes": "3"}) == "decodeloop eval --episodes 3"
    assert console(found[2][4]) == [("decodeloop eval --episodes 200", "ok")]
    assert shutil.which("bash"), "the blocks run with bash"
