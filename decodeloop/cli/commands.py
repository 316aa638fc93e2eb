"""The commands, run, chat, eval, train, view, fetch and auth (its actions in auth.py): each from its parsed
options to an exit code. The work happens in harness.py, tools/startup.py, lab/ and bfcl/; main() in
__init__.py dispatches here."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from decodeloop import utf8
from decodeloop.cli.options import (
    EXIT_CAPPED,
    EXIT_ERROR,
    EXIT_GAVE_UP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    build_harness,
    checked,
    client_options,
    load_bundle,
    server_specs,
    started,
    user_terminal,
)

if TYPE_CHECKING:
    from decodeloop.events import Emit


def _locked(view):
    """The view behind a lock: server notifications arrive on reader threads."""
    lock = threading.Lock()

    def emit(event) -> None:
        with lock:
            view(event)

    return emit


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.ui.jsonl import AnswerView, JsonlView
    from decodeloop.ui.step import StepView
    from decodeloop.ui.trace import TraceView

    sampler, processors, config = checked(args, parser)
    if args.html and not os.path.isdir(os.path.dirname(os.path.abspath(args.html))):
        parser.error(f"--html: no such directory: {os.path.dirname(args.html)}")
    view: Emit  # whichever of the four views the output options pick
    terminal = user_terminal(args)  # None without one: nobody to ask
    if args.json:
        view = JsonlView(max_chars=args.max_result_chars)
    elif args.quiet:
        view = AnswerView()
    elif args.step:
        view = StepView(TraceView(frames=True), terminal=terminal)
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
        return _run_turn(args, parser, emit, sampler, processors, config, last_token, page, terminal)
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


def _run_turn(args, parser, emit, sampler, processors, config, last_token, page, terminal) -> int:
    from decodeloop.ui.step import QuitRequested

    try:
        with started(args, parser, emit, config.detail, terminal) as (bundle, router):
            if page is not None:
                page.watch(bundle)  # the transformer's attention, for the page
            harness = build_harness(args, bundle, router, emit, sampler, processors, config, terminal)
            result = harness.run(args.prompt, getattr(args, "attach", None) or ())
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

    sampler, processors, config = checked(args, parser)
    utf8.lenient(sys.stdin)  # a line that is not UTF-8 arrives marked, and ChatSession refuses it
    view = JsonlView(max_chars=args.max_result_chars) if args.json else TraceView() if args.trace else ChatView()
    emit = _locked(view)
    terminal = user_terminal(args)  # chat's lines and the servers' questions, read by one owner
    if terminal is not None and not args.json:
        # a server's notice while you type: shown under your line, not across it
        emit = terminal.showing(emit, lambda event: hasattr(view, "on_" + event.kind))
    with started(args, parser, emit, config.detail, terminal) as (bundle, router):
        harness = build_harness(args, bundle, router, emit, sampler, processors, config, terminal)
        return ChatSession(harness, quiet=args.json, terminal=terminal).loop()


def studio_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """`decodeloop studio`: the page and one conversation on 127.0.0.1 until Ctrl-C (studio/)."""
    from decodeloop.studio.server import StudioServer
    from decodeloop.studio.session import EventLog, StudioSession

    sampler, processors, config = checked(args, parser)
    try:  # the port first: one in use is said before a model loads
        studio = StudioServer(port=args.port)
    except OSError as e:
        print(f"decodeloop: cannot listen on 127.0.0.1:{args.port}: {e.strerror or e}", file=sys.stderr)
        return EXIT_ERROR
    log = EventLog()
    try:
        # nobody at this terminal answers a server's question: elicitation is declined, with an event saying so
        with started(args, parser, log, config.detail, None) as (bundle, router):
            harness = build_harness(args, bundle, router, log, sampler, processors, config, None)
            print(f"decodeloop studio: {studio.url}", flush=True)
            print("  (the address holds the studio's secret: share it with nobody; Ctrl-C stops)", flush=True)
            if args.open:  # on a thread: a browser that runs in this terminal would hold it until it quits
                import webbrowser

                threading.Thread(target=webbrowser.open, args=(studio.url,), daemon=True).start()
            others = _studio_models(args, router, log, sampler, processors, config)
            try:
                studio.serve_forever(StudioSession(harness, log, model=args.model, others=others))
            except KeyboardInterrupt:
                print("\nstopped.", file=sys.stderr)
    finally:
        studio.shutdown()
    return EXIT_OK


def _studio_models(args, router, log, sampler, processors, config) -> dict[str, Callable[[], object]]:
    """The lab's other models, which the studio's page may choose: each loaded (and its harness built with the
    command's options) the first time it is chosen."""
    from decodeloop.registry import LAB_MODELS, load_model

    def maker(name: str) -> Callable[[], object]:
        def make() -> object:
            bundle = load_model(name, order=args.order, weights=args.weights if name == "transformer" else None)
            return build_harness(args, bundle, router, log, sampler, processors, config, None)

        return make

    return {name: maker(name) for name in LAB_MODELS if name != args.model}


def eval_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.lab.corpus import episodes
    from decodeloop.lab.evaluate import ProgressBar, evaluate, summary_json

    sampler, processors, config = checked(args, parser)
    if args.suite is not None:
        return _suite_command(args, parser, sampler, processors, config)
    if args.entries is not None or args.bfcl_wheel is not None:
        parser.error("--entries and --bfcl-wheel apply to --suite bfcl:... only")
    held_out = episodes(args.seed, args.episodes, args.split)
    if args.concurrency > 1:
        summary, bundle = _eval_concurrently(args, parser, held_out, sampler, processors, config)
    else:
        with started(args, parser, None, False) as (bundle, router):
            summary, _ = evaluate(
                lambda emit: build_harness(args, bundle, router, emit, sampler, processors, config),
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
    from decodeloop.harness import Harness
    from decodeloop.lab.bfcl_suite import run_suite, summary_json, table
    from decodeloop.lab.evaluate import ProgressBar
    from decodeloop.trust.policy import Policy

    name, _, categories = args.suite.partition(":")
    if name != "bfcl":
        parser.error(f"--suite: unknown suite {args.suite!r}; the one suite is bfcl:CATEGORY[,CATEGORY...]")
    try:
        categories = parse_categories(categories)
    except BfclError as e:
        parser.error(f"--suite: {e}")
    if args.mcp or args.mcp_url or args.mcp_config or args.split != "heldout" or args.concurrency != 1:
        parser.error(
            "--suite runs each entry against a server of its own functions, one at a time: "
            "--mcp, --mcp-url, --mcp-config, --split and --concurrency do not apply"
        )
    if args.calls is None:  # the first message's calls are scored, parallel ones too: let it write them all
        config = dataclasses.replace(config, collect_calls=True)
    bundle = load_bundle(args, parser)

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
        "call_shapes": args.call_shapes or bundle.chat.call_shapes,
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

    specs = server_specs(args, parser)
    bundle = load_bundle(args, parser)
    reason = serial_reason(bundle)
    if reason:
        print(f"decodeloop: --concurrency {args.concurrency}: {reason}", file=sys.stderr)
        with _eval_servers(args, specs) as router:
            summary, _ = evaluate(
                lambda emit: build_harness(args, bundle, router, emit, sampler, processors, config),
                held_out,
                ProgressBar(f"eval {args.model}"),
            )
        return summary, bundle

    @contextlib.contextmanager
    def worker(emit):
        with _eval_servers(args, specs) as router:
            # a sampler and processors of its own: their state (an rng, tokens seen) is per conversation
            yield build_harness(args, bundle, router, emit, copy.deepcopy(sampler), copy.deepcopy(processors), config)

    summary, _ = evaluate_concurrently(worker, held_out, args.concurrency, ProgressBar(f"eval {args.model}"))
    return summary, bundle


def train_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.lab.train.transformer import MAX_TRANSCRIPTS, TrainConfig
    from decodeloop.lab.train.transformer import main as train_transformer

    shipped = TrainConfig()
    if (args.steps or shipped.steps) * (args.batch_size or shipped.batch_size) > MAX_TRANSCRIPTS:
        parser.error(
            f"--steps times --batch-size is the transcripts trained on, all held in memory: at most "
            f"{MAX_TRANSCRIPTS:,} (the shipped run's {shipped.steps:,} steps of {shipped.batch_size} are "
            f"{shipped.steps * shipped.batch_size:,})"
        )
    return train_transformer(
        out=args.out, steps=args.steps, seed=args.seed, batch_size=args.batch_size, lr=args.lr, threads=args.threads
    )


def view_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.ui.html import TraceError, read_trace, write_page

    try:  # read as bytes: a byte that is not UTF-8 is named with its line (read_trace), not met mid-read
        if args.trace == "-":
            kept = read_trace(utf8.lines(sys.stdin))
        else:
            with open(args.trace, "rb") as f:
                kept = read_trace(utf8.lines(f))
    except (OSError, TraceError) as e:
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


def auth_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.cli.auth import auth_command as run_auth

    return run_auth(args, parser)


COMMANDS: dict[str, Callable[[argparse.Namespace, argparse.ArgumentParser], int]] = {
    "run": run_command,
    "chat": chat_command,
    "eval": eval_command,
    "train": train_command,
    "view": view_command,
    "studio": studio_command,
    "fetch": fetch_command,
    "auth": auth_command,
}


def _eval_servers(args, specs):
    """The servers of one eval worker (or of the one serial run), started with the command's options."""
    from decodeloop.tools.startup import start_servers

    return start_servers(specs, None, client_options(args))
