"""The router (tools/router.py) through whole turns: tools across servers, exposed names, a tool that cannot be
routed, and a list that changes mid-session; real server processes."""

from __future__ import annotations

import pytest
from conftest import FAULTY, WEATHER
from table_turn import QUESTION, run_turn

from decodeloop.decode.bundle import lab_bundle
from decodeloop.errors import ConfigError
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.servers.weather import get_weather
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy


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
