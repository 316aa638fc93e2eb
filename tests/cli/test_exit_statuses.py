"""docs/cli.md's table of exit statuses, kept: each status the CLI returns is in the table, and each row is met
by a real command line here (3, 4, 130 and 141 by test_cli.py: a turn that gave up, the token cap, Ctrl-C
at a terminal, a reader that went away). Real subprocesses, the real bundled servers."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from conftest import ROOT
from test_cli import ANSWER
from test_inputs import PROMPT, cli, last_line

from decodeloop.cli import options

CLI_DOC = os.path.join(ROOT, "docs", "cli.md")


def documented() -> dict[int, str]:
    """The table under docs/cli.md's "Exit status" heading: status -> what it says."""
    with open(CLI_DOC, encoding="utf-8") as f:
        section = f.read().split("\n## Exit status\n", 1)[1].split("\n## ", 1)[0]
    return {int(status): meaning for status, meaning in re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)}


def test_every_exit_code_of_the_cli_is_in_the_documented_table_and_no_other():
    codes = {name: value for name, value in vars(options).items() if name.startswith("EXIT_")}
    assert sorted(documented()) == sorted(set(codes.values())) == [0, 1, 2, 3, 4, 78, 130, 141]
    assert codes["EXIT_CONFIG"] == 78 and "configuration" in documented()[78]
    # and the commands return the names, not numbers of their own
    for path in ("__init__.py", "commands.py", "auth.py", "options.py"):
        with open(os.path.join(ROOT, "decodeloop", "cli", path), encoding="utf-8") as f:
            source = f.read()
        assert not re.search(r"\breturn \d+\b|\bexit\(\d+", source), path


def test_0_answered():
    p = cli("run", "-q", PROMPT)
    assert (p.returncode, p.stdout.decode()) == (0, ANSWER + "\n")


@pytest.mark.parametrize(
    "args, says",
    [
        (["--mcp", "no-such-server-binary"], "decodeloop: cannot start: "),  # a server that does not start
        (["--mcp", f"{sys.executable} -c pass"], "server exited with code 0"),  # nor finishes its handshake
    ],
)
def test_1_a_runtime_failure(args, says):
    p = cli("run", "-q", *args, PROMPT)
    assert p.returncode == 1 and says in last_line(p)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--model", "bogus"], "--model: unknown model 'bogus'"),
        (["--sampling-model", "bogus"], "--sampling-model: unknown model 'bogus'"),  # was 1, "cannot start"
        (["--sampling-model", "openai:http://127.0.0.1:9/v1"], "openai:URL is for --model only"),  # a traceback
        (["--temperature", "nan"], "argument --temperature: expected a finite number"),
        (["--no-such-option"], "unknown option --no-such-option"),
        (["--mcp", ""], "--mcp: empty server command"),  # the command line's mistakes, where they were 1
        (["--mcp-url", "ftp://h/mcp"], "--mcp-url: bad MCP server URL 'ftp://h/mcp'"),
        (["--root", "/no/such/dir"], "--root: root '/no/such/dir': no such file or directory"),
    ],
)
def test_2_a_usage_error_names_the_flag(args, says):
    p = cli("run", "-q", *args, PROMPT)
    assert p.returncode == 2 and p.stderr.decode().startswith("usage: decodeloop run [-h]")
    assert says in last_line(p)


CONFIGS = {
    "missing": None,
    "empty": b"",
    "not JSON": b'{"mcpServers": {"w": {"command": "x"},}}',
    "wrong type": json.dumps({"mcpServers": {"w": {"command": 3}}}).encode(),
    "wrong shape": json.dumps({"mcpServers": []}).encode(),
    "unknown key": json.dumps({"mcpServers": {"w": {"cmd": "x"}}}).encode(),
    "bad engine": json.dumps({"mcpServers": {}, "engine": {"url": 3}}).encode(),
    "latin-1": '{"mcpServers": {"m\xe9t\xe9o": {"command": "x"}}}'.encode("latin-1"),
    "a directory": "dir",
}


@pytest.mark.parametrize("kind", CONFIGS)
def test_78_a_config_file_that_cannot_be_used_as_it_is(tmp_path, kind):
    # missing, empty and not JSON were 2, a wrong type or shape 1: one status now, whichever is wrong
    path = tmp_path / "servers.json"
    if CONFIGS[kind] == "dir":
        path.mkdir()
    elif CONFIGS[kind] is not None:
        path.write_bytes(CONFIGS[kind])
    p = cli("run", "-q", "--mcp-config", str(path), PROMPT)
    assert p.returncode == 78 and p.stdout == b""
    line = last_line(p)
    assert p.stderr.decode() == line + "\n" and line.startswith("decodeloop: cannot start: ") and str(path) in line


@pytest.mark.parametrize(
    "args, says",
    [
        (["--model", "hf:/no/such/model"], "--model hf:/no/such/model: no model at '/no/such/model'"),
        (["--sampling-model", "hf:/no/such/model"], "--sampling-model hf:/no/such/model: no model at"),
        (["--model", "transformer", "--weights", "/no/such.npz"], "--weights: no such file: /no/such.npz"),
    ],
)
def test_78_a_model_that_does_not_load(args, says):
    p = cli("run", "-q", *args, PROMPT)
    assert p.returncode == 78 and p.stdout == b"" and says in last_line(p)
    assert p.stderr.decode().count("\n") == 1  # one line: no usage, which would bury it


def test_78_a_model_whose_extra_is_missing(tmp_path):
    # the model cannot load on this installation, as a path that is not there cannot: nothing at run time
    # changes it until the extra is installed
    try:
        import llama_cpp  # noqa: F401

        pytest.skip("the llamacpp extra is installed here")
    except ImportError:
        pass
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    p = cli("run", "-q", "--model", f"gguf:{model}", PROMPT)
    assert p.returncode == 78 and "pip install -e '.[llamacpp]'" in last_line(p)
