"""The viewer page in a real browser: headless Chromium over the DevTools protocol (tests/cdp.py).

Runs when DECODELOOP_CHROMIUM names a Chromium binary; .ci/browser installs Debian's chromium and sets it.
Each test loads a page made from a real run, presses keys as a reader would and checks what the page
shows: no console error on load or on any event, the cursor where the key says, search, hostile text inert.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from cdp import Browser
from conftest import app_probes_blocked
from test_viewer import (
    HOSTILE,
    QUESTION,
    cli,
    embedded,
    hostile_events,
    library_turn,
    progress_events,
    tiny_hf_jsonl,
)

from decodeloop.text.untrusted import visible
from decodeloop.ui.html import HtmlView, page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.environ.get("DECODELOOP_CHROMIUM"),
        reason="the browser tier: set DECODELOOP_CHROMIUM to a Chromium binary, or run .ci/browser",
    ),
]


@pytest.fixture(scope="module")
def browser():
    with Browser(os.environ["DECODELOOP_CHROMIUM"]) as b:
        yield b


def write(events, path, meta=None) -> str:
    view = HtmlView(str(path), meta)
    for event in events:
        view(event)
    view.write()
    return str(path)


def cursor(b) -> int:
    return int(b.evaluate("document.body.dataset.cursor"))


def text(b, element_id: str) -> str:
    return b.evaluate(f"document.getElementById({json.dumps(element_id)}).textContent")


def visit_every_event(b) -> int:
    """Step from the first event to the last with the → key, as a reader would; the count of events."""
    n = b.evaluate("JSON.parse(document.getElementById('data').textContent).events.length")
    b.key("Home")
    for _ in range(n):
        b.key("ArrowRight")
    return n


@pytest.fixture(scope="module")
def weather_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("viewer") / "weather.html"
    p = cli("run", "--html", str(path), "--temperature", "0.7", "--seed", "3", QUESTION)
    assert p.returncode == 0, p.stderr
    return str(path), embedded(path.read_text(encoding="utf-8"))["events"]


def test_the_page_loads_without_errors_and_keys_move_the_cursor(browser, weather_page):
    path, events = weather_page
    kinds = [e["event"] for e in events]
    browser.events.clear()
    browser.open(path)
    assert browser.errors() == []
    assert cursor(browser) == kinds.index("prompt")
    # the bars are the distribution each token was drawn from, at the sampling temperature
    assert "the distribution each token was drawn from: softmax(logits / 0.7), T = 0.7" in text(browser, "probnote")
    browser.key("ArrowRight")
    assert cursor(browser) == kinds.index("prompt") + 1
    assert text(browser, "step-title") == "Token 1 of turn 1: the four steps"
    step = text(browser, "step")
    for part in ("1 forward", "2 sample", "3 append", "4 stop check", "top 3 of softmax(logits / 0.7):"):
        assert part in step
    browser.key("ArrowLeft")
    assert cursor(browser) == kinds.index("prompt")
    browser.key("t")  # the next call
    assert cursor(browser) == kinds.index("tool_call")
    call = events[kinds.index("tool_call")]
    for path, sources in call.get("origins", {}).items():  # where the call's values came from
        assert f"{path}: found in {', '.join(sources)}" in text(browser, "step")
    chain = text(browser, "round")
    for part in (
        "call (parsed)",
        "JSON-RPC request → weather",
        "tools/call",
        "JSON-RPC response ← weather",
        "tool message",
        "injected span",
        "tool:weather/get_weather",
    ):
        assert part in chain
    for e in events:
        if e["event"] == "policy":  # the policy's decision is a step of the round
            assert f"policy: {e['verdict']}" in chain and e["reason"] in chain
    browser.key("s")  # the next stop: the answer's end
    assert events[cursor(browser)] == {"event": "stop", "reason": "eos"}
    browser.key("s")  # none after it: the cursor stays
    assert events[cursor(browser)] == {"event": "stop", "reason": "eos"}
    browser.key("End")
    assert cursor(browser) == len(events) - 1 and "Event: done" in text(browser, "step-title")
    browser.key("Home")
    assert cursor(browser) == 0
    assert browser.errors() == []


def test_a_token_step_shows_the_held_text_and_the_cache(browser, weather_page):
    path, events = weather_page
    browser.open(path)
    browser.key("t")
    browser.key("T")  # back: there is no earlier call, the cursor stays
    at = events.index(next(e for e in events if e["event"] == "tool_call"))
    assert cursor(browser) == at
    first_after = next(i for i in range(at, len(events)) if events[i]["event"] == "token")
    while cursor(browser) < first_after:
        browser.key("ArrowRight")
    step = text(browser, "step")
    e = events[first_after]
    assert f"computed {e['computed']} position(s), {e['cached']} served from the cache" in step
    assert "a prefill" in step
    held = next(i for i, e in enumerate(events) if e["event"] == "token" and e["held"] and not e["in_call"])
    while cursor(browser) > held:
        browser.key("ArrowLeft")
    assert "held back: " + json.dumps(
        events[held]["held"]
    ) + ': it could still be the start of the call opener "[call "' in text(browser, "step")
    byte = next(i for i, e in enumerate(events) if e["event"] == "token" and e["text"] == "\\xc2")  # ° is 2 bytes
    while cursor(browser) < byte:
        browser.key("ArrowRight")
    assert "'\\xc2' holds a byte, not a character: UTF-8 writes a character outside ASCII as 2 to 4 bytes" in text(
        browser, "step"
    )
    browser.key("ArrowRight")  # its second byte, then a whole character
    assert events[byte + 1]["text"] == "\\xb0" and "'\\xb0' holds a byte, not a character" in text(browser, "step")
    browser.key("ArrowRight")
    assert events[byte + 2]["text"] == "F" and "holds a byte" not in text(browser, "step")


def test_search_finds_a_token(browser, weather_page):
    path, events = weather_page
    browser.open(path)
    browser.key("/")
    browser.type("overcast")
    assert text(browser, "found") == "1 / 1 match(es)"
    at = cursor(browser)
    spelled = "".join(e["text"] for e in events[at : at + 8] if e["event"] == "token")
    assert events[at]["event"] == "token" and spelled == "overcast"
    assert browser.evaluate("document.querySelectorAll('.strip .t.match').length") == 8
    browser.key("Escape")
    browser.key("ArrowRight")
    browser.key("n")  # the only match again
    assert cursor(browser) == at
    browser.key("/")
    browser.type("zzz")
    assert text(browser, "found") == "no match"
    assert browser.errors() == []


def test_hostile_text_is_inert(browser, tmp_path):
    path = write(hostile_events(), tmp_path / "hostile.html", {"title": "<img src=x onerror=window.__pwned=4>"})
    browser.open(path)
    visit_every_event(browser)
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
    assert browser.evaluate("document.scripts.length") == 2
    assert browser.evaluate("document.title") == "<img src=x onerror=window.__pwned=4>"
    browser.key("End")
    assert HOSTILE in text(browser, "step")  # shown as text
    assert browser.errors() == []


def test_invisible_characters_are_shown_escaped(browser, tmp_path):
    """A result that hides an instruction in tag characters (tests/servers/smuggler.py): every panel spells them."""
    from test_invisible import INVISIBLE, turn

    table = {"<|user|>Weather?<|assistant|>": '[call get_weather city="Polson"]', "<|assistant|>": "Cold.<|eos|>"}
    events = turn(table)[0]
    browser.open(write(events, tmp_path / "smuggled.html", {"title": "Weather?\U000e0041"}))
    shown = []
    for i, event in enumerate(events):
        browser.evaluate(f"go({i})")
        shown.append(
            browser.evaluate(
                "document.body.textContent + [...document.querySelectorAll('[title]')].map(e => e.title).join('')"
            )
        )
        if event.kind == "tool_result":
            step = text(browser, "step")
            assert "over\\xadcast \u2601\\ufe0f, w\\u034find 5\\u200b mph" in step
            assert "\\U000e0001\\U000e0049\\U000e0067" in step and "\\U000e0049" in text(browser, "round")
    assert not INVISIBLE & set("".join(shown))
    assert text(browser, "title") == browser.evaluate("document.title") == "Weather?\\U000e0041"
    assert browser.errors() == []


def test_text_held_back_for_a_stop_string(browser, tmp_path):
    p = cli("run", "--html", str(tmp_path / "stop.html"), "--stop", "overcast", QUESTION)
    assert p.returncode == 0, p.stderr
    events = embedded((tmp_path / "stop.html").read_text(encoding="utf-8"))["events"]
    held = next(i for i, e in enumerate(events) if e["event"] == "token" and e["held"] == "over")
    browser.open(str(tmp_path / "stop.html"))
    assert text(browser, "probnote").startswith(
        "Sampling was greedy (T = 0): the most likely token is taken. "
        "The probabilities shown are the model’s own distribution"
    )
    while cursor(browser) < held:
        browser.key("ArrowRight")
    assert "top 3 of the model’s softmax at temperature 1 (greedy, T = 0):" in text(browser, "step")
    assert 'held back: "over": it could still be the start of a stop string, so' in text(browser, "step")
    browser.key("s")
    browser.key("ArrowLeft")  # the token that completed the stop string
    step = text(browser, "step")
    assert "stop_sequence fired: a stop string is complete; it is not shown" in step
    assert browser.errors() == []


@pytest.mark.slow
def test_every_kind_of_trace_renders_every_event(browser, tmp_path):
    crash = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call big megabytes=20]",
        "characters]<|assistant|>": "[call crash]",
        "<|assistant|>": "Ok.<|eos|>",
    }
    retries = {"<|user|>" + QUESTION + "<|assistant|>": "[call nope]", "<|assistant|>": "[call echo]"}
    pages = [
        write(library_turn(crash, max_result_chars=2000), tmp_path / "crash.html"),
        write(library_turn(retries, max_retries=3), tmp_path / "retries.html"),
    ]
    for name, args, stdin in [
        ("ngram", ["run", "--json", "--model", "ngram", "--order", "4", QUESTION], None),
        ("chat", ["chat", "--json"], QUESTION + "\n" + QUESTION + "\n"),
    ]:
        trace = tmp_path / f"{name}.jsonl"
        trace.write_text(cli(*args, stdin=stdin).stdout, encoding="utf-8")
        assert cli("view", str(trace), "-o", str(tmp_path / f"{name}.html")).returncode == 0
        pages.append(str(tmp_path / f"{name}.html"))
    for path in pages:
        browser.events.clear()
        browser.open(path)
        if path.endswith("ngram.html"):  # its forward keeps no cache: the step says so
            browser.key("ArrowRight")
            assert "The n-gram has no KV cache" in text(browser, "step")
            assert "served from the cache" not in text(browser, "step")
        n = visit_every_event(browser)
        assert cursor(browser) == n - 1, path
        assert browser.errors() == [], path
    # the chat page: two turns, each with its own prompt and call round
    assert "2 turn(s)" in text(browser, "meta") and "2 call round(s)" in text(browser, "meta")


@pytest.mark.slow
def test_the_attention_of_any_head_at_any_step(browser, tmp_path):
    pytest.importorskip("numpy")
    path = tmp_path / "transformer.html"
    p = cli("run", "--quiet", "--model", "transformer", "--html", str(path), "What's the weather in Burlington, VT?")
    assert p.returncode == 0, p.stderr
    events = embedded(path.read_text(encoding="utf-8"))["events"]
    browser.events.clear()
    browser.open(str(path))
    assert browser.evaluate("document.getElementById('attn-panel').hidden") is True  # the prompt: no step
    browser.key("ArrowRight")
    e = events[cursor(browser)]
    assert e["event"] == "token" and browser.evaluate("document.getElementById('attn-panel').hidden") is False
    options = browser.evaluate("[...document.querySelectorAll('#attn option')].map(o => o.textContent)")
    assert len(options) == 8 and sum("(the copy head)" in o for o in options) == 1
    assert "(the copy head)" in browser.evaluate(
        "document.querySelector('#attn select').selectedOptions[0].textContent"
    )
    assert browser.evaluate("document.querySelectorAll('#attn .attn span').length") == len(e["attention"]["keys"])
    browser.evaluate(
        "(() => { const s = document.querySelector('#attn select'); s.value = '0';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    heaviest = max(
        range(len(e["attention"]["heads"][0]["weights"])), key=e["attention"]["heads"][0]["weights"].__getitem__
    )
    shade = browser.evaluate(f"document.querySelectorAll('#attn .attn span')[{heaviest}].style.background")
    assert shade == "rgb(47, 111, 214)"  # the head's largest weight: the darkest cell, opaque
    browser.key("ArrowRight")  # the reader's head stays chosen from step to step
    assert browser.evaluate("document.querySelector('#attn select').value") == "0"
    assert browser.errors() == []


def test_an_event_kind_the_page_does_not_know_is_shown_whole(browser, tmp_path):
    events = [
        {"event": "prompt", "text": "hi", "tokens": 1, "tools": [], "context": 1, "spans": [[0, 1, "user"]]},
        {"event": "stop", "reason": "tool_call"},
        {"event": "audit", "verdict": "<u>allowed</u>", "rule": 7},
        {"event": "done", "answer": "", "reason": "eos", "tokens": 0, "tool_calls": 0, "error": None},
    ]
    path = tmp_path / "new.html"
    path.write_text(page(events), encoding="utf-8")
    browser.events.clear()
    browser.open(str(path))
    browser.key("ArrowRight")
    browser.key("ArrowRight")
    assert text(browser, "step-title") == "Event: audit"
    assert '"verdict": "<u>allowed</u>"' in text(browser, "step")
    assert 'audit {"verdict":"<u>allowed</u>","rule":7}' in browser.evaluate(
        "document.querySelector('.row.cur').textContent"
    )
    assert "<u>allowed</u>" in text(browser, "round") and browser.evaluate("document.querySelectorAll('u').length") == 0
    assert browser.errors() == []


def test_progress_is_a_line_under_its_call_with_the_servers_text_escaped(browser, tmp_path):
    events = progress_events()
    kinds = [e.kind for e in events]
    browser.events.clear()
    browser.open(write(events, tmp_path / "progress.html"))
    second = [i for i, kind in enumerate(kinds) if kind == "progress"][1]
    browser.evaluate(f"go({second})")
    row = browser.evaluate("document.querySelector('.row.cur').textContent")
    assert row == "    · roots_logging/slow: progress 2/3: half\\x1b[31m way"  # indented under the call
    assert "k-progress" in browser.evaluate("document.querySelector('.row.cur').className")
    step = text(browser, "step")
    assert "the call of slow on roots_logging" in step and "2 of 3" in step and "half\\x1b[31m way" in step
    chain = text(browser, "round")
    assert "progress ← roots_logging/slow" in chain
    for line in ("progress 1/3: starting", "progress 2/3: half\\x1b[31m way", "progress 3/3"):
        assert line in chain
    assert chain.index("progress 1/3") < chain.index("progress 3/3") < chain.index("tool message")
    assert "\x1b" not in browser.evaluate("document.body.textContent")
    n = visit_every_event(browser)
    assert cursor(browser) == n - 1


def test_an_elicitation_is_summarised_and_shown_as_text(browser, tmp_path):
    hostile = "<img src=x onerror=window.__pwned=5>\u202e"
    events = [
        {"event": "prompt", "text": "hi", "tokens": 1, "tools": [], "context": 1, "spans": [[0, 1, "user"]]},
        {
            "event": "elicitation",
            "server": "asking",
            "mode": "form",
            "message": hostile,
            "action": "accept",
            "reason": "the user sent the answers",
            "fields": ["name"],
            "url": None,
            "content": {"name": hostile},
        },
        {
            "event": "elicitation",
            "server": "asking",
            "mode": "url",
            "message": "pay",
            "action": "decline",
            "reason": "nobody to ask: stdin is not a terminal",
            "fields": [],
            "url": "https://pay.example.com/<b>x</b>",
            "content": None,
        },
        {"event": "done", "answer": "", "reason": "eos", "tokens": 0, "tool_calls": 0, "error": None},
    ]
    path = tmp_path / "asked.html"
    path.write_text(page(events), encoding="utf-8")
    browser.events.clear()
    browser.open(str(path))
    browser.key("ArrowRight")
    assert text(browser, "step-title") == "Event: elicitation"
    assert browser.evaluate("document.querySelector('.row.cur').textContent") == (
        "? asking asked for input: accept, the user sent the answers"
    )
    step = text(browser, "step")
    assert "<img src=x onerror=window.__pwned=5>\\u202e" in step and "content sent" in step
    browser.key("ArrowRight")
    assert browser.evaluate("document.querySelector('.row.cur').textContent") == (
        "? asking asked to open https://pay.example.com/<b>x</b>: decline, nobody to ask: stdin is not a terminal"
    )
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('img, b').length") == 0
    assert browser.errors() == []


def test_calls_to_two_servers_in_one_message_are_one_round(browser, tmp_path):
    from conftest import FAULTY, WEATHER, Recorder

    from decodeloop.decode.bundle import ModelBundle
    from decodeloop.formats.calls.json import JsonSyntax
    from decodeloop.formats.lab import CharTokenizer, LabChat
    from decodeloop.harness import Harness
    from decodeloop.lab.table import TableModel
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import ClientOptions, start_stdio_servers
    from decodeloop.trust.policy import Policy

    weather = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}\n</tool_call>'
    words = '<tool_call>\n{"name": "count_words", "arguments": {"text": "a b"}}\n</tool_call>'
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": weather + "\n" + words + "<|eos|>",
        "<|tool|>2 words<|assistant|>": "Both done.<|eos|>",
    }
    tokenizer, syntax, events = CharTokenizer(), JsonSyntax(), Recorder()
    bundle = ModelBundle("table", tokenizer, LabChat(tokenizer, syntax), syntax, model=TableModel(tokenizer, table))
    with start_stdio_servers([WEATHER, FAULTY], events, options=ClientOptions(timeout=20)) as router:
        assert Harness(bundle, Sampler(), router, events, policy=Policy.off()).run(QUESTION).tool_calls == 2
    browser.events.clear()
    browser.open(write(events, tmp_path / "two.html"))
    browser.key("t")
    chain = text(browser, "round")
    assert "round 1 of 1" in chain
    for part in (
        "get_weather",
        "count_words",
        "JSON-RPC request → weather",
        "JSON-RPC request → faulty",
        "JSON-RPC response ← faulty",
        "2 words",
        "tool:weather/get_weather",
        "tool:faulty/count_words",
    ):
        assert part in chain
    browser.key("t")  # the second call of the same round
    assert "count_words" in text(browser, "step") and "round 1 of 1" in text(browser, "round")
    legend = text(browser, "legend")
    assert "tool result of server weather (get_weather)" in legend and "tool result of server faulty" in legend
    assert browser.errors() == []


@pytest.fixture(scope="module")
def tiny_hf_trace(tmp_path_factory):
    return tiny_hf_jsonl(tmp_path_factory)


@pytest.mark.slow
def test_a_hugging_face_models_page(browser, tiny_hf_trace, tmp_path):
    """BPE tokens (byte-level labels, control characters, NUL) from a real transformers model."""
    assert cli("view", str(tiny_hf_trace), "-o", str(tmp_path / "hf.html")).returncode == 0
    browser.events.clear()
    browser.open(str(tmp_path / "hf.html"))
    n = visit_every_event(browser)
    assert cursor(browser) == n - 1 and browser.errors() == []
    done = json.loads(tiny_hf_trace.read_text(encoding="utf-8").splitlines()[-1])
    assert visible(done["answer"]) in text(browser, "step")  # the answer as text, control characters escaped


def test_a_new_conversation_starts_the_context_again(browser, tmp_path):
    q = QUESTION + "\n"
    trace = tmp_path / "chat.jsonl"
    trace.write_text(cli("chat", "--json", stdin=q + q + "/reset\n" + q).stdout, encoding="utf-8")
    assert cli("view", str(trace), "-o", str(tmp_path / "chat.html")).returncode == 0
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    prompts = [i for i, e in enumerate(events) if e["event"] == "prompt"]
    assert len(prompts) == 3
    browser.open(str(tmp_path / "chat.html"))
    seen = []
    for i in prompts:
        while cursor(browser) < i:
            browser.key("ArrowRight")
        note = browser.evaluate("document.querySelector('#context .note').textContent")
        segments = browser.evaluate("document.querySelectorAll('#context .map .seg').length")
        seen.append((note.split(": ", 1)[1].split(" positions")[0], segments))  # ("1,082", 10)
    # turn 2 continues turn 1's context; turn 3 (after /reset) starts from position 0 like turn 1
    assert seen[2] == seen[0] and seen[1][1] > seen[0][1]
    assert browser.errors() == []


@pytest.mark.slow
def test_traces_that_end_badly_render_every_event(browser, tmp_path):
    """A policy denial, the cap inside a call, a server that never started, repeated calls, a 20 MB result
    through JSON Lines, and an empty trace: each page loads and steps through without an error."""
    import shlex
    import sys

    from decodeloop.ui.jsonl import JsonlView

    malicious = shlex.join(
        [sys.executable, "-m", "decodeloop.servers.malicious", "--outbox", str(tmp_path / "outbox.jsonl")]
    )
    runs = {
        "denied": (["--policy", "strict", "--mcp", malicious, "Summarize my latest email."], 0),
        "capped": (["--max-tokens", "20", QUESTION], 4),
        "no-server": (["--mcp", f"{shlex.quote(sys.executable)} -c 'import sys; sys.exit(3)'", QUESTION], 1),
    }
    pages = {}
    for name, (args, status) in runs.items():
        pages[name] = tmp_path / f"{name}.html"
        p = cli("run", "--html", str(pages[name]), *args)
        assert p.returncode == status, (name, p.stderr)
    repeated = {"<|user|>" + QUESTION + "<|assistant|>": "[call echo text=a]", "<|assistant|>": "[call echo text=a]"}
    pages["repeated"] = tmp_path / "repeated.html"
    write(library_turn(repeated, max_repeats=2, on_repeat="stop"), pages["repeated"])  # the strict guard ends it
    crash = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call big megabytes=20]",
        "characters]<|assistant|>": "[call crash]",
        "<|assistant|>": "Ok.<|eos|>",
    }
    with open(tmp_path / "big.jsonl", "w", encoding="utf-8") as f:  # the 20 MB result as --json caps it
        view = JsonlView(f, max_chars=16_000)
        for event in library_turn(crash, max_result_chars=2000):
            view(event)
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    for name in ("big", "empty"):
        pages[name] = tmp_path / f"{name}.html"
        assert cli("view", str(tmp_path / f"{name}.jsonl"), "-o", str(pages[name])).returncode == 0
    ended = {
        "denied": "ended: eos",
        "capped": "ended: max_tokens",
        "repeated": "ended: repeated_call",
        "big": "ended: eos",
    }
    for name, path in pages.items():
        browser.events.clear()
        browser.open(str(path))
        assert ended.get(name, "") in text(browser, "meta"), name
        if name == "empty":
            assert text(browser, "step") == "This trace has no events."
        else:
            n = visit_every_event(browser)
            assert cursor(browser) == n - 1, name
        assert browser.errors() == [], name
    browser.open(str(pages["denied"]))
    for _ in range(2):
        browser.key("t")  # the second call: the one the policy denied
    chain = text(browser, "round")
    assert "policy: deny" in chain and "policy error" in chain and "send_email" in chain
    browser.open(str(pages["big"]))
    browser.key("t")
    for _ in range(20):  # through the round, to the tool message
        if text(browser, "step-title") == "Event: tool_result":
            break
        browser.key("ArrowRight")
    assert "[... result truncated: showing 2,000 of 20,971,520 characters]" in text(browser, "step")
    assert browser.errors() == []


def test_a_sampling_request_and_its_nested_turn(browser, tmp_path):
    from test_server_sampling import Asking, ask

    with Asking("2025-11-25") as run:
        run.sample(ask("<b>bold</b> \u202e reversed"))
    path = write(run.events, tmp_path / "sampling.html")
    browser.events.clear()
    browser.open(path)
    visit_every_event(browser)
    rows = browser.evaluate("[...document.querySelectorAll('.row')].map(r => r.textContent).join('\\n')")
    assert "sampling #1 from asking (call sample): asks the model" in rows
    assert "#1 \u2506 \u2500\u2500 nested turn: prompt" in rows and "#1 \u2506 \u25a0 stop: max_tokens" in rows
    assert "\\u202e" in rows and "\u202e" not in rows  # the server's bidi override, spelled out
    assert browser.evaluate("document.querySelectorAll('b').length") == 0
    assert browser.errors() == []


def test_a_task_s_status_is_a_line_under_its_call_and_a_link_of_its_round(browser, tmp_path):
    from conftest import ROOT

    tasks = [sys.executable, os.path.join(ROOT, "tests", "servers", "tasks.py")]
    table = {"<|user|>" + QUESTION + "<|assistant|>": "[call slow seconds=0.6]", "<|assistant|>": "Done.<|eos|>"}
    events = library_turn(table, servers=(tasks,))
    statuses = [e for e in events if e.kind == "task"]
    assert statuses[0].status == "working" and statuses[-1].status == "completed"
    path = write(events, tmp_path / "task.html")
    browser.open(path)
    rows = browser.evaluate("EV.map((e, i) => summary(i))")  # every row's text (the timeline draws those in view)
    lines = [r for r in rows if r.lstrip().startswith("◷ ")]
    assert (
        len(lines) == len(statuses)
        and lines[-1].strip() == f"◷ tasks/slow: task {statuses[-1].task_id}: completed: done"
    )
    # the status rows are links of the call's round, between the call and its result
    at = next(i for i, e in enumerate(events) if e.kind == "task")
    browser.key("Home")
    for _ in range(at):
        browser.key("ArrowRight")
    assert "run as a task (MCP Tasks)" in text(browser, "step") and "working: still running" in text(browser, "step")
    assert "task \u2190 tasks/slow" in text(browser, "round")
    visit_every_event(browser)
    assert browser.errors() == []


APPS = [sys.executable, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "servers", "apps.py")]


def app_log(b) -> list[str]:
    return b.evaluate("[...document.querySelectorAll('#step ul.app-log li')].map(li => li.textContent)")


def test_a_tool_s_app_is_shown_in_a_sandboxed_frame_and_given_its_call_s_result(browser, tmp_path):
    table = {"<|user|>" + QUESTION + "<|assistant|>": "[call forecast city=Paris]", "<|assistant|>": "Sunny.<|eos|>"}
    events = library_turn(table, servers=(APPS,))
    [app] = [e for e in events if e.kind == "app"]
    assert (app.tool, app.uri, app.arguments) == ("forecast", "ui://apps/forecast", {"city": "Paris"})
    browser.open(write(events, tmp_path / "app.html"))
    at = events.index(app)
    browser.key("Home")
    for _ in range(at):
        browser.key("ArrowRight")
    assert browser.evaluate("document.querySelector('#step iframe.app').getAttribute('sandbox')") == "allow-scripts"
    browser.wait_for("[...document.querySelectorAll('#step ul.app-log li')].length >= 2")
    assert app_log(browser)[:2] == [
        "the app says: initialized: decodeloop viewer",
        "the app says: shown: Forecast for Paris: sunny, 21°C",
    ]
    assert browser.errors() == []


def test_a_public_app_runs_in_its_frame_and_shows_its_call_s_result(browser, basic_app, tmp_path):
    """MCP Apps' own example (its SDK's App class, bundled): the page, run in the sandboxed frame, takes the
    handshake and its call's result through the viewer's bridge and shows the time; its own call is refused."""
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call get-time]",
        "Z<|assistant|>": "That is the server's clock.<|eos|>",
    }
    events = library_turn(table, servers=(basic_app,))
    [app] = [e for e in events if e.kind == "app"]
    time = app.result["structuredContent"]["time"]
    browser.open(write(events, tmp_path / "clock.html"))
    browser.key("Home")
    for _ in range(events.index(app)):
        browser.key("ArrowRight")
    assert browser.evaluate("document.querySelector('#step iframe.app').getAttribute('sandbox')") == "allow-scripts"
    assert browser.frame_wait_for(f"document.getElementById('server-time').textContent === {json.dumps(time)}")
    browser.frame_evaluate("document.getElementById('get-time-btn').click()")
    browser.wait_for(
        "[...document.querySelectorAll('#step ul.app-log li')].some(li => li.textContent.includes('get-time'))"
    )
    assert "asked to call get-time: refused (a replay calls nothing)" in app_log(browser)
    assert browser.errors() == []


def test_a_hostile_app_cannot_leave_its_frame_read_the_page_reach_the_network_or_call_a_tool(browser, tmp_path):
    table = {"<|user|>" + QUESTION + "<|assistant|>": "[call widget]", "<|assistant|>": "Done.<|eos|>"}
    events = library_turn(table, servers=(APPS,))
    at = next(i for i, e in enumerate(events) if e.kind == "app")
    browser.open(write(events, tmp_path / "hostile.html"))
    where = browser.evaluate("location.href")
    browser.key("Home")
    for _ in range(at):
        browser.key("ArrowRight")
    browser.wait_for(
        "[...document.querySelectorAll('#step ul.app-log li')].some(li => li.textContent.includes('ui/message'))"
    )
    browser.wait_for(
        "[...document.querySelectorAll('#step ul.app-log li')].some(li => li.textContent.includes('probe fetch'))"
    )
    browser.wait_for(
        "[...document.querySelectorAll('#step ul.app-log li')].some(li => li.textContent.includes('probe host api'))"
    )
    said = app_log(browser)
    app_probes_blocked(said)
    assert "asked to call send_money: refused (a replay calls nothing)" in said
    assert "asked for ui/message: refused (not granted to apps here)" in said
    assert browser.evaluate("location.href") == where and browser.evaluate("document.title").startswith("decodeloop")
    # the policy's refusal of the fetch is the only thing Chromium reports
    assert [e for e in browser.errors() if "Content Security Policy" not in e and "127.0.0.1:9" not in e] == []
