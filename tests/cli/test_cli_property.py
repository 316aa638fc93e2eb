"""Generated command lines over every command: real option names from the parser mixed with hostile values
(numbers that mean nothing, huge ints, empty strings, NUL, lone surrogates, `--`, unknown options, options
missing their value) never make a traceback, and always end with a status of docs/cli.md's table.

main() runs in process, with stdin a pipe at its end, in a fresh folder, with the token store there. Nothing
can reach the network or start an expensive job: no generated value is a URL, a known model to fetch or a
config file that exists; `train` always ends with `--steps 0`, `eval` with `--model table --episodes 1` and `studio` with
`--port` of a port this module holds (the last of an option wins: it stops before anything loads), so the
most an example runs is one turn of the table model."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import socket
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_exit_statuses import documented

from decodeloop.cli import main
from decodeloop.cli.parser import build_parser
from decodeloop.mcp.auth.store import TOKEN_DIR_ENV
from decodeloop.models.fetch import MODELS


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser) of every command that runs: run, chat, ..., auth login, auth logout, auth status."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, sub in subs[0].choices.items():
        yield from commands(sub, (*path, name))


PATHS = {path: parser for path, parser in commands(build_parser())}
VALUED = {path: sorted({s for a in p._actions if a.nargs != 0 for s in a.option_strings}) for path, p in PATHS.items()}
FLAGS = {path: sorted({s for a in p._actions if a.nargs == 0 for s in a.option_strings}) for path, p in PATHS.items()}
EVERY = sorted({name for path in PATHS for name in VALUED[path] + FLAGS[path]})  # another command's too
NUMBERS = ["inf", "-inf", "nan", "NaN", "-1", "0", "-0", "1e400", "-1e400", "1e-320", "5e-324", str(2**64), "9" * 30]
TEXT = ["", "\0", "a\0b", "\udcff", "x\ud800y", "--", "-", "--nonsense", "--temprature", "é", "\u202e", "a b", "?"]
BENIGN = ["1", "0.5", "hi", "What's the weather in Polson, MT?"]  # so that some lines get past the parser
VALUES = NUMBERS + TEXT + BENIGN
# the positional arguments each command needs, drawn from the values: a real prompt, or hostile text
POSITIONALS = {("run",): 1, ("train",): 1, ("view",): 1, ("fetch",): 1, ("auth", "login"): 1, ("auth", "logout"): 1}
# what keeps each example cheap, appended: the last value of an option is the one taken
BUSY = socket.create_server(("127.0.0.1", 0))  # held open for the module: studio cannot listen there
BRAKES = {
    ("train",): ["--steps", "0"],
    ("eval",): ["--model", "table", "--episodes", "1"],
    ("studio",): ["--port", str(BUSY.getsockname()[1])],
}
assert not set(VALUES) & set(MODELS) and not any("://" in v for v in VALUES)  # no download, no network


@st.composite
def command_lines(draw) -> list[str]:
    """A command, options with values (often hostile), bare options, flags, stray tokens and its positional
    arguments, in any order; then its brake."""
    path = draw(st.sampled_from(sorted(PATHS)))
    value = st.one_of(st.sampled_from(NUMBERS), st.sampled_from(TEXT), st.sampled_from(BENIGN))
    text = st.one_of(st.sampled_from(TEXT), st.sampled_from(BENIGN))  # the positional arguments'
    kinds = [
        st.sampled_from(FLAGS[path]).map(lambda f: [f]),
        st.sampled_from(EVERY).map(lambda o: [o]),  # an option of another command, or one missing its value
        value.map(lambda v: [v]),  # a stray value
    ]
    if VALUED[path]:  # auth status takes none
        options = st.sampled_from(VALUED[path])
        kinds.append(st.tuples(options, value).map(list))  # an option and its value
        kinds.append(st.tuples(options, value).map(lambda p: [f"{p[0]}={p[1]}"]))
    piece = st.one_of(kinds)
    pieces = draw(st.lists(piece, max_size=3))
    positionals = draw(st.lists(text, min_size=POSITIONALS.get(path, 0), max_size=POSITIONALS.get(path, 0)))
    at = draw(st.integers(0, len(pieces)))
    words = [w for p in pieces[:at] for w in p] + positionals + [w for p in pieces[at:] for w in p]
    if path == ("view",):
        words += ["-o", "page.html"]  # its one required option, given late: a generated -o may come first
    return [*path, *words, *BRAKES.get(path, [])]


@contextlib.contextmanager
def isolated(folder: str):
    """The working directory, the token store and stdin (a pipe at its end) of one example."""
    read, write = os.pipe()
    os.close(write)
    stdin, here, tokens = sys.stdin, os.getcwd(), os.environ.get(TOKEN_DIR_ENV)
    os.environ[TOKEN_DIR_ENV] = os.path.join(folder, "tokens")
    os.chdir(folder)
    sys.stdin = open(read, encoding="utf-8")
    try:
        yield
    finally:
        sys.stdin.close()
        sys.stdin = stdin
        os.chdir(here)
        if tokens is None:
            del os.environ[TOKEN_DIR_ENV]
        else:
            os.environ[TOKEN_DIR_ENV] = tokens


STATUSES = set(documented())


@settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=command_lines())
def test_no_command_line_makes_a_traceback_and_every_status_is_in_the_table(tmp_path, argv):
    out, err = io.StringIO(), io.StringIO()
    with isolated(str(tmp_path)), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exited:  # argparse's usage errors, --help, --version
            status = exited.code
    assert status in STATUSES, (argv, status, err.getvalue()[-2000:])
    assert "Traceback" not in err.getvalue(), (argv, err.getvalue()[-2000:])
    if argv[0] in ("train", "fetch"):  # the brake held, and fetch never had a model to download: or --help
        assert status == 2 or (status == 0 and out.getvalue().startswith("usage: ")), (argv, err.getvalue()[-2000:])
