"""The dispatch table in cli/commands.py, in process: main() hands each parsed command to its entry."""

from __future__ import annotations

import argparse

from decodeloop.cli.commands import COMMANDS
from decodeloop.cli.parser import build_parser


def test_every_command_the_parser_offers_has_a_function_that_runs_it():
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    # a parser without an entry would parse, then end with exit status 2 and no message
    assert sorted(commands.choices) == sorted(COMMANDS) == ["chat", "eval", "fetch", "run", "train", "view"]
