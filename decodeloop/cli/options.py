"""What the parsed options become: the checked sampler, processors and turn configuration, the model
bundle, the server specs, the started servers and the harness. An option the parser cannot judge alone
(options that do not go together, a path that is not there) is a usage error here; a value out of range
was refused by its type in parser.py. A config file or a model that cannot be used as it is is a
configuration error (Misconfigured, exit status 78). The exit codes every command returns are here too."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import threading

from decodeloop.errors import ConfigError, Misconfigured
from decodeloop.text.untrusted import visible  # a server's error text reaches stderr

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_GAVE_UP, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CAPPED = 4  # the token cap ended the turn before an answer (inside a call, or before any text)
EXIT_CONFIG = 78  # a config file or a model that cannot be used as it is (sysexits.h's EX_CONFIG)
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (`| head`): 128 + SIGPIPE, as shells report it


def checked(args: argparse.Namespace, parser: argparse.ArgumentParser):
    """Validate the shared options; return the sampler, the processors and the turn configuration."""
    from decodeloop.harness import TurnConfig
    from decodeloop.registry import LAB_MODELS
    from decodeloop.sampling.processors import RepetitionPenalty
    from decodeloop.sampling.sampler import Sampler

    _engine_from_config(args, parser)
    lab = args.model in LAB_MODELS
    remote = args.model.startswith("openai:")
    if not lab and not remote and not args.model.startswith(("hf:", "gguf:")):
        parser.error(
            f"--model: unknown model {args.model!r}; choose table, ngram, transformer, hf:PATH, gguf:PATH or openai:URL"
        )
    sampling = getattr(args, "sampling_model", None)  # refused alike, before anything starts
    if sampling is not None and sampling not in LAB_MODELS and not sampling.startswith(("hf:", "gguf:")):
        why = " (openai:URL is for --model only)" if sampling.startswith("openai:") else ""
        parser.error(
            f"--sampling-model: unknown model {sampling!r}; choose table, ngram, transformer, hf:PATH or gguf:PATH{why}"
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
    if args.order is not None and args.model != "ngram":
        parser.error("--order applies to --model ngram only")
    if args.weights is not None and args.model != "transformer":
        parser.error("--weights applies to --model transformer only")
    if args.weights is not None and not os.path.isfile(args.weights):
        parser.exit(EXIT_CONFIG, f"{parser.prog}: error: --weights: no such file: {args.weights}\n")
    if lab and (args.device or args.dtype):
        parser.error("--device and --dtype apply to hf: models only")
    if lab and args.syntax not in (None, "auto", "compact"):
        parser.error("the lab models write compact calls only (--call-format compact)")
    if getattr(args, "root", None):  # a typo'd --root is the command line's mistake, found before any server starts
        from decodeloop.mcp.roots import file_roots

        try:
            file_roots(args.root)
        except ConfigError as e:
            parser.error(f"--root: {visible(str(e))}")
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
        max_call_chars=args.max_call_chars,
        history=args.history,
        on_repeat=args.on_repeat,
        calls_in_reasoning=args.calls_in_reasoning,
        detail=not (
            (getattr(args, "quiet", False) and not getattr(args, "html", None))
            or args.command == "eval"
            or (args.command == "chat" and not (args.trace or args.json))
        ),
    )
    return sampler, processors, config


def load_bundle(args: argparse.Namespace, parser: argparse.ArgumentParser):
    """The model bundle the options name; one that does not load is a configuration error (one line)."""
    from decodeloop.registry import load_model

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
        parser.exit(EXIT_CONFIG, f"{parser.prog}: error: {flag}: {e}\n")


def _engine_from_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """A config file's "engine" ({"url", "model", "tokenizer"}) when --model was not given. A file that
    cannot be read as a config raises Misconfigured here, before anything starts."""
    from decodeloop.tools.config import load_engine

    if args.model != parser.get_default("model"):
        return  # --model given: it wins over the file
    for path in args.mcp_config:
        engine = load_engine(path)
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

        emit(Notice(source="ngram", message=ngram_cache_note(bundle.model.order)))
    if bundle.info:
        details = ", ".join(
            f"{key} { ({True: 'yes', False: 'no'}.get(value, value)) }" for key, value in bundle.info.items()
        )
        if "call format" not in bundle.info:
            details += f"; calls in the {bundle.syntax.name} syntax"
        emit(Notice(source=bundle.name, message=details))


def server_specs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list:
    """--mcp, --mcp-url and --mcp-config as server specs; the model's bundled servers when none is given."""
    from decodeloop.registry import default_servers
    from decodeloop.tools.config import load_config, parse_header, url_spec
    from decodeloop.tools.startup import parse_command, stdio_specs, unique_names

    if args.mcp_header and not args.mcp_url:
        parser.error("--mcp-header applies to --mcp-url servers; give headers of config servers in the file")

    def given(flag: str, read, values: list[str]) -> list:
        """What the command line wrote: a mistake is a usage error, where a config file's is Misconfigured."""
        try:
            return [read(value) for value in values]
        except ConfigError as e:
            parser.error(f"{flag}: {visible(str(e))}")

    headers = dict(given("--mcp-header", parse_header, args.mcp_header))
    specs = stdio_specs(given("--mcp", parse_command, args.mcp))
    specs += given("--mcp-url", lambda url: url_spec(url, headers), args.mcp_url)
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


