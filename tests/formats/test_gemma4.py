"""Gemma 4's call format (formats/calls/families/gemma4.py): the notation, its errors, and the output around calls."""

from __future__ import annotations

import pytest

from decodeloop.decode.parse import OutputParser, parse_output
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.base import Call, ParseError
from decodeloop.formats.calls.families.gemma4 import CLOSER, OPENER, STRING, Gemma4Syntax, parse, scanner
from decodeloop.formats.calls.formats import detect, get_format

S = STRING
TOOLS = {"get_weather": {"type": "object"}, "echo": {"type": "object"}, "get_time": {"type": "object"}}


def call(body: str) -> str:
    return f"{OPENER}call:{body}{CLOSER}"


def error(text: str) -> ParseError:
    with pytest.raises(ParseError) as caught:
        parse(text)
    return caught.value


def test_values_keep_their_types():
    text = call(f"record{{n:42,x:-0.5,e:1e-05,big:1e+21,ok:true,no:false,none:null,s:{S}42{S},l:[1, {S}a{S}],o:{{}}}}")
    assert parse(text) == Call(
        "record",
        {"n": 42, "x": -0.5, "e": 1e-05, "big": 1e21, "ok": True, "no": False, "none": None, "s": "42",
         "l": [1, "a"], "o": {}},
    )  # fmt: skip


def test_keys_are_bare_text_up_to_the_colon_spaces_and_all():
    assert parse(call(f"f{{key with space:1, B :{{inner:{S}v{S}}}}}")).arguments == {
        "key with space": 1,
        "B": {"inner": "v"},
    }


def test_strings_are_not_escaped():
    value = 'line 1\n\t"quoted" {brace} \\back, [x]: y'
    assert parse(call(f"write{{text:{S}{value}{S}}}")).arguments == {"text": value}


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        (f"{OPENER}get_weather{{}}{CLOSER}", 13, "expected call: at column 13"),
        (call("bad_func no brace"), 26, 'expected { after the tool\'s name "bad_func" at column 26, found a space'),
        (call("get_weather{city:Paris}"), 35, f'found "Paris": write text between {S} markers: {S}Paris{S}'),
        (call("get_weather{ok:True}"), 33, "write true in lower case"),
        (call(f"get_weather{{city:{S}a{S},}}"), 47, "remove the comma before '}'"),
        (call(f"get_weather{{city:{S}a{S},city:{S}b{S}}}"), 47, 'the key "city" at column 47 is given twice'),
        (call(f"get_weather{{city:{S}a{S} unit:1}}"), 47, "expected ',' or '}' after the value of \"city\""),
        (call("get_weather{l:[1,]}"), 35, "remove the comma before it"),
        (call(f"get_weather{{city:{S}a{S}}}}}"), 47, f"end the call with {CLOSER} right after them"),
    ],
)
def test_an_error_names_its_column_and_says_how_to_fix_it(text, column, words):
    e = error(text)
    assert words in str(e) and e.column == column
    assert str(e).endswith(f"a call looks like {OPENER}call:NAME{{key:{S}text{S},count:1}}{CLOSER}")


def test_an_unclosed_call_says_where_the_text_ended():
    e = error(f"{OPENER}call:get_weather{{city:{S}Paris")
    assert "unclosed call: the text ends at column 45 inside the string opened at column 35" in str(e)
    assert e.column == 45


def test_nesting_is_bounded():
    e = error(call("f{a:" + "[" * 200 + "]" * 200 + "}"))
    assert "nest too deeply" in str(e)


def test_a_call_through_parse_output_with_reasoning_and_text_around_it():
    out = parse_output(
        f"<|channel>thought\nLondon needs live data.\n<channel|>Checking. {call(f'get_weather{{city:{S}London{S}}}')}"
        " One moment.",
        TOOLS,
        format=get_format("gemma4"),
    )
    assert out.reasoning == "London needs live data."
    assert out.content == "Checking.  One moment."
    assert out.tool_calls == [Call("get_weather", {"city": "London"})]


