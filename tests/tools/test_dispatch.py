"""Dispatch (tools/dispatch.py) through whole turns: a malformed or invalid call, a crashing, hanging or
flooding server, and a result that breaks its schema all come back to the model as tool messages; real
server processes."""

from __future__ import annotations

import pytest
from conftest import FAULTY
from table_turn import QUESTION, run_turn

from decodeloop.servers.weather import get_weather

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
