"""The turn end to end through the library: a real table model, real MCP server processes."""

from __future__ import annotations

import pytest
from conftest import FAULTY, WEATHER

from decodeloop.decode.bundle import lab_bundle
from decodeloop.errors import ConfigError
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.servers.weather import get_weather
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy

QUESTION = "What's the weather in Polson, MT?"


def run_turn(events, table=None, servers=(WEATHER,), question=QUESTION, **config):
    tokenizer = CharTokenizer()
    model = TableModel(tokenizer, table)
    with start_stdio_servers(
        [list(s) for s in servers], events, options=ClientOptions(timeout=config.pop("timeout", 10))
    ) as router:
        harness = Harness(
            lab_bundle(model, tokenizer), Sampler(), router, events, config=TurnConfig(**config), policy=Policy.off()
        )
        return harness.run(question)


def test_weather_episode(events):
    result = run_turn(events)
    expected_text, expected = get_weather("Polson", "MT")
    # the call the model wrote, parsed and validated
    [call] = events.of("tool_call")
    assert (call.name, call.arguments, call.text) == (
        "get_weather",
        {"city": "Polson", "state": "MT"},
        "[call get_weather city=Polson state=MT]",
    )
    # the JSON-RPC exchange, in order: the bundled server speaks 2026-07-28, so server/discover and no
    # handshake, then tools/list, tools/call and its response
    rpc = events.of("rpc")
    sent = [e.message.get("method") for e in rpc if e.direction == "send"]
    assert sent == ["server/discover", "tools/list", "tools/call"]
    request = next(e.message for e in rpc if e.message.get("method") == "tools/call")
    assert request["jsonrpc"] == "2.0"
    assert request["params"]["name"] == "get_weather"
    assert request["params"]["arguments"] == {"city": "Polson", "state": "MT"}
    response = next(e.message for e in rpc if e.direction == "recv" and e.message.get("id") == request["id"])
    assert response["result"]["content"] == [{"type": "text", "text": expected_text}]
    # the result reaches the context and the prefill computes exactly the new positions
    [inject] = events.of("inject")
    assert inject.text == f"<|tool|>{expected_text}<|assistant|>"
    tokens = events.of("token")
    after = tokens[[t.stop for t in tokens].index("tool_call") + 1]
    assert after.computed == inject.tokens + 1  # the injected span and the call's closing token
    assert after.cached == inject.context - inject.tokens - 1
    assert all(t.computed == 1 for t in tokens if t is not after and t.index > 1)
    # the answer uses the tool's values
    assert [e.reason for e in events.of("stop")] == ["tool_call", "eos"]
    assert str(expected["temperature_f"]) + "°F" in result.answer
    assert expected["conditions"] in result.answer
    assert events[-1].kind == "done" and events[-1].answer == result.answer
    assert result.reason == "eos" and result.tool_calls == 1


def test_system_prompt_describes_listed_tools(events):
    run_turn(events)
    [prompt] = events.of("prompt")
    assert "get_weather: " in prompt.text and "get_forecast: " in prompt.text
    assert "[call NAME key=value" in prompt.text
    assert prompt.tools == ["get_weather", "get_forecast"]


# A model that errs: the first call is malformed; after the error it retries correctly.
RETRY_TABLE = {
    "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson state]",
    "<|assistant|>": "[call get_weather city=Polson state=MT]",
    "<|tool|>" + get_weather("Polson", "MT")[0] + "<|assistant|>": "Got it.<|eos|>",
}


def test_parse_error_goes_back_to_the_model_and_it_retries(events):
    result = run_turn(events, RETRY_TABLE)
    [error] = events.of("tool_error")
    assert error.text == "[call get_weather city=Polson state]"
    assert "column" in error.message and "key=value" in error.message
    injects = events.of("inject")
    assert injects[0].text.startswith("<|tool|>error: ") and error.message in injects[0].text
    assert [c.arguments for c in events.of("tool_call")] == [{"city": "Polson", "state": "MT"}]
    assert result.answer == "Got it." and result.reason == "eos" and result.tool_calls == 2


