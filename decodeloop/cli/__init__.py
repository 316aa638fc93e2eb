"""The command line, `decodeloop COMMAND` and `python3 -m decodeloop`: main() parses, hands the options to
their command, and turns the errors any command can meet into one line on stderr and an exit code.

    parser.py    the parsers, their help texts and examples; a mistyped option named
    options.py   parsed options to the sampler, turn config, model bundle, servers and harness; exit codes
                 (the table is in docs/cli.md: each status below means one thing, whatever the command)
    commands.py  run, chat, eval, train, view, fetch, auth
    auth.py      auth login, logout, status: a user's OAuth login to a config's server, and its token store
"""

from __future__ import annotations

import os
import sys

from decodeloop.cli.commands import COMMANDS
from decodeloop.cli.options import EXIT_BROKEN_PIPE, EXIT_CONFIG, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE
from decodeloop.cli.parser import build_parser, parse
from decodeloop.errors import ConfigError, McpError, Misconfigured, MissingDependency, RemoteError
from decodeloop.text.untrusted import visible  # a server's error text reaches stderr

__all__ = ["main"]


def main(
    argv: list[str] | None = None,
    *,
    default_prompt: str | None = None,
    prog: str = "decodeloop",
    default_model: str = "table",
    defaults: dict | None = None,
) -> int:
    """Run one command line (sys.argv when `argv` is None); return its exit code. A lab script passes
    `default_prompt`, its `prog` and its own option `defaults` (build_parser says how they are used)."""
    parser = build_parser(default_prompt, prog, default_model, defaults)
    args, unknown = parse(parser, argv)
    parser = args.command_parser
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (a prompt with spaces needs quotes)")
    try:
        command = COMMANDS.get(args.command)
        return command(args, parser) if command is not None else EXIT_USAGE
    except Misconfigured as e:  # a config file or a model that cannot be used as it is
        print(f"decodeloop: cannot start: {visible(str(e))}", file=sys.stderr)
        return EXIT_CONFIG
    except (ConfigError, McpError) as e:  # the servers as asked, or the model's context
        print(f"decodeloop: cannot start: {visible(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("\ninterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except MissingDependency as e:  # the model cannot load on this installation until the extra is installed
        print(f"decodeloop: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except RemoteError as e:  # a remote engine's server: down, refusing, silent, or cut off mid-stream
        print(f"decodeloop: the engine's server failed: {visible(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, and keep Python from complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
