"""From the text of a call to the text of its result: parse, validate, route, call.

Every way a call can fail (bad syntax, unknown tool, arguments that break the
tool's inputSchema, a server that errors, exits or times out, structuredContent
that breaks the tool's outputSchema) ends here as an
error Outcome whose message the model can act on; none of them raises. Bugs in
the harness itself are not caught: they should surface.
"""

from __future__ import annotations

from dataclasses import dataclass

from decodeloop.calls import ParseError
from decodeloop.events import Emit, ToolCall, ToolError, ToolResult
from decodeloop.mcp.errors import McpError, RequestTimeout
from decodeloop.router import Router, UnknownTool
from decodeloop.schema import ArgumentError, check_value, validate_arguments

DEFAULT_MAX_RESULT_CHARS = 16_000


@dataclass(slots=True)
class Outcome:
    text: str        # what the tool message will say (before the syntax renders it)
    is_error: bool


def dispatch(call_text: str, syntax, router: Router, emit: Emit, *,
             timeout: float | None = None, max_result_chars: int = DEFAULT_MAX_RESULT_CHARS) -> Outcome:
    try:
        call = syntax.parse(call_text)
    except ParseError as e:
        return _failed(emit, str(e), call_text, "parse")
    try:
        tool = router.resolve(call.name)
    except UnknownTool as e:
        return _failed(emit, str(e), call_text, "route", call.name)
    try:
        arguments = validate_arguments(call.name, call.arguments, tool.input_schema)
    except ArgumentError as e:
        return _failed(emit, str(e), call_text, "arguments", call.name)

    emit(ToolCall(call.name, arguments, router.owner[call.name], call_text))
    try:
        result = router.call(call.name, arguments, timeout=timeout)
    except RequestTimeout as e:
        return _failed(emit, f"{call.name} did not answer in time ({e})", call_text, "call", call.name)
    except McpError as e:
        return _failed(emit, f"{call.name} failed: {e}", call_text, "call", call.name)

    problem = output_problem(tool, result)
    if problem is not None:  # the server answered, but not what it promised: a failed call
        return _failed(emit, problem, call_text, "call", call.name)
    text = cap_text(result.text(), max_result_chars)
    emit(ToolResult(call.name, result.content, result.is_error, text))
    return Outcome(text, result.is_error)


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


def _failed(emit: Emit, message: str, call_text: str, stage: str, name: str | None = None) -> Outcome:
    emit(ToolError(message, call_text, stage, name))
    return Outcome(message, True)


def cap_text(text: str, limit: int) -> str:
    """Keep at most `limit` characters of a result, saying so visibly when cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... result truncated: showing {limit:,} of {len(text):,} characters]"
