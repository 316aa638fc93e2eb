"""Running BFCL entries through the harness and scoring them with BFCL's checker.

Each entry is one user turn of a new conversation through the real `Harness`,
against a real MCP server process that serves the entry's functions
(decodeloop/servers/bfcl.py, started with a tools file written for it). What is
scored is the model's first assistant message: the calls in it, read from the
turn's events, exactly as the trace shows them:

- a `tool_call` event is a call that parsed and validated: its name as the
  model wrote it, its arguments as the harness sent them (after the schema's
  conversions);
- a `tool_error` of stage `route` (no such tool) or `arguments` (did not
  validate) is a call that parsed: it goes to the checker with the arguments as
  written, and the checker judges it as BFCL would;
- a `tool_error` of stage `parse`, or a message cut by the token cap inside a
  call, is a call that did not parse: the entry is wrong (BFCL: the output does
  not decode);
- for irrelevance, any call attempted (even one that did not parse) is a false
  call, and an entry is right when there is none.

Once the first message's calls have their results (the server's real answers
are in the context), the turn is stopped: what the model writes after them is
not part of the score, so it is not generated. A turn with no call ends as it
ends (an answer, the cap).

The decoded calls, `[{name: {argument: value}}, ...]`, go to BFCL's own
`ast_checker` (checker.py). Per category: accuracy, the well-formed rate (calls
that parsed and validated over calls attempted), false calls on irrelevance,
and seconds per entry (the turn, from the prompt to the stop; starting the
server is not counted).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from decodeloop.bfcl.checker import check
from decodeloop.bfcl.entries import Entry
from decodeloop.bfcl.tools import mcp_tools


@dataclass
class EntryOutcome:
    id: str
    category: str
    correct: bool
    calls: int = 0  # calls attempted in the first message
    well_formed: int = 0  # of them, calls that parsed and validated
    output: list = field(default_factory=list)  # the decoded calls the checker saw
    error: str = ""  # the checker's error type (or why the output did not decode)
    stop: str = ""  # how the first message ended: tool_call, eos, max_tokens, ...
    near_misses: int = 0  # text that looked like a call and was left as text (a notice each)
    tokens: int = 0
    seconds: float = 0.0


@dataclass
class CategorySummary:
    category: str
    entries: int
    correct: int
    accuracy: float
    calls: int
    well_formed: int
    well_formed_rate: float | None  # None: no call was attempted
    false_calls: int | None  # irrelevance only: entries with a call
    near_misses: int  # entries whose first message had text that looked like a call, left as text
    seconds_per_entry: float
    tokens_per_entry: float


class _FirstMessageOver(Exception):
    """Raised from the event sink once the first message's calls have their results."""


def score(entry: Entry, events: list, syntax, checker) -> EntryOutcome:
    """The outcome of one entry from its turn's events (up to the end of the first message's dispatch)."""
    output: list[dict] = []
    calls = well_formed = tokens = near_misses = 0
    undecodable = ""
    stop, last_token = "", None
    for event in events:
        kind = event.kind
        if kind == "token":
            tokens, last_token = tokens + 1, event
        elif kind == "stop" and not stop:
            stop = event.reason
        elif kind == "notice" and event.source == "near_miss":  # call-like text the stop check let go
            near_misses += 1
        elif kind == "tool_call":
            calls += 1
            well_formed += 1
            output.append({event.name: copy.deepcopy(event.arguments)})
        elif kind == "tool_error" and event.stage != "call":  # a "call" error follows its tool_call
            calls += 1
            if event.stage == "parse":
                undecodable = undecodable or "ast_decoder:decoder_failed"
                continue
            well_formed += event.stage in ("repeat", "policy")  # these passed validation
            if event.arguments is None:  # the stop check read the call once; its arguments ride on the error
                undecodable = undecodable or "ast_decoder:decoder_failed"
                continue
            output.append({event.name: copy.deepcopy(event.arguments)})
        elif kind == "inject":
            break
    if stop == "max_tokens" and last_token is not None and last_token.in_call:
        calls += 1  # a call cut by the cap: attempted, never closed
        undecodable = undecodable or "ast_decoder:cut_by_token_cap"
    outcome = EntryOutcome(
        entry.id, entry.category, False, calls, well_formed, output, stop=stop, tokens=tokens, near_misses=near_misses
    )
    if entry.category == "irrelevance":
        outcome.correct = calls == 0
        outcome.error = "" if outcome.correct else "irrelevance_error:call_made"
    elif undecodable:
        outcome.error = undecodable
    else:
        verdict = check(checker, entry, output)
        outcome.correct = bool(verdict.get("valid"))
        outcome.error = "" if outcome.correct else str(verdict.get("error_type", "invalid"))
    return outcome


