"""From the text of calls to the text of their results: parse, validate, route, call.

Every way a call can fail (bad syntax, unknown tool, arguments that break the
tool's inputSchema, the same call repeated after its result was given, a call
the policy denies (policy.py: between validation and the call), a server
that errors, exits or times out, structuredContent that breaks the tool's
outputSchema) ends here as an error Outcome whose message the model can act on;
none of them raises. Bugs in the harness itself are not caught: they should
surface.

Several calls in one message (`dispatch_all`) are prepared in order, then run:
calls to different servers concurrently, calls to the same server one after
another, and their outcomes come back in the order the model wrote them. A call
its server runs as a task (mcp/tasks.py) is started in that order and followed
to its end with the message's other tasks on that server, all polled together;
Ctrl-C cancels every task still running.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from decodeloop.errors import McpError, RequestTimeout
from decodeloop.events import ToolCall, ToolError, ToolReturned
from decodeloop.formats.calls import shapes as call_shapes
from decodeloop.formats.calls.base import ParsedCall
from decodeloop.mcp.tasks import RunningTask, wait_all
from decodeloop.schema.arguments import ArgumentError, validate_arguments
from decodeloop.schema.standard import check_value
from decodeloop.tools.apps import app_view
from decodeloop.tools.router import Router, UnknownTool
from decodeloop.tools.turn import (  # the caps are the state's; named here too, where callers look for them
    DEFAULT_MAX_RESULT_CHARS,
    DEFAULT_MAX_TURN_RESULT_CHARS,
    MIN_RESULT_CHARS,
    DispatchState,
)
from decodeloop.trust.policy import EVIDENCE, denial

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "DEFAULT_MAX_TURN_RESULT_CHARS",
    "MIN_RESULT_CHARS",
    "NEEDS_EVIDENCE",
    "NeedsEvidence",
    "Outcome",
    "call_key",
    "dispatch_all",
    "output_problem",
]


@dataclass(slots=True)
class Outcome:
    text: str  # what the tool message will say, as admitted to the context (before the syntax renders it)
    is_error: bool
    name: str | None = None  # the tool the call named, once it parsed
    server: str | None = None  # the server whose text the message carries: it answered, or its schema is quoted
    stage: str | None = None  # for errors: "parse", "route", "arguments", "repeat", "policy" or "call"
    key: str | None = None  # the call's identity (tool and converted arguments), once validated


@dataclass(slots=True)
class _Prepared:
    text: str
    name: str
    tool: Any
    arguments: dict
    server: str
    key: str
    shape: str


class NeedsEvidence:
    """What dispatch_all answers, having done nothing, when the policy's masked mode must see the model's calls
    with the user's request masked before it decides: the harness runs that re-run (`state.masked`) and
    dispatches again. Nothing below the harness runs the model."""

    def __repr__(self) -> str:
        return "NEEDS_EVIDENCE"


NEEDS_EVIDENCE = NeedsEvidence()


def dispatch_all(
    calls: list[ParsedCall],
    router: Router,
    state: DispatchState,
    *,
    timeout: float | None = None,
) -> list[Outcome] | NeedsEvidence:
    """Every call of one message, in the order written, as the stop check read them (each a call, or the error
    it failed to parse with); `state` is the turn they belong to (tools/turn.py). NEEDS_EVIDENCE, before
    anything is done, when the policy needs the masked re-run's calls and `state.masked` has none yet.

    The caller starts the round (state.round) and records its outcomes (state.record).
    """
    if state.masked is None and any(_needs_evidence(parsed, router, state) for parsed in calls):
        return NEEDS_EVIDENCE
    prepared: list[_Prepared | Outcome] = [_prepare(parsed, router, state) for parsed in calls]
    runnable = [p for p in prepared if isinstance(p, _Prepared)]
    by_server: dict[str, list[_Prepared]] = {}
    for p in runnable:
        by_server.setdefault(p.server, []).append(p)
    stop = threading.Event()  # Ctrl-C on this thread: the other servers' tasks are cancelled too
    if len(by_server) > 1:
        with ThreadPoolExecutor(max_workers=len(by_server)) as pool:
            futures = {server: pool.submit(_run, calls, router, timeout, stop) for server, calls in by_server.items()}
            try:
                while wait(futures.values(), timeout=0.2).not_done:  # short waits: Ctrl-C reaches this thread
                    pass
            except KeyboardInterrupt:
                stop.set()
                raise
            done = {server: future.result() for server, future in futures.items()}
    else:
        done = {server: _run(calls, router, timeout, stop) for server, calls in by_server.items()}
    results = {id(p): r for server, calls in by_server.items() for p, r in zip(calls, done[server])}
    return [p if isinstance(p, Outcome) else _finish(p, results[id(p)], state, router) for p in prepared]


def call_key(name: str, arguments: dict) -> str:
    """A call's identity: the tool and its arguments after schema conversion."""
    return name + " " + json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


def _needs_evidence(parsed: ParsedCall, router: Router, state: DispatchState) -> bool:
    """Whether the policy's decision on this call waits for the masked re-run: the steps before the policy
    taken quietly (a call that fails one of them never reaches it)."""
    call = parsed.call
    if state.policy is None or state.policy.mode != "masked" or call is None or call.name not in router.tools:
        return False
    tool = router.resolve(call.name)
    try:
        arguments = validate_arguments(call.name, call.arguments, tool.input_schema)
    except ArgumentError:
        return False
    if state.repeated(call_key(call.name, arguments)):
        return False
    route = router.routes[call.name]
    decision = state.check(call.name, route.server, route.remote, tool, arguments)
    return decision is not None and decision.verdict == EVIDENCE


