"""Kimi's call formats (formats/calls/families/kimi.py): K2's calls section, K3's XTML; read through the parser
and the loop's stop check, the errors a model is told, rendering."""

from __future__ import annotations

import pytest

from decodeloop.decode.parse import OutputParser, parse_output
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.base import Call, ParseError
from decodeloop.formats.calls.formats import detect, get_format

TOOLS = {"get_weather": {"type": "object"}, "write_file": {"type": "object"}}
SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CB, CE, AB = "<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_call_argument_begin|>"


def k2_call(ident: str, arguments: str) -> str:
    return f"{CB}{ident}{AB}{arguments}{CE}"


def argument(key: str, value: str, kind: str = "string") -> str:
    return f'<|open|>argument key="{key}" type="{kind}"<|sep|>{value}<|close|>argument<|sep|>'


def k3_call(name: str, *arguments: str, index: int = 1) -> str:
    return f'<|open|>call tool="{name}" index="{index}"<|sep|>' + "".join(arguments) + "<|close|>call<|sep|>"


def k3_message(answer: str, *calls: str, reasoning: str = "") -> str:
    """What K3 writes after a thinking prompt (which opened the think element)."""
    tools = "<|open|>tools<|sep|>" + "".join(calls) + "<|close|>tools<|sep|>" if calls else ""
    return f"{reasoning}<|close|>think<|sep|><|open|>response<|sep|>{answer}<|close|>response<|sep|>{tools}<|close|>message<|sep|>"


def parse(format_name: str, text: str, **options):
    return parse_output(text, TOOLS, format=get_format(format_name), **options)


def only_error(format_name: str, text: str, **options) -> ParseError:
    out = parse(format_name, text, **options)
    assert out.tool_calls == [] and len(out.errors) == 1, out
    error = out.errors[0].error
    assert error is not None
    return error


# --- K2 -------------------------------------------------------------------------------------------------------


def test_a_k2_call_through_parse_output_with_its_reasoning():
    text = "Paris, in Celsius.</think>Let me check." + SB + k2_call("functions.get_weather:0", '{"city": "Paris"}') + SE
    out = parse("kimi-k2", text, reasoning_open=True)
    assert (out.reasoning, out.content) == ("Paris, in Celsius.", "Let me check.")
    assert out.tool_calls == [Call("get_weather", {"city": "Paris"})]


def test_parallel_k2_calls_in_one_piece_and_ids_with_or_without_functions():
    text = (
        SB + k2_call("functions.get_weather:0", '{"city": "Paris"}') + k2_call("write_file:1 ", ' {"path": "a"} ') + SE
    )
    out = parse("kimi-k2", text)
    assert out.tool_calls == [Call("get_weather", {"city": "Paris"}), Call("write_file", {"path": "a"})]
    assert out.content is None and out.errors == []


def test_k2_markers_inside_a_json_string_are_the_strings_text():
    content = f"stop at {CE} and {SE}; {SB} opens, </think> ends reasoning"
    text = SB + k2_call("functions.write_file:0", f'{{"path": "x", "content": "{content}"}}') + SE
    assert parse("kimi-k2", text).tool_calls == [Call("write_file", {"path": "x", "content": content})]


def test_k2_text_in_the_section_outside_a_call_is_not_read_but_text_after_it_is_content():
    text = "Before. " + SB + " noise " + k2_call("functions.get_weather:0", '{"city": "Rome"}') + SE + " After."
    out = parse("kimi-k2", text)
    assert (out.content, out.tool_calls) == ("Before.  After.", [Call("get_weather", {"city": "Rome"})])


def test_k2_call_cut_off_by_the_token_cap_is_a_notice_and_no_call():
    out = parse("kimi-k2", SB + CB + "functions.get_weather:0" + AB + '{"city": "Madrid", "unit":', truncated=True)
    assert out.calls == [] and out.content is None
    assert any("cut off a call" in n for n in out.notices)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (k2_call("functions.get_weather:0", '{"city": Paris}'), "the arguments are not a JSON object"),
        (f'{CB}functions.get_weather:0{{"city": "P"}}{CE}', "no <|tool_call_argument_begin|> after the call's id"),
        (k2_call("functions.get weather:0", "{}"), '"get weather" is not a tool\'s name'),
        (f'{CB}functions.get_weather:0{AB}{{"city": "P"}}', "end it with <|tool_call_end|> before"),
        ("just text", "the calls section holds no call"),
    ],
)
def test_k2_errors_tell_the_model_how_a_call_is_written(body, said):
    assert said in str(only_error("kimi-k2", SB + body + SE))


