"""Admitting text into the context: the one path every text the model will read as data takes.

A tool's result, an error quoting a server's words, the user's message, a tool's definition: each is cut to
its cap (untrusted.cap_text) when it has one, loses its invisible characters (invisible.py) and, unless the
harness wrote it, has every forged marker escaped (markers.py). Each change is told in a notice, so what the
model reads differs from what was sent only in ways the trace shows.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from decodeloop.events import Emit, Notice
from decodeloop.trust import invisible
from decodeloop.trust.markers import Markers
from decodeloop.trust.untrusted import cap_text


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
    sent = cap_text(text, limit, cut) if limit is not None else text
    text, removed = invisible.strip(sent or "")
    if removed:
        emit(Notice("harness", invisible.notice(removed, what)))
    if markers is not None:
        text, found = markers.neutralize(text)
        if found:
            emit(Notice("harness", f"escaped {len(found)} marker(s) in {what}: {', '.join(sorted(set(found)))}"))
    return Admitted(sent, text)


def admit_tool(tool: Any, emit: Emit, markers: Markers) -> Any:
    """A tool as the prompt describes it: its title, description and inputSchema are the server's text."""
    tool, removed = invisible.strip_tool(tool)
    what = f"the definition of {tool.name}"
    if removed:
        emit(Notice("harness", invisible.notice(removed, what)))
    tool, found = markers.neutralize_tool(tool)
    if found:
        emit(Notice("harness", f"escaped {len(found)} marker(s) in {what}: {', '.join(sorted(set(found)))}"))
    return tool
