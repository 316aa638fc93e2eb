"""Harness, the conversation: its context and cache across turns, reset, the repeat guard, provenance, the
calls of one message, Ctrl-C; the lab's table model and real server processes."""

from __future__ import annotations

from conftest import FAULTY, WEATHER

from decodeloop.decode.bundle import ModelBundle, lab_bundle
from decodeloop.decode.context import Context
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.formats.lab import CharTokenizer, LabChat
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy

QUESTION = "What's the weather in Polson, MT?"
RESULT = "Polson, MT: 33°F, overcast, humidity 53%, wind 21 mph SE"
BOISE = "Boise, ID: "


def harness(events, table, router, **config):
    tokenizer = CharTokenizer()
    return Harness(
        lab_bundle(TableModel(tokenizer, table), tokenizer),
        Sampler(),
        router,
        events,
        config=TurnConfig(**config),
        policy=Policy.off(),
    )


def test_a_conversation_keeps_its_context_and_the_cache(events):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson state=MT]",
        "<|tool|>" + RESULT + "<|assistant|>": "33°F and overcast.<|eos|>",
        "<|user|>And tomorrow?<|assistant|>": "I only know today.<|eos|>",
    }
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = harness(events, table, router)
        first = h.run(QUESTION)
        events.clear()
        second = h.run("And tomorrow?")
    assert (first.answer, second.answer) == ("33°F and overcast.", "I only know today.")
    assert second.context[: len(first.context)] == first.context
    [prompt] = events.of("prompt")
    assert prompt.text == "<|user|>And tomorrow?<|assistant|>" and prompt.context == len(first.context) + prompt.tokens
    # the model computed only the new turn: the first token's forward prefilled just the appended tokens
    first_token = events.of("token")[0]
    assert first_token.computed == prompt.tokens + 1  # and the eos the model wrote last, never run through it
    assert first_token.cached == len(first.context) - 1


def test_reset_starts_a_new_conversation(events):
    table = {"<|user|>hi<|assistant|>": "Hello.<|eos|>"}
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = harness(events, table, router)
        one = h.run("hi")
        h.reset()
        two = h.run("hi")
    assert one.context == two.context
    assert [p.context for p in events.of("prompt")] == [p.tokens for p in events.of("prompt")]


def test_a_repeated_call_is_not_sent_again_and_ends_the_turn_after_the_limit(events):
    call = "[call get_weather city=Polson state=MT]"
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": call,
        "<|tool|>" + RESULT + "<|assistant|>": call,
        "result is above; answer the user from it, or call with other arguments<|assistant|>": call,
    }
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        result = harness(events, table, router, max_repeats=2, on_repeat="stop").run(QUESTION)
    assert result.reason == "repeated_call" and "2 calls repeated" in result.error
    sent = [e for e in events.of("rpc") if e.direction == "send" and e.message.get("method") == "tools/call"]
    assert len(sent) == 1  # the server answered once; the repeats never reached it
    errors = events.of("tool_error")
    assert [e.stage for e in errors] == ["repeat", "repeat"]
    assert "already called with these arguments" in errors[0].message
    assert events.of("inject")[1].text.startswith("<|tool|>error: get_weather was already called")


def test_provenance_spans_cover_the_context_and_name_the_tool(events):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson state=MT]",
        "<|tool|>" + RESULT + "<|assistant|>": "Done.<|eos|>",
    }
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        result = harness(events, table, router).run(QUESTION)
    [prompt], [inject] = events.of("prompt"), events.of("inject")
    assert [s[2] for s in prompt.spans] == ["chat", "system", "chat", "user", "chat"]
    assert prompt.spans[0][0] == 0 and prompt.spans[-1][1] == prompt.tokens
    assert [s[2] for s in inject.spans] == ["chat", "tool:weather/get_weather", "chat"]
    tokenizer = CharTokenizer()
    start, end, _ = inject.spans[1]
    assert tokenizer.decode(result.context[start:end]) == RESULT
    assert inject.spans[0][0] == inject.context - inject.tokens


def test_context_spans_and_truncation():
    c = Context()
    c.extend([1, 2], "chat")
    c.extend([3], "user")
    c.open("model")
    c.ids.extend([4, 5])
    c.extend([6], "tool:s/t")
    assert [s.to_json() for s in c.spans()] == [[0, 2, "chat"], [2, 3, "user"], [3, 5, "model"], [5, 6, "tool:s/t"]]
    assert c.source_at(4) == "model" and c.source_at(0) == "chat"
    c.truncate(4)
    assert [s.to_json() for s in c.spans()] == [[0, 2, "chat"], [2, 3, "user"], [3, 4, "model"]]
    assert [s.to_json() for s in c.spans(3)] == [[3, 4, "model"]]


