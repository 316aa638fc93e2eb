"""The remote engine (models/openai/engine.py) against a scripted OpenAI-compatible server process.

The server (tests/servers/openai_scripted.py) streams a script over the lab's
character tokenizer, in the shapes real servers use (vLLM's token ids and
cached_tokens, llama.cpp's logprobs with ids and timings, text only), and
misbehaves on demand. The MCP round trip goes to the real weather server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest
from conftest import ROOT, WEATHER

from decodeloop.decode.bundle import ModelBundle
from decodeloop.errors import RemoteError
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.lab import CharTokenizer, LabChat
from decodeloop.harness import Harness
from decodeloop.models.openai.engine import OpenAIEngine
from decodeloop.models.openai.wire import Endpoint
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers

SERVER = [sys.executable, os.path.join(ROOT, "tests", "servers", "openai_scripted.py")]
QUESTION = "What's the weather in Polson, MT?"
RESULT = "Polson, MT: 33°F, overcast, humidity 53%, wind 21 mph SE"


class Scripted:
    def __init__(self, mode: str) -> None:
        self.proc = subprocess.Popen([*SERVER, "--mode", mode], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.strip().isdigit(), line
        self.url = f"http://127.0.0.1:{int(line)}/v1"

    def seen(self) -> list[dict]:
        with urllib.request.urlopen(self.url.removesuffix("/v1") + "/seen", timeout=30) as response:
            return json.load(response)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def server(request):
    s = Scripted(request.param)
    yield s
    s.stop()


def bundle_for(url: str, timeout: float = 30.0, **options) -> ModelBundle:
    tokenizer, syntax = CharTokenizer(), CompactSyntax()
    chat = LabChat(tokenizer, syntax)
    endpoint = Endpoint(url, timeout=timeout)
    return ModelBundle(
        "openai:scripted",
        tokenizer,
        chat,
        syntax,
        make_engine=lambda sampler, processors: OpenAIEngine(
            endpoint, "scripted", tokenizer, sampler=sampler, stop_ids=chat.stop_ids, **options
        ),
    )


def weather_turn(url: str, events, **options):
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=30)) as router:
        harness = Harness(bundle_for(url, **options), Sampler(), router, events)
        return harness, harness.run(QUESTION)


@pytest.mark.parametrize("server", ["vllm", "batched", "llamacpp", "text"], indirect=True)
def test_a_turn_with_a_tool_call_through_a_streaming_server(server, events):
    harness, result = weather_turn(server.url, events)
    mode = server.proc.args[-1]
    notes = [n.message for n in events.of("notice") if n.source == "openai"]
    if mode == "text":
        assert not any("other tokens" in n or "could not be checked" in n for n in notes)  # checked, equal
        # one token per chunk, decoded alone: the two byte tokens of "°" come with no text, and are lost
        assert result.answer == "It is 33F in Polson." and result.reason == "eos", result
        assert any("no text of their own" in n for n in notes)
    else:
        assert result.answer == "It is 33°F in Polson." and result.reason == "eos", result
        assert notes == []
        # the answer in the context is what the second stream sent, and nothing the first sent past its "]"
        [inject] = events.of("inject")
        assert harness.tokenizer.decode(result.context[inject.context :]) == "It is 33°F in Polson.<|eos|>"
    [call] = events.of("tool_call")
    assert call.arguments == {"city": "Polson", "state": "MT"}
    assert [r.text for r in events.of("tool_result")] == [RESULT]
    seen = server.seen()
    posts = [r for r in seen if r["body"].get("prompt") is not None]
    # text mode: the token-id prompt was refused once, then text
    sent = [r["body"]["prompt"] for r in posts if not (mode == "text" and isinstance(r["body"]["prompt"], list))]
    assert len(sent) == 2
    tokenizer = harness.tokenizer
    if mode == "text":
        assert all(isinstance(p, str) for p in sent)
    else:
        assert all(isinstance(p, list) for p in sent)
    # the first stream was hung up at the call's "]": the filler after it was never all sent
    streams = [r for r in posts if r["sent"]]
    assert streams[0]["hung_up"] or streams[0]["sent"] < len(
        "[call get_weather city=Polson state=MT]" + " and more text" * 40
    )
    assert "and more" not in tokenizer.decode(result.context)
    # the second request is the first's context, the call as streamed, and the inserted tool message
    [inject] = events.of("inject")
    second = sent[1] if mode != "text" else tokenizer.encode_markup(sent[1])
    assert second == result.context[: inject.context]
    requests = events.of("request")
    assert [r.finish for r in requests] == ["closed", "closed"] or mode != "vllm"
    assert [r.sent for r in requests] == (["text", "text"] if mode == "text" else ["ids", "ids"])
    if mode == "text":
        assert [r.cached for r in requests] == [None, None]  # the server reports no cache
    else:
        # the server's prefix cache served everything before the inserted span, and says so
        call_end = inject.context - inject.tokens
        assert requests[0].cached == 0
        assert requests[1].cached == call_end
        first_after = [t for t in events.of("token") if t.context == inject.context + 1]
        assert [(t.cached, t.computed) for t in first_after] == [(call_end, inject.tokens)]
    assert all(t.prob == pytest.approx(0.9048, abs=1e-3) for t in events.of("token") if t.prob is not None)


@pytest.mark.parametrize("server", ["textonly"], indirect=True)
def test_a_server_without_logprobs_or_counts_gets_a_visible_warning(server, events):
    _, result = weather_turn(server.url, events)
    assert result.answer == "It is 33°F in Polson."
    notes = [n.message for n in events.of("notice") if n.source == "openai"]
    assert any("refused a token-id prompt" in n for n in notes)
    assert any("refused logprobs" in n for n in notes)
    assert any("could not be checked" in n for n in notes)
    assert any("no tokenize endpoint" in n for n in notes)


@pytest.mark.parametrize("server", ["textplain"], indirect=True)
def test_a_server_that_reads_the_text_prompt_as_other_tokens_is_named(server, events):
    # this server reads "<|user|>" as eight characters: its tokenize endpoint shows it, and the trace says so
    _, _result = weather_turn(server.url, events)
    notes = [n.message for n in events.of("notice") if n.source == "openai"]
    assert any("other tokens than the context's from position 0" in n for n in notes), notes
    requests = events.of("request")
    assert requests and all(r.server_prompt > r.prompt for r in requests)


@pytest.mark.parametrize("server", ["vllm"], indirect=True)
def test_extra_fields_reach_every_request(server, events):
    weather_turn(server.url, events, extra={"grammar": "root ::= [a-z]+", "repetition_penalty": 1.1})
    bodies = [r["body"] for r in server.seen()]
    assert len(bodies) == 2
    assert all(b["grammar"] == "root ::= [a-z]+" and b["repetition_penalty"] == 1.1 for b in bodies)
    assert all(b["stream"] is True and b["return_token_ids"] and b["cache_prompt"] for b in bodies)


@pytest.mark.parametrize(
    "server, message",
    [
        ("garbage", "not JSON"),
        ("cut", r"closed the stream before \[DONE\]"),
        ("error500", "answered 500"),
        ("badid", "outside the vocabulary"),
        ("html", "text/html, not an event stream"),
        ("full", "stopped at its length limit before any token"),
    ],
    indirect=["server"],
)
def test_a_misbehaving_server_is_a_clear_error(server, message, events):
    with pytest.raises(RemoteError, match=message) as info:
        weather_turn(server.url, events)
    assert "\x1b" not in str(info.value)


@pytest.mark.parametrize("server", ["hang"], indirect=True)
def test_a_silent_server_times_out(server, events):
    with pytest.raises(RemoteError, match="sent nothing for 0.5s"):
        with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=30)) as router:
            Harness(bundle_for(server.url, timeout=0.5), Sampler(), router, events).run(QUESTION)


def test_a_server_that_is_down_is_a_clear_error(events):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RemoteError, match="cannot reach"):
        weather_turn(f"http://127.0.0.1:{port}/v1", events)


@pytest.mark.parametrize("server", ["error500"], indirect=True)
def test_the_command_line_reports_a_failing_server_in_one_line(server, tmp_path):
    from tiny_hf import build_tokenizer

    build_tokenizer(str(tmp_path))  # the tokenizer and chat template; a config without weights
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 1024}))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "decodeloop",
            "run",
            "--model",
            "openai:" + server.url,
            "--engine-model",
            "m",
            "--tokenizer",
            str(tmp_path),
            "--mcp",
            " ".join(WEATHER),
            QUESTION,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert "the engine's server failed" in p.stderr and "answered 500" in p.stderr
    assert "\x1b" not in p.stderr and "\\x1b[31mcrashed" in p.stderr


@pytest.mark.parametrize("server", ["vllm"], indirect=True)
def test_the_engine_from_a_config_file_with_extra_fields(server, tmp_path):
    from tiny_hf import build_tokenizer

    model = tmp_path / "model"
    build_tokenizer(str(model))
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 1024}))
    config = tmp_path / "servers.json"
    config.write_text(
        json.dumps(
            {
                "engine": {"url": server.url, "model": "served-name", "tokenizer": "model"},  # relative to the file
                "mcpServers": {"weather": {"command": WEATHER[0], "args": WEATHER[1:]}},
            }
        )
    )
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "decodeloop",
            "run",
            "--json",
            "--max-tokens",
            "5",
            "--mcp-config",
            str(config),
            "--engine-extra",
            '{"min_tokens": 2}',
            "Hi",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert "Traceback" not in p.stderr, p.stderr
    [body] = [r["body"] for r in server.seen()]
    assert body["model"] == "served-name" and body["min_tokens"] == 2 and isinstance(body["prompt"], list)
    events = [json.loads(line) for line in p.stdout.splitlines()]
    [request] = [e for e in events if e["event"] == "request"]
    assert request["sent"] == "ids" and request["cached"] == 0 and request["prompt"] == len(body["prompt"])


@pytest.mark.parametrize("server", ["vllm"], indirect=True)
def test_the_trace_shows_each_request_and_what_the_server_cached(server):
    import io

    from decodeloop.ui.trace import TraceView

    out = io.StringIO()
    view = TraceView(out, color=False)
    _, _result = weather_turn(server.url, view)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("· request:")]
    assert len(lines) == 2
    assert "prompt tokens as ids (0 cached)" in lines[0] and ", closed, " in lines[0]
    cached = int(lines[1].split("(")[1].split(" cached")[0].replace(",", ""))
    assert cached > 0 and "as ids" in lines[1]


def test_a_config_file_s_engine_is_checked(tmp_path):
    from decodeloop.errors import ConfigError
    from decodeloop.tools.config import load_config, load_engine

    path = tmp_path / "c.json"
    servers = {"mcpServers": {"weather": {"command": "python3"}}}
    path.write_text(json.dumps({**servers, "engine": {"url": "http://h:1/v1", "tokenizer": "m/x.gguf"}}))
    assert load_engine(str(path)) == {"url": "http://h:1/v1", "tokenizer": str(tmp_path / "m" / "x.gguf")}
    assert [s.name for s in load_config(str(path))] == ["weather"]  # the servers read as before
    path.write_text(json.dumps(servers))
    assert load_engine(str(path)) is None
    for engine in ({"url": 3}, {"url": "ftp://h/"}, {"url": "http://h/", "port": "1"}, "http://h/"):
        path.write_text(json.dumps({**servers, "engine": engine}))
        with pytest.raises(ConfigError, match="engine"):
            load_engine(str(path))