def test_an_empty_k2_section_is_no_call_and_no_text():
    assert (lambda out: (out.content, out.calls))(parse("kimi-k2", "Reasoning. " + SB + SE)) == ("Reasoning.", [])


# --- K3 -------------------------------------------------------------------------------------------------------


def test_a_k3_message_its_reasoning_answer_and_typed_calls():
    call = k3_call(
        "get_weather",
        argument("city", "Paris"),
        argument("days", "3", "number"),
        argument("exact", "false", "boolean"),
        argument("note", "null", "null"),
        argument("where", '{"lat": 48.9, "tags": ["a"]}', "object"),
    )
    out = parse("kimi-k3", k3_message("Let me look.", call, reasoning="Paris it is."), reasoning_open=True)
    assert (out.reasoning, out.content) == ("Paris it is.", "Let me look.")
    assert out.tool_calls == [
        Call(
            "get_weather",
            {"city": "Paris", "days": 3, "exact": False, "note": None, "where": {"lat": 48.9, "tags": ["a"]}},
        )
    ]


def test_parallel_k3_calls_in_one_piece():
    calls = (
        k3_call("get_weather", argument("city", "Paris")),
        k3_call("get_weather", argument("city", "Tokyo"), index=2),
    )
    out = parse("kimi-k3", k3_message("", *calls), reasoning_open=True)
    assert out.tool_calls == [Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Tokyo"})]
    assert (out.content, out.reasoning, out.errors) == (None, None, [])


def test_k3_values_are_raw_and_attribute_values_unescaped():
    call = k3_call(
        "write_file",
        '<|open|>argument key="q&amp;a &quot;1&quot;" type="string"<|sep|>C:\\a "b" & <c>\n<|close|>argument<|sep|>',
    )
    out = parse("kimi-k3", k3_message("", call), reasoning_open=True)
    assert out.tool_calls == [Call("write_file", {'q&a "1"': 'C:\\a "b" & <c>\n'})]


def test_k3_marker_text_inside_a_value_is_the_values_when_no_argument_or_call_end_follows_it():
    value = "<|close|>argument<|sep|> is how args end, <|close|>call<|sep|> too"
    call = k3_call("write_file", argument("path", "x.txt"), argument("content", value))
    out = parse("kimi-k3", k3_message("", call), reasoning_open=True)
    assert out.tool_calls == [Call("write_file", {"path": "x.txt", "content": value})]


def test_k3_skipping_the_think_element_the_prompt_opened_answers_in_the_response():
    out = parse(
        "kimi-k3",
        "<|open|>response<|sep|>Hello world<|close|>response<|sep|><|close|>message<|sep|>",
        reasoning_open=True,
    )
    assert (out.content, out.reasoning) == ("Hello world", None)


def test_k3_with_the_response_opened_by_the_prompt():
    text = (
        "<|close|>response<|sep|><|open|>tools<|sep|>"
        + k3_call("get_weather", argument("city", "Rome"))
        + "<|close|>tools<|sep|>"
    )
    out = parse("kimi-k3", "Hi." + text)
    assert (out.content, out.tool_calls) == ("Hi.", [Call("get_weather", {"city": "Rome"})])


def test_k3_call_cut_off_by_the_token_cap_keeps_the_whole_calls_before_it():
    text = "<|close|>response<|sep|><|open|>tools<|sep|>" + k3_call("get_weather", argument("city", "Rome"))
    out = parse(
        "kimi-k3",
        text + '<|open|>call tool="write_file" index="2"<|sep|>' + '<|open|>argument key="path"',
        truncated=True,
    )
    assert out.tool_calls == [Call("get_weather", {"city": "Rome"})] and out.errors == []
    assert any("cut off a call" in n for n in out.notices)


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (k3_call("get_weather", argument("days", "three", "number")), 'the value of "days" is not JSON'),
        (k3_call("get_weather", argument("days", "true", "number")), 'the value of "days" is not of the type number'),
        (k3_call("get_weather", argument("days", "3", "float")), 'has the type "float"'),
        ('<|open|>call index="1"<|sep|><|close|>call<|sep|>', 'the call names no tool: tool="NAME"'),
        (k3_call("get_weather", argument("a", "1"), argument("a", "2")), 'the argument "a" is given twice'),
        (k3_call("get_weather", "hello"), 'unexpected text "hello" in the call to get_weather'),
        ('<|open|>call tool="get_weather" index="1"<|sep|>', "is not closed: end it with <|close|>call<|sep|>"),
        ("some words", "the tools element holds no call"),
    ],
)
def test_k3_errors_tell_the_model_how_a_call_is_written(call, said):
    assert said in str(only_error("kimi-k3", k3_message("", call), reasoning_open=True))


