"""The dispatch table in cli/commands.py, in process: main() hands each parsed command to its entry."""

from __future__ import annotations

import argparse

from decodeloop.cli.commands import COMMANDS
from decodeloop.cli.parser import build_parser


def test_every_command_the_parser_offers_has_a_function_that_runs_it():
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    # a parser without an entry would parse, then end with exit status 2 and no message
    assert (
        sorted(commands.choices)
        == sorted(COMMANDS)
        == ["auth", "chat", "eval", "fetch", "run", "studio", "train", "view"]
    )


def test_every_auth_action_has_a_function_and_its_own_usage():
    from decodeloop.cli.auth import ACTIONS

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    (actions,) = [a for a in commands.choices["auth"]._actions if isinstance(a, argparse._SubParsersAction)]
    assert sorted(actions.choices) == sorted(ACTIONS) == ["login", "logout", "status"]
    args = parser.parse_args(["auth", "logout", "svc", "--no-revoke"])
    assert args.command == "auth" and args.auth_command == "logout" and args.command_parser is actions.choices["logout"]
