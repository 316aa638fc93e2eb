"""The viewer page (ui/html.py) from real runs: the CLI's --html and view, every lab model, faults, hostile text.

What the page does in a browser is tested in tests/ui/test_viewer_browser.py; here, what the page is: one
self-contained file, the events inside it exactly as the run emitted them (long strings cut), and no
server-controlled text that could leave its JSON.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import FAULTY, ROOT, Recorder

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy
from decodeloop.ui.html import JS, MAX_STRING, HtmlView, embed, page, read_jsonl

QUESTION = "What's the weather in Polson, MT?"
HOSTILE = '</script><img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
HOSTILE_QUESTION = "<b>Echo</b> </script><script>window.__pwned=3</script>"
DATA = re.compile(r'<script type="application/json" id="data">(.*?)</script>', re.S)


def cli(*args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "decodeloop", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


def embedded(html: str) -> dict:
    """The data the page renders: the JSON of its one data element."""
    [data] = DATA.findall(html)
    return json.loads(data)


def library_turn(table: dict, servers=(FAULTY,), question: str = QUESTION, **config) -> Recorder:
    events = Recorder()
    tokenizer = CharTokenizer()
    with start_stdio_servers(
        [list(s) for s in servers], events, options=ClientOptions(timeout=config.pop("timeout", 20))
    ) as router:
        Harness(
            lab_bundle(TableModel(tokenizer, table), tokenizer),
            Sampler(),
            router,
            events,
            config=TurnConfig(**config),
            policy=Policy.off(),
        ).run(question)
    return events


def hostile_events() -> Recorder:
    """A turn whose question, call, tool result and answer all carry markup and script."""
    call = '[call echo text="' + HOSTILE.replace('"', '\\"') + '"]'
    table = {"<|user|>" + HOSTILE_QUESTION + "<|assistant|>": call, "<|assistant|>": HOSTILE + "<|eos|>"}
    return library_turn(table, question=HOSTILE_QUESTION)


def assert_self_contained(html: str) -> None:
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(link|iframe|object|embed|img)\b", html, re.I)
    assert not re.search(r"<script[^>]*\bsrc=", html, re.I)
    assert "http://" not in html.split('id="data">')[0] and "https://" not in html.split('id="data">')[0]
    assert "default-src 'none'" in html  # the page may load nothing, even by mistake
    assert html.count("<script") == 2 and html.count("</script>") == 2  # data, code: nothing else


def test_run_html_writes_the_turn_as_the_json_lines_show_it(tmp_path):
    out = tmp_path / "turn.html"
    p = cli("run", "--html", str(out), "--temperature", "0.7", "--seed", "3", QUESTION)
    assert p.returncode == 0, p.stderr
    assert "answer:" in p.stdout  # the trace is still printed
    html = out.read_text(encoding="utf-8")
    assert_self_contained(html)
    data = embedded(html)
    assert data["meta"]["model"] == "table" and data["meta"]["temperature"] == 0.7
    assert data["meta"]["title"] == QUESTION
    jsonl = cli("run", "--json", "--temperature", "0.7", "--seed", "3", QUESTION).stdout
    expected = [json.loads(line) for line in jsonl.splitlines()]
    for e in [*expected, *data["events"]]:
        e.pop("seconds", None)
    assert data["events"] == expected
    kinds = [e["event"] for e in data["events"]]
    assert kinds.count("token") == data["events"][-1]["tokens"] and "inject" in kinds


def test_view_reads_json_lines_from_a_file_and_from_stdin(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(cli("run", "--json", QUESTION).stdout, encoding="utf-8")
    p = cli("view", str(trace), "-o", str(tmp_path / "a.html"), "--temperature", "0")
    assert p.returncode == 0 and p.stdout == ""
    assert p.stderr.startswith(f"decodeloop: wrote the viewer page {tmp_path / 'a.html'} (")
    assert p.stderr.endswith(" MB); open it in a browser\n")
    a = embedded((tmp_path / "a.html").read_text(encoding="utf-8"))
    assert a["meta"] == {"title": "t.jsonl", "source": "t.jsonl", "temperature": 0.0}
    assert a["events"] == [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    p = cli(
        "view", "-", "-o", str(tmp_path / "b.html"), "--title", "from a pipe", stdin=trace.read_text(encoding="utf-8")
    )
    b = embedded((tmp_path / "b.html").read_text(encoding="utf-8"))
    assert p.returncode == 0 and b["events"] == a["events"] and b["meta"]["title"] == "from a pipe"


def test_view_refuses_what_is_not_an_event_stream(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"event": "prompt", "text": "x", "tokens": 1, "tools": []}\n\nnot json\n', encoding="utf-8")
    p = cli("view", str(bad), "-o", str(tmp_path / "x.html"))
    assert p.returncode == 2 and "line 3: not JSON" in p.stderr and not (tmp_path / "x.html").exists()
    bad.write_text("[1, 2]\n", encoding="utf-8")
    p = cli("view", str(bad), "-o", str(tmp_path / "x.html"))
    assert p.returncode == 2 and "line 1: not an event" in p.stderr
    p = cli("view", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "x.html"))
    assert p.returncode == 2 and "missing.jsonl" in p.stderr
    p = cli("run", "--html", str(tmp_path / "no" / "such" / "dir.html"), QUESTION)
    assert p.returncode == 2 and "--html: no such directory" in p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("model", [["--model", "ngram", "--order", "4"], ["--model", "transformer"]])
def test_every_lab_model_makes_a_page(tmp_path, model):
    pytest.importorskip("numpy") if "transformer" in model else None
    trace = tmp_path / "t.jsonl"
    p = cli("run", "--json", *model, "--max-tokens", "300", QUESTION)
    assert p.returncode in (0, 3, 4), p.stderr
    trace.write_text(p.stdout, encoding="utf-8")
    p = cli("view", str(trace), "-o", str(tmp_path / "t.html"))
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "t.html").read_text(encoding="utf-8")
    assert_self_contained(html)
    events = embedded(html)["events"]
    assert events == read_jsonl(trace.read_text(encoding="utf-8").splitlines())
    assert {"prompt", "token", "done"} <= {e["event"] for e in events}


def test_hostile_text_stays_data(tmp_path):
    events = hostile_events()
    view = HtmlView(str(tmp_path / "h.html"), {"title": HOSTILE_QUESTION})
    for event in events:
        view(event)
    view.write()
    html = (tmp_path / "h.html").read_text(encoding="utf-8")
    assert_self_contained(html)  # no script element, image or closing tag got through
    outside = DATA.sub("", re.sub(r"<title>.*?</title>", "", html))
    assert "onerror" not in outside and "__pwned" not in outside  # only inside the JSON, as string data
    assert "<title>&lt;b&gt;Echo&lt;/b&gt; &lt;/script&gt;" in html
    data = embedded(html)
    [result] = [e for e in data["events"] if e["event"] == "tool_result"]
    assert result["text"] == HOSTILE  # the text survives exactly, as data
    assert data["events"][-1]["answer"] == HOSTILE
    assert next(e for e in data["events"] if e["event"] == "prompt")["text"].count(HOSTILE_QUESTION) == 1


def test_the_page_script_never_parses_data_as_markup():
    from decodeloop.ui.html import APP_JS

    page = JS.replace(APP_JS, "")
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "setAttribute('on",
        "srcdoc",
    ):
        assert sink not in page
    assert "textContent" in page
    # the one place markup is parsed: an app's own page (MCP Apps), in a frame that is sandboxed without
    # allow-same-origin (an origin of its own, none of this page's), under a policy that fetches nothing
    parsed = [line.strip() for line in APP_JS.splitlines() if "srcdoc" in line and not line.strip().startswith("//")]
    assert parsed == [
        """else frame.srcdoc = '<meta http-equiv="Content-Security-Policy" content="' + APP_CSP + '">' + e.html;"""
    ]
    assert "frame.setAttribute('sandbox', 'allow-scripts');" in APP_JS and "allow-same-origin'" not in APP_JS
    assert "APP_CSP = \"default-src 'none';" in APP_JS
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in APP_JS


def test_embedding_cannot_close_the_script_element():
    for text in ("</script>", "</SCRIPT >", "<!--", "<script>", "a & b", "\u2028\u2029", "]]>"):
        out = embed({"t": text})
        assert "<" not in out and ">" not in out and "&" not in out
        assert json.loads(out) == {"t": text}


def test_a_crashed_server_and_a_capped_20_megabyte_result(tmp_path):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call big megabytes=20]",
        "characters]<|assistant|>": "[call crash]",
        "<|assistant|>": "Ok.<|eos|>",
    }
    events = library_turn(table, max_result_chars=2000, max_tokens=100)
    [error] = events.of("tool_error")
    assert "exited with code 3" in error.message
    view = HtmlView(str(tmp_path / "f.html"))
    for event in events:
        view(event)
    view.write()
    size = os.path.getsize(tmp_path / "f.html")
    assert size < 1_000_000  # the 20 MB response is cut in the page
    data = embedded((tmp_path / "f.html").read_text(encoding="utf-8"))
    [response] = [
        e
        for e in data["events"]
        if e["event"] == "rpc"
        and e["direction"] == "recv"
        and "result" in e["message"]
        and "content" in e["message"]["result"]
    ]
    text = response["message"]["result"]["content"][0]["text"]
    assert text.startswith("y" * 1000) and len(text) < MAX_STRING + 200 and "characters" in text[-80:]
    [result] = [e for e in data["events"] if e["event"] == "tool_result"]
    assert "result truncated: showing 2,000 of 20,971,520 characters" in result["text"]
    assert [e["stage"] for e in data["events"] if e["event"] == "tool_error"] == ["call"]
    assert data["events"][-1]["answer"] == "Ok."


def test_an_app_s_page_is_kept_whole_where_a_result_as_long_is_cut(tmp_path):
    from decodeloop.events import AppView, ToolReturned

    # a single-file app with its framework bundled in: far past the page's cap on a string, under the app cap
    html = "<!DOCTYPE html><script>" + "let x = '<&>';\n" * 20_000 + "</script>"
    assert MAX_STRING < len(html) < 400_000
    view = HtmlView(str(tmp_path / "app.html"))
    view(ToolReturned(name="forecast", content=[{"type": "text", "text": html}], is_error=False, text="shown"))
    view(
        AppView(
            server="apps",
            tool="forecast",
            uri="ui://apps/forecast",
            html=html,
            definition={"name": "forecast"},
            arguments={"city": "Paris"},
            result={"content": [{"type": "text", "text": html}], "isError": False},
        )
    )
    view.write()
    result, app = embedded((tmp_path / "app.html").read_text(encoding="utf-8"))["events"]
    assert app["html"] == html  # the program whole
    assert len(result["content"][0]["text"]) < MAX_STRING + 200  # the same text as a result: cut
    assert len(app["result"]["content"][0]["text"]) < MAX_STRING + 200  # and in the app event's other fields


ROOTS_LOGGING = [sys.executable, os.path.join(ROOT, "tests", "servers", "roots_logging.py")]


def progress_events() -> Recorder:
    """A turn whose call reports progress three times (tests/servers/roots_logging.py's `slow`), the second
    message holding an escape character."""
    table = {"<|user|>" + QUESTION + "<|assistant|>": "[call slow]", "<|assistant|>": "Done.<|eos|>"}
    return library_turn(table, servers=(ROOTS_LOGGING,))


def test_progress_events_are_on_the_page_under_their_call_as_the_run_emitted_them(tmp_path):
    events = progress_events()
    view = HtmlView(str(tmp_path / "p.html"))
    for event in events:
        view(event)
    view.write()
    html = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert_self_contained(html)
    assert "\x1b" not in html  # the server's escape character is in the JSON only as \u001b
    kept = embedded(html)["events"]
    kinds = [e["event"] for e in kept]
    call, result = kinds.index("tool_call"), kinds.index("tool_result")
    progress = [e for e in kept if e["event"] == "progress"]
    assert [kept.index(e) for e in progress] == [i for i in range(call, result) if kinds[i] == "progress"]
    assert [(e["server"], e["tool"], e["progress"], e["total"], e["message"]) for e in progress] == [
        ("roots_logging", "slow", 1, 3, "starting"),
        ("roots_logging", "slow", 2, 3, "half\x1b[31m way"),
        ("roots_logging", "slow", 3, 3, None),
    ]
    # the page renders them: in the timeline, the step panel and the call's round (tests/ui/test_viewer_browser.py
    # shows what a browser makes of them), with text only
    for where in ("case 'progress': return", "case 'progress':\n      kv(g, 'call'", "case 'progress': kind ="):
        assert where in JS
    assert "function progressText(e)" in JS


def test_non_finite_numbers_and_an_empty_stream():
    html = page([{"event": "token", "prob": float("nan"), "top": [["a", float("inf")]]}])
    assert embedded(html)["events"] == [{"event": "token", "prob": None, "top": [["a", None]]}]
    assert embedded(page([]))["events"] == []


def test_quiet_html_keeps_the_probabilities(tmp_path):
    p = cli("run", "--quiet", "--html", str(tmp_path / "q.html"), QUESTION)
    assert p.returncode == 0 and p.stdout.startswith("It's 33°F")
    tokens = [e for e in embedded((tmp_path / "q.html").read_text(encoding="utf-8"))["events"] if e["event"] == "token"]
    assert tokens and all(e["prob"] is not None and len(e["top"]) == 3 for e in tokens)


@pytest.mark.slow
def test_the_transformer_page_carries_every_heads_attention(tmp_path):
    pytest.importorskip("numpy")
    p = cli(
        "run",
        "--quiet",
        "--model",
        "transformer",
        "--html",
        str(tmp_path / "t.html"),
        "What's the weather in Burlington, VT?",
    )
    assert p.returncode == 0, p.stderr
    events = embedded((tmp_path / "t.html").read_text(encoding="utf-8"))["events"]
    tokens = [e for e in events if e["event"] == "token"]
    assert tokens and all("attention" in e for e in tokens)
    copy_heads = set()
    for e in tokens:
        a = e["attention"]
        assert len(a["heads"]) == 4 * 2  # layers x heads of the shipped weights
        assert a["start"] + len(a["keys"]) == e["context"] - 1  # keys up to the position that chose it
        before = events[events.index(e) - 1]
        if before["event"] == "token":  # the position that chose it holds the last token
            assert a["keys"][-1] == before["text"]
        for head in a["heads"]:
            assert len(head["weights"]) == len(a["keys"]) and abs(sum(head["weights"]) - 1) < 0.01
        copy_heads |= {(h["layer"], h["head"]) for h in a["heads"] if h.get("copy")}
    assert len(copy_heads) == 1
    # the copy head, at the token that starts the temperature in the answer, looks at that digit in the result
    [inject] = [e for e in events if e["event"] == "inject"]
    [(start, end)] = [(s[0], s[1]) for s in inject["spans"] if s[2].startswith("tool:")]
    digit = next(e for e in tokens if e["context"] > inject["context"] and e["text"].isdigit())
    head = next(h for h in digit["attention"]["heads"] if h.get("copy"))
    keys, weights, first = digit["attention"]["keys"], head["weights"], digit["attention"]["start"]
    peak = max(range(len(weights)), key=weights.__getitem__) + first
    assert start <= peak < end and keys[peak - first] == digit["text"]


def tiny_hf_jsonl(tmp_path_factory):
    """JSON Lines of a turn of a real transformers model (random weights, a trained byte-level BPE)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import tiny_hf

    folder = tmp_path_factory.mktemp("tiny_hf")
    tiny_hf.build_model(str(folder / "model"))
    p = cli(
        "run",
        "--json",
        "--model",
        f"hf:{folder / 'model'}",
        "--temperature",
        "1",
        "--seed",
        "0",
        "--max-tokens",
        "40",
        QUESTION,
        timeout=300,
    )
    assert p.returncode in (0, 3, 4), p.stderr
    (folder / "t.jsonl").write_text(p.stdout, encoding="utf-8")
    return folder / "t.jsonl"


@pytest.fixture(scope="module")
def tiny_hf_trace(tmp_path_factory):
    return tiny_hf_jsonl(tmp_path_factory)


@pytest.mark.slow
def test_a_hugging_face_model_makes_a_page(tiny_hf_trace, tmp_path):
    p = cli("view", str(tiny_hf_trace), "-o", str(tmp_path / "hf.html"))
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "hf.html").read_text(encoding="utf-8")
    assert_self_contained(html)
    events = embedded(html)["events"]
    assert events == read_jsonl(tiny_hf_trace.read_text(encoding="utf-8").splitlines())
    tokens = [e for e in events if e["event"] == "token"]
    assert len(tokens) == 40 and all(len(e["top"]) == 3 for e in tokens)
    assert any(e["event"] == "notice" and e["source"].startswith("hf") for e in events)  # the loaded model


def test_a_trace_cut_in_its_last_line_is_shown_with_a_notice(tmp_path):
    whole = cli("run", "--json", QUESTION).stdout
    trace = tmp_path / "cut.jsonl"
    trace.write_text(whole[: len(whole) - 40], encoding="utf-8")  # the run killed, or `head -c`
    p = cli("view", str(trace), "-o", str(tmp_path / "cut.html"))
    assert p.returncode == 0, p.stderr
    events = embedded((tmp_path / "cut.html").read_text(encoding="utf-8"))["events"]
    lines = whole.splitlines()
    assert events[:-1] == read_jsonl(lines[:-1])
    assert events[-1] == {
        "event": "notice",
        "source": "viewer",
        "message": f"the trace's last line (line {len(lines)}, {len(lines[-1]) - 40 + 1:,} characters) is "
        "cut short; it is left out",
    }
    middle = tmp_path / "middle.jsonl"  # anywhere else it is refused
    middle.write_text("\n".join(lines[:3] + [lines[3][:20]] + lines[4:]) + "\n", encoding="utf-8")
    p = cli("view", str(middle), "-o", str(tmp_path / "m.html"))
    assert p.returncode == 2 and "line 4: not JSON" in p.stderr
