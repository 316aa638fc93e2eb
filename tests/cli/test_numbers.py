"""Every numeric option of every command, found in the parser itself (a new one cannot escape), driven through
the values that mean nothing: each is a usage error (exit status 2) naming the flag and what it takes, and
the values that mean something parse. In process: main() for the refusals, the parser alone for the values it
takes (main would run the command)."""

from __future__ import annotations

import pytest
from test_cli_property import commands

from decodeloop.cli import main
from decodeloop.cli.parser import Number, build_parser, parse

# the positional arguments each command needs to parse, so that a value it takes is seen to be taken
NEEDS = {
    ("run",): ["hi"],
    ("chat",): [],
    ("eval",): [],
    ("train",): ["transformer"],
    ("view",): ["trace.jsonl", "-o", "page.html"],
    ("studio",): [],
    ("fetch",): ["smollm2"],
    ("auth", "login"): ["svc"],
    ("auth", "logout"): ["svc"],
    ("auth", "status"): [],
}
HUGE = "1" + "0" * 30  # an int no count means and a float no sampling needs; finite all the same
VALUES = ["inf", "-inf", "nan", "-1", "0", "1e400", "ten", "", HUGE, "1"]
# what is taken besides 1: zero where it means something (greedy, off, a seed), and a huge finite number
# where nothing bounds it above (a temperature that flattens, a penalty, a learning rate)
TAKEN = {
    "0": {"--temperature", "--top-k", "--min-p", "--seed", "--port"},
    HUGE: {"--temperature", "--repetition-penalty", "--lr"},
}


def numeric_options() -> list[tuple[tuple[str, ...], str, str]]:
    """(command path, flag, dest) of every option whose type is a Number; a plain int or float is refused."""
    found = []
    for path, parser in commands(build_parser()):
        for action in parser._actions:
            convert = getattr(action.type, "convert", action.type)
            assert convert not in (int, float), f"{' '.join(path)} {action.option_strings}: use a Number of parser.py"
            if isinstance(convert, Number):
                found.append((path, max(action.option_strings, key=len), action.dest))
    return found


OPTIONS = numeric_options()


def test_the_options_found_are_every_numeric_one_and_every_command_is_driven():
    assert {path for path, _ in commands(build_parser())} == set(NEEDS)
    flags = {flag for _, flag, _ in OPTIONS}
    # 17 each in run and chat, 18 in studio (--port), 20 in eval, 5 train, 1 view, 3 auth
    assert len(OPTIONS) == 81 and flags == {
        *("--timeout", "--task-timeout", "--max-tokens", "--max-retries", "--max-repeats", "--max-result-chars"),
        *("--max-turn-result-chars", "--max-tool-tokens", "--max-tools", "--temperature", "--top-p", "--top-k"),
        *("--min-p", "--repetition-penalty", "--seed", "--order", "--episodes", "--concurrency", "--entries"),
        *("--steps", "--batch-size", "--lr", "--threads", "--wait", "--max-call-chars", "--port"),
    }


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("path, flag, dest", OPTIONS, ids=[f"{' '.join(p)} {f}" for p, f, _ in OPTIONS])
def test_a_numeric_option_refuses_what_means_nothing(path, flag, dest, value, capsys):
    argv = [*path, flag, value, *NEEDS[path]]
    if value == "1" or flag in TAKEN.get(value, ()):
        args, unknown = parse(build_parser(), argv)
        assert not unknown and getattr(args, dest) == float(value)
        return
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err
    line = err.splitlines()[-1]
    assert line.startswith(f"decodeloop {' '.join(path)}: error: argument {flag}: expected "), err
    # -inf looks like an option to argparse: the flag is named as missing its value
    assert line.endswith("expected one argument" if value == "-inf" else f", got {value!r}"), line