def user_terminal(args: argparse.Namespace):
    """The user's terminal in run and chat, when stdin is one: every question to the user, and chat's prompt,
    read through its one owner (ui/terminal.py). None elsewhere: nobody to ask."""
    from decodeloop.ui.terminal import Terminal

    if args.command not in ("run", "chat") or not sys.stdin or not sys.stdin.isatty():
        return None
    return Terminal(sys.stdin, sys.stdout, sys.stderr)


@contextlib.contextmanager
def started(args: argparse.Namespace, parser: argparse.ArgumentParser, emit, detail: bool, terminal=None):
    """The model bundle and the started servers the options name (closed on the way out); `terminal`, the
    user's (user_terminal), answers the servers' questions."""
    from decodeloop.client_features.elicitation import ctrl_c_noted
    from decodeloop.tools.startup import start_servers

    specs = server_specs(args, parser)
    bundle = load_bundle(args, parser)
    if emit is not None:
        _announce(bundle, emit, detail)
    # Ctrl-C, for a question asked on a server's reader thread
    interrupted = terminal.interrupted if terminal is not None else threading.Event()
    features = client_features(args, emit, interrupted, terminal)
    with start_servers(specs, emit, client_options(args, features)) as router:
        with ctrl_c_noted(interrupted) if features.offer_elicitation else contextlib.nullcontext():
            yield bundle, router


def elicitation_answerer(args: argparse.Namespace, emit, interrupted: threading.Event, terminal=None):
    """Who answers a server's elicitation/create in run and chat: the user, asked on stderr through the
    terminal's owner, when there is a terminal; else nobody, and it is declined with an event saying so.
    eval offers no elicitation (None)."""
    from decodeloop.client_features.elicitation import TerminalElicitation, Unattended

    if args.command not in ("run", "chat"):
        return None
    if terminal is None:
        return Unattended(emit, "stdin is not a terminal")
    return TerminalElicitation(terminal.read_line, terminal.write, emit, interrupted, hold=terminal.holding)


def client_options(args: argparse.Namespace, features=None):
    """The command's options as the client's (tools/startup.py ClientOptions): --timeout, --task-timeout, --verbose,
    --mcp-protocol, --pin-store, --max-tools, --root, --no-roots and --server-log-level; the token store of
    `decodeloop auth login` (its default directory, or $DECODELOOP_TOKEN_DIR); `features`, what the client
    offers the servers."""
    from decodeloop.mcp.auth.store import TokenStore
    from decodeloop.mcp.tasks import DEFAULT_TASK_TIMEOUT
    from decodeloop.tools.startup import ClientOptions

    if getattr(args, "no_roots", False):
        roots: list[str] | None = []
    else:
        roots = getattr(args, "root", None) or None  # None: the working directory
    return ClientOptions(
        timeout=args.timeout,
        verbose=getattr(args, "verbose", False),
        protocol=getattr(args, "mcp_protocol", "auto"),
        pin_store=args.pin_store,
        max_tools=args.max_tools,
        roots=roots,
        log_level=getattr(args, "server_log_level", None),
        features=features,
        token_store=TokenStore(),
        task_timeout=getattr(args, "task_timeout", DEFAULT_TASK_TIMEOUT),
    )


def client_features(args: argparse.Namespace, emit, interrupted: threading.Event, terminal=None):
    """The client features run and chat offer the servers: elicitation, answered now, and sampling, answered
    once the harness is built (build_harness); eval offers none (nobody there answers)."""
    from decodeloop.mcp.client_features import ClientFeatures

    return ClientFeatures(
        elicitation=elicitation_answerer(args, emit, interrupted, terminal),
        offer_sampling=args.command in ("run", "chat"),
    )


def local_sampling(args: argparse.Namespace, bundle, emit, sampler, config, terminal=None):
    """The servers' sampling requests answered by --sampling-model, or the run's own model, asking at the
    terminal when there is one."""
    from decodeloop.client_features.local_sampling import LocalSampling
    from decodeloop.registry import load_model

    sampling_bundle = bundle
    if args.sampling_model:
        try:
            sampling_bundle = load_model(args.sampling_model, device=args.device, dtype=args.dtype)
        except (ValueError, OSError) as e:
            raise Misconfigured(f"--sampling-model {args.sampling_model}: {e}") from None
    return LocalSampling(
        sampling_bundle,
        sampler,
        emit,
        approve=terminal.confirm if terminal is not None else None,
        hold=terminal.asking if terminal is not None else None,
        with_tools=args.sampling_tools,
        max_tokens=config.max_tokens,
        detail=config.detail,
        max_message_chars=config.max_result_chars,
    )


def build_harness(args: argparse.Namespace, bundle, router, emit, sampler, processors, config, terminal=None):
    """A harness for one conversation: the policy the options name (asking at `terminal`, the user's, when
    there is one) and the system prompt, told under plan and masked to state its plan first."""
    from decodeloop.harness import Harness
    from decodeloop.trust.policy import PLAN_NOTE, Policy

    policy = Policy(args.policy, router.specs, _confirmer(terminal))
    system = args.system
    if args.policy in ("plan", "masked"):  # told to state its plan first, or every side effect is denied
        system = f"{system if system is not None else bundle.chat.preamble} {PLAN_NOTE}"
    harness = Harness(bundle, sampler, router, emit, config=config, system=system, processors=processors, policy=policy)
    features = router.features
    if features is not None and features.offer_sampling:
        features.sampling = local_sampling(args, bundle, emit, sampler, config, terminal)
    return harness


def _confirmer(terminal):
    """The policy's question to the user, on a terminal only (None: nobody to ask, so the call is denied)."""
    if terminal is None:
        return None
    return lambda question: terminal.confirm(f"run {question}", "the policy")
