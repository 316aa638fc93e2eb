"""The call shapes real models write (formats/calls/shapes.py): recognised while streaming, only where a call can
begin, only when the name is a tool and the arguments parse; everything else stays text."""

from __future__ import annotations

import pytest
from conftest import FAULTY, WEATHER
from hypothesis import given, settings
from hypothesis import strategies as st

from decodeloop.decode.bundle import ModelBundle
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.compact import ParseError
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.formats.calls.shapes import BY_NAME, NotACall, parse, read
from decodeloop.formats.lab import CharTokenizer, LabChat
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers

TOOLS = {"get_weather", "math.factorial"}
EOS = 0
ARGS = '{"city": "Polson", "state": "MT"}'
CALL = '{"name": "get_weather", "arguments": ' + ARGS + "}"


def stops(lenient: bool = True, collect: bool = True) -> Stops:
    return Stops(
        JsonSyntax(),
        eos_ids={EOS},
        settings=StopSettings(max_tokens=100_000, collect_calls=collect, lenient=lenient),
        known=TOOLS.__contains__,
    )


def feed(text: str, cuts=(), *, end: bool = True, **options):
    """Stream `text` cut at `cuts` (then an end-of-turn id): (reason, calls, shapes, shown text, notices, helds)."""
    s = stops(**options)
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(text))), len(text)]
    shown, notices, helds = [], [], []
    verdict = None
    for a, b in zip(bounds, bounds[1:]):
        verdict = s.check(1, text[a:b])
        shown.append(verdict.delta)
        helds.append(verdict.held)
        if verdict.notice:
            notices.append(verdict.notice)
        if verdict.reason:
            return verdict.reason, verdict.calls, verdict.shapes, "".join(shown), notices, helds
    if end:
        verdict = s.check(EOS, "")
        shown.append(verdict.delta)
        if verdict.notice:
            notices.append(verdict.notice)
    return verdict.reason, verdict.calls, verdict.shapes, "".join(shown), notices, helds


RECOGNISED = [
    ("```json\n" + CALL + "\n```", "fenced_json"),
    ("```tool_call\n" + CALL + "\n```", "fenced_tool_call"),
    ("```\n" + CALL + "\n```", "fenced"),
    (CALL, "bare_json"),
    ("  \n" + CALL, "bare_json"),
    ("[" + CALL + "]", "bare_json"),
    ("<function=get_weather>" + ARGS + "</function>", "function_tag"),
    ("<tools>" + CALL + "</tools>", "tools_tag"),
    ("[TOOL_CALLS][" + CALL + "]", "tool_calls_tag"),
    ('{"name": "get_weather", "parameters": ' + ARGS + "}", "bare_json"),  # Llama 3.x
    ('{"type": "function", "name": "get_weather", "parameters": ' + ARGS + "}", "bare_json"),
    ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Polson\\"}"}', "bare_json"),  # arguments twice encoded
]


@pytest.mark.parametrize("text,shape", RECOGNISED)
def test_each_alternate_is_read_as_a_call_and_nothing_of_it_is_shown(text, shape):
    reason, calls, shapes, shown, notices, _ = feed(text)
    assert reason == "tool_call" and shapes == (shape,) and shown.strip() == "" and not notices
    [call] = [parse(s, c) for s, c in zip(shapes, calls)]
    assert call.name == "get_weather" and call.arguments["city"] == "Polson"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(RECOGNISED), st.lists(st.integers(min_value=1, max_value=120), max_size=12))
def test_recognition_does_not_depend_on_how_the_text_is_cut_into_tokens(case, cuts):
    before = "" if case[1] in ("bare_json", "tool_calls_tag") else "Sure.\n"  # bare JSON opens a message
    text = before + case[0] + "\n"
    whole = feed(text)
    assert feed(text, cuts)[:4] == whole[:4]
    assert whole[0] == "tool_call" and whole[3].strip() == before.strip()


def test_the_text_after_a_line_break_is_shown_and_the_call_is_held_back_while_it_is_written():
    text = "Let me check.\n```json\n" + CALL + "\n```"
    reason, _calls, shapes, shown, _, helds = feed(text, range(1, len(text)))
    assert reason == "tool_call" and shown == "Let me check.\n" and shapes == ("fenced_json",)
    assert any(h.startswith("```json\n{") for h in helds)  # the span is held, not shown, while it is written


