"""The turn end to end through the library: a real table model, real MCP server processes."""

from __future__ import annotations

from table_turn import run_turn

from decodeloop.servers.weather import get_weather


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


def test_stop_string_and_max_tokens(events):
    result = run_turn(events, stop_strings=("overcast",))
    assert result.reason == "stop_sequence" and result.answer == "It's 33°F and"
    events.clear()
    result = run_turn(events, max_tokens=10)
    assert result.reason == "max_tokens" and result.tool_calls == 0 and len(events.of("token")) == 10