def test_a_prompt_that_opened_the_thought_channel_makes_the_output_start_in_it():
    out = parse_output(
        f"still thinking<channel|>{call('get_time{}')}", TOOLS, format=get_format("gemma4"), reasoning_open=True
    )
    assert out.reasoning == "still thinking" and out.content is None and out.tool_calls == [Call("get_time", {})]


def test_markers_inside_a_string_are_its_text_as_text_and_as_special_tokens():
    value = f"wrap calls as {OPENER}call:f{{}}{CLOSER} and close thoughts with <channel|>."
    text = call(f"echo{{text:{S}{value}{S}}}")
    assert parse_output(text, TOOLS, format=get_format("gemma4")).tool_calls == [Call("echo", {"text": value})]
    # the loop's view: every marker a special token of its own, the call's text inside a call
    syntax = Gemma4Syntax()
    specials = {100: OPENER, 101: CLOSER, 102: S, 103: "<channel|>"}
    ids = {v: k for k, v in specials.items()}
    stops = Stops(syntax, eos_ids={0}, settings=StopSettings(collect_calls=True), specials=specials, tools=TOOLS)
    pieces = [OPENER, "call:echo{text:", S, "wrap calls as ", OPENER, "call:f{}", CLOSER]
    pieces += [" and close thoughts with ", "<channel|>", ".", S, "}", CLOSER]
    verdicts = [stops.check(ids.get(p, 1), "" if p in ids else p) for p in pieces]
    assert all(v.reason is None for v in verdicts)
    end = stops.check(0, "")
    assert end.reason == "tool_call" and [p.call for p in end.parsed] == [Call("echo", {"text": value})]


def test_a_truncated_call_is_a_notice_and_no_call():
    out = parse_output(
        f"{call('get_time{}')}{OPENER}call:get_weather{{city:{S}Par", TOOLS, format=get_format("gemma4"), truncated=True
    )
    assert out.tool_calls == [Call("get_time", {})] and not out.errors
    assert len(out.notices) == 1 and "cut off a call to get_weather" in out.notices[0]


def test_parallel_calls_in_one_piece():
    parser = OutputParser(get_format("gemma4"), TOOLS)
    parser.feed_text_only(call(f"get_weather{{city:{S}Paris{S}}}") + call("get_time{}"))
    out = parser.finish()
    assert out.tool_calls == [Call("get_weather", {"city": "Paris"}), Call("get_time", {})]


@pytest.mark.parametrize("size", [1, 2, 5, 13])
def test_the_scanner_ends_at_the_closer_outside_strings_however_the_text_is_cut(size):
    text = f"call:echo{{text:{S}a {CLOSER} b{S}}}{CLOSER} after"
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    found, consumed = None, 0
    scan = scanner()
    for piece in pieces:
        at = scan.feed(piece)
        if at is not None:
            found = consumed + at
            break
        consumed += len(piece)
    assert found == text.index(" after")


def test_render_writes_what_parse_reads_back():
    syntax = Gemma4Syntax()
    arguments = {"city": "Zürich", "n": 3, "x": 1e-05, "ok": False, "none": None, "key with space": [1, {"a": "b"}]}
    arguments["a:b"] = "keys that cannot stand bare are strings"
    text = syntax.render(Call("get_weather", arguments))
    assert text.startswith(f"{OPENER}call:get_weather{{city:{S}Zürich{S},n:3,x:1e-05,")
    assert parse(text) == Call("get_weather", arguments)
    with pytest.raises(ValueError, match="cannot hold"):
        syntax.render(Call("echo", {"text": f"a {S} b"}))


def test_detect_names_gemma4_from_the_template_or_the_vocabulary():
    assert detect("{{ '<|tool_call>call:' + name }}")[0] == "gemma4"
    assert detect("", {"<|tool_call>", "<tool_call|>"})[0] == "gemma4"
    assert detect("<tool_call>{{ tool }}</tool_call>")[0] == "hermes"