@pytest.mark.parametrize(
    "bad_call, expect",
    [
        (
            "[call get_wether city=Polson state=MT]",
            ['unknown tool "get_wether"', 'Did you mean "get_weather"', "get_weather, get_forecast"],
        ),
        ("[call get_forecast city=Polson state=MT days=9]", ['"days"', "7"]),
        (
            "[call get_forecast city=Polson days=two]",
            ['"days" must be an integer', 'missing required argument "state"'],
        ),
        ("[call get_weather city=Polson state=ZZ]", ['unknown state code "ZZ"']),
    ],
)
def test_bad_calls_become_tool_errors_then_retry(events, bad_call, expect):
    table = dict(RETRY_TABLE)
    table["<|user|>" + QUESTION + "<|assistant|>"] = bad_call
    result = run_turn(events, table)
    first_error = events.of("inject")[0].text
    assert first_error.startswith("<|tool|>error: ")
    for fragment in expect:
        assert fragment in first_error
    assert result.answer == "Got it."


def test_consecutive_failures_end_the_turn(events):
    table = {"<|assistant|>": "[call get_weather city=Polson]"}
    result = run_turn(events, table, max_retries=3)
    assert result.reason == "max_retries"
    assert len(events.of("tool_error")) == 3
    assert "3 consecutive failed tool calls" in result.error and 'missing required argument "state"' in result.error
    assert [e.reason for e in events.of("stop")][-1] == "max_retries"
    assert events[-1].kind == "done" and events[-1].error == result.error


def test_a_success_resets_the_failure_count(events):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson]",
        "<|assistant|>": "[call get_weather city=Polson state=MT]",
        "<|tool|>" + get_weather("Polson", "MT")[0] + "<|assistant|>": "[call get_weather]",
        'e.g. Polson); missing required argument "state" (string: Two-letter US state code, e.g. MT)<|assistant|>': "[call get_weather city=Boise state=ID]",
        "<|tool|>" + get_weather("Boise", "ID")[0] + "<|assistant|>": "Done.<|eos|>",
    }
    result = run_turn(events, table, max_retries=2, max_tokens=400)
    # fail, succeed, fail, succeed, answer: never two failures in a row
    assert result.reason == "eos" and result.answer == "Done." and result.tool_calls == 4
    assert [e.stage for e in events.of("tool_error")] == ["arguments", "arguments"]
    assert len(events.of("tool_result")) == 2


def test_stop_string_and_max_tokens(events):
    result = run_turn(events, stop_strings=("overcast",))
    assert result.reason == "stop_sequence" and result.answer == "It's 33°F and"
    events.clear()
    result = run_turn(events, max_tokens=10)
    assert result.reason == "max_tokens" and result.tool_calls == 0 and len(events.of("token")) == 10


def test_server_that_crashes_mid_call_becomes_an_error_result(events):
    table = {"<|user|>" + QUESTION + "<|assistant|>": "[call crash]", "<|assistant|>": "Sorry.<|eos|>"}
    result = run_turn(events, table, servers=(FAULTY,))
    [error] = events.of("tool_error")
    assert "crash failed" in error.message and "exited with code 3" in error.message
    assert result.answer == "Sorry."


def test_server_that_hangs_times_out(events):
    table = {"<|user|>" + QUESTION + "<|assistant|>": "[call hang]", "<|assistant|>": "Sorry.<|eos|>"}
    result = run_turn(events, table, servers=(FAULTY,), timeout=0.5)
    [error] = events.of("tool_error")
    assert "did not answer in time" in error.message
    # the call's request is cancelled once (a busy machine may also see the start-up probe cancelled)
    [call] = [e.message for e in events.of("rpc") if e.message.get("method") == "tools/call"]
    cancelled = [e.message for e in events.of("rpc") if e.message.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancelled].count(call["id"]) == 1
    assert result.answer == "Sorry."


def test_huge_result_is_capped_visibly(events):
    table = {"<|user|>" + QUESTION + "<|assistant|>": "[call big megabytes=2]", "<|assistant|>": "Ok.<|eos|>"}
    run_turn(events, table, servers=(FAULTY,), max_result_chars=1000)
    [result] = events.of("tool_result")
    assert len(result.text) < 1100 and "result truncated: showing 1,000 of 2,097,152 characters" in result.text


def test_tools_across_two_servers_are_routed(events):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": '[call echo text="hi there"]',
        "<|tool|>hi there<|assistant|>": "[call get_weather city=Polson state=MT]",
        "<|tool|>" + get_weather("Polson", "MT")[0] + "<|assistant|>": "Done.<|eos|>",
    }
    result = run_turn(events, table, servers=(FAULTY, WEATHER))
    assert [(c.name, c.server) for c in events.of("tool_call")] == [("echo", "faulty"), ("get_weather", "weather")]
    assert result.answer == "Done."


