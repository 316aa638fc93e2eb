"""Qwen's XML call format (formats/calls/families/qwen3_xml.py): values typed by the schema, where a value
ends, the errors a model reads, the bare <function= shape, and the same reading however the text is cut."""

from __future__ import annotations

import random

import pytest

from decodeloop.decode.parse import OutputParser, parse_output
from decodeloop.formats.calls.base import Call, ParseError
from decodeloop.formats.calls.formats import detect, get_format

SYNTAX = get_format("qwen3-xml")
TOOLS = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "zip": {"type": "string"},
            "metric": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    },
    "write_file": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}},
}


def call(*parameters: tuple[str, str], name: str = "get_weather") -> str:
    body = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in parameters)
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def parsed(text: str, **options):
    return parse_output(text, TOOLS, format=SYNTAX, **options)


def only_call(text: str, **options) -> Call:
    out = parsed(text, **options)
    assert [p.error for p in out.calls] == [None]
    return out.tool_calls[0]


def error_of(text: str) -> ParseError:
    out = parsed(text)
    assert out.tool_calls == [] and len(out.errors) == 1
    error = out.errors[0].error
    assert error is not None
    return error


def test_a_call_through_parse_output_has_its_values_typed_by_the_schema():
    text = "Let me look.\n\n" + call(
        ("city", "Paris"), ("days", "3"), ("zip", "02139"), ("metric", "True"), ("tags", '["a", "b"]')
    )
    out = parsed(text)
    assert out.content == "Let me look."
    assert out.tool_calls == [
        Call("get_weather", {"city": "Paris", "days": 3, "zip": "02139", "metric": True, "tags": ["a", "b"]})
    ]


def test_exactly_one_line_break_on_each_side_of_a_value_is_markup():
    text = "<tool_call>\n<function=write_file>\n<parameter=content>\n    indented\n\n</parameter>\n</function>\n</tool_call>"
    assert only_call(text).arguments == {"content": "    indented\n"}


def test_a_parameter_the_schema_does_not_name_stays_text():
    assert only_call(call(("days", "3"), name="unknown_tool")).arguments == {"days": "3"}


def test_markup_inside_a_value_is_its_text():
    value = "Close with </parameter> then </function> and </tool_call>; open <tool_call> or <parameter=x>."
    text = call(("path", "x.md"), ("content", value), name="write_file")
    assert only_call(text).arguments == {"path": "x.md", "content": value}


def test_a_special_tokens_marker_inside_a_string_argument_is_the_arguments_text():
    # <tool_call> and </tool_call> are special tokens of Qwen's tokenizer: as ids inside a value they are text
    parser = OutputParser(SYNTAX, TOOLS, specials=["<|im_end|>"])
    opener, closer = parser.special_id("<tool_call>"), parser.special_id("</tool_call>")
    parser.feed_units([opener, "\n<function=write_file>\n<parameter=content>\nwrap in ", opener, " and ", closer])
    parser.feed_units([" blocks\n</parameter>\n</function>\n", closer])
    out = parser.finish()
    assert out.tool_calls == [Call("write_file", {"content": "wrap in <tool_call> and </tool_call> blocks"})]


def test_parallel_calls_in_one_piece_are_read_in_order():
    text = call(("city", "Paris")) + "\n" + call(("city", "Oslo"), ("days", "2"))
    out = parsed(text)
    assert out.tool_calls == [Call("get_weather", {"city": "Paris"}), Call("get_weather", {"city": "Oslo", "days": 2})]
    assert out.content is None


def test_a_call_the_token_cap_cuts_off_is_a_notice_not_a_call():
    out = parsed("<tool_call>\n<function=write_file>\n<parameter=content>\nrm -rf /", truncated=True)
    assert out.calls == [] and out.content is None
    assert any("cut off a call to write_file" in notice for notice in out.notices)


def test_a_message_that_ends_inside_a_value_is_an_error_not_a_call():
    error = error_of("<tool_call>\n<function=write_file>\n<parameter=content>\nrm -rf /")
    assert str(error).startswith('unclosed call: the text ends at column 63 inside the value of "content"')


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>',
            'expected <function=NAME> at column 13, found "{\\"name\\": \\"get_weather\\", ..."',
            13,
        ),
        (
            "<tool_call>\n<function=get_weather\n</function>\n</tool_call>",
            "the <function= tag at column 13 has no closing '>' on its line",
            13,
        ),
        (
            "<tool_call>\n<function=get weather>\n</function>\n</tool_call>",
            '"get weather" is not a tool name: a tool name uses only letters, digits, _ . - and /',
            23,
        ),
        (
            call(("city", "Paris"), ("city", "Oslo")),
            'the argument "city" at column 72 is given twice; give it once',
            72,
        ),
        (
            "<tool_call>\n<function=get_weather>\ncity=Paris\n</function>\n</tool_call>",
            'expected <parameter=KEY> or </function> at column 36, found "city=Paris"',
            36,
        ),
        (
            "<tool_call>\n<function=get_weather>\n</function>\nthat is all\n</tool_call>",
            'unexpected text after </function> at column 48: "that is all"; end the call with </tool_call> right '
            "after </function>",
            48,
        ),
    ],
)
def test_errors_say_where_and_how_to_write_the_call(text, message, column):
    error = error_of(text)
    assert str(error).startswith(message + "; a call is <tool_call>, <function=NAME>, a <parameter=KEY> line")
    assert error.column == column


