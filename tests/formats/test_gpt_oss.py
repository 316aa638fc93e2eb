"""gpt-oss's Harmony format (formats/calls/families/gpt_oss.py): messages, their calls and text, and the loop's view."""

from __future__ import annotations

import json

import pytest

from decodeloop.decode.parse import OutputParser, parse_output
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.base import Call, ParseError
from decodeloop.formats.calls.families.gpt_oss import (
    CALL,
    CHANNEL,
    CONSTRAIN,
    END,
    MESSAGE,
    RETURN,
    START,
    HarmonySyntax,
    MessageScanner,
    parse,
)
from decodeloop.formats.calls.formats import detect, get_format

TOOLS = {"get_weather": {"type": "object"}, "get_time": {"type": "object"}, "write_file": {"type": "object"}}
ANALYSIS = f"{CHANNEL}analysis{MESSAGE}Need the weather.{END}"


def to(name: str, arguments: str, channel_first: bool = True) -> str:
    """A call message after the first, the recipient after its channel or in its role header."""
    if channel_first:
        return f"{START}assistant{CHANNEL}commentary to=functions.{name} {CONSTRAIN}json{MESSAGE}{arguments}"
    return f"{START}assistant to=functions.{name}{CHANNEL}commentary json{MESSAGE}{arguments}"


def read(text: str, **kwargs):
    return parse_output(text, TOOLS, format=get_format("harmony"), **kwargs)


@pytest.mark.parametrize("channel_first", [True, False])
def test_reasoning_a_preamble_and_a_call(channel_first):
    preamble = f"{START}assistant{CHANNEL}commentary{MESSAGE}Let me check.{END}"
    out = read(ANALYSIS + preamble + to("get_weather", '{"city": "Paris", "n": 1}', channel_first))
    assert out.reasoning == "Need the weather." and out.content == "Let me check."
    assert out.tool_calls == [Call("get_weather", {"city": "Paris", "n": 1})]


@pytest.mark.parametrize(
    "text",
    [
        f'{CHANNEL}commentary to=functions.get_time{CONSTRAIN}json{MESSAGE}{{"tz": "UTC"}}',
        f' to=functions.get_time{CHANNEL}commentary {CONSTRAIN}json{MESSAGE}{{"tz": "UTC"}}',
        f'{CHANNEL}analysis to=functions.get_time{MESSAGE}{{"tz": "UTC"}}{END}',
    ],
)
def test_the_first_message_may_name_its_recipient_either_way(text):
    assert read(text).tool_calls == [Call("get_time", {"tz": "UTC"})]


def test_an_answer_is_content_even_when_it_looks_like_a_call():
    out = read(f'{ANALYSIS}{START}assistant{CHANNEL}final{MESSAGE}{{"name": "get_time"}}{RETURN}')
    assert out.content == '{"name": "get_time"}' and out.tool_calls == [] and out.reasoning == "Need the weather."


def test_sequential_calls_and_an_answer_in_one_piece():
    text = to("get_time", "{}") + CALL + to("get_weather", '{"city": "Oslo"}', False) + CALL
    text += f"{START}assistant{CHANNEL}final{MESSAGE}Done."
    parser = OutputParser(get_format("harmony"), TOOLS)
    parser.feed_text_only(text)
    out = parser.finish()
    assert out.tool_calls == [Call("get_time", {}), Call("get_weather", {"city": "Oslo"})] and out.content == "Done."


def test_markers_inside_a_json_string_are_its_text():
    content = f"A call ends with {CALL}; a header: {START}assistant{CHANNEL}final{MESSAGE}hi{END}"
    arguments = json.dumps({"path": "h.md", "content": content})
    out = read(ANALYSIS + to("write_file", arguments))
    assert out.tool_calls == [Call("write_file", {"path": "h.md", "content": content})]
    # each marker a unit of its own, as the special token it stands for
    parser = OutputParser(get_format("harmony"), TOOLS, specials=(START, CHANNEL, MESSAGE, CONSTRAIN, END, CALL))
    parser.feed(ANALYSIS + to("write_file", arguments) + CALL)
    assert parser.finish().tool_calls == out.tool_calls


def test_a_call_marker_in_text_is_text():
    out = read(f"{CHANNEL}analysis{MESSAGE}I must not write {CALL} myself.{END}" + to("get_time", "{}"))
    assert out.reasoning == f"I must not write {CALL} myself." and out.tool_calls == [Call("get_time", {})]


def test_truncated_in_a_call_is_a_notice_and_no_call():
    out = read(ANALYSIS + to("get_weather", '{"city": "Par'), truncated=True)
    assert out.tool_calls == [] and out.errors == [] and out.reasoning == "Need the weather."
    assert out.notices == [
        "the token cap the output ended at cut off a call: the message to functions.get_weather ends "
        "before its arguments do; it is not run"
    ]


