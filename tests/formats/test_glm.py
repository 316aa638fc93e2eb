"""GLM's call format (formats/calls/families/glm.py): both variants read alike, values typed by the schema,
tags inside a value are its text, the errors a model reads, and the same reading however the text is cut."""

from __future__ import annotations

import random

import pytest

from decodeloop.decode.parse import OutputParser, parse_output
from decodeloop.formats.calls.base import Call, ParseError
from decodeloop.formats.calls.formats import detect, get_format

GLM47 = get_format("glm47")
GLM45 = get_format("glm45")
TOOLS = {
    "set_timer": {
        "type": "object",
        "properties": {
            "seconds": {"type": "integer"},
            "label": {"type": "string"},
            "repeat": {"type": ["boolean", "null"]},
            "tags": {"type": "array"},
        },
    },
    "write_file": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}},
}
MARKERS = ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "</think>")


def call(name: str, *pairs: tuple[str, str], newlines: bool = False) -> str:
    sep = "\n" if newlines else ""
    return sep.join(
        [f"<tool_call>{name}", *(f"<arg_key>{k}</arg_key>{sep}<arg_value>{v}</arg_value>" for k, v in pairs)]
    ) + (sep + "</tool_call>")


def parsed(text: str, syntax=GLM47, **options):
    return parse_output(text, TOOLS, format=syntax, **options)


def error_of(text: str) -> ParseError:
    out = parsed(text)
    assert out.tool_calls == [] and len(out.errors) == 1
    error = out.errors[0].error
    assert error is not None
    return error


@pytest.mark.parametrize("newlines", [False, True])
def test_both_variants_read_alike_with_values_typed_by_the_schema(newlines):
    text = "Timing it.</think>" + call(
        "set_timer", ("seconds", "3"), ("label", "3"), ("repeat", "null"), ("tags", '["a"]'), newlines=newlines
    )
    out = parsed(text, GLM45 if newlines else GLM47, reasoning_open=True)
    assert out.reasoning == "Timing it." and out.content is None
    assert out.tool_calls == [Call("set_timer", {"seconds": 3, "label": "3", "repeat": None, "tags": ["a"]})]


def test_a_value_is_raw_text_whitespace_and_all():
    text = call("write_file", ("path", "C:\\tmp\\x"), ("content", '  two  "spaces"\n'))
    assert parsed(text).tool_calls == [Call("write_file", {"path": "C:\\tmp\\x", "content": '  two  "spaces"\n'})]


def test_a_value_the_schema_does_not_type_is_json_where_it_reads_as_json():
    text = call("other", ("n", "[1, 2]"), ("id", "123_456"), ("zip", "0042"), ("x", "NaN"))
    assert parsed(text).tool_calls == [Call("other", {"n": [1, 2], "id": "123_456", "zip": "0042", "x": "NaN"})]


def test_a_special_tokens_marker_inside_a_string_argument_is_the_arguments_text():
    parser = OutputParser(GLM47, TOOLS)
    ids = {m: parser.special_id(m) for m in MARKERS}
    value = ["wrap in ", ids["<tool_call>"], " and ", ids["</tool_call>"], "; keys in ", ids["<arg_key>"]]
    parser.feed_units([ids["<tool_call>"], "write_file", ids["<arg_key>"], "content", ids["</arg_key>"]])
    parser.feed_units([ids["<arg_value>"], *value, ids["</arg_value>"], ids["</tool_call>"]])
    out = parser.finish()
    assert out.tool_calls == [
        Call("write_file", {"content": "wrap in <tool_call> and </tool_call>; keys in <arg_key>"})
    ]


def test_parallel_calls_in_one_piece_are_read_in_order():
    text = call("set_timer", ("seconds", "1")) + "\n" + call("set_timer", ("seconds", "2")) + call("get_time")
    out = parsed(text)
    assert [c.arguments for c in out.tool_calls] == [{"seconds": 1}, {"seconds": 2}, {}]
    assert [c.name for c in out.tool_calls] == ["set_timer", "set_timer", "get_time"] and out.content is None


def test_text_around_calls_is_content():
    out = parsed("Checking.<tool_call>get_time</tool_call>after it")
    assert out.content == "Checking.after it" and out.tool_calls == [Call("get_time", {})]


def test_a_call_the_token_cap_cuts_off_is_a_notice_not_a_call():
    out = parsed("<tool_call>set_timer<arg_key>seconds</arg_key><arg_value>3</arg_value>", truncated=True)
    assert out.calls == [] and out.content is None
    assert any("cut off a call to set_timer" in notice for notice in out.notices)


