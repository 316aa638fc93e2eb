"""Llama's call formats (formats/calls/families/llama.py): Llama 3's JSON and Llama 4's pythonic lists, read
through the parser and the loop's stop check, the errors a model is told, and the calls written back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decodeloop.decode.parse import OutputParser, parse_output
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.base import Call, ParseError
from decodeloop.formats.calls.families.llama import (
    CallListScanner,
    JsonCallsScanner,
    Llama3Json,
    Llama4Pythonic,
    render_pythonic,
)
from decodeloop.formats.calls.formats import detect, get_format

L3 = get_format("llama3-json")
L4 = get_format("llama4-pythonic")
TOOLS = {"get_weather": {"type": "object"}, "get_time": {"type": "object"}, "write_file": {"type": "object"}}


def cuts(text: str):
    yield [text]
    yield list(text)
    yield [text[i : i + 3] for i in range(0, len(text), 3)]


def streamed(syntax, pieces, tools=TOOLS, truncated=False):
    parser = OutputParser(syntax, tools)
    for piece in pieces:
        parser.feed(piece)
    return parser.finish(truncated)


def calls(out) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in out.tool_calls]


def seen(out) -> tuple:
    """What an output says, its errors compared by message and column."""
    read = [(c.text, c.shape, c.call, c.error and (str(c.error), c.error.column)) for c in out.calls]
    return out.content, out.reasoning, read, out.notices


def errors(out) -> list[str]:
    return [str(c.error) for c in out.errors]


def test_the_formats_are_registered_with_their_canonical_markers():
    assert isinstance(L3, Llama3Json) and isinstance(L4, Llama4Pythonic)
    assert (L3.name, L3.opener, L3.closer, L3.shape) == ("llama3-json", "<|python_tag|>", "", "python_tag")
    assert (L4.name, L4.opener, L4.closer) == ("llama4-pythonic", "<|python_start|>", "<|python_end|>")
    assert L3.collect_calls and L4.collect_calls and L3.alternates == () == L4.alternates


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        '  {"name": "get_weather", "arguments": {"city": "Paris"}}',
        '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}',
        '{"name": "get_weather", "parameters": "{\\"city\\": \\"Paris\\"}"}',  # the object encoded twice
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
    ],
)
def test_a_llama3_json_call_is_read(text):
    for pieces in cuts(text):
        out = streamed(L3, pieces)
        assert calls(out) == [("get_weather", {"city": "Paris"})] and out.content is None


def test_bare_json_is_a_call_only_when_it_names_an_offered_tool():
    for text in ('{"name": "get_stock", "parameters": {}}', '{"a": 1} is a dict', "{}", '{"capital": "Paris"}'):
        out = parse_output(text, TOOLS, format=L3)
        assert out.calls == [] and out.content == text
    # after <|python_tag|> the model said it calls: a tool that is not offered is for dispatch to refuse
    out = parse_output('<|python_tag|>{"name": "get_stock", "parameters": {}}', TOOLS, format=L3)
    assert calls(out) == [("get_stock", {})]


def test_json_opening_the_message_only():
    out = parse_output('Here: {"name": "get_weather", "parameters": {}}', TOOLS, format=L3)
    assert out.calls == [] and out.content == 'Here: {"name": "get_weather", "parameters": {}}'
    out = parse_output('Let me check. <|python_tag|>{"name": "get_time", "parameters": {}}', TOOLS, format=L3)
    assert out.content == "Let me check." and calls(out) == [("get_time", {})]


def test_parallel_json_calls_separated_by_semicolons_in_one_piece():
    text = '{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}} Done.'
    for pieces in cuts(text):
        out = streamed(L3, pieces)
        assert calls(out) == [("get_weather", {"city": "Paris"}), ("get_time", {})]
        assert out.content == "Done."
        assert [c.text for c in out.calls] == [text[: text.index(";")], '{"name": "get_time", "parameters": {}}']


def test_a_marker_inside_a_string_argument_is_the_string():
    # the markers arrive as their special tokens: inside a call they are the call's text, and the scanner
    # follows the string, so neither <|python_tag|> nor <|python_end|> cuts the call
    text = '{"name": "write_file", "parameters": {"text": "a <|python_tag|> b <|python_end|> c"}}'
    for pieces in cuts(text):
        assert calls(streamed(L3, pieces)) == [("write_file", {"text": "a <|python_tag|> b <|python_end|> c"})]
    text = "<|python_start|>[write_file(text='x <|python_end|> y]')]<|python_end|>"
    for pieces in cuts(text):
        assert calls(streamed(L4, pieces)) == [("write_file", {"text": "x <|python_end|> y]"})]


def test_a_call_the_cap_cuts_off_is_a_notice_and_no_call():
    for syntax, text in (
        (L3, '{"name": "get_weather", "parameters": {"city": "Par'),
        (L4, '[get_weather(city="San Francisco"), get_time(zone="UT'),
    ):
        out = parse_output(text, TOOLS, format=syntax, truncated=True)
        assert out.calls == [] and out.content is None
        assert any("cut off a call" in notice for notice in out.notices)


def test_a_call_the_message_ends_inside_is_an_error_the_model_reads():
    out = parse_output('{"name": "get_weather", "parameters": {"city": "Paris"}', TOOLS, format=L3)
    assert out.tool_calls == [] and errors(out) == [
        "the text ends in the middle of the JSON at column 56; finish the JSON; "
        'a call looks like {"name": "get_weather", "parameters": {"city": "Paris"}}'
    ]
    out = parse_output('[get_weather(city="Paris"', TOOLS, format=L4)
    assert errors(out)[0].startswith("the message ended inside the call list; the call list is not valid Python")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"name": "get_weather", "city": "Paris"}',
            'the call at column 1 has the key "city": a call has "name" and "parameters" (or "arguments"), '
            'and may have "type": "function"; put the arguments inside "parameters"',
        ),
        ('{"name": "get_weather", "parameters": [1]}', "the arguments of the call at column 1 must be a JSON object"),
        ('{"name": "get_weather", "type": "tool"}', 'the call at column 1 has "type" the string "tool"'),
        ('{"name": "get_weather", "parameters": {}, "arguments": {}}', 'has both "parameters" and "arguments"'),
        ('{"name": "get_weather", "parameters": {\'city\': 1}}', "JSON writes strings and keys in double quotes"),
        ('{"name": "get_weather", "parameters": {"a": 1, "a": 2}}', 'the key "a" is given twice'),
        ('<|python_tag|>{"name": "get weather"}', 'the tool name "get weather" at column 15 may use only letters'),
        ("<|python_tag|>print(42)", "<|python_tag|> is not followed by a call"),
    ],
)
def test_json_errors_tell_the_model_what_to_fix(text, message):
    found = errors(parse_output(text, TOOLS, format=L3))
    assert len(found) == 1 and message in found[0], found


def test_a_json_error_names_the_column():
    with pytest.raises(ParseError) as caught:
        L3.parse('{"name": "get_weather", "parameters": {"city" "Paris"}}')
    assert caught.value.column == 47 and "invalid JSON at column 47: expecting ':' delimiter" in str(caught.value)


def test_pythonic_values_become_json_values():
    text = (
        "[get_weather(city='Martha\\'s Vineyard', n=-3, ok=True, none=None, xs=[1, (2, 3.5)], "
        "d={'k': \"v\"}, j=null, _limit=5), get_time()]"
    )
    for pieces in cuts(text):
        out = streamed(L4, pieces)
        assert calls(out) == [
            (
                "get_weather",
                {
                    "city": "Martha's Vineyard",
                    "n": -3,
                    "ok": True,
                    "none": None,
                    "xs": [1, [2, 3.5]],
                    "d": {"k": "v"},
                    "j": None,
                    "_limit": 5,
                },
            ),
            ("get_time", {}),
        ]
        assert [c.text for c in out.calls][1] == "get_time()"


def test_a_list_that_does_not_begin_a_call_is_text():
    for text in ("[1, 2] are numbers", "[Note] see below", "[get_weather is a tool]", "[]"):
        out = parse_output(text, TOOLS, format=L4)
        assert out.calls == [] and out.content == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[get_weather("Paris")]', "write every argument of get_weather as key=value (column 14)"),
        ("[get_weather(city=Paris)]", "'Paris' at column 19 is not a value"),
        ("[get_weather(city='a', city='b')]", "the argument city of get_weather is given twice"),
        ("[get_weather(**d)]", "not **"),
        ("[get_weather(d={1: 2})]", "a dict's keys are strings"),
        ("[get_weather(z=1j)]", "'1j' at column 16 is not a value"),
        ("<|python_start|>get_weather(city='a')<|python_end|>", "the calls are a Python list of one or more calls"),
        ("<|python_start|>[get_weather(city='a'),]]<|python_end|>", "the call list is not valid Python at column"),
    ],
)
def test_pythonic_errors_tell_the_model_what_to_fix(text, message):
    found = errors(parse_output(text, TOOLS, format=L4))
    assert len(found) == 1 and message in found[0], found


def test_the_stop_check_runs_parallel_calls_when_the_message_ends():
    stops = Stops(L4, eos_ids=[0], settings=StopSettings(max_tokens=100, collect_calls=True), tools=TOOLS)
    text = "<|python_start|>[get_weather(city='Paris'), get_time()]<|python_end|>"
    verdicts = [stops.check(1, ch) for ch in text]
    assert all(v.reason is None and v.delta == "" for v in verdicts)
    end = stops.check(0, "")
    assert end.reason == "tool_call" and end.shapes == ("python_start", "python_start")
    assert [p.call for p in end.parsed] == [Call("get_weather", {"city": "Paris"}), Call("get_time", {})]


def test_render_writes_what_parse_reads():
    call = Call("get_weather", {"city": "Zürich \"'\n", "n": 1.5, "ok": False, "none": None, "xs": [{"a": [1]}]})
    assert L3.render(call).startswith('{"name": "get_weather", "parameters": {"city": "Zürich')
    assert L3.parse(L3.render(call)) == call
    assert L4.parse(L4.render(call)) == call
    assert L4.render(Call("get_time", {})) == "[get_time()]"


def test_render_refuses_what_a_pythonic_call_cannot_hold():
    with pytest.raises(ValueError, match="not a Python name"):
        render_pythonic(Call("get_weather", {"from": "Paris"}))
    with pytest.raises(ValueError, match="NaN"):
        render_pythonic(Call("get_weather", {"x": float("nan")}))


def test_describe_teaches_each_format_and_lists_the_tools():
    class Tool:
        name, description, input_schema = "get_weather", "The weather", {"type": "object"}

    assert '"parameters": dictionary of argument name' in L3.describe([Tool()])
    assert "[func_name1(param_name1=value1" in L4.describe([Tool()])
    assert '"name": "get_weather"' in L4.describe([Tool()]) and L3.describe([]) == ""


def test_the_scanners_end_where_the_calls_do():
    def end_of(scanner, pieces):
        consumed = 0
        for piece in pieces:
            at = scanner.feed(piece)
            if at is not None:
                return consumed + at
            consumed += len(piece)
        return None

    text = '"a": "}; x"} ;{"b": [1]}  then'
    for pieces in cuts(text):
        assert end_of(JsonCallsScanner(opened=True), pieces) == text.index("then")
    for pieces in cuts(" f(a=')]', b=[1]) , g()] rest"):
        assert end_of(CallListScanner(), pieces) == len(" f(a=')]', b=[1]) , g()]")
    assert end_of(CallListScanner(), ["1, 2]"]) == 0
    assert end_of(JsonCallsScanner(opened=True), ["braces}"]) == 0


@pytest.mark.parametrize(
    ("template", "vocabulary", "name"),
    [
        ("{{ '<|python_tag|>' }}", (), "llama3-json"),
        ("", ("<|begin_of_text|>", "<|python_tag|>", "<|eom_id|>"), "llama3-json"),
        ("", ("<|header_start|>", "<|python_start|>", "<|python_end|>"), "llama4-pythonic"),
    ],
)
def test_detect_names_the_llama_formats(template, vocabulary, name):
    found = detect(template, vocabulary)
    assert found is not None and found[0] == name and found[1]


ATOMS = [
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    '"',
    "'",
    "\\",
    ":",
    ",",
    ";",
    "=",
    " ",
    "\n",
    '"name"',
    '"parameters"',
    "get_weather",
    "city",
    "1",
    "-",
    "True",
    "None",
    "null",
    "x",
    "é",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), max_size=24), st.lists(st.integers(1, 5), min_size=1), st.booleans())
def test_any_text_reads_the_same_however_it_is_cut_and_never_raises(units, sizes, truncated):
    text = "".join(units)
    for syntax in (L3, L4):
        whole = parse_output(text, TOOLS, format=syntax, truncated=truncated)
        parser, at, n = OutputParser(syntax, TOOLS), 0, 0
        while at < len(units):  # the units whole, as a tokenizer keeps a marker one token
            size = sizes[n % len(sizes)]
            parser.feed("".join(units[at : at + size]))
            at, n = at + size, n + 1
        assert seen(parser.finish(truncated)) == seen(whole)