def test_parallel_calls_in_one_array_and_in_consecutive_objects_are_all_collected():
    array = "```json\n[" + CALL + ', {"name": "math.factorial", "arguments": {"n": 5}}]\n```'
    reason, calls, shapes, *_ = feed(array)
    assert reason == "tool_call" and [parse(s, c).name for s, c in zip(shapes, calls)] == [
        "get_weather",
        "math.factorial",
    ]
    assert calls[1] == '{"name": "math.factorial", "arguments": {"n": 5}}'  # each element as written
    lines = CALL + '\n{"name": "math.factorial", "arguments": {"n": 3}}'
    for cuts in ((), range(1, len(lines))):
        reason, calls, shapes, *_ = feed(lines, cuts)
        assert [parse(s, c).arguments for s, c in zip(shapes, calls)] == [{"city": "Polson", "state": "MT"}, {"n": 3}]


@pytest.mark.parametrize(
    "text",
    [
        "Here is how: " + CALL,  # bare JSON only at the start of the message
        "In JSON that is ```json\n" + CALL + "\n``` inline",  # a fence only at the start of a line
        "```python\nprint(get_weather)\n```",  # a code block
        "```\nprint(1)\n```",
        '```json\n{"city": "Polson"}\n```',  # JSON with no name
        '{"temperature": 33}',
        "[1] See the forecast.",
        "[Note] get_weather is a tool.",
    ],
)
def test_text_that_is_not_a_call_stays_text_as_written(text):
    reason, calls, _, shown, notices, _ = feed(text)
    assert reason == "eos" and calls == () and shown == text and not notices


@pytest.mark.parametrize(
    "text,why",
    [
        ('```json\n{"name": "get_weather", "arguments": {"city": }}\n```', "does not parse"),
        ('{"name": "get_weather", "arguments": [1]}', "not a JSON object"),
        ('{"name": "get_weather", "args": {}}', "keys a call does not have"),
        ('<function=get_weather>{"city": Polson}</function>', "does not parse"),
    ],
)
def test_a_near_miss_stays_text_with_a_notice_that_says_why(text, why):
    reason, calls, _, shown, notices, _ = feed(text)
    assert reason == "eos" and calls == () and shown == text
    [notice] = notices
    assert "get_weather" in notice and why in notice


def test_a_whole_call_to_a_tool_that_does_not_exist_is_text_with_a_notice():
    text = '```json\n{"name": "send_money", "arguments": {"to": "me"}}\n```'
    reason, calls, shapes, shown, [notice], _ = feed(text)
    assert (reason, calls, shapes, shown) == ("eos", (), (), text)
    assert "'send_money' is not a tool" in notice and "fenced_json" in notice and "stays text" in notice
    # the model's name is quoted, control characters escaped and its length capped
    hostile = '{"name": "x\\u001b[31m' + "y" * 500 + '", "arguments": {}}'
    [notice] = feed(hostile)[4]
    assert "\x1b" not in notice and "\\x1b" in notice and len(notice) < 200


def test_strict_reads_only_the_syntax_own_shape():
    text = "```json\n" + CALL + "\n```"
    assert feed(text, lenient=False)[:4] == ("eos", (), (), text)


def test_an_unclosed_fence_at_the_end_of_the_message_is_read_when_it_holds_a_whole_call():
    reason, _calls, shapes, _shown, _, _ = feed("```json\n" + CALL + "\n")
    assert reason == "tool_call" and shapes == ("fenced_json",)


def test_an_alternate_longer_than_a_call_may_be_is_let_go_as_text():
    text = "[" + " " * 5000 + "]"
    reason, _calls, _, shown, _, _ = feed(text, range(100, len(text), 100))
    assert reason == "eos" and shown == text


def test_reading_and_parsing_refuse_what_is_not_a_call():
    with pytest.raises(NotACall):
        read(
            BY_NAME["fenced_json"], '```json\n{"name": "get_weather", "arguments": {}, "x": 1}\n```', TOOLS.__contains__
        )
    with pytest.raises(NotACall):
        read(BY_NAME["bare_json"], '{"name": "get_weather", "name": "x", "arguments": {}}', TOOLS.__contains__)
    with pytest.raises(NotACall):
        read(BY_NAME["bare_json"], '{"name": "get_weather", "arguments": {"x": NaN}}', TOOLS.__contains__)
    with pytest.raises(ParseError):
        parse("fenced_json", "```json\nnot json\n```")
    with pytest.raises(ParseError):
        parse("no_such_shape", CALL)


