"""What the viewer page keeps of an event stream: the bounds that hold whatever a server sends.

`run --html` holds a turn's events until the turn ends and `view` reads a whole trace, while a server
decides how many notifications it sends and how large its results are. `PageEvents` keeps each event
only as the JSON the page embeds (UTF-8 bytes), within four bounds:

- a string: `MAX_STRING` characters, cut with a note of its full length (a 20 MB result); an app's page
  (MCP Apps) is a program, kept whole up to the app cap (`MAX_APP_CHARS`), as the harness keeps it;
- an event: `MAX_EVENT_BYTES` of JSON; past that its strings, lists and objects are cut in order, each
  with a note of what was left out (a result of ten thousand items);
- a flood: of the events a server can repeat at will (JSON-RPC messages, notices, tools-changed events),
  the first `FLOOD_FIRST` of one kind from one server are kept, then only the last `FLOOD_LAST`; a notice
  where the others were says how many and how large they were;
- the page: `MAX_PAGE_BYTES` of events in all; once the next event would pass it, only the last
  `PAGE_TAIL` events are kept, after a notice that says where the page was cut and what was left out.

So the memory it holds is bounded by these caps, not by the stream. JSON Lines hold nothing, so they
only cut each long string of a message or a result (ui/jsonl.py); the page cuts every string the same way
and bounds the rest because it holds what it keeps.
"""

from __future__ import annotations

import json
import math
from collections import deque
from typing import Any

from decodeloop.text.untrusted import json_escaped
from decodeloop.tools.apps import MAX_APP_CHARS

MAX_STRING = 20_000  # characters of one string (or object key) the page keeps
MAX_EVENT_BYTES = 100_000  # one event's JSON in the page
FLOOD_FIRST = 100  # events of one kind from one server kept as they come
FLOOD_LAST = 10  # then only the last ones
MAX_FLOOD_KINDS = 256  # kinds told apart; past that an event counts only against the page's cap
MAX_PAGE_BYTES = 64_000_000  # every event's JSON in the page, the cut's tail included
PAGE_TAIL = 50  # events kept after the page is cut, so the turn's end is still shown
SOURCE = "viewer"  # the source of the notices this module writes into the page

CUT = "\u2026 [cut for the page: {:,} characters in all]"
CUT_ITEMS = "\u2026 [cut for the page: {:,} more item(s)]"
CUT_KEYS = "\u2026 [cut for the page: {:,} more key(s)]"
CUT_KEY = "\u2026"  # the key of the note that ends an object cut short

# the MCP methods told apart in a flood; any other method is "other" (its name is the server's to choose)
MCP_METHODS = frozenset(
    (
        "initialize",
        "notifications/initialized",
        "ping",
        "server/discover",
        "tools/list",
        "tools/call",
        "notifications/message",
        "notifications/progress",
        "notifications/cancelled",
        "notifications/tools/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
        "notifications/prompts/list_changed",
        "notifications/roots/list_changed",
        "resources/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "sampling/createMessage",
        "elicitation/create",
        "notifications/elicitation/complete",
        "roots/list",
        "logging/setLevel",
        "completion/complete",
        "subscriptions/listen",
    )
)