def test_a_message_ending_at_a_close_tool_call_a_value_swallowed_is_the_calls_end():
    text = "<tool_call>set_timer<arg_key>label</arg_key><arg_value>tea</tool_call>"
    assert parsed(text).tool_calls == [Call("set_timer", {"label": "tea"})]


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        (
            '<tool_call>{"name": "set_timer"}</tool_call>',
            '"{\\"name\\": \\"set_timer\\"}" after <tool_call> is not a tool name',
            12,
        ),
        ("<tool_call></tool_call>", "the call names no tool: write the tool's name right after <tool_call>", 12),
        (
            "<tool_call>set_timer<arg_value>3</arg_value></tool_call>",
            "expected <arg_key> or </tool_call> at column 21, found '<arg_value>'",
            21,
        ),
        (
            "<tool_call>set_timer<arg_key>seconds</arg_key>3</tool_call>",
            'expected <arg_value> after the key "seconds" at column 47, found "3"',
            47,
        ),
        (
            "<tool_call>set_timer<arg_key>seconds<arg_value>3</arg_value></tool_call>",
            "the <arg_key> at column 21 has no </arg_key>",
            21,
        ),
        (
            call("set_timer", ("seconds", "1"), ("seconds", "2")),
            'the argument "seconds" at column 71 is given twice; give it once',
            71,
        ),
        (
            "<tool_call>set_timer<arg_key>seconds</arg_key><arg_value>3</arg_value>",
            "unclosed call: the text ends at column 71; end the call with </tool_call>",
            71,
        ),
        (
            "<tool_call>set_timer<arg_key>seconds</arg_key><arg_value>3",
            'unclosed call: the text ends at column 59 inside the value of "seconds"',
            59,
        ),
    ],
)
def test_errors_say_where_and_how_to_write_the_call(text, message, column):
    error = error_of(text)
    assert str(error).startswith(message)
    assert str(error).endswith(
        "; a call looks like <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value></tool_call>"
    )
    assert error.column == column


OUTPUTS = [
    "\n<think>Two timers.</think>\n" + call("set_timer", ("seconds", "1"), newlines=True) + "\n" + call("get_time"),
    call("write_file", ("content", "a <tool_call>b</tool_call> <arg_key>c"), ("path", "p")) + "tail",
    "Checking. " + call("set_timer", ("label", "  spaced  ")),
    "<tool_call>set_timer<arg_key>label</arg_key><arg_value>tea</tool_call>",
]


def units(parser: OutputParser, text: str) -> list:
    """The text as units: each marker whole, as its special id, every other character alone."""
    out: list = []
    pos = 0
    while pos < len(text):
        marker = next((m for m in (*MARKERS, "<think>") if text.startswith(m, pos)), None)
        out.append(parser.special_id(marker) if marker else text[pos])
        pos += len(marker) if marker else 1
    return out


def read(text: str, group: int | None, seed: int = 0):
    syntax = GLM45 if "\n<arg_key>" in text else GLM47
    parser = OutputParser(syntax, TOOLS)
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


def test_each_variant_renders_as_its_model_writes_and_parse_reads_it_back():
    written = Call("set_timer", {"seconds": 3, "label": "tea\n"})
    assert GLM47.render(written) == (
        "<tool_call>set_timer<arg_key>seconds</arg_key><arg_value>3</arg_value>"
        "<arg_key>label</arg_key><arg_value>tea\n</arg_value></tool_call>"
    )
    assert GLM45.render(written) == (
        "<tool_call>set_timer\n<arg_key>seconds</arg_key>\n<arg_value>3</arg_value>\n"
        "<arg_key>label</arg_key>\n<arg_value>tea\n</arg_value>\n</tool_call>"
    )
    assert GLM45.render(Call("get_time", {})) == "<tool_call>get_time\n</tool_call>"
    assert GLM47.parse(GLM45.render(written)) == written
    with pytest.raises(ValueError, match="holds </arg_value>"):
        GLM47.render(Call("write_file", {"content": "a </arg_value> b"}))


def test_the_chat_template_names_the_variant():
    assert detect("<tool_call>{{ tc.name }}\n<arg_key>{{ k }}</arg_key>\n<arg_value>")[0] == "glm45"
    assert detect("<tool_call>{{ tc.name }}<arg_key>{{ k }}</arg_key><arg_value>")[0] == "glm47"
    assert detect("", vocabulary={"<arg_key>", "<tool_call>"})[0] == "glm47"


def test_describe_shows_each_variants_call():
    class Tool:
        name, description, input_schema = "get_time", "The time.", {"type": "object"}

    assert GLM45.describe([Tool()]).endswith(
        "<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n"
        "<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>"
    )
    assert '"name": "get_time"' in GLM47.describe([Tool()]) and GLM47.describe([]) == ""