# --- through the harness, with a real (hand-written table) model and real MCP servers ----------------------

QUESTION = "What's the weather in Polson, MT?"
RESULT = "Polson, MT: 33°F, overcast, humidity 53%, wind 21 mph SE"


def _bundle(table):
    tokenizer = CharTokenizer()
    syntax = JsonSyntax()
    return ModelBundle("table", tokenizer, LabChat(tokenizer, syntax), syntax, model=TableModel(tokenizer, table))


def test_a_fenced_call_is_answered_like_any_other_and_the_events_name_its_shape(events):
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": "```json\n" + CALL + "\n```<|eos|>",
        "<|tool|>" + RESULT + "<|assistant|>": "It is 33°F and overcast.<|eos|>",
    }
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        result = Harness(_bundle(table), Sampler(), router, events, config=TurnConfig(call_shapes="lenient")).run(
            QUESTION
        )
    assert result.answer == "It is 33°F and overcast." and result.tool_calls == 1
    [call] = events.of("tool_call")
    assert call.shape == "fenced_json" and call.to_json()["shape"] == "fenced_json"
    assert call.arguments == {"city": "Polson", "state": "MT"}
    assert any("```json block as a call" in n.message for n in events.of("notice"))


def test_strict_prints_the_same_fence_as_the_answer(events):
    table = {"<|user|>" + QUESTION + "<|assistant|>": "```json\n" + CALL + "\n```<|eos|>"}
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        result = Harness(_bundle(table), Sampler(), router, events, config=TurnConfig(call_shapes="strict")).run(
            QUESTION
        )
    assert result.tool_calls == 0 and result.answer.startswith("```json")


def test_a_repeat_in_another_shape_is_the_same_call_and_the_turn_ends_in_a_defined_way(events):
    """The canonical call, then the same call again as bare JSON after its result: the repeat guard (the strict
    one, --on-repeat stop; tests/test_answer.py has the default, which answers)."""
    canonical = "<tool_call>\n" + CALL + "\n</tool_call>"
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": canonical + "<|eos|>",
        "<|tool|>" + RESULT + "<|assistant|>": CALL + "<|eos|>",
        "answer the user from it, or call with other arguments<|assistant|>": CALL + "<|eos|>",
    }
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        config = TurnConfig(call_shapes="lenient", on_repeat="stop")
        result = Harness(_bundle(table), Sampler(), router, events, config=config).run(QUESTION)
    assert result.reason == "repeated_call" and result.answer == ""
    errors = events.of("tool_error")
    assert [e.stage for e in errors] == ["repeat", "repeat"] and {e.shape for e in errors} == {"bare_json"}
    assert len(events.of("tool_call")) == 1  # the server saw the call once


def test_calls_of_one_message_in_two_shapes_run_together(events):
    text = (
        "<tool_call>\n" + CALL + '\n</tool_call>\n```json\n{"name": "count_words", "arguments": {"text": "a b"}}\n```'
    )
    table = {
        "<|user|>" + QUESTION + "<|assistant|>": text + "<|eos|>",
        "<|tool|>2 words<|assistant|>": "Both done.<|eos|>",
    }
    with start_stdio_servers([WEATHER, FAULTY], events, options=ClientOptions(timeout=10)) as router:
        result = Harness(_bundle(table), Sampler(), router, events, config=TurnConfig(call_shapes="lenient")).run(
            QUESTION
        )
    assert result.answer == "Both done." and [c.shape for c in events.of("tool_call")] == ["tool_call", "fenced_json"]


def test_the_lazy_grammar_may_start_only_once_the_model_named_a_tool_that_exists():
    for text, begun in (
        ('```json\n{"result": 3', False),
        ("```json\n{", False),
        ('```json\n{ "name"', False),
        ('```json\n{ "name": "get_weather', False),
        ('```json\n{ "name": "get_weather"', True),
        ('{"name": "get_weather"', True),
        ('{"name": "get_weather_now"', False),
        ('{"name": "calculate_triangle_area"', False),
        ('{"temperature"', False),
        ('<tools>{"name":"math.factorial"', True),
        ('```json\n{"data": {"name": "get_weather"', False),
    ):
        s = stops()
        for ch in text:
            s.check(1, ch)
        assert (s.alternate is not None) == begun, text
