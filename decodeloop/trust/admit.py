"""Admitting text into the context: the one path every text the model will read as data takes.

A tool's result, an error quoting a server's words, the user's message, a tool's definition: each has every
credential this process holds redacted (credentials.py: a server that echoes a token cannot hand it to the
model, which could pass it to another server), is cut to its cap (untrusted.cap_text) when it has one, loses
its invisible characters (invisible.py) and, unless the harness wrote it, has every forged marker escaped
(markers.py). Each change is told in a notice, so what the model reads differs from what was sent only in
ways the trace shows.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from decodeloop.events import Emit, Notice
from decodeloop.text import credentials, invisible
from decodeloop.text.untrusted import cap_text
from decodeloop.trust.markers import Markers


class Admitted(NamedTuple):
    sent: str  # the text as sent, capped: what the trace, JSON Lines and the viewer show (each escapes it)
    text: str  # what the context holds


def admit_result(
    text: str,
    what: str,
    emit: Emit,
    markers: Markers | None,
    *,
    limit: int | None = None,
    cut: str = "result",
) -> Admitted:
    """`text` as the context may hold it. `what` names it in notices ("the result of get_weather");
    `markers` None keeps markers (the harness's own words); `limit` caps it, `cut` naming what was cut."""
    text, redacted = credentials.redact_counted(text or "")
    sent = cap_text(text, limit, cut) if limit is not None else text
    if limit is not None and len(text) > limit:
        emit(Notice(source="harness", message=f"cut {what} to {limit:,} of {len(text):,} characters (the cap)"))
    text, removed = invisible.strip(sent)
    if removed:
        emit(Notice(source="harness", message=invisible.notice(removed, what)))
        text, more = credentials.redact_counted(text)  # a secret the invisible characters split
        redacted += more
    if redacted:
        emit(Notice(source="harness", message=redacted_notice(redacted, what)))
    if markers is not None:
        text, found = markers.neutralize(text)
        if found:
            emit(
                Notice(
                    source="harness",
                    message=f"escaped {len(found)} marker(s) in {what}: {', '.join(sorted(set(found)))}",
                )
            )
    return Admitted(sent, text)


def admit_tool(tool: Any, emit: Emit, markers: Markers) -> Any:
    """A tool as the prompt describes it: its title, description and inputSchema are the server's text."""
    what = f"the definition of {tool.name}"
    tool = _redact_tool(tool, emit, what)
    tool, removed = invisible.strip_tool(tool)
    if removed:
        emit(Notice(source="harness", message=invisible.notice(removed, what)))
    tool, found = markers.neutralize_tool(tool)
    if found:
        emit(
            Notice(
                source="harness", message=f"escaped {len(found)} marker(s) in {what}: {', '.join(sorted(set(found)))}"
            )
        )
    return tool


def redacted_notice(markers: list[str], what: str) -> str:
    """What a notice says of credentials redacted from `what`: how many, and the markers (never the secret)."""
    return f"redacted {len(markers)} credential(s) from {what}: {', '.join(sorted(set(markers)))}"


def _redact_tool(tool: Any, emit: Emit, what: str) -> Any:
    """The tool with held credentials redacted from its title, description and inputSchema."""
    if not credentials.HELD.held:
        return tool
    found: list[str] = []

    def text(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value, markers = credentials.redact_counted(value)
        found.extend(markers)
        return value

    title, description = text(tool.title), text(tool.description)
    schema = invisible.map_strings(tool.input_schema, text)
    if not found:
        return tool
    emit(Notice(source="harness", message=redacted_notice(found, what)))
    return dataclasses.replace(tool, title=title, description=description, input_schema=schema)
