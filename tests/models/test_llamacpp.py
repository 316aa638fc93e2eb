"""A real llama.cpp server (llama-cpp-python's) behind --model openai:URL: the llama.cpp tier.

Runs only when DECODELOOP_LLAMACPP_PYTHON names a Python with llama-cpp-python[server] installed and
DECODELOOP_SMOLLM2 the SmolLM2-135M-Instruct .gguf (`.ci/llamacpp` sets both). The test starts the
server on the .gguf, renders prompts with the same file's chat template and tokenizer, and reads the
server's own log of what its KV cache served for each request ("N prefix-match hit, remaining M
prompt tokens to eval"): the server streams text and reports no cache counts on the wire.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.request

import pytest
from conftest import WEATHER

from decodeloop.tools.startup import ClientOptions

PYTHON = os.environ.get("DECODELOOP_LLAMACPP_PYTHON")
SMOLLM2 = os.environ.get("DECODELOOP_SMOLLM2")
pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.skipif(
        not (PYTHON and SMOLLM2),
        reason="set DECODELOOP_LLAMACPP_PYTHON (a Python with llama-cpp-python[server]) "
        "and DECODELOOP_SMOLLM2 (SmolLM2-135M-Instruct's .gguf); .ci/llamacpp does",
    ),
]
QUESTION = "What's the weather in Polson, MT?"
CALL = '<tool_call>\n{"name": "get_weather", "arguments": { "city": "Polson", "state": "MT" }}\n</tool_call>'
CALL_SPLIT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}\n</tool_call>'
HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")


def gbnf(text: str) -> str:
    """A llama.cpp grammar whose only sentence is `text`."""
    return "root ::= " + json.dumps(text)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("llamacpp") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "llama_cpp.server",
                "--model",
                SMOLLM2,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "4096",
                "--verbose",
                "true",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(600):  # loading the model: up to a minute on a busy machine
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=5):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(f"llama_cpp.server did not answer: {log.read_text()[-2000:]}")
        yield url, log
    finally:
        proc.terminate()
        proc.wait(30)


def hits(log) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in HIT.findall(log.read_text(errors="replace"))]


@pytest.fixture(scope="module")
def smol_bundle(server):
    from decodeloop.registry import load_model

    url, _ = server
    return load_model("openai:" + url, model="smollm2", tokenizer_path=SMOLLM2, max_tokens=64, timeout=120)


def call_turn(bundle, log, call: str, events):
    """One turn whose call `call` is written under a llama.cpp grammar; the answer is the model's own.
    Returns the turn's result and the server's log lines of what its cache served, per request."""
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import ClientOptions, start_stdio_servers
    from decodeloop.trust.policy import Policy

    before = len(hits(log))
    harness = None

    def emit(event) -> None:
        events(event)
        if event.kind == "tool_result":  # the grammar wrote the call; the model writes the answer itself
            harness.engine.extra.pop("grammar", None)

    with start_stdio_servers([WEATHER], emit, options=ClientOptions(timeout=30)) as router:
        harness = Harness(bundle, Sampler(), router, emit, config=TurnConfig(max_tokens=64), policy=Policy.off())
        harness.engine.extra["grammar"] = gbnf(call)
        result = harness.run(QUESTION)
    [tool_call] = events.of("tool_call")
    assert tool_call.arguments == {"city": "Polson", "state": "MT"}
    assert events.of("tool_result")[0].text.startswith("Polson, MT:")
    requests = events.of("request")
    assert len(requests) == 2 and [r.sent for r in requests] == ["text", "text"]  # it refuses token ids
    served = hits(log)[before:]
    print(
        "\nrequests (prompt, streamed, finish, server read as):",
        [(r.prompt, r.generated, r.finish, r.server_prompt) for r in requests],
        "server cache (hit, computed):",
        served[-2:],
    )
    return result, requests, served


def test_after_a_tool_call_the_server_prefills_only_the_inserted_span(server, smol_bundle, events):
    # greedy SmolLM2 under this grammar writes the call in the tokens its tokenizer gives the call's text
    _, log = server
    _result, requests, served = call_turn(smol_bundle, log, CALL, events)
    notes = [n.message for n in events.of("notice") if n.source == "openai"]
    # the server read each text prompt as exactly the context's ids (its /extras/tokenize)
    assert not any("other tokens" in n or "could not be checked" in n or "no text" in n for n in notes), notes
    assert [r.server_prompt for r in requests] == [r.prompt for r in requests]
    [inject] = events.of("inject")
    start = inject.context - inject.tokens  # where the tool message begins
    # the second request: the server's cache served the whole first request and every token it generated,
    # all but the end-of-turn token it sampled last (sampled, never fed back); it computed only the rest
    assert served[-1] == (start - 1, requests[1].prompt - (start - 1)), (served, start, requests)


def test_where_the_server_reads_the_text_as_other_tokens_the_trace_names_it(server, smol_bundle, events):
    # under this grammar the model writes ' {' '"' where the tokenizer reads ' {"': the text prompt of the
    # next request is other tokens from there on, and the server's cache serves exactly up to that point
    _, log = server
    _result, requests, served = call_turn(smol_bundle, log, CALL_SPLIT, events)
    [note] = [n.message for n in events.of("notice") if n.source == "openai" and "other tokens" in n.message]
    at = int(re.search(r"from position (\d+)", note).group(1))
    [inject] = events.of("inject")
    assert at < inject.context - inject.tokens
    assert served[-1][0] == at
    assert requests[1].server_prompt != requests[1].prompt


def test_a_conversation_turn_reuses_the_server_cache(server, smol_bundle, events):
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import start_stdio_servers
    from decodeloop.trust.policy import Policy

    _url, log = server
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=30)) as router:
        harness = Harness(smol_bundle, Sampler(), router, events, config=TurnConfig(max_tokens=24), policy=Policy.off())
        first = harness.run("Say hello.")
        before = len(hits(log))
        events.clear()
        harness.run("And goodbye?")
    [prompt] = events.of("prompt")
    start = prompt.context - prompt.tokens
    served = hits(log)[before:]
    # everything before the new user message, but for the last token the server sampled (never fed back
    # when it ended the turn; fed back when it went on past the harness's cap before it saw the hang-up)
    assert start - 1 <= served[0][0] <= start, (served, start, first.reason)
    assert served[0][0] + served[0][1] == prompt.context
