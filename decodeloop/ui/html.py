"""The viewer: one self-contained HTML page from the event stream.

`decodeloop run --html FILE` collects a turn's events with `HtmlView`; `decodeloop view TRACE.jsonl -o FILE`
reads JSON Lines (`--json`) with `read_trace`. Both write the page with `write_page`: inline CSS and
JavaScript, no network, no build step. The events go into the page as JSON in a `<script
type="application/json">` with `<`, `>` and `&` written as \\u escapes, so no text in them (a tool result is
server-controlled) can close the script element; the script renders every string with `textContent`,
never as markup, and with every control, format and invisible character spelled as the terminal spells it
(untrusted.py: `\\x1b`, `\\u202e`, a tag character as `\\U000e0041`), so no text hides in the page or
reorders it.

The page's markup, style and script are files of their own, package data in ui/viewer/
(page.html, viewer.css, viewer.js), read once at import and filled in here.

What the page keeps of the events is bounded (ui/page_events.py): long strings and large events are cut,
a flood of one kind of event from a server is summarised, and the page as a whole has a cap, each with a
note on the page saying what was left out; the page is a view, the JSON Lines keep everything.
"""

from __future__ import annotations

import html
import io
import json
import os
from collections.abc import Iterable
from typing import Any, BinaryIO

from decodeloop import utf8
from decodeloop.decode.model import RecordsAttention
from decodeloop.events import Event
from decodeloop.text.untrusted import UNSAFE_RANGES, visible

# MAX_STRING (the page's cap on one string) is imported from here too
from decodeloop.ui.page_events import MAX_STRING, SOURCE, PageEvents, embed, fit  # noqa: F401


class HtmlView:
    """An event sink that keeps the page's share of every event (`PageEvents`); `write()` writes the page."""

    def __init__(self, path: str, meta: dict[str, Any] | None = None, **bounds: int) -> None:
        self.path = path
        self.meta = dict(meta or {})
        self.kept = PageEvents(**bounds)
        self.bundle: Any = None  # a bundle whose model records its attention maps (watch)

    def __call__(self, event: Event) -> None:
        self.kept.add(event.to_json())

    def watch(self, bundle) -> None:
        """Record the attention maps of a model that can keep them (the numpy transformer) for the page."""
        if isinstance(bundle.model, RecordsAttention):
            self.bundle = bundle
            bundle.model.record_attention = True

    def write(self) -> None:
        texts = self.kept.texts()
        bundle = self.bundle
        if bundle is not None:
            events = [json.loads(text) for text in texts]
            add_attention(events, bundle.model, bundle.tokenizer)
            texts = [embed(fit(e)).encode() for e in events]
        with open(self.path, "wb") as f:
            write_page(f, texts, self.meta)


def add_attention(events: list[dict[str, Any]], model: RecordsAttention, tokenizer) -> None:
    """Give each token event `attention`: every head's weights from the position that chose the token
    over the keys in its window, and which head copied most on this turn (the copy head): the mean weight
    the position choosing a token puts on the same token inside a tool result, over the tokens after a call.

    `model` recorded its maps (`record_attention`); positions it no longer holds are skipped."""
    ids = list(model.cached_tokens)
    maps = model.attention
    tool = [
        (s[0], s[1])
        for e in events
        if e["event"] in ("prompt", "inject")
        for s in e.get("spans") or []
        if str(s[2]).startswith("tool")
    ]
    rows = []
    for e in events:
        if e["event"] != "token":
            continue
        query = e["context"] - 2  # the last position before the token was appended
        found = [_row(layer, query) for layer in maps]
        if not found or any(f is None for f in found) or query >= len(ids):
            continue
        lo = found[0][0]
        heads = [
            {"layer": layer, "head": head, "weights": [round(float(w), 4) for w in weights[head][: query + 1 - lo]]}
            for layer, (_, weights) in enumerate(found)
            for head in range(weights.shape[0])
        ]
        e["attention"] = {"start": lo, "keys": [tokenizer.token_text(t) for t in ids[lo : query + 1]], "heads": heads}
        rows.append((e, lo, found))
    scores: dict[int, list[float]] = {}
    for e, lo, found in rows:
        query = e["context"] - 2
        sources = [p for a, b in tool for p in range(max(a, lo), min(b, query + 1)) if ids[p] == e["id"]]
        if not sources:
            continue
        n = 0
        for _, weights in found:
            for head in range(weights.shape[0]):
                scores.setdefault(n, []).append(float(sum(weights[head][p - lo] for p in sources)))
                n += 1
    if scores:
        best = max(scores, key=lambda n: sum(scores[n]) / len(scores[n]))
        for e, _, _ in rows:
            e["attention"]["heads"][best]["copy"] = True