def test_a_left_out_close_parameter_ends_at_the_next_tag():
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nDallas\n<parameter=days>\n3\n</function>\n</tool_call>"
    )
    assert only_call(text).arguments == {"city": "Dallas", "days": 3}


def test_a_message_ending_at_a_close_tool_call_a_value_swallowed_is_the_calls_end():
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</tool_call>"
    assert only_call(text).arguments == {"city": "Paris"}


def test_a_call_without_its_tool_call_opener_is_read_with_the_closer_after_it():
    text = "I will look.\n\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
    out = parsed(text)
    assert out.tool_calls == [Call("get_weather", {"city": "Paris"})] and out.content == "I will look."
    assert [p.shape for p in out.calls] == ["qwen3_xml_bare"]


def test_text_after_a_bare_call_is_content_and_a_function_tag_in_prose_is_text():
    out = parsed("<function=get_weather>\n</function>\nDone.")
    assert out.tool_calls == [Call("get_weather", {})] and out.content == "Done."
    prose = "Write <function=NAME> to call a tool, like <function=get_weather> <b>this</b>."
    out = parsed(prose)
    assert out.calls == [] and out.content == prose


def test_a_call_inside_reasoning_runs_by_default_and_is_reasoning_when_ignored():
    # the format's default: Qwen3.5 may go from the prefilled <think> straight to a call
    text = "Check the weather.\n" + call(("city", "Paris"))
    ignored = OutputParser(SYNTAX, TOOLS, reasoning_open=True, calls_in_reasoning="ignore")
    ignored.feed(text)
    out = ignored.finish()
    assert out.calls == [] and out.reasoning is not None and "<tool_call>" in out.reasoning
    parser = OutputParser(SYNTAX, TOOLS, reasoning_open=True)
    parser.feed(text)
    out = parser.finish()
    assert out.tool_calls == [Call("get_weather", {"city": "Paris"})] and out.reasoning == "Check the weather."


OUTPUTS = [
    "Thinking.\n</think>\n\nSure.\n" + call(("city", "Paris"), ("days", "3")) + "\n" + call(("city", "Oslo")),
    call(("content", "a </parameter> b\n</function> c </tool_call> d"), ("path", "p"), name="write_file"),
    "before<tool_call><function=get_weather><parameter=city>Paris</parameter></function></tool_call>after",
    "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n" + call(),
    "Use <function=get_weather> like this.\n<function=get_weather>\n</function>\ntail",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</tool_call>",
]


def units(parser: OutputParser, text: str) -> list:
    """The text as units: each marker of the format whole, as its special id, every other character alone."""
    markers = ("<tool_call>", "</tool_call>", "<function=", "<think>", "</think>")
    out: list = []
    pos = 0
    while pos < len(text):
        marker = next((m for m in markers if text.startswith(m, pos)), None)
        out.append(parser.special_id(marker) if marker else text[pos])
        pos += len(marker) if marker else 1
    return out


def read(text: str, group: int | None, seed: int = 0):
    parser = OutputParser(SYNTAX, TOOLS, reasoning_open=text.startswith("Thinking"))
    all_units = units(parser, text)
    rng = random.Random(seed)
    pos = 0
    while pos < len(all_units):
        size = len(all_units) if group is None else group or rng.randint(1, 9)
        parser.feed_units(all_units[pos : pos + size])
        pos += size
    out = parser.finish()
    return out.content, out.reasoning, [(p.text, p.call, p.error and str(p.error)) for p in out.calls]


@pytest.mark.parametrize("text", OUTPUTS)
def test_the_same_reading_however_the_text_is_cut(text):
    whole = read(text, None)
    assert whole[2], "every sample holds a call"
    for group, seed in [(1, 0), (2, 0), (0, 1), (0, 2), (0, 3)]:
        assert read(text, group, seed) == whole


def test_render_writes_what_parse_reads_back_and_refuses_a_value_that_would_end_early():
    written = SYNTAX.render(Call("write_file", {"path": "a </parameter> b", "content": "x\n"}))
    assert written == (
        "<tool_call>\n<function=write_file>\n<parameter=path>\na </parameter> b\n</parameter>\n"
        "<parameter=content>\nx\n\n</parameter>\n</function>\n</tool_call>"
    )
    assert SYNTAX.parse(written) == Call("write_file", {"path": "a </parameter> b", "content": "x\n"})
    assert "<parameter=days>\n3\n</parameter>" in SYNTAX.render(Call("get_weather", {"days": 3}))
    with pytest.raises(ValueError, match="would end it early"):
        SYNTAX.render(Call("write_file", {"content": "x\n</parameter>\n</function>"}))


def test_the_chat_template_names_the_format():
    template = "<tool_call>\n<function={{ tool_call.name }}>\n<parameter={{ name }}>\n"
    assert detect(template) == (
        "qwen3-xml",
        "the chat template writes <function=NAME> and <parameter=KEY> tags in <tool_call>",
    )
    assert detect('<tool_call>\n{"name": ...}\n</tool_call>')[0] == "hermes"


def test_describe_lists_each_tool_and_shows_the_call():
    class Tool:
        name, description, input_schema = "get_weather", "Weather.", {"type": "object"}

    text = SYNTAX.describe([Tool()])
    assert '{"type": "function", "function": {"name": "get_weather"' in text
    assert "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>" in text
    assert SYNTAX.describe([]) == ""
