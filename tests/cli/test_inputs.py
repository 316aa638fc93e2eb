"""Bad input as a user meets it: bytes that are not UTF-8 on the command line, in a config file, on chat's
stdin and in a trace, and a timeout that means nothing. Each is one line saying what and where, with the
exit status of docs/cli.md's table, and never a traceback. Real subprocesses, the real bundled servers.

A shell hands Python bytes that are not UTF-8 as lone surrogates (surrogateescape). stdin is read two ways:
under a UTF-8 locale a bad byte raises as it is read (`strict`, here PYTHONIOENCODING=utf-8), under the C
locale it arrives as a lone surrogate; both are run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT
from test_cli import ANSWER
from test_viewer import embedded

from decodeloop.ui.html import read_jsonl

PROMPT = "What's the weather in Polson, MT?"


def cli(*args: str | bytes, stdin: bytes | int = b"", strict: bool = False) -> subprocess.CompletedProcess:
    """`decodeloop ARGS` with bytes in and out; `strict`: stdin decoded as a UTF-8 locale does, else as the C
    locale does. `stdin` may be a file descriptor (a terminal's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LC_ALL", "LANG", "NO_COLOR")}
    env.update(LC_ALL="C", NO_COLOR="1", XDG_STATE_HOME=os.path.join(os.devnull, "state"))  # no chat history kept
    if strict:
        env["PYTHONIOENCODING"] = "utf-8"
    given = {"input": stdin} if isinstance(stdin, bytes) else {"stdin": stdin}
    return subprocess.run(
        [sys.executable, "-m", "decodeloop", *args], capture_output=True, cwd=ROOT, env=env, timeout=120, **given
    )


def last_line(p: subprocess.CompletedProcess) -> str:
    err = p.stderr.decode()
    assert "Traceback" not in err, err
    return err.splitlines()[-1]


# -- the command line ------------------------------------------------------------------------------------


def test_a_prompt_with_a_byte_that_is_not_utf8_is_refused_with_its_offset():
    p = cli("run", b"weather \xff in Polson")
    assert p.returncode == 2 and p.stdout == b""
    assert last_line(p) == (
        "decodeloop run: error: argument prompt: not UTF-8: byte 0xff at offset 8 (every argument must be UTF-8 text)"
    )


@pytest.mark.parametrize(
    "flag, value, offset",
    [
        ("--system", b"Be caf\xe9-brief.", 6),
        ("--stop", b"\x80", 0),
        ("--attach", b"weather:weather://\xfe", 18),
        ("--mcp-config", b"servers-\xe9.json", 8),  # a path too: it is shown in the trace, the events, the page
    ],
)
def test_every_option_refuses_bytes_that_are_not_utf8_naming_itself(flag, value, offset):
    p = cli("run", flag, value, PROMPT)
    assert p.returncode == 2 and p.stdout == b""
    assert f"error: argument {flag}: not UTF-8: byte 0x{value[offset]:02x} at offset {offset} " in last_line(p)


@pytest.mark.parametrize("value", ["inf", "nan", "1e400", "0", "-1"])
def test_a_timeout_that_means_nothing_is_a_usage_error(value):
    # inf overflowed a deadline (a traceback); nan was taken, and every server then failed "in nans" (exit 1)
    p = cli("run", "-q", "--timeout", value, PROMPT)
    assert p.returncode == 2 and p.stdout == b""
    assert (
        last_line(p)
        == f"decodeloop run: error: argument --timeout: expected seconds above 0, at most 1,000,000, got {value!r}"
    )


# -- a config file ---------------------------------------------------------------------------------------


def _config(tmp_path, encoding: str):
    path = tmp_path / "servers.json"
    servers = {"mcpServers": {"météo": {"command": sys.executable, "args": ["-m", "decodeloop.servers.weather"]}}}
    path.write_text(json.dumps(servers, ensure_ascii=False), encoding=encoding)
    return str(path)


@pytest.mark.parametrize(
    "encoding, where",
    [
        ("latin-1", "byte 0xe9 at offset 18"),
        ("utf-16", "byte 0xff at offset 0; it starts with a UTF-16 byte-order mark"),
        ("cp1252", "byte 0xe9 at offset 18"),
    ],
)
def test_a_config_file_that_is_not_utf8_names_the_file_and_the_byte(tmp_path, encoding, where):
    path = _config(tmp_path, encoding)
    p = cli("run", "-q", "--mcp-config", path, PROMPT)
    assert p.returncode == 78 and p.stdout == b""
    assert p.stderr.decode() == (
        f"decodeloop: cannot start: {path}: not UTF-8: {where} (expected UTF-8 JSON: save the file as UTF-8)\n"
    )


def test_a_config_file_in_utf8_with_a_byte_order_mark_is_read(tmp_path):
    p = cli("run", "-q", "--mcp-config", _config(tmp_path, "utf-8-sig"), PROMPT)
    assert (p.returncode, p.stdout.decode()) == (0, ANSWER + "\n"), p.stderr


# -- chat's stdin ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("strict", [True, False], ids=["utf8-locale", "c-locale"])
@pytest.mark.parametrize("json_lines", [False, True], ids=["chat", "json"])
def test_a_chat_line_that_is_not_utf8_is_not_sent_and_the_chat_goes_on(strict, json_lines):
    lines = b"caf\xe9, weather?\n" + PROMPT.encode() + b"\n"
    p = cli("chat", *(["--json"] if json_lines else []), stdin=lines, strict=strict)
    assert p.returncode == 0, p.stderr
    refusal = "decodeloop: not sent: the line is not UTF-8: byte 0xe9 at offset 3\n"
    out, err = p.stdout.decode(), p.stderr.decode()
    assert (err if json_lines else out).count(refusal) == 1 and "Traceback" not in err
    if json_lines:  # one turn ran: the second line's
        [done] = [json.loads(line) for line in out.splitlines() if '"event": "done"' in line]
        assert done["answer"] == ANSWER
    else:
        assert out.count("assistant> ") == 1 and f"assistant> {ANSWER}" in out


def test_a_chat_line_typed_at_a_terminal_that_is_not_utf8_is_not_sent():
    import pty

    leader, follower = pty.openpty()  # stdin a terminal: chat prompts and reads there; stdout stays a pipe
    try:
        os.write(leader, b"caf\xe9?\n/quit\n")
        p = cli("chat", stdin=follower, strict=True)
    finally:
        os.close(follower)
        os.close(leader)
    assert p.returncode == 0 and "Traceback" not in p.stderr.decode(), p.stderr
    assert "you> decodeloop: not sent: the line is not UTF-8: byte 0xe9 at offset 3\nyou> " in p.stdout.decode()


# -- a trace for the viewer ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trace() -> bytes:
    p = cli("run", "--json", PROMPT)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("source", ["file", "stdin-utf8-locale", "stdin-c-locale"])
def test_a_trace_with_a_byte_that_is_not_utf8_names_its_line(tmp_path, trace, source):
    lines = trace.splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"event"', b'"ev\xffent"', 1)  # line 2: `{"ev\xffent": ...`
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(lines))
    page = str(tmp_path / "page.html")
    if source == "file":
        p = cli("view", str(path), "-o", page)
    else:
        p = cli("view", "-", "-o", page, stdin=path.read_bytes(), strict=source == "stdin-utf8-locale")
    name = str(path) if source == "file" else "-"
    assert p.returncode == 2 and not os.path.exists(page)
    assert last_line(p) == f"decodeloop view: error: {name}: line 2: not UTF-8: byte 0xff at offset 4 of the line"


def test_a_trace_cut_inside_a_character_keeps_every_whole_line(tmp_path, trace):
    # `head -c` stopped inside the last line's ° (c2 b0): that line is left out with a notice, as a cut line is
    cut = trace.rindex("°".encode()) + 1
    assert trace[cut - 1 : cut] == b"\xc2" and b"\n" not in trace[trace.rindex(b"\n", 0, cut) + 1 : cut]
    page = tmp_path / "page.html"
    p = cli("view", "-", "-o", str(page), stdin=trace[:cut], strict=True)
    assert p.returncode == 0 and "Traceback" not in p.stderr.decode(), p.stderr
    whole = trace[:cut].decode("utf-8", "surrogateescape").splitlines(keepends=True)
    events = embedded(page.read_text(encoding="utf-8"))["events"]
    assert events[:-1] == read_jsonl(whole[:-1]) and len(events) > 100
    assert events[-1] == {
        "event": "notice",
        "source": "viewer",
        "message": f"the trace's last line (line {len(whole)}, {len(whole[-1]):,} characters) is cut short; it is left out",
    }