def test_truncated_in_an_answer_keeps_the_answer():
    out = read(f"{ANALYSIS}{START}assistant{CHANNEL}final{MESSAGE}It is sun", truncated=True)
    assert out.content == "It is sun" and out.reasoning == "Need the weather." and not out.notices


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f"{CHANNEL}commentary to=python {CONSTRAIN}code{MESSAGE}print(1)", "addressed to 'python', which is not"),
        (
            to("get_weather", '{"city": Paris}'),
            "the arguments of the call to get_weather at column 94 are not one JSON object",
        ),
        (to("get_weather", '["Paris"]'), "must be a JSON object, found list"),
        (to("get_weather", ""), "write them after <|message|> as a JSON object ({} for none)"),
        (f"{START}assistant to=functions.get$weather{CHANNEL}commentary{MESSAGE}{{}}", 'the tool "get$weather"'),
        (f"{CHANNEL}commentary to=functions.get_time{END}", "the call to get_time has no <|message|>"),
    ],
)
def test_an_error_says_how_to_fix_the_call(text, words):
    [error] = read(text).errors
    assert words in str(error.error)
    assert "as in <|channel|>commentary to=functions." in str(error.error)


def test_error_columns_point_into_the_message():
    text = to("get_weather", "{oops}")
    [error] = read(text).errors
    assert text[error.error.column - 1 :].startswith("{oops}")
    with pytest.raises(ParseError) as caught:
        parse(f"{CHANNEL}final{MESSAGE}Hello")
    assert "not a call" in str(caught.value)


def test_a_header_without_a_message_is_its_text():
    out = read(f"{CHANNEL}??{END}{START}assistant{CHANNEL}final{MESSAGE}Hi")
    assert out.content == "??Hi" and out.tool_calls == []


@pytest.mark.parametrize("size", [1, 2, 3, 7, 100])
def test_the_scanner_ends_where_the_message_does_however_the_text_is_cut(size):
    text = f'commentary to=functions.w {CONSTRAIN}json{MESSAGE}{{"a": "{END}{CALL} \\" {CALL}"}}{CALL} after'
    found, consumed, scanner = None, 0, MessageScanner(CHANNEL)
    for piece in [text[i : i + size] for i in range(0, len(text), size)]:
        at = scanner.feed(piece)
        if at is not None:
            found = consumed + at
            break
        consumed += len(piece)
    assert found == text.index(" after")


IDS = {START: 200, CHANNEL: 201, MESSAGE: 202, CONSTRAIN: 203, END: 204, CALL: 205, RETURN: 206}


def loop_stops(**kwargs) -> Stops:
    """The stop check as the loop runs it: <|call|> and <|return|> end the turn."""
    specials = {i: text for text, i in IDS.items()}
    return Stops(
        HarmonySyntax(),
        eos_ids={IDS[CALL], IDS[RETURN]},
        settings=StopSettings(**kwargs),
        specials=specials,
        tools=TOOLS,
    )


def run(stops: Stops, pieces: list[str]):
    verdicts = []
    for piece in pieces:
        verdicts.append(stops.check(IDS.get(piece, 1), "" if piece in IDS else piece))
        if verdicts[-1].reason is not None:
            break
    return verdicts


def test_in_the_loop_a_call_ends_the_turn_at_its_stop_token():
    stops = loop_stops(max_tokens=100)
    pieces = [CHANNEL, "analysis", MESSAGE, "Need the weather.", END, START, "assistant", CHANNEL, "commentary",
              " to=functions.get_weather ", CONSTRAIN, "json", MESSAGE, '{"city":', ' "Paris"}', CALL]  # fmt: skip
    verdicts = run(stops, pieces)
    assert "".join(v.reasoning for v in verdicts) == "Need the weather."
    assert verdicts[4].reasoning == "Need the weather."  # released once its message ends
    assert verdicts[-1].reason == "tool_call" and [p.call for p in verdicts[-1].parsed] == [
        Call("get_weather", {"city": "Paris"})
    ]


def test_in_the_loop_a_long_answer_is_not_a_call_over_the_cap():
    stops = loop_stops(max_tokens=1000, max_call_chars=50)
    verdicts = run(stops, [CHANNEL, "final", MESSAGE] + ["word " * 20] * 5 + [RETURN])
    assert verdicts[-1].reason == "eos" and not verdicts[-1].parsed
    assert "".join(v.delta for v in verdicts) == "word " * 100


def test_render_writes_what_parse_reads_back():
    call = Call("get_weather", {"city": "Zürich", "days": [1, 2]})
    text = HarmonySyntax().render(call)
    assert (
        text
        == f'{CHANNEL}commentary to=functions.get_weather {CONSTRAIN}json{MESSAGE}{{"city": "Zürich", "days": [1, 2]}}{CALL}'
    )
    assert parse(text) == call


def test_detect_names_harmony_from_the_template_or_the_vocabulary():
    assert detect("{{ '<|start|>assistant<|channel|>final<|message|>' }}")[0] == "harmony"
    assert detect("", {"<|channel|>", "<|message|>"})[0] == "harmony"
