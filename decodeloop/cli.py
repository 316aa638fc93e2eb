"""The command line: argparse wiring only. The work happens in loop.py and router.py."""

from __future__ import annotations

import argparse
import os
import sys
import threading

from decodeloop import __version__

EXAMPLES = """\
examples:
  decodeloop run "What's the weather in Polson, MT?"
  decodeloop run --step "What's the weather in Polson, MT?"
  decodeloop run --json "What's the weather in Polson, MT?" | jq -c 'select(.event != "token")'
  decodeloop run --quiet --mcp "python3 -m decodeloop.servers.weather" "What's the weather in Polson, MT?"
  decodeloop run --temperature 0.8 --top-p 0.9 --seed 7 --stop "Sorry" "hello"
"""

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_GAVE_UP = 0, 1, 2, 3


def build_parser(default_prompt: str | None = None, prog: str = "decodeloop") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="A harness for language models that call MCP tools: every step visible.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"decodeloop {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run", help="run one assistant turn with tools", epilog=EXAMPLES,
        description="Run one assistant turn: generate, call tools over MCP, resume, answer.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("prompt", nargs="?" if default_prompt else None, default=default_prompt,
                     help="the user's message" + (f" (default: {default_prompt!r})" if default_prompt else ""))
    from decodeloop.models import MODEL_NAMES
    run.add_argument("--model", choices=MODEL_NAMES, default="table", help="the model (default: table)")
    run.add_argument("--mcp", action="append", default=[], metavar="COMMAND",
                     help="a stdio MCP server command line, e.g. \"python3 server.py\"; repeatable "
                          "(default: the bundled weather server)")
    sampling = run.add_argument_group("sampling")
    sampling.add_argument("--temperature", type=float, default=0.0, help="0 is greedy (default: 0)")
    sampling.add_argument("--top-p", type=float, default=1.0, help="nucleus mass to keep (default: 1, off)")
    sampling.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (default: 0, off)")
    sampling.add_argument("--seed", type=int, default=None, help="seed of the sampler's random generator")
    stopping = run.add_argument_group("stopping and tools")
    stopping.add_argument("--max-tokens", type=int, default=256,
                          help="cap on generated tokens in the turn (default: 256)")
    stopping.add_argument("--stop", action="append", default=[], metavar="STRING",
                          help="stop when the model writes STRING (not shown); repeatable")
    stopping.add_argument("--max-retries", type=int, default=3,
                          help="consecutive failed tool calls that end the turn (default: 3)")
    stopping.add_argument("--timeout", type=float, default=60.0,
                          help="seconds to wait for an MCP server's answer (default: 60)")
    stopping.add_argument("--max-result-chars", type=int, default=16_000,
                          help="characters of a tool result the model sees (default: 16000)")
    output = run.add_argument_group("output").add_mutually_exclusive_group()
    output.add_argument("--step", action="store_true",
                        help="pause after every frame: Enter next, c continue, q quit")
    output.add_argument("--quiet", "-q", action="store_true", help="print only the answer")
    output.add_argument("--json", action="store_true", help="JSON Lines: one event per line on stdout")
    run.add_argument("--verbose", "-v", action="store_true", help="show the MCP servers' stderr")
    return parser


def main(argv: list[str] | None = None, *, default_prompt: str | None = None, prog: str = "decodeloop") -> int:
    parser = build_parser(default_prompt, prog)
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return run_command(args, parser)
        return EXIT_USAGE
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, and keep Python from complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.loop import Harness, TurnConfig
    from decodeloop.mcp.errors import McpError
    from decodeloop.models import load_model
    from decodeloop.router import ConfigError, default_server_command, parse_command, start_stdio_servers
    from decodeloop.sampling import Sampler
    from decodeloop.tokenize import CharTokenizer
    from decodeloop.ui.jsonl import AnswerView, JsonlView
    from decodeloop.ui.step import QuitRequested, StepView
    from decodeloop.ui.trace import TraceView

    for flag, value, low in (("--max-tokens", args.max_tokens, 1), ("--max-retries", args.max_retries, 1),
                             ("--max-result-chars", args.max_result_chars, 1)):
        if value < low:
            parser.error(f"{flag} must be at least {low}")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    if any(not s for s in args.stop):
        parser.error("--stop needs a non-empty string")
    try:
        sampler = Sampler(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    except ValueError as e:
        parser.error(str(e))

    if args.json:
        view = JsonlView()
    elif args.quiet:
        view = AnswerView()
    elif args.step:
        view = StepView(TraceView(frames=True))
    else:
        view = TraceView()
    lock = threading.Lock()  # server notifications arrive on reader threads

    def emit(event) -> None:
        with lock:
            view(event)

    config = TurnConfig(max_tokens=args.max_tokens, stop_strings=tuple(args.stop),
                        max_retries=args.max_retries, timeout=args.timeout,
                        max_result_chars=args.max_result_chars, detail=not args.quiet)
    try:
        commands = [parse_command(c) for c in args.mcp] or [default_server_command()]
        tokenizer = CharTokenizer()
        model = load_model(args.model, tokenizer)
        with start_stdio_servers(commands, emit, timeout=args.timeout, verbose=args.verbose) as router:
            harness = Harness(model, tokenizer, sampler, router, emit, config=config)
            result = harness.run(args.prompt)
    except (ConfigError, McpError) as e:
        print(f"decodeloop: cannot start: {e}", file=sys.stderr)
        return EXIT_ERROR
    except QuitRequested:
        print("quit.")
        return EXIT_OK
    except KeyboardInterrupt:
        print("\ninterrupted.", file=sys.stderr)
        return 130
    return EXIT_GAVE_UP if result.reason == "max_retries" else EXIT_OK