def _stops(**kw):
    return Stops(CompactSyntax(), eos_ids={0}, settings=StopSettings(max_tokens=500, **kw))


def _feed(stops, text, end=None):
    verdicts = [stops.check(ord(ch) + 10, ch) for ch in text]
    if end is not None:
        verdicts.append(stops.check(end, ""))
    return verdicts


def test_collected_calls_end_with_the_message():
    stops = _stops(collect_calls=True)
    verdicts = _feed(stops, "Let me check. [call a x=1]\n [call b y=2]", end=0)
    assert [v.reason for v in verdicts[:-1]] == [None] * (len(verdicts) - 1)
    last = verdicts[-1]
    assert last.reason == "tool_call" and last.calls == ("[call a x=1]", "[call b y=2]") and last.ended
    shown = "".join(v.delta for v in verdicts)
    assert shown == "Let me check. "  # the whitespace between calls is not shown


def test_collected_calls_end_at_text_after_them():
    stops = _stops(collect_calls=True)
    verdicts = _feed(stops, "[call a x=1] ok")
    stopped = [v for v in verdicts if v.reason]
    assert len(stopped) == 1 and stopped[0].calls == ("[call a x=1]",) and not stopped[0].ended


def test_without_collecting_the_first_closed_call_stops():
    stops = _stops()
    verdicts = _feed(stops, "[call a x=1] [call b y=2]")
    first = next(v for v in verdicts if v.reason)
    assert first.calls == ("[call a x=1]",) and verdicts.index(first) == len("[call a x=1]") - 1


def test_an_opener_and_closer_that_are_special_tokens_delimit_a_call_where_the_scanner_allows():
    # the opener and the closer as special ids (no text of their own): the opener opens a call, and the closer
    # closes it where the call's scanner says a closer can stand, outside any string
    stops = Stops(
        JsonSyntax(),
        eos_ids={0},
        settings=StopSettings(max_tokens=100, collect_calls=False),
        specials={1: "<tool_call>", 2: "</tool_call>"},
    )
    body = '{"name": "f", "arguments": {"x": "a'
    v = [stops.check(1, "")] + [stops.check(ord(ch) + 10, ch) for ch in body] + [stops.check(2, "")]
    assert v[-1].reason is None and v[-1].in_call  # inside the string, the closer id is the string's text
    v += [stops.check(ord(ch) + 10, ch) for ch in '"}}'] + [stops.check(2, "")]
    assert v[-1].reason == "tool_call"
    [parsed] = v[-1].parsed
    assert parsed.call is not None and parsed.call.arguments == {"x": "a</tool_call>"}


def test_parallel_calls_to_two_servers_run_and_come_back_in_order(events):
    tokenizer = CharTokenizer()
    syntax = CompactSyntax()
    syntax.collect_calls = True  # this instance only: the message's calls run together
    table = {
        "<|user|>"
        + QUESTION
        + "<|assistant|>": '[call get_weather city=Polson state=MT] [call count_words text="a b"]<|eos|>',
        "<|tool|>2 words<|assistant|>": "Both done.<|eos|>",
    }
    bundle = ModelBundle("table", tokenizer, LabChat(tokenizer, syntax), syntax, model=TableModel(tokenizer, table))
    with start_stdio_servers([WEATHER, FAULTY], events, options=ClientOptions(timeout=10)) as router:
        result = Harness(bundle, Sampler(), router, events, policy=Policy.off()).run(QUESTION)
    assert result.answer == "Both done." and result.tool_calls == 2
    assert [c.name for c in events.of("tool_call")] == ["get_weather", "count_words"]
    [inject] = events.of("inject")
    assert [s[2] for s in inject.spans] == [
        "chat",
        "tool:weather/get_weather",
        "chat",
        "tool:faulty/count_words",
        "chat",
    ]
    assert inject.text == f"<|tool|>{RESULT}<|tool|>2 words<|assistant|>"


def _json_bundle(table):
    from decodeloop.formats.calls.json import JsonSyntax

    tokenizer = CharTokenizer()
    syntax = JsonSyntax()
    return ModelBundle("table", tokenizer, LabChat(tokenizer, syntax), syntax, model=TableModel(tokenizer, table))


W = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}\n</tool_call>'
C = '<tool_call>\n{"name": "count_words", "arguments": {"text": "a b"}}\n</tool_call>'


def test_json_calls_in_one_message_all_run_when_the_message_ends(events):
    """The Hermes shape: two <tool_call> blocks, then the end of the message; both run, results in order."""
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": W + "\n" + C + "<|eos|>",
        "<|tool|>2 words<|assistant|>": "Both done.<|eos|>",
    }
    with start_stdio_servers([WEATHER, FAULTY], events, options=ClientOptions(timeout=10)) as router:
        result = Harness(_json_bundle(table), Sampler(), router, events, policy=Policy.off()).run(QUESTION)
    assert result.answer == "Both done." and result.tool_calls == 2
    assert [c.arguments for c in events.of("tool_call")] == [{"city": "Polson", "state": "MT"}, {"text": "a b"}]
    assert [s.reason for s in events.of("stop")] == ["tool_call", "eos"]
    assert events.of("inject")[0].text == f"<|tool|>{RESULT}<|tool|>2 words<|assistant|>"


def test_json_calls_can_run_one_at_a_time(events):
    """--calls first: the message stops at the first closed call; the second call comes after its result."""
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": W + "\n" + C + "<|eos|>",
        "<|tool|>" + RESULT + "<|assistant|>": C,
        "<|tool|>2 words<|assistant|>": "Both done.<|eos|>",
    }
    with start_stdio_servers([WEATHER, FAULTY], events, options=ClientOptions(timeout=10)) as router:
        result = Harness(
            _json_bundle(table), Sampler(), router, events, config=TurnConfig(collect_calls=False), policy=Policy.off()
        ).run(QUESTION)
    assert result.answer == "Both done." and result.tool_calls == 2
    assert [s.reason for s in events.of("stop")] == ["tool_call", "tool_call", "eos"]
    assert [i.text for i in events.of("inject")] == [f"<|tool|>{RESULT}<|assistant|>", "<|tool|>2 words<|assistant|>"]


def test_a_malformed_json_call_gets_an_error_and_a_retry(events):
    bad = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Polson" "state": "MT"}}\n</tool_call>'
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": bad + "<|eos|>",
        "<|assistant|>": W + "<|eos|>",  # after the error message: the call again, well formed
        "<|tool|>" + RESULT + "<|assistant|>": "33°F.<|eos|>",
    }
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        result = Harness(_json_bundle(table), Sampler(), router, events, policy=Policy.off()).run(QUESTION)
    [error] = events.of("tool_error")
    assert error.stage == "parse" and "invalid JSON" in error.message and "column" in error.message
    assert result.answer == "33°F." and result.tool_calls == 2


class _InterruptAt:
    """A real table model whose forward raises KeyboardInterrupt (what Ctrl-C does) at one call."""

    def __init__(self, model, at: int) -> None:
        self.model, self.at, self.calls = model, at, 0

    def __getattr__(self, name):
        return getattr(self.model, name)

    def forward(self, context):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.model.forward(context)


def test_ctrl_c_ends_the_turn_and_the_conversation_goes_on(events):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson state=MT]",
        "<|tool|>" + RESULT + "<|assistant|>": "33°F and overcast.<|eos|>",
        "<|user|>again<|assistant|>": "Again: 33°F.<|eos|>",
    }
    tokenizer = CharTokenizer()
    model = _InterruptAt(TableModel(tokenizer, table), at=10)  # in the middle of writing the call
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        h = Harness(lab_bundle(model, tokenizer), Sampler(), router, events, policy=Policy.off())
        stopped = h.run(QUESTION)
        assert stopped.reason == "interrupted" and events.of("stop")[-1].reason == "interrupted"
        assert events.of("done")[-1].reason == "interrupted"
        assert len(stopped.context) == events.of("prompt")[0].tokens + 9
        # the nine tokens written before Ctrl-C stay; the half-written call never ran
        assert tokenizer.decode(stopped.context).endswith("<|assistant|>[call get")
        assert not events.of("tool_call")
        events.clear()
        again = h.run("again")
    # the model never closed its message, so the next turn closes it first; the cache is still right
    assert events.of("prompt")[0].text == "<|eos|><|user|>again<|assistant|>"
    assert again.answer == "Again: 33°F." and again.context[: len(stopped.context)] == stopped.context