def test_k3_control_tokens_as_the_tokenizer_writes_them_text_between():
    """<|open|>, <|close|> and <|sep|> are the special tokens; the element's names are text, in pieces of their own."""
    parser = OutputParser(get_format("kimi-k3"), TOOLS, reasoning_open=True)
    o, c, s = (parser.special_id(m) for m in ("<|open|>", "<|close|>", "<|sep|>"))
    units = ["Plan", c, "think", s, o, "response", s, "Sure", c, "response", s, o, "tools", s, o]
    units += ['call tool="write_file" index="1"', s, o, 'argument key="content" type="string"', s, "a", c, "argument"]
    units += [s, " b", c, "argument", s, c, "call", s, c, "tools", s, c, "message", s]
    for unit in units:
        parser.feed_units([unit])
    out = parser.finish()
    assert (out.reasoning, out.content) == ("Plan", "Sure")
    assert out.tool_calls == [Call("write_file", {"content": "a<|close|>argument<|sep|> b"})]


def test_the_loops_stop_check_runs_every_k3_call_at_the_end_of_the_message():
    calls = (
        k3_call("get_weather", argument("city", "Paris")),
        k3_call("get_weather", argument("city", "Oslo"), index=2),
    )
    stops = Stops(
        get_format("kimi-k3"),  # its reasoning markers too
        eos_ids=[0],
        settings=StopSettings(collect_calls=True, max_tokens=10_000),
        reasoning_open=True,
    )
    shown = reasoning = ""
    for ch in k3_message("One moment.", *calls, reasoning="Two cities."):
        verdict = stops.check(1, ch)
        assert verdict.reason is None
        shown, reasoning = shown + verdict.delta, reasoning + verdict.reasoning
    verdict = stops.check(0, "")
    assert verdict.reason == "tool_call" and (shown, reasoning) == ("One moment.", "Two cities.")
    assert [p.call for p in verdict.parsed] == [
        Call("get_weather", {"city": "Paris"}),
        Call("get_weather", {"city": "Oslo"}),
    ]


# --- the syntaxes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["kimi-k2", "kimi-k3"])
def test_a_rendered_call_reads_back_as_itself(name):
    syntax = get_format(name)
    call = Call(
        "write_file", {'a "key"': 'say "hi" & <b>\n', "n": -2.5, "ok": True, "none": None, "list": [1, {"a": "b"}]}
    )
    written = syntax.render(call)
    assert parse_output(written, TOOLS, format=syntax).tool_calls == [call]
    assert syntax.parse(written) == call
    with pytest.raises(ValueError):
        syntax.render(Call("bad name", {}))


def test_parse_raises_the_error_of_a_call_that_does_not_read():
    with pytest.raises(ParseError, match="the arguments are not a JSON object"):
        get_format("kimi-k2").parse(SB + k2_call("functions.get_weather:0", "{") + SE)
    with pytest.raises(ParseError, match="no call"):
        get_format("kimi-k3").parse("hello")


def test_describe_names_the_tools_and_the_calls_markup():
    class Tool:
        name, description, input_schema = "get_weather", "The weather.", {"type": "object", "properties": {}}

    assert '"name": "get_weather"' in get_format("kimi-k2").describe([Tool()])
    assert "<|open|>call tool=" in get_format("kimi-k3").describe([Tool()])
    assert get_format("kimi-k3").describe([]) == ""


def test_detect_names_each_variant_and_why():
    name, reason = detect("", ["<|tool_calls_section_begin|>", "<|im_end|>"])
    assert name == "kimi-k2" and "<|tool_calls_section_begin|>" in reason
    assert detect("", ["<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"])[0] == "kimi-k3"
    assert detect("", ["<|open|>"]) is None