def test_a_tool_described_but_not_routable_is_a_startup_error(events):
    tokenizer = CharTokenizer()
    with start_stdio_servers([WEATHER], events) as router:
        with pytest.raises(ConfigError, match="get_time"):
            Harness(
                lab_bundle(TableModel(tokenizer), tokenizer),
                Sampler(),
                router,
                events,
                tools=["get_weather", "get_time"],
                policy=Policy.off(),
            )


def test_same_tool_on_two_servers_keeps_its_name_on_the_first_and_is_namespaced_on_the_next(events):
    # both weather servers offer get_weather: the first configured keeps the plain names, the second gets
    # server__tool; echo stays bare
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call weather2__get_weather city=Polson state=MT]",
        "<|tool|>" + get_weather("Polson", "MT")[0] + "<|assistant|>": "[call get_weather city=Boise state=ID]",
        "<|tool|>" + get_weather("Boise", "ID")[0] + "<|assistant|>": "Done.<|eos|>",
    }
    result = run_turn(events, table, servers=(WEATHER, FAULTY, WEATHER))
    [prompt] = events.of("prompt")
    assert prompt.tools == [
        "get_weather",
        "get_forecast",
        "echo",
        "crash",
        "hang",
        "flood",
        "garbage",
        "big",
        "ping_client",
        "chatty",
        "count_words",
        "grow",
        "weather2__get_weather",
        "weather2__get_forecast",
    ]
    assert "weather2__get_weather: Current weather" in prompt.text
    calls = [e.message for e in events.of("rpc") if e.direction == "send" and e.message.get("method") == "tools/call"]
    assert [(e.name, e.server) for e in events.of("tool_call")] == [
        ("weather2__get_weather", "weather2"),
        ("get_weather", "weather"),
    ]
    assert [c["params"]["name"] for c in calls] == ["get_weather", "get_weather"]  # each server sees its own name
    notices = [n.message for n in events.of("notice") if n.source == "weather2"]
    assert "tool get_weather is exposed as weather2__get_weather: server weather already offers it" in notices
    assert not events.of("tool_error") and result.answer == "Done."


def test_tools_list_changed_routes_at_once_and_reaches_the_prompt_of_the_next_conversation(events):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call grow name=shout]",
        "<|tool|>added shout<|assistant|>": "[call shout text=HEY]",
        "<|tool|>HEY<|assistant|>": "Done.<|eos|>",
        "<|user|>again<|assistant|>": "Bye.<|eos|>",
    }
    tokenizer = CharTokenizer()
    with start_stdio_servers([FAULTY], events, options=ClientOptions(timeout=10)) as router:
        harness = Harness(
            lab_bundle(TableModel(tokenizer, table), tokenizer), Sampler(), router, events, policy=Policy.off()
        )
        first = harness.run(QUESTION)
        [changed] = events.of("tools_changed")
        assert (changed.server, changed.added, changed.removed) == ("faulty", ["shout"], [])
        # the new tool was callable in the same turn, though the prompt did not describe it yet
        assert [c.name for c in events.of("tool_call")] == ["grow", "shout"] and first.answer == "Done."
        assert "shout" not in events.of("prompt")[0].tools
        # the conversation goes on over the same context: the system prompt is never rewritten
        second = harness.run("again")
        assert second.answer == "Bye." and second.context[: len(first.context)] == first.context
        assert events.of("prompt")[1].text == "<|user|>again<|assistant|>"
        harness.reset()
        harness.run("again")
        assert "shout" in events.of("prompt")[2].tools
        assert "shout: Return the text unchanged (added at run time)." in events.of("prompt")[2].text
        lists = [e for e in events.of("rpc") if e.direction == "send" and e.message.get("method") == "tools/list"]
        assert len(lists) == 2  # once at start, once after the announcement; never again without one


def test_structured_content_that_breaks_the_output_schema_is_an_error_the_model_sees(events):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": '[call count_words text="a b c" lie=true]',
        "<|assistant|>": '[call count_words text="a b c"]',
        "<|tool|>3 words<|assistant|>": "Three.<|eos|>",
    }
    result = run_turn(events, table, servers=(FAULTY,))
    [error] = events.of("tool_error")
    assert error.stage == "call" and error.name == "count_words"
    assert error.message == (
        'count_words returned structuredContent that breaks its outputSchema: $.words must be an integer, got "3"'
    )
    assert events.of("inject")[0].text.startswith("<|tool|>error: count_words returned structuredContent")
    assert [r.text for r in events.of("tool_result")] == ["3 words"] and result.answer == "Three."
