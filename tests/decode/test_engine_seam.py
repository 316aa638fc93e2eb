"""The engine seam: an engine that samples for itself drives the same loop, unchanged.

`StreamingEngine` stands in for a server that streams tokens (as an
OpenAI-compatible completions endpoint does): it is given the whole context
when a stream opens, produces tokens from its own script, and is told by the
loop when to stop. The harness keeps stop and call detection, the MCP round
trip (to a real server process) and the events.
"""

from __future__ import annotations

from conftest import WEATHER

from decodeloop.decode.bundle import ModelBundle
from decodeloop.decode.engine import Engine, Step
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.lab import CharTokenizer, LabChat
from decodeloop.harness import Harness
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers

QUESTION = "What's the weather in Polson, MT?"
RESULT = "Polson, MT: 33°F, overcast, humidity 53%, wind 21 mph SE"


class StreamingEngine(Engine):
    """A scripted token stream per context: what a remote engine looks like to the loop."""

    def __init__(self, tokenizer: CharTokenizer, script: dict[str, str]) -> None:
        # the text a stream writes, keyed by how the context ends (markup names for specials)
        self.tokenizer = tokenizer
        self.script = [(tokenizer.encode_markup(k), tokenizer.encode_markup(v)) for k, v in script.items()]
        self.stream: list[int] | None = None
        self.opened: list[int] = []  # context length each stream was opened with
        self.closed = 0  # streams the loop closed
        self.prefilled: list[int] = []  # positions the "server" computed per stream (no cache across streams)

    def step(self, context: list[int], state) -> Step:
        if self.stream is None:
            ends = [(key, text) for key, text in self.script if context[-len(key) :] == key]
            _key, text = max(ends, key=lambda kt: len(kt[0]))
            self.stream = list(text)
            self.opened.append(len(context))
            computed, cached = len(context), 0
        else:
            computed, cached = 1, len(context) - 1
        token = self.stream.pop(0)
        return Step(token, computed, cached, prob=0.9, top=[(token, 0.9)])

    def explain(self, step: Step, n: int):
        return step.prob, step.top[:n]

    def stop(self) -> None:
        if self.stream is not None:
            self.closed += 1
            self.stream = None


def test_an_engine_that_samples_for_itself_runs_the_whole_turn(events):
    tokenizer = CharTokenizer()
    syntax = CompactSyntax()
    engine = StreamingEngine(
        tokenizer,
        {
            # after the call the stream would go on; the loop must close it at the call's "]"
            "<|user|>" + QUESTION + "<|assistant|>": "[call get_weather city=Polson state=MT] and more text",
            "<|tool|>" + RESULT + "<|assistant|>": "It is 33°F in Polson.<|eos|>",
        },
    )
    bundle = ModelBundle(
        "streaming", tokenizer, LabChat(tokenizer, syntax), syntax, make_engine=lambda sampler, processors: engine
    )
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        result = Harness(bundle, Sampler(), router, events).run(QUESTION)
    assert result.answer == "It is 33°F in Polson." and result.reason == "eos"
    [call] = events.of("tool_call")
    assert call.arguments == {"city": "Polson", "state": "MT"}
    assert [r.text for r in events.of("tool_result")] == [RESULT]
    # two streams: the prompt, then the context extended by the tool message; each closed by the loop
    assert len(engine.opened) == 2 and engine.closed == 2
    assert engine.opened[1] == events.of("inject")[0].context
    # nothing after the call's "]" was consumed: the stream was closed as soon as the call was complete
    assert "and more" not in tokenizer.decode(result.context)
    # the engine's own probabilities reach the trace
    assert all(t.prob == 0.9 for t in events.of("token"))