def _prepare(parsed: ParsedCall, router: Router, state: DispatchState) -> _Prepared | Outcome:
    call_text, shape, call = parsed.text, parsed.shape, parsed.call

    def failed(message: str, stage: str, name=None, server=None, key=None, cut=None) -> Outcome:
        arguments = call.arguments if call is not None else None
        return _failed(state, message, call_text, stage, name, server, key, shape, cut, arguments)

    if call is None:
        return failed(str(parsed.error) if parsed.error is not None else "the call could not be read", "parse")
    try:
        tool = router.resolve(call.name)
    except UnknownTool as e:
        # it lists every tool the servers offer: as long as they make it, so capped like their text
        return failed(str(e), "route", call.name, cut="error")
    try:
        arguments = validate_arguments(call.name, call.arguments, tool.input_schema)
    except ArgumentError as e:
        # it quotes the server's schema (property names, descriptions, enum values): the server's text, capped
        # like it and marked with the server, so the policy and the marker escape treat it as data
        return failed(str(e), "arguments", call.name, router.routes[call.name].server, cut="error")
    key = call_key(call.name, arguments)
    if state.repeated(key):
        # the server is spared
        return failed(
            f"{call.name} was already called with these arguments in this turn and its "
            f"result is above; answer the user from it, or call with other arguments",
            "repeat",
            call.name,
            key=key,
        )
    route = router.routes[call.name]
    server = route.server
    decision = state.check(call.name, server, route.remote, tool, arguments)
    if decision is not None:
        state.emit(decision)
        if decision.verdict != "allow":  # the server never sees it; the model is told why
            return failed(denial(decision), "policy", call.name)
    state.emit(
        ToolCall(
            name=call.name,
            arguments=arguments,
            server=server,
            text=call_text,
            origins=state.origins(arguments),
            shape=shape,
        )
    )
    return _Prepared(call_text, call.name, tool, arguments, server, key, shape)


def _run(calls: list[_Prepared], router: Router, timeout: float | None, stop: threading.Event) -> list:
    """The calls to one server, in order: each answer, or the McpError it failed with (returned, not raised,
    across threads). Calls the server runs as tasks are started in turn and then followed together."""
    started = [_start(p, router, timeout) for p in calls]
    tasks = [s for s in started if isinstance(s, RunningTask)]
    if tasks:
        wait_all(tasks, stop)
    return [_task_outcome(s) if isinstance(s, RunningTask) else s for s in started]


def _start(p: _Prepared, router: Router, timeout: float | None):
    try:
        return router.start(p.name, p.arguments, timeout=timeout)
    except McpError as e:
        return e


def _task_outcome(task: RunningTask):
    try:
        return task.client.task_result(task)
    except McpError as e:
        return e


def _finish(p: _Prepared, result, state: DispatchState, router: Router) -> Outcome:
    # an error's text is the server's as much as a result's: the same cap holds
    message: str | None
    if isinstance(result, RequestTimeout):
        message = f"{p.name} did not answer in time ({result})"
    elif isinstance(result, McpError):
        message = f"{p.name} failed: {result}"
    else:
        message = output_problem(p.tool, result)  # the server answered, but not what it promised: a failed call
    if message is not None:
        return _failed(
            state, message, p.text, "call", p.name, p.server, shape=p.shape, cut="error", arguments=p.arguments
        )
    what = f"the {'error for' if result.is_error else 'result of'} {p.name}"
    sent, text = state.admit(result.text(), what, server_text=True, cut="result")
    state.emit(ToolReturned(name=p.name, content=result.content, is_error=result.is_error, text=sent))
    app_view(router, p.server, p.tool, p.arguments, result, state.emit)  # a tool with an app of its own (MCP Apps)
    return Outcome(text, result.is_error, p.name, p.server, "call" if result.is_error else None, p.key)


def output_problem(tool, result) -> str | None:
    """Why a successful result breaks the tool's declared outputSchema, or None if it keeps it."""
    if tool.output_schema is None or result.is_error:
        return None
    if result.structured is None:
        return f"{tool.name} declares an outputSchema but returned no structuredContent"
    problems = check_value(result.structured, tool.output_schema)
    if problems:
        return f"{tool.name} returned structuredContent that breaks its outputSchema: " + "; ".join(problems)
    return None


def _failed(
    state: DispatchState,
    message: str,
    call_text: str,
    stage: str,
    name: str | None = None,
    server: str | None = None,
    key: str | None = None,
    shape: str = call_shapes.CANONICAL,
    cut: str | None = None,
    arguments: dict | None = None,
) -> Outcome:
    """An error Outcome; its text admitted as the server's when it carries a server's words (`server`)."""
    sent, text = state.admit(message, f"the error for {name or 'a call'}", server_text=server is not None, cut=cut)
    state.emit(ToolError(message=sent, text=call_text, stage=stage, name=name, shape=shape, arguments=arguments))
    return Outcome(text, True, name, server, stage, key)
