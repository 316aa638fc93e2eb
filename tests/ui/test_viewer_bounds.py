"""The viewer page stays bounded whatever a server sends (ui/page_events.py): a real server process
(tests/servers/flooding.py) floods log notifications and answers with a result of hundreds of large items
during the table model's call; the page keeps the first and last of the flood, says how many it left
out, cuts large events, and is cut at its own cap with a marker.
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from conftest import ROOT
from test_viewer import QUESTION, assert_self_contained, cli, embedded

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy
from decodeloop.ui.html import HtmlView
from decodeloop.ui.page_events import FLOOD_FIRST, FLOOD_LAST, MAX_EVENT_BYTES, embed

FLOODING = [sys.executable, os.path.join(ROOT, "tests", "servers", "flooding.py")]
LOGS = 3_000  # log notifications of 1,000 characters: 3 MB, and as much again as JSON-RPC
ITEMS = ["--result-items", "200", "--item-chars", "20000"]  # a 4 MB result of 200 items
SUMMARY = re.compile(
    r"^\u2026 ([\d,]+) more (.+?) \(([\d.]+) M characters\) not kept; "
    r"the first 100 are above and the last 10 follow$"
)


def flooding(*args: str) -> str:
    return " ".join([*FLOODING, *args])


def summaries(events: list[dict]) -> dict[str, tuple[int, float, int]]:
    """The page's flood notices: what they are about -> (how many were left out, millions of characters
    in them, where the notice is)."""
    found = {}
    for at, e in enumerate(events):
        match = SUMMARY.match(e.get("message", "")) if e["event"] == "notice" and e["source"] == "viewer" else None
        if match:
            found[match.group(2)] = (int(match.group(1).replace(",", "")), float(match.group(3)), at)
    return found


def log_number(e: dict) -> int:
    """The number the server gave a log notification, from its notice or its JSON-RPC message."""
    text = e["message"] if e["event"] == "notice" else e["message"]["params"]["data"]
    return int(re.search(r"\d+", text.removeprefix("log info:")).group())


def assert_flood_summarised(events: list[dict]) -> None:
    notices = [e for e in events if e["event"] == "notice" and e["source"] == "flooding"]
    # the one notice that is not a log message: its logging said once as deprecated (it speaks 2026-07-28)
    [deprecated] = [e for e in notices if "deprecates" in e["message"]]
    notices.remove(deprecated)
    received = [e for e in events if e["event"] == "rpc" and e["message"].get("method") == "notifications/message"]
    assert len(notices) == len(received) == FLOOD_FIRST + FLOOD_LAST  # of the 3,000 of each
    found = summaries(events)
    assert found.keys() == {
        "log messages from flooding",
        "JSON-RPC notifications/message messages received from flooding",
    }
    for kept in (notices, received):
        numbers = [log_number(e) for e in kept]
        assert numbers == [*range(FLOOD_FIRST), *range(LOGS - FLOOD_LAST, LOGS)]  # the first and the last
    dropped, millions, at = found["log messages from flooding"]
    assert dropped == LOGS - FLOOD_FIRST - FLOOD_LAST
    assert 1_000 < millions * 1e6 / dropped < 1_100  # how large they were: the line and the notice's fields
    assert events.index(notices[FLOOD_FIRST]) > at > events.index(notices[FLOOD_FIRST - 1])  # where they were
    assert events[-1]["event"] == "done" and events[-1]["answer"]


def test_run_html_keeps_a_flood_of_log_notifications_and_a_huge_result_bounded(tmp_path):
    out = tmp_path / "flood.html"
    p = cli("run", "-q", "--html", str(out), "--mcp", flooding("--log-messages", str(LOGS), *ITEMS), QUESTION)
    assert p.returncode == 0, p.stderr
    assert os.path.getsize(out) < 1_000_000  # of 6 MB of notifications and a 4 MB result, twice each
    html = out.read_text(encoding="utf-8")
    assert_self_contained(html)
    events = embedded(html)["events"]
    assert len(events) < 400
    assert_flood_summarised(events)
    [response] = [
        e for e in events if e["event"] == "rpc" and "result" in e["message"] and "content" in e["message"]["result"]
    ]
    [result] = [e for e in events if e["event"] == "tool_result"]
    for large in (response, result):  # the 200 items cut in order, with a note of the rest
        assert len(embed(large).encode()) <= MAX_EVENT_BYTES
        items = large["message"]["result"]["content"] if large is response else large["content"]
        assert items[0]["text"].startswith("0 yyy") and re.fullmatch(
            r"\u2026 \[cut for the page: \d+ more item\(s\)\]", items[-1]
        )
    assert result["is_error"] is False and "result truncated" in result["text"]  # small fields kept whole


def test_view_of_a_flooded_trace_is_bounded_the_same_way(tmp_path):
    trace = tmp_path / "flood.jsonl"
    p = cli("run", "--json", "--mcp", flooding("--log-messages", str(LOGS)), QUESTION)
    assert p.returncode == 0, p.stderr
    trace.write_text(p.stdout, encoding="utf-8")
    assert p.stdout.count('"method": "notifications/message"') == LOGS  # the JSON Lines keep everything
    p = cli("view", str(trace), "-o", str(tmp_path / "flood.html"))
    assert p.returncode == 0, p.stderr
    assert os.path.getsize(tmp_path / "flood.html") < 1_000_000 < os.path.getsize(trace)
    assert_flood_summarised(embedded((tmp_path / "flood.html").read_text(encoding="utf-8"))["events"])


def test_the_page_is_cut_at_its_cap_with_a_marker_and_ends_with_the_turn(tmp_path):
    answer = "It is sunny. " * 300  # 3,900 tokens: more than the page's room
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson state=MT]",
        "<|assistant|>": answer + "<|eos|>",
    }
    cap, tail = 1_000_000, 5
    view = HtmlView(str(tmp_path / "cut.html"), max_page_bytes=cap, page_tail=tail)
    tokenizer = CharTokenizer()
    with start_stdio_servers([FLOODING + ["--log-messages", "500"]], view, options=ClientOptions(timeout=30)) as router:
        Harness(
            lab_bundle(TableModel(tokenizer, table), tokenizer),
            Sampler(),
            router,
            view,
            config=TurnConfig(max_tokens=5_000),
            policy=Policy.off(),
        ).run(QUESTION)
    assert view.kept.bytes_held <= cap  # what it holds, not only what it writes
    view.write()
    html = (tmp_path / "cut.html").read_text(encoding="utf-8")
    assert len(html.encode()) < cap + 100_000  # the events within the cap; the page's script beside them
    events = embedded(html)["events"]
    [(at, marker)] = [
        (at, e["message"])
        for at, e in enumerate(events)
        if e["event"] == "notice" and "the page is cut here" in e["message"]
    ]
    cut = int(re.search(r"cut here: ([\d,]+) more events", marker).group(1).replace(",", ""))
    assert f"past the page's cap of {cap:,} bytes; the last {tail} follow" in marker
    tokens = [e for e in events if e["event"] == "token"]
    assert cut > 1_000 and len(tokens) + cut == events[-1]["tokens"]  # every event cut out is a token here
    assert len(events) - at - 1 == tail and events[-1]["event"] == "done"  # the turn's end is still shown
    assert events[-1]["answer"] == answer.strip()
    assert any("390 more log messages from flooding" in e.get("message", "") for e in events)  # as ever


@pytest.mark.browser
@pytest.mark.skipif(
    not os.environ.get("DECODELOOP_CHROMIUM"),
    reason="the browser tier: set DECODELOOP_CHROMIUM to a Chromium binary, or run .ci/browser",
)
def test_the_flooded_page_renders_every_event_in_a_browser(tmp_path):
    from cdp import Browser

    out = tmp_path / "flood.html"
    p = cli("run", "-q", "--html", str(out), "--mcp", flooding("--log-messages", str(LOGS), *ITEMS), QUESTION)
    assert p.returncode == 0, p.stderr
    events = embedded(out.read_text(encoding="utf-8"))["events"]
    with Browser(os.environ["DECODELOOP_CHROMIUM"]) as b:
        b.open(str(out))
        assert b.errors() == []
        b.key("Home")
        for at in range(len(events)):
            if events[at]["event"] == "notice" and events[at]["source"] == "viewer":
                step = b.evaluate("document.getElementById('step').textContent")
                assert "not kept" in step and json.loads(b.evaluate("document.body.dataset.cursor")) == at
            b.key("ArrowRight")
        assert b.errors() == []