def _row(maps, query: int):
    """(first key, weights [heads, keys]) of one query position from one layer's recorded maps."""
    for pos0, lo, att in maps:
        if pos0 <= query < pos0 + att.shape[1]:
            return lo, att[:, query - pos0]
    return None


class TraceError(ValueError):
    """A JSON Lines file that is not an event stream; the message names the line."""


def read_trace(lines: Iterable[str], **bounds: int) -> PageEvents:
    """The page's share of the events of a JSON Lines trace (blank lines skipped), read line by line.

    A last line that is not JSON (or not UTF-8) and has no newline was cut while it was written (the run
    was killed, or `head -c` cut the file): it is left out, and a notice event at the end says so. A byte
    that is not UTF-8 anywhere else is a TraceError naming the line; `lines` are decoded with
    surrogateescape (utf8.lines) so that it can be found.
    """
    kept = PageEvents(**bounds)
    cut = None
    for number, line in enumerate(lines, 1):
        if cut is not None:  # the unreadable line was not the last one after all
            raise TraceError(cut[1])
        if not line.strip():
            continue
        bad = utf8.in_text(line)  # the reader decoded with surrogateescape (utf8.lines)
        if bad is not None:
            if not line.endswith("\n"):  # `head -c` cut a character in two
                cut = (number, f"line {number}: not UTF-8: {bad} of the line", len(line))
                continue
            raise TraceError(f"line {number}: not UTF-8: {bad} of the line")
        try:
            event = json.loads(line)
        except ValueError as e:
            if not line.endswith("\n"):
                cut = (number, f"line {number}: not JSON: {e}", len(line))
                continue
            raise TraceError(f"line {number}: not JSON: {e}") from None
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            raise TraceError(f'line {number}: not an event (an object with "event")')
        kept.add(event)
    if cut is not None:
        kept.add(
            {
                "event": "notice",
                "source": SOURCE,
                "message": f"the trace's last line (line {cut[0]}, {cut[2]:,} characters) is cut short; it is left out",
            }
        )
    return kept


def read_jsonl(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The events of a JSON Lines trace as the page shows them (`read_trace`)."""
    return read_trace(lines).events()


def page(events: Iterable[dict[str, Any]], meta: dict[str, Any] | None = None) -> str:
    """The whole page for events (their JSON form) and what is known of the run, within the page's bounds."""
    kept = PageEvents()
    for event in events:
        kept.add(event)
    out = io.BytesIO()
    write_page(out, kept.texts(), meta)
    return out.getvalue().decode("utf-8")


def write_page(out: BinaryIO, texts: Iterable[bytes], meta: dict[str, Any] | None = None) -> None:
    """Write the page: the template around the events' embedded JSON (`PageEvents.texts()`), one at a time."""
    meta = dict(meta or {})
    title = html.escape(visible(str(meta.get("title") or "decodeloop trace")))
    head, tail = TEMPLATE.replace("__CSS__", CSS).replace("__JS__", JS).split("__DATA__")
    out.write(head.replace("__TITLE__", title).encode("utf-8"))  # the title last: its text is the user's
    out.write(b'{"meta":' + embed(fit(meta)).encode("utf-8") + b',"events":[')
    for n, text in enumerate(texts):
        out.write(b"," + text if n else text)
    out.write(b"]}" + tail.encode("utf-8"))


VIEWER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "viewer")  # the page's files (package data)


def _viewer_file(name: str) -> str:
    with open(os.path.join(VIEWER, name), encoding="utf-8") as f:
        return f.read()


TEMPLATE = _viewer_file("page.html")
CSS = _viewer_file("viewer.css")


def unsafe_class() -> str:
    """The characters the views spell as escapes, as a JavaScript regex class: the one list is
    untrusted.UNSAFE_RANGES (the viewer's and the studio's scripts hold `__UNSAFE__` where it goes)."""
    return "[" + "".join(f"\\u{{{a:x}}}" + ("" if a == b else f"-\\u{{{b:x}}}") for a, b in UNSAFE_RANGES) + "]"


TEXT_JS = _viewer_file("text.js").replace("__UNSAFE__", unsafe_class())  # first in every page's script
APP_JS = _viewer_file("app.js")  # MCP Apps' frame and bridge: the viewer's and the studio's
JS = TEXT_JS + APP_JS + _viewer_file("viewer.js")
