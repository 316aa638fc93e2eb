"""Mistral's call formats (formats/calls/families/mistral.py): [TOOL_CALLS] with a call by name (v11+) or a JSON
array (v3), [THINK] and <think> reasoning, read through the parser and the loop's stop check, the errors a model
is told, and the calls written back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decodeloop.decode.parse import OutputParser, parse_output
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.base import Call, ParseError
from decodeloop.formats.calls.families.mistral import MistralSyntax, ToolCallsScanner
from decodeloop.formats.calls.formats import detect, get_format

MISTRAL = get_format("mistral")
V3 = get_format("mistral-v3")
THINK_TEXT = get_format("mistral-think-text")
TOOLS = {"get_weather": {"type": "object"}, "get_time": {"type": "object"}, "write_file": {"type": "object"}}


def cuts(text: str):
    yield [text]
    yield list(text)
    yield [text[i : i + 3] for i in range(0, len(text), 3)]


def streamed(syntax, pieces, truncated=False):
    parser = OutputParser(syntax, TOOLS)
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


def test_the_formats_are_registered():
    assert all(isinstance(s, MistralSyntax) for s in (MISTRAL, V3, THINK_TEXT))
    assert (MISTRAL.name, MISTRAL.opener, MISTRAL.closer, MISTRAL.shape) == (
        "mistral",
        "[TOOL_CALLS]",
        "",
        "tool_calls",
    )
    assert MISTRAL.reasoning == (("[THINK]", "[/THINK]"),) and V3.reasoning == ()
    assert THINK_TEXT.reasoning == (("<think>", "</think>"),)


def test_parallel_calls_by_name_in_one_piece():
    text = 'Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich"}[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{}'
    for pieces in cuts(text):
        out = streamed(MISTRAL, pieces)
        assert out.content == "Checking."
        assert calls(out) == [("get_weather", {"city": "Zürich"}), ("get_time", {})]
        assert [c.text for c in out.calls] == [
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich"}',
            "[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{}",
        ]


def test_v3_writes_the_calls_as_one_json_array():
    text = '[TOOL_CALLS] [{"arguments": {"name": "x"}, "name": "get_weather", "id": "abc123def"}, {"name": "get_time"}]'
    for syntax in (V3, MISTRAL):  # what follows the marker says which
        for pieces in cuts(text):
            out = streamed(syntax, pieces)
            assert calls(out) == [("get_weather", {"name": "x"}), ("get_time", {})] and out.content is None
            assert [c.text for c in out.calls][1] == '{"name": "get_time"}'


def test_a_marker_inside_a_string_argument_is_the_string():
    # markers arrive as their special tokens; inside a call they are its text, and the scanner follows strings
    value = 'a [TOOL_CALLS]x[ARGS]{"b": 1} [THINK]y[/THINK] }'
    text = '[TOOL_CALLS]write_file[ARGS]{"text": "a [TOOL_CALLS]x[ARGS]{\\"b\\": 1} [THINK]y[/THINK] }"}'
    for pieces in cuts(text):
        assert calls(streamed(MISTRAL, pieces)) == [("write_file", {"text": value})]


def test_reasoning_and_a_call_written_inside_it():
    text = '[THINK]Maybe [TOOL_CALLS]get_time[ARGS]{} first.[/THINK]Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}'
    for pieces in cuts(text):
        out = streamed(MISTRAL, pieces)
        assert out.reasoning == "Maybe [TOOL_CALLS]get_time[ARGS]{} first."
        assert out.content == "Sure." and calls(out) == [("get_weather", {"city": "Oslo"})]
        assert any("inside its reasoning" in notice for notice in out.notices)


def test_plain_text_think_for_magistral_2506():
    out = parse_output("<think>r</think>c[TOOL_CALLS]get_time[ARGS]{}", TOOLS, format=THINK_TEXT)
    assert (out.reasoning, out.content, calls(out)) == ("r", "c", [("get_time", {})])
    out = parse_output("<think>r</think>c", TOOLS, format=MISTRAL)  # ordinary text to the others
    assert out.reasoning is None and out.content == "<think>r</think>c"


def test_a_call_the_cap_cuts_off_is_a_notice_and_no_call():
    for text in ('[TOOL_CALLS]write_file[ARGS]{"path": "/tmp/a", "text": "rm -rf /', "Let me check.[TOOL_CALLS]"):
        out = parse_output(text, TOOLS, format=MISTRAL, truncated=True)
        assert out.calls == [] and any("cut off a call" in notice for notice in out.notices)
    out = parse_output("[THINK]so I will need", TOOLS, format=MISTRAL, truncated=True)
    assert out.reasoning == "so I will need" and out.calls == []


def test_text_that_does_not_begin_a_call_stays_text_and_the_model_is_told():
    out = parse_output("[TOOL_CALLS] not json at all", TOOLS, format=V3)
    assert out.tool_calls == [] and out.content == "not json at all"
    assert errors(out) == [
        'expected a tool\'s name and [ARGS] after [TOOL_CALLS] at column 14, found "not"; '
        'a call looks like [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[TOOL_CALLS]", "[TOOL_CALLS] is not followed by a call"),
        ("[TOOL_CALLS][ARGS]{}", "expected a tool's name and [ARGS] after [TOOL_CALLS] at column 13"),
        ("[TOOL_CALLS]get_weather[ARG]{}", 'found "get_weather[ARG"'),
        ('[TOOL_CALLS]get_weather[ARGS]["Paris"]', "the arguments of get_weather after [ARGS] (column 30) must be"),
        ('[TOOL_CALLS]get_weather[ARGS]"Paris"', "expected the arguments of get_weather after [ARGS], a JSON object"),
        ('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris",}', "invalid JSON at column 47: expecting property name"),
        ('[TOOL_CALLS]get_weather[ARGS]{"city": NaN}', "NaN is not JSON"),
        ("[TOOL_CALLS]get_weather[ARGS]{\"city\": 'Paris'}", "JSON writes strings and keys in double quotes"),
        ('[TOOL_CALLS] [{"name": "get_weather", "args": {}}]', 'the call at column 15 has the key "args"'),
        ('[TOOL_CALLS] [{"arguments": {}}]', 'the call at column 15 needs "name"'),
        ('[TOOL_CALLS] [{"name": "get_weather", "arguments": 3}]', '"arguments" of the call at column 15 must be'),
        ("[TOOL_CALLS] []", "expected a JSON array of one or more calls at column 14"),
    ],
)
def test_errors_tell_the_model_what_to_fix(text, message):
    found = errors(parse_output(text, TOOLS, format=MISTRAL))
    assert len(found) == 1 and message in found[0], found


def test_the_stop_check_runs_the_calls_when_the_message_ends():
    stops = Stops(MISTRAL, eos_ids=[0], settings=StopSettings(max_tokens=100, collect_calls=True), tools=TOOLS)
    text = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}'
    assert all(stops.check(1, ch).reason is None for ch in text)
    end = stops.check(0, "")
    assert end.reason == "tool_call" and end.shapes == ("tool_calls", "tool_calls")
    assert [p.call for p in end.parsed] == [Call("get_weather", {"city": "Paris"}), Call("get_time", {})]


def test_render_writes_what_parse_reads():
    call = Call("get_weather", {"city": "Zürich", "q": 'a "b" [ARGS]', "n": [1, 2.5, None]})
    assert (
        MISTRAL.render(call)
        == '[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich", "q": "a \\"b\\" [ARGS]", "n": [1, 2.5, null]}'
    )
    assert V3.render(call).startswith('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city"')
    assert MISTRAL.parse(MISTRAL.render(call)) == call == V3.parse(V3.render(call))
    with pytest.raises(ParseError, match="a call starts with"):
        MISTRAL.parse("get_weather[ARGS]{}")
    with pytest.raises(ValueError, match="not a valid tool name"):
        MISTRAL.render(Call("get weather", {}))


def test_describe_teaches_the_variant_s_calls():
    class Tool:
        name, description, input_schema = "get_weather", "The weather", {"type": "object"}

    assert "[TOOL_CALLS]get_weather[ARGS]{" in MISTRAL.describe([Tool()])
    assert '[TOOL_CALLS] [{"name": "get_weather", "arguments"' in V3.describe([Tool()])
    assert MISTRAL.describe([]) == ""


def test_the_scanner_ends_where_the_arguments_close():
    def end_of(pieces):
        scanner, consumed = ToolCallsScanner(), 0
        for piece in pieces:
            at = scanner.feed(piece)
            if at is not None:
                return consumed + at
            consumed += len(piece)
        return None

    for text, end in (
        ('get_weather[ARGS]{"a": "}[TOOL_CALLS]"} tail', len('get_weather[ARGS]{"a": "}[TOOL_CALLS]"}')),
        ('f[CALL_ID]x1[ARGS] {"a": [1]}[TOOL_CALLS]', len('f[CALL_ID]x1[ARGS] {"a": [1]}')),
        (' [{"name": "f", "arguments": {"s": "]"}}] tail', len(' [{"name": "f", "arguments": {"s": "]"}}]')),
        ("not json", len("not")),
        ("f[CALL_ID]x[CALL_ID]", len("f[CALL_ID]x[")),  # a second id is not a call
    ):
        for pieces in cuts(text):
            assert end_of(pieces) == end, (text, pieces)


@pytest.mark.parametrize(
    ("template", "vocabulary", "name"),
    [
        ("{{ '[TOOL_CALLS] [' }}", ("[TOOL_CALLS]", "[INST]"), "mistral-v3"),
        ("", ("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"), "mistral"),
        ("", ("[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"), "mistral"),
        ("Reason in <think>...</think> first.", ("[TOOL_CALLS]", "[ARGS]"), "mistral-think-text"),
    ],
)
def test_detect_names_the_mistral_formats(template, vocabulary, name):
    found = detect(template, vocabulary)
    assert found is not None and found[0] == name and found[1]


ATOMS = [
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "[THINK]",
    "[/THINK]",
    "<think>",
    "</think>",
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    ":",
    ",",
    " ",
    "\n",
    '"name"',
    '"arguments"',
    "get_weather",
    "a1",
    "1",
    "null",
    "x",
    "é",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), max_size=24), st.lists(st.integers(1, 5), min_size=1), st.booleans())
def test_any_text_reads_the_same_however_it_is_cut_and_never_raises(units, sizes, truncated):
    text = "".join(units)
    for syntax in (MISTRAL, V3, THINK_TEXT):
        whole = parse_output(text, TOOLS, format=syntax, truncated=truncated)
        parser, at, n = OutputParser(syntax, TOOLS), 0, 0
        while at < len(units):  # the units whole, as a tokenizer keeps a marker one token
            size = sizes[n % len(sizes)]
            parser.feed("".join(units[at : at + size]))
            at, n = at + size, n + 1
        assert seen(parser.finish(truncated)) == seen(whole)
