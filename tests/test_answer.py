"""An answer every time (--on-repeat answer): a model that writes the same call again after its result has that
message dropped and the next one held to text, so it answers from what it has; a model that takes another tool
is never held; --on-repeat stop keeps the strict guard. Against the real weather server."""

from __future__ import annotations

import pytest
from conftest import WEATHER, Recorder

from decodeloop.constrain.text_only import HoldToText
from decodeloop.decode.bundle import ModelBundle
from decodeloop.decode.model import PrefixCachedModel
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.formats.lab import ASSISTANT, EOS, TOOL, USER, CharTokenizer, LabChat
from decodeloop.harness import Harness, TurnConfig
from decodeloop.sampling import Sampler
from decodeloop.sampling.processors import ProcessorState
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy

QUESTION = "What's the weather in Polson, MT?"
RESULT = "Polson, MT: 33°F, overcast, humidity 53%, wind 21 mph SE"
CALL = '```json\n{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}\n```'
FORECAST = '```json\n{"name": "get_forecast", "arguments": {"city": "Polson", "state": "MT", "days": 2}}\n```'
ANSWER = "It is 33°F and overcast in Polson."


class TwoMinds(PrefixCachedModel):
    """A deterministic model with a first and a second choice at every step: after a key, it prefers one
    continuation (logit 9) and would write the other (logit 8) if the first were ruled out; a token off the
    first leaves only the second. Like a real model, it repeats its call when nothing stops it."""

    name = "two-minds"

    def __init__(self, tokenizer, table: dict[str, tuple[str, str]]) -> None:
        super().__init__()
        self.vocab_size, self.eos_id = tokenizer.vocab_size, tokenizer.eos_id
        self.table = [
            (tokenizer.encode_markup(k), [tokenizer.encode_markup(t) for t in pair]) for k, pair in table.items()
        ]

    def _truncate(self, n: int) -> None:
        pass

    def _compute(self, start: int):
        tokens = self.cached_tokens
        best = None
        for key, pair in self.table:  # the key that ends last, nearest the end of the context
            for at in range(len(tokens) - len(key), -1, -1):
                if tokens[at : at + len(key)] == key:
                    if best is None or at + len(key) > best[0]:
                        best = (at + len(key), pair)
                    break
        logits = [0.0] * self.vocab_size
        if best is None:
            logits[self.eos_id] = 9.0
            return logits
        written = tokens[best[0] :]
        for weight, continuation in zip((9.0, 8.0), best[1]):
            if continuation[: len(written)] == written and len(written) < len(continuation):
                logits[continuation[len(written)]] = max(logits[continuation[len(written)]], weight)
        if not any(logits):
            logits[self.eos_id] = 9.0
        return logits


def turn(table, **config):
    tokenizer = CharTokenizer()
    syntax = JsonSyntax()
    model = TwoMinds(tokenizer, table)
    bundle = ModelBundle("two-minds", tokenizer, LabChat(tokenizer, syntax), syntax, model=model)
    events = Recorder()
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        harness = Harness(
            bundle,
            Sampler(),
            router,
            events,
            config=TurnConfig(call_shapes="lenient", max_tokens=2000, **config),
            policy=Policy.off(),
        )
        result = harness.run(QUESTION)
    return result, events


REPEATER = {
    USER + QUESTION + ASSISTANT: (CALL + EOS, CALL + EOS),
    TOOL + RESULT + ASSISTANT: (CALL + EOS, ANSWER + EOS),  # the result in: the same call again, else the answer
    "answer the user from it, or call with other arguments" + ASSISTANT: (CALL + EOS, ANSWER + EOS),
}


@pytest.mark.parametrize("answer_after", [0, 1])
def test_a_repeated_call_is_dropped_and_the_next_message_held_to_text(answer_after):
    result, events = turn(REPEATER, answer_after=answer_after)
    assert result.reason == "eos" and result.answer == ANSWER
    assert [c.name for c in events.of("tool_call")] == ["get_weather"]  # the server saw the call once
    repeats = [e for e in events.of("tool_error") if e.stage == "repeat"]
    assert len(repeats) == answer_after + 1
    notices = [n.message for n in events.of("notice") if n.source == "calls"]
    assert any("held to text" in m for m in notices), notices
    # the dropped message is not in the context: the call, the repeats told the guard's message, then the answer
    assert CharTokenizer().decode(result.context).count("```json") == 1 + answer_after


def test_the_strict_guard_still_ends_the_turn():
    result, events = turn(REPEATER, on_repeat="stop")
    assert result.reason == "repeated_call" and result.answer == ""
    assert not [n for n in events.of("notice") if "held to text" in n.message]


def test_a_model_that_takes_another_tool_is_never_held():
    table = {
        USER + QUESTION + ASSISTANT: (CALL + EOS, CALL + EOS),
        TOOL + RESULT + ASSISTANT: (FORECAST + EOS, FORECAST + EOS),
        ASSISTANT + "xx": ("", ""),
    }
    _, events = turn(table)
    assert [c.name for c in events.of("tool_call")] == ["get_weather", "get_forecast"]
    assert not [n for n in events.of("notice") if "held to text" in n.message]


def test_held_text_opens_no_call_where_one_could_open():
    tokenizer = CharTokenizer()
    hold = HoldToText(tokenizer, ["<tool_call>"], ["```json\n"], ["{"])
    hold.hold(0)
    backtick, brace, angle, a = (tokenizer.encode(c)[0] for c in "`{<a")
    assert {brace, backtick, angle} <= hold.banned("") and a not in hold.banned("")  # nothing can open the message
    assert backtick in hold.banned("Sure.\n") and backtick not in hold.banned("Sure, ")  # a fence opens a line
    assert brace not in hold.banned("Here: ") and angle in hold.banned("Here: ")  # <tool_call> opens anywhere
    state = ProcessorState(context=tokenizer.encode(""))
    logits = [0.0] * tokenizer.vocab_size
    assert hold(logits, state)[brace] == float("-inf") and hold(logits, state)[a] == 0.0
    hold.release()
    assert hold(logits, state) is logits