def embed(data: Any) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' left to end it or open a comment."""
    text = json_escaped(json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def fit(value: Any, budget: float = math.inf) -> Any:
    """A copy of a JSON value for the page: strings cut to `MAX_STRING`, non-finite numbers as null
    (JSON.parse takes neither NaN nor Inf), and, within `budget` characters, what comes first kept."""
    return _Fitter(budget).value(value)


class _Fitter:
    """One walk of `fit`: the characters left of the budget, spent in the order the value is written."""

    def __init__(self, budget: float) -> None:
        self.left = budget

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            keep = int(max(0, min(len(value), MAX_STRING, self.left)))
            self.left -= keep + 2
            return value if keep == len(value) else value[:keep] + CUT.format(len(value))
        if isinstance(value, dict):
            return self.object(value)
        if isinstance(value, (list, tuple)):
            self.left -= 2
            out = []
            for n, item in enumerate(value):
                if self.left <= 0:
                    out.append(CUT_ITEMS.format(len(value) - n))
                    break
                out.append(self.value(item))
                self.left -= 1
            return out
        self.left -= 5
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    def object(self, value: dict) -> dict:
        self.left -= 2
        out = {}
        for n, (key, item) in enumerate(value.items()):
            if self.left <= 0:
                out[CUT_KEY] = CUT_KEYS.format(len(value) - n)
                break
            key = str(key)
            if len(key) > MAX_STRING:  # a key is cut like a string, but never for the budget: it names its value
                key = key[:MAX_STRING] + CUT.format(len(key))
            self.left -= len(key) + 3
            out[key] = self.value(item)
        return out


def event_json(data: dict) -> bytes:
    """One event as the page embeds it, at most `MAX_EVENT_BYTES`: its strings cut, and if that is not
    enough, its fields cut in turn, the small ones (kind, server, name) kept whole before the large ones
    share what is left."""
    html = data.get("html") if data.get("event") == "app" else None
    if isinstance(html, str) and len(html) <= MAX_APP_CHARS:
        # an app's page is kept whole or not at all (tools/apps.py caps it): a page cut short is a broken
        # program, not a shorter text; the event's other fields are held to the cap as any event's are
        rest = json.loads(event_json({key: item for key, item in data.items() if key != "html"}))
        return embed({**rest, "html": html}).encode()
    # the walk counts at most three times an event's JSON (a 0 in a list counts 6): an event under the cap
    # is never cut by this budget, and a huge one is not copied whole before it is cut
    text = embed(fit(data, 3 * MAX_EVENT_BYTES)).encode()
    budget = MAX_EVENT_BYTES * 0.9
    while len(text) > MAX_EVENT_BYTES and budget >= 100:
        text = embed(_shared(data, budget)).encode()
        budget /= 4  # escapes (a control character is written in six) made the JSON longer than counted
    if len(text) > MAX_EVENT_BYTES:
        kind = data.get("event")
        text = embed(
            {"event": kind[:100] if isinstance(kind, str) else "?", "note": "this event is too large for the page"}
        ).encode()
    return text


def _shared(data: dict, budget: float) -> dict:
    """The event's fields within `budget`: small fields first, then the large ones, each an equal share."""
    small = {
        key
        for key, item in data.items()
        if not isinstance(item, (dict, list, tuple)) and not (isinstance(item, str) and len(item) > 200)
    }
    fitter = _Fitter(budget)
    out = {key: fitter.value(item) for key, item in data.items() if key in small}
    large = [key for key in data if key not in small]
    for n, key in enumerate(large):
        share = max(0.0, fitter.left) / (len(large) - n)
        part = _Fitter(share)
        out[key] = part.value(data[key])
        fitter.left -= share - part.left  # what it spent: a little more than its share, for a note
    return {key: out[key] for key in data}  # the fields in their order


def text_size(value: Any) -> int:
    """About how many characters a JSON value holds: its strings and keys, and a few for everything else."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(str(key)) + text_size(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return sum(text_size(item) for item in value)
    return 4


def flood_kind(data: dict) -> tuple | None:
    """What a server can send any number of, as a kind: (event, server, ...); None for the turn's own events."""
    kind = data.get("event")
    if kind == "rpc":
        message = data.get("message")
        method = message.get("method") if isinstance(message, dict) else None
        if method is None:
            what = "response"
        else:
            what = method if isinstance(method, str) and method in MCP_METHODS else "other"
        return ("rpc", _name(data.get("server")), data.get("direction") == "send", what)
    if kind == "notice":
        message = data.get("message")
        what = "notice"
        if isinstance(message, str):
            what = "log" if message.startswith("log ") else "progress" if message.startswith("progress ") else what
        return ("notice", _name(data.get("source")), what)
    if kind == "progress":  # counted with the progress a server sent as notices
        return ("notice", _name(data.get("server")), "progress")
    if kind == "tools_changed":
        return ("tools_changed", _name(data.get("server")))
    if kind == "sampling":  # a server may ask as often as it likes; without a terminal each is denied at once
        return ("sampling", _name(data.get("server")))
    if kind == "elicitation":  # a server may ask again and again, each declined at once without a terminal
        return ("elicitation", _name(data.get("server")))
    return None


def describe(kind: tuple) -> str:
    """A flood's kind in words: 'log messages from weather'."""
    if kind[0] == "rpc":
        _, server, sent, what = kind
        what = "JSON-RPC responses" if what == "response" else f"JSON-RPC {what} messages"
        return f"{what} {'sent to' if sent else 'received from'} {server}"
    if kind[0] == "notice":
        _, source, what = kind
        return {"log": "log messages", "progress": "progress notices"}.get(what, "notices") + f" from {source}"
    if kind[0] == "sampling":
        return f"sampling events from {kind[1]}"
    if kind[0] == "elicitation":
        return f"elicitation requests from {kind[1]}"
    return f"tools-changed events from {kind[1]}"


def _name(value: Any) -> str:
    return value[:200] if isinstance(value, str) else "?"


def _amount(chars: int) -> str:
    return f"{chars / 1e6:,.1f} M characters" if chars >= 1_000_000 else f"{chars:,} characters"


class _Flood:
    """One kind of event past its first `FLOOD_FIRST`: how many, how large, and the last few kept."""

    def __init__(self) -> None:
        self.seen = 0
        self.dropped = 0
        self.dropped_chars = 0
        self.last: deque[tuple[int, bytes, int]] = deque()  # (order, JSON, characters in the original)


class PageEvents:
    """The events a page keeps, in order, each as its embedded JSON: `add` them, then read `texts()`."""

    def __init__(self, max_page_bytes: int = MAX_PAGE_BYTES, page_tail: int = PAGE_TAIL) -> None:
        self.max_page_bytes = max_page_bytes
        self.page_tail = page_tail
        self._kept: list[tuple[int, bytes]] = []  # (order, JSON) before any cut
        self._floods: dict[tuple, _Flood] = {}
        self._count = 0  # events added
        self.bytes_held = 0  # the JSON of every event kept
        self._cut_at: int | None = None  # the order of the first event the page's cap left out
        self._tail: deque[tuple[int, bytes, int]] = deque()  # the last events after the cut
        self._cut_events = 0
        self._cut_chars = 0

    def add(self, data: dict) -> None:
        """Keep an event's JSON form, or count it, within the bounds."""
        order, self._count = self._count, self._count + 1
        text = event_json(data)
        room = self.max_page_bytes - self.page_tail * MAX_EVENT_BYTES  # the tail's room is kept back
        if self._cut_at is None and self.bytes_held + len(text) > room:
            self._cut_at = order
        if self._cut_at is not None:
            dropped = self._keep_last(self._tail, self.page_tail, order, text, data)
            if dropped is not None:
                self._cut_events += 1
                self._cut_chars += dropped
            return
        kind = flood_kind(data)
        flood = self._flood(kind) if kind is not None else None
        if flood is not None:
            flood.seen += 1
            if flood.seen > FLOOD_FIRST:
                dropped = self._keep_last(flood.last, FLOOD_LAST, order, text, data)
                if dropped is not None:
                    flood.dropped += 1
                    flood.dropped_chars += dropped
                return
        self._kept.append((order, text))
        self.bytes_held += len(text)

    def _flood(self, kind: tuple) -> _Flood | None:
        flood = self._floods.get(kind)
        if flood is None and len(self._floods) < MAX_FLOOD_KINDS:
            flood = self._floods[kind] = _Flood()
        return flood

    def _keep_last(self, last: deque, size: int, order: int, text: bytes, data: dict) -> int | None:
        """Keep an event among the last `size` of `last`; the characters of the one that falls out, if any."""
        last.append((order, text, text_size(data)))
        self.bytes_held += len(text)
        if len(last) <= size:
            return None
        _, old, chars = last.popleft()
        self.bytes_held -= len(old)
        return chars

    def texts(self) -> list[bytes]:
        """The JSON of every event kept, in the order they came, with a notice where any were left out."""
        rows: list[tuple[float, bytes]] = list(self._kept)
        for kind, flood in self._floods.items():
            rows.extend((order, text) for order, text, _ in flood.last)
            if flood.dropped:
                note = (
                    f"\u2026 {flood.dropped:,} more {describe(kind)} ({_amount(flood.dropped_chars)}) not kept; "
                    f"the first {FLOOD_FIRST:,} are above and the last {len(flood.last):,} follow"
                )
                rows.append((flood.last[0][0] - 0.5, self._notice(note)))
        if self._cut_at is not None:
            rows.extend((order, text) for order, text, _ in self._tail)
            if self._cut_events:
                note = (
                    f"\u2026 the page is cut here: {self._cut_events:,} more events "
                    f"({_amount(self._cut_chars)}) not kept, past the page's cap of "
                    f"{self.max_page_bytes:,} bytes; the last {len(self._tail):,} follow"
                )
                rows.append((self._tail[0][0] - 0.5, self._notice(note)))
        rows.sort(key=lambda row: row[0])
        return [text for _, text in rows]

    def events(self) -> list[dict]:
        """The events kept, as JSON values again (`texts()` parsed)."""
        return [json.loads(text) for text in self.texts()]

    @staticmethod
    def _notice(message: str) -> bytes:
        return embed({"event": "notice", "source": SOURCE, "message": message}).encode()