def write_tools(entry: Entry, folder: str) -> str:
    """The entry's functions, converted, as the JSON file its server is started with."""
    path = os.path.join(folder, f"{entry.id}.tools.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(mcp_tools(entry.functions), f, ensure_ascii=False)
    return path


@contextlib.contextmanager
def entry_server(entry: Entry, folder: str, *, timeout: float = 60.0, protocol: str = "auto"):
    """The router over a started BFCL server process serving `entry`'s functions (stopped on exit)."""
    from decodeloop.servers import command
    from decodeloop.tools.config import ServerSpec
    from decodeloop.tools.startup import ClientOptions, start_servers

    spec = ServerSpec(name="bfcl", command=[*command("bfcl"), write_tools(entry, folder)], transport="stdio")
    with start_servers([spec], None, options=ClientOptions(timeout=timeout, protocol=protocol)) as router:
        yield router


def run_entries(
    entries: list[Entry],
    checker,
    make_harness: Callable,
    *,
    syntax,
    server: Callable = entry_server,
    progress: Callable[[int, int], None] | None = None,
) -> list[EntryOutcome]:
    """Run each entry as one turn of a new conversation and score it.

    `make_harness(router, emit, system)` builds the turn's harness around the entry's router, the
    event sink and the entry's system prompt (None: the chat format's own); `server(entry, folder)`
    is a context manager yielding that router. Ctrl-C ends the run (KeyboardInterrupt).
    """
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="decodeloop-bfcl-") as folder:
        for i, entry in enumerate(entries):
            recorded: list = []

            def record(event, recorded=recorded) -> None:
                recorded.append(event)
                if event.kind == "inject":  # the first message's calls have their results
                    raise _FirstMessageOver

            with server(entry, folder) as router:
                harness = make_harness(router, record, entry.system)
                started = time.perf_counter()
                try:
                    result = harness.run(entry.user)
                except _FirstMessageOver:
                    result = None
                seconds = time.perf_counter() - started
                if harness.constraint is not None:
                    harness.constraint.release()  # this entry's grammar, freed now: memory stays bounded
            if result is not None and result.reason == "interrupted":
                raise KeyboardInterrupt
            outcome = score(entry, recorded, syntax, checker)
            outcome.seconds = seconds
            outcomes.append(outcome)
            if progress:
                progress(i + 1, len(entries))
    return outcomes


def run_suite(
    categories: list[str],
    make_harness: Callable,
    *,
    syntax,
    limit: int | None = None,
    wheel: str | None = None,
    server: Callable = entry_server,
    progress_for: Callable[[str], Callable[[int, int], None]] | None = None,
) -> tuple[list[CategorySummary], list[EntryOutcome]]:
    """Every category's first `limit` entries (all: None), run and scored; the wheel is fetched if missing."""
    from decodeloop.bfcl.checker import load_checker
    from decodeloop.bfcl.entries import load_entries
    from decodeloop.bfcl.wheel import Wheel, locate_wheel

    with Wheel(locate_wheel(wheel)) as opened:
        checker = load_checker(opened)
        chosen = [(category, load_entries(opened, category, limit)) for category in categories]
    for _, entries in chosen:  # a function whose schema cannot be converted stops the run before it starts
        for entry in entries:
            mcp_tools(entry.functions)
    summaries, outcomes = [], []
    for category, entries in chosen:
        done = run_entries(
            entries,
            checker,
            make_harness,
            syntax=syntax,
            server=server,
            progress=progress_for(category) if progress_for else None,
        )
        summaries.append(summarize(category, done))
        outcomes += done
    return summaries, outcomes


def summarize(category: str, outcomes: list[EntryOutcome]) -> CategorySummary:
    n = len(outcomes)
    calls = sum(o.calls for o in outcomes)
    well_formed = sum(o.well_formed for o in outcomes)
    correct = sum(o.correct for o in outcomes)
    return CategorySummary(
        category=category,
        entries=n,
        correct=correct,
        accuracy=correct / n if n else 0.0,
        calls=calls,
        well_formed=well_formed,
        well_formed_rate=well_formed / calls if calls else None,
        false_calls=sum(o.calls > 0 for o in outcomes) if category == "irrelevance" else None,
        near_misses=sum(o.near_misses > 0 for o in outcomes),
        seconds_per_entry=sum(o.seconds for o in outcomes) / n if n else 0.0,
        tokens_per_entry=sum(o.tokens for o in outcomes) / n if n else 0.0,
    )


COLUMNS = ("category", "entries", "accuracy", "well-formed", "false calls", "call-like text", "s/entry")


def table(summaries: list[CategorySummary]) -> list[str]:
    """The summary as text lines: one row per category."""
    rows = [COLUMNS]
    for s in summaries:
        rows.append(
            (
                s.category,
                str(s.entries),
                f"{s.accuracy:.1%} ({s.correct})",
                "-" if s.well_formed_rate is None else f"{s.well_formed_rate:.1%} ({s.well_formed}/{s.calls})",
                "-" if s.false_calls is None else f"{s.false_calls}/{s.entries}",
                f"{s.near_misses}/{s.entries}",
                f"{s.seconds_per_entry:.2f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return [
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
        for row in rows
    ]


def summary_json(summaries: list[CategorySummary], outcomes: list[EntryOutcome], **context) -> dict:
    """One JSON object: the run's settings, each category's figures, and each entry's verdict."""
    return {
        **context,
        "suite": "bfcl",
        "categories": {s.category: asdict(s) for s in summaries},
        "entries": [
            {
                "id": o.id,
                "correct": o.correct,
                "calls": o.calls,
                "well_formed": o.well_formed,
                "error": o.error,
                "stop": o.stop,
                "output": o.output,
                "near_misses": o.near_misses,
            }
            for o in outcomes
        ],
    }
