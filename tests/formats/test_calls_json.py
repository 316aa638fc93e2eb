"""The JSON call syntax (Hermes / Qwen / SmolLM): parsing, errors a model can act on, rendering, the scanner."""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.formats.calls.compact import Call, ParseError
from decodeloop.formats.calls.json import MAX_DEPTH, JsonCallScanner, JsonSyntax

SYNTAX = JsonSyntax()
OPENER, CLOSER = JsonSyntax.opener, JsonSyntax.closer
SHAPE = 'a call looks like <tool_call>{"name": "NAME", "arguments": {"key": "value"}}</tool_call>'


def call_text(body: str) -> str:
    return OPENER + body + CLOSER


def error(text: str) -> ParseError:
    with pytest.raises(ParseError) as caught:
        SYNTAX.parse(text)
    return caught.value


def column_of(text: str, needle: str, nth: int = 1) -> int:
    """The 1-based column of the nth occurrence of `needle` in `text`."""
    pos = -1
    for _ in range(nth):
        pos = text.index(needle, pos + 1)
    return pos + 1


def test_interface():
    assert (SYNTAX.name, SYNTAX.opener, SYNTAX.closer) == ("json", "<tool_call>", "</tool_call>")
    assert isinstance(SYNTAX.scanner(), JsonCallScanner)
    assert SYNTAX.collect_calls is True


def test_a_call_found_in_a_token_stream_parses():
    written = SYNTAX.render(Call("get_weather", {"city": "Polson", "note": "a </tool_call> b"}))
    stops = Stops(SYNTAX, eos_ids=[0], settings=StopSettings(collect_calls=False))  # the first call stops
    verdicts = [stops.check(1, ch) for ch in "Let me check. " + written + "\nmore"]
    done = [v for v in verdicts if v.reason is not None]
    assert done[0].reason == "tool_call"
    assert done[0].call_text == written
    assert SYNTAX.parse(done[0].call_text) == Call("get_weather", {"city": "Polson", "note": "a </tool_call> b"})


# --- valid forms ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text, name, arguments",
    [
        (
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}</tool_call>',
            "get_weather",
            {"city": "Polson", "state": "MT"},
        ),
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Polson"}}\n</tool_call>',
            "get_weather",
            {"city": "Polson"},
        ),
        ('<tool_call>  \r\n\t{ "name" : "x" , "arguments" : { } }\t\n </tool_call>\n\n', "x", {}),
        ('<tool_call>{"name": "get_time"}</tool_call>', "get_time", {}),
        ('<tool_call>{"arguments": {"a": 1}, "name": "x"}</tool_call>', "x", {"a": 1}),
        (
            '<tool_call>{"name": "x", "arguments": "{\\"city\\": \\"Polson\\", \\"days\\": 3}"}</tool_call>',
            "x",
            {"city": "Polson", "days": 3},
        ),
        ('<tool_call>{"name": "x", "arguments": " {} "}</tool_call>', "x", {}),
        (
            '<tool_call>{"name": "fs/read_file", "arguments": {"path": "/tmp/a.txt"}}</tool_call>',
            "fs/read_file",
            {"path": "/tmp/a.txt"},
        ),
        ('<tool_call>{"name": "a.b-c_D9", "arguments": {}}</tool_call>', "a.b-c_D9", {}),
        (
            '<tool_call>{"name": "x", "arguments": {"n": 3, "f": -2.5e3, "z": -0, "t": true, "u": false, '
            '"v": null, "l": [1, [2, {"k": "v"}]], "o": {"p": {}}}}</tool_call>',
            "x",
            {"n": 3, "f": -2500.0, "z": 0, "t": True, "u": False, "v": None, "l": [1, [2, {"k": "v"}]], "o": {"p": {}}},
        ),
        (
            '<tool_call>{"name": "x", "arguments": {"q": "héllo wörld 😀 \\u00e9 \\ud83d\\ude00"}}</tool_call>',
            "x",
            {"q": "héllo wörld 😀 é 😀"},
        ),
        (
            '<tool_call>{"name": "x", "arguments": {"q": "say \\"hi\\" \\\\ \\/ \\b\\f\\n\\r\\t"}}</tool_call>',
            "x",
            {"q": 'say "hi" \\ / \b\f\n\r\t'},
        ),
        (
            '<tool_call>{"name": "x", "arguments": {"note": "</tool_call>", "": "empty key"}}</tool_call>',
            "x",
            {"note": "</tool_call>", "": "empty key"},
        ),
        ('<tool_call>{"name": "x", "arguments": {"a": "\\ud800 lone"}}</tool_call>', "x", {"a": "\ud800 lone"}),
    ],
)
def test_parse_valid(text, name, arguments):
    assert SYNTAX.parse(text) == Call(name, arguments)


def test_numbers_keep_their_types():
    call = SYNTAX.parse(call_text('{"name": "x", "arguments": {"i": 3, "f": 3.0, "e": 1e2, "b": true}}'))
    assert [type(v) for v in call.arguments.values()] == [int, float, float, bool]


def test_argument_order_is_kept():
    call = SYNTAX.parse(call_text('{"name": "x", "arguments": {"c": 1, "a": 2, "b": 3}}'))
    assert list(call.arguments) == ["c", "a", "b"]


def test_lone_surrogates_and_control_characters_do_not_crash():
    call = SYNTAX.parse(call_text('{"name": "x", "arguments": {"a": "\ud800\udfff"}}'))
    assert call.arguments == {"a": "\ud800\udfff"}
    e = error(call_text('{"name": "x", "arguments": {"a": "\x00\ud800"}}'))
    assert "control character U+0000" in str(e)
    e = error(call_text('{"name": "\ud800"}'))
    assert '"\\ud800"' in str(e)
    e = error(call_text('{"name": "x", "arguments": {"\\udfff": 1, "\\udfff": 2}}'))
    assert str(e).startswith('duplicate key "\\udfff"')


# --- errors: each says what was wrong, where, what was found, and the right shape


def check(text: str, column: int, *words: str) -> ParseError:
    e = error(text)
    assert e.column == column, str(e)
    assert f"column {column}" in str(e), str(e)
    for word in words:
        assert word in str(e), str(e)
    return e


def test_invalid_json_names_column_found_and_shape():
    text = call_text('{"name": "get_weather", "arguments": {"city": "Polson" "state": "MT"}}')
    e = check(text, column_of(text, '"state"'))
    assert str(e) == (
        f"invalid JSON in the call at column {e.column}: expected ',' or '}}' after the value of "
        '"city", found a quote ("); a call looks like <tool_call>{"name": "get_weather", '
        '"arguments": {"key": "value"}}</tool_call>'
    )


@pytest.mark.parametrize(
    "body, needle, words",
    [
        ('{"name": "x", "arguments": {"city" "Polson"}}', '"Polson"', ["expected ':' after the key \"city\""]),
        (
            '{"name": "x", "arguments": {city: "Polson"}}',
            "city",
            ["expected a key in double quotes or '}'", "found 'city'", 'put the key in double quotes: "city"'],
        ),
        ("{'name': 'x'}", "'name'", ["found a single quote (')", 'double quotes (")', SHAPE]),
        ('{"name": "x", "arguments": {"a": True}}', "True", ["found 'True'", "true, false and null in lower case"]),
        (
            '{"name": "x", "arguments": {"a": Polson}}',
            "Polson",
            ['expected the value of "a"', "found 'Polson'", 'put text in double quotes: "Polson"'],
        ),
        ('{"name": "x", "arguments": {"a": NaN}}', "NaN", ["JSON has no NaN or Infinity"]),
        (
            '{"name": "x", "arguments": {"a": 1,}}',
            "}}",
            ["expected a key in double quotes", "found '}'", "remove the comma before '}'"],
        ),
        ('{"name": "x", "arguments": {"a": [1, 2,]}}', "]", ["expected an array item", "remove the comma before ']'"]),
        ('{"name": "x", "arguments": {"a": [1 2]}}', "2]", ["expected ',' or ']' after an array item", "found '2'"]),
        ('{"name": "x", "arguments": {"a": 01}}', "01", ["invalid number '01'", "3, -2, 0.5 or 1e3"]),
        ('{"name": "x", "arguments": {"a": +1}}', "+1", ["invalid number '+1'"]),
        ('{"name": "x", "arguments": {"a": 1.}}', "1.", ["invalid number '1.'"]),
        ('{"name": "x", "arguments": {"a": 1e999}}', "1e999", ["the number", "is too large"]),
        ('{"name": "x", "arguments": {"a": ' + "9" * 5000 + "}}", "9", ["the number", "too many digits"]),
        ('{"name": "x", "arguments": {"a": "\\q"}}', "\\q", ['unknown escape "\\q"', '\\" for a quote']),
        ('{"name": "x", "arguments": {"a": "\\u12x4"}}', "\\u", ['invalid escape "\\u12"', "four hex digits"]),
        (
            '{"name": "x", "arguments": {"a": "two\nlines"}}',
            "\n",
            ["a line break inside a string", "\\n for a line break"],
        ),
        ('{"name": "x", "arguments": {"a": "tab\there"}}', "\t", ["a tab inside a string"]),
        ('{"name": "x", "arguments": {"a": "x\x01"}}', "\x01", ["the control character U+0001 inside a string"]),
        ("", "</tool_call>", ["expected a JSON object ('{')", "found '</tool_call>'", SHAPE]),
        ('["x"]', "[", ["expected a JSON object ('{')", "found '['"]),
        ('{"name": "x"', "</tool_call>", ["expected ',' or '}' after the value of \"name\"", "found '</tool_call>'"]),
        ('{"name": "x"} trailing', "trailing", ["unexpected text after the JSON object", "'trailing'"]),
        (
            '{"name": "x"}\n{"name": "y"}',
            '{"name": "y"',
            ["unexpected second JSON object", "each call in its own <tool_call>"],
        ),
    ],
)
def test_json_errors(body, needle, words):
    text = call_text(body)
    check(text, column_of(text, needle), *words)


@pytest.mark.parametrize(
    "body, needle, nth, words",
    [
        ('{"name": 5, "arguments": {}}', "5", 1, ['"name"', "must be a string", "found a number (5)"]),
        ('{"name": null}', "null", 1, ['"name"', "must be a string", "found null"]),
        ('{"name": ""}', '""', 1, ['"name"', "is empty"]),
        (
            '{"name": "get weather"}',
            " weather",
            1,
            ["a space", 'tool name "get weather"', "letters, digits, _ . - and /"],
        ),
        ('{"name": "get,weather"}', ",", 1, ["',' at column", 'tool name "get,weather"']),
        ('{"name": "get\\u0020weather"}', '"get', 1, ["a space", 'tool name "get weather"']),
        ('{"arguments": {"city": "Polson"}}', "{", 1, ['missing "name"', SHAPE]),
        ("{}", "{", 1, ['missing "name"']),
        (
            '{"name": "x", "parameters": {"a": 1}}',
            '"parameters"',
            1,
            ['unknown key "parameters"', 'only "name" and "arguments"', 'did you mean "arguments"?'],
        ),
        ('{"name": "x", "argumnets": {}}', '"argumnets"', 1, ['unknown key "argumnets"', 'did you mean "arguments"?']),
        ('{"name": "x", "id": 7}', '"id"', 1, ['unknown key "id"', 'only "name" and "arguments"']),
        (
            '{"name": "x", "arguments": [1]}',
            "[1]",
            1,
            ['"arguments"', "must be a JSON object", "found an array", '"arguments": {} for a call without arguments'],
        ),
        ('{"name": "x", "arguments": null}', "null", 1, ["must be a JSON object", "found null"]),
        ('{"name": "x", "arguments": 3}', "3", 1, ["must be a JSON object", "found a number (3)"]),
        (
            '{"name": "x", "arguments": "city=Polson"}',
            '"city',
            1,
            [
                '"arguments"',
                "is a string that does not hold a JSON object",
                "invalid JSON at character 1 of the string: expected '{'",
                "found 'city=Polson'",
                "not a string",
            ],
        ),
        (
            '{"name": "x", "arguments": "{\\"a\\": 1"}',
            '"{',
            1,
            ["does not hold a JSON object", "at character 8 of the string", "found the end of the string"],
        ),
        (
            '{"name": "x", "arguments": "{\\"a\\": 1, \\"a\\": 2}"}',
            '"{',
            1,
            ['duplicate key "a" at character 10 of the string'],
        ),
        ('{"name": "x", "arguments": "{} {}"}', '"{', 1, ["unexpected text after the object at character 4"]),
        ('{"name": "x", "arguments": {"a": 1, "a": 2}}', '"a"', 2, ['duplicate key "a"', "give each key once"]),
        ('{"name": "x", "arguments": {"o": {"k": 1, "k": 1}}}', '"k"', 2, ['duplicate key "k"']),
        ('{"name": "x", "name": "y"}', '"name"', 2, ['duplicate key "name"']),
    ],
)
def test_shape_errors(body, needle, nth, words):
    text = call_text(body)
    check(text, column_of(text, needle, nth), *words)


def test_shape_uses_the_name_once_known():
    e = error(call_text('{"name": "get_weather", "arguments": {"city": }}'))
    assert str(e).endswith(
        'a call looks like <tool_call>{"name": "get_weather", "arguments": {"key": "value"}}</tool_call>'
    )


@pytest.mark.parametrize(
    "text, words",
    [
        (
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Polson"}}',
            ["unclosed call", 'expected "</tool_call>"', "found the end of the text"],
        ),
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Polson"}}\n',
            ["unclosed call", 'expected "</tool_call>"'],
        ),
        (
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Polson"',
            ["unclosed call", "in the middle of the JSON", "',' or '}' after the value of \"city\"", "</tool_call>"],
        ),
        (
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Pol',
            ["unclosed call", "inside the string opened at column 58"],
        ),
        ('<tool_call>{"name": "x", "arguments": {"a": "\\', ["unclosed call", "inside the string"]),
        ('<tool_call>{"name": "x", "arguments": {"a": "\\u00', ["unclosed call", "inside the string"]),
        ('<tool_call>{"name": "x", "arguments": {"a": tr', ["unclosed call", 'the value of "a"']),
        ('<tool_call>{"name": "x", "arguments": {"a": -', ["unclosed call", "the rest of the number"]),
        ('<tool_call>{"name": "x", "arguments": {"a": 12', ["unclosed call"]),
        ('<tool_call>{"name": "x", "arguments": {"note": "</tool_call>', ["unclosed call", "inside the string"]),
        ("<tool_call>", ["unclosed call", "a JSON object ('{')"]),
        ("<tool_call>\n", ["unclosed call"]),
    ],
)
def test_unclosed_calls(text, words):
    e = check(text, len(text) + 1, *words)
    assert e.column == len(text) + 1


def test_unclosed_call_with_text_after_the_object():
    text = '<tool_call>{"name": "x"}</tool_cal>'
    check(text, column_of(text, "</tool_cal>"), 'expected "</tool_call>" after the JSON object', "found '</tool_cal>'")


def test_text_after_the_closer():
    text = '<tool_call>{"name": "x"}</tool_call>  thanks'
    check(
        text,
        column_of(text, "thanks"),
        'unexpected text after the closing "</tool_call>"',
        "'thanks'",
        "a call ends at its </tool_call>",
    )


@pytest.mark.parametrize(
    "text, found",
    [
        ("get_weather", "found 'get_weather'"),
        ("", "found the end of the text"),
        (" <tool_call>{}</tool_call>", "found a space"),
        ('{"name": "x"}', "found '{'"),
    ],
)
def test_text_must_start_with_the_opener(text, found):
    check(text, 1, 'expected a call to start with "<tool_call>"', found, SHAPE)


def test_nesting_is_limited_with_a_message():
    deep = '{"name": "x", "arguments": ' + '{"a": ' * MAX_DEPTH + "1" + "}" * MAX_DEPTH + "}"
    text = call_text(deep)
    check(text, column_of(text, "{", MAX_DEPTH + 1), "nests too deeply", f"at most {MAX_DEPTH} levels")
    ok = '{"name": "x", "arguments": {"a": ' + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2) + "}}"
    assert SYNTAX.parse(call_text(ok)).name == "x"
    very_deep = '{"name": "x", "arguments": {"a": ' + "[" * 100_000
    assert "nests too deeply" in str(error(call_text(very_deep)))


def test_parse_error_is_a_value_error():
    assert issubclass(ParseError, ValueError)


# --- render ----------------------------------------------------------------------


def test_render_call():
    call = Call("get_weather", {"city": "Great Falls", "days": 3, "note": "é </tool_call>"})
    assert SYNTAX.render(call) == (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Great Falls", '
        '"days": 3, "note": "é </tool_call>"}}\n</tool_call>'
    )
    assert SYNTAX.render(Call("get_time", {})) == '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'


@pytest.mark.parametrize(
    "call",
    [
        Call("get weather", {}),
        Call("", {}),
        Call("x", {"a": float("nan")}),
        Call("x", {"a": [float("inf")]}),
        Call("x", {"a": {1: "int key"}}),
        Call("x", {"a": object()}),
        Call("x", {"a": (1, 2)}),
        Call("x", ["not", "a", "dict"]),
        Call("x", {"a": json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))}),
    ],
)
def test_render_rejects_what_cannot_be_parsed_back(call):
    with pytest.raises(ValueError):
        SYNTAX.render(call)


def test_render_accepts_the_deepest_that_parses():
    call = Call("x", {"a": json.loads("[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2))})
    assert SYNTAX.parse(SYNTAX.render(call)) == call


def test_render_result():
    assert SYNTAX.render_result("72F and sunny", False) == "72F and sunny"
    assert SYNTAX.render_result("no such city", True) == "error: no such city"


# --- the scanner -----------------------------------------------------------------


def scan(body: str, size: int) -> int | None:
    """Feed `body` in pieces of `size`; the offset into `body` just past the close, or None."""
    scanner = SYNTAX.scanner()
    for start in range(0, len(body), size):
        closed = scanner.feed(body[start : start + size])
        if closed is not None:
            assert scanner.closed and scanner.length == start + closed
            return start + closed
    assert not scanner.closed and scanner.length == len(body)
    return None


BODIES = [
    # (text after the opener, where the call ends in it)
    ('\n{"name": "x", "arguments": {}}\n</tool_call> and then', 44),
    ('{"name": "x", "arguments": {"note": "</tool_call>"}}</tool_call>tail', 64),
    (r'{"a": "say \"</tool_call>\" ok"}</tool_call>', 44),
    (r'{"a": "back\\"}</tool_call>rest', 27),  # an escaped backslash, then the closing quote
    (r'{"a": "\\\"</tool_call>"}</tool_call>', 37),
    ('{"a": "\\u0022</tool_call>"}</tool_call>', 39),  # \u0022 is a quote, but escaped: still inside
    ("<</tool_call>", 13),
    ("</tool_call</tool_call>", 23),
    ("</tool_call>", 12),
    ('{"a": "5" tall"}\n</tool_call>', 29),  # a stray quote ends at the line break
    ('{"a": "x"}</TOOL_CALL></tool_call>', 34),
]


@pytest.mark.parametrize("body, end", BODIES)
def test_scanner_finds_the_end_at_every_piece_size(body, end):
    for size in range(1, len(body) + 2):
        assert scan(body, size) == end, size


@pytest.mark.parametrize("size", [1, 2, 5, 100])
def test_scanner_stays_open_inside_strings(size):
    assert scan('{"a": "never </tool_call> closed', size) is None
    assert scan(r'{"a": "escaped \"</tool_call>', size) is None
    assert scan('{"a": "x"}</tool_call', size) is None


def test_scanner_closer_split_across_pieces():
    scanner = JsonCallScanner()
    for piece in ['{"name": "x"}<', "/tool", "_call"]:
        assert scanner.feed(piece) is None
    assert scanner.feed(">\n") == 1
    assert scanner.length == len('{"name": "x"}</tool_call>')


def test_scanner_broken_closer_then_a_whole_one():
    scanner = JsonCallScanner()
    assert scanner.feed("</tool") is None
    assert scanner.feed("</tool_call>") == 12


def test_scanner_escape_split_across_pieces():
    scanner = JsonCallScanner()
    for piece in ['{"a": "x', "\\", '"', "</tool_call>", '"}']:
        assert scanner.feed(piece) is None
    assert scanner.feed("</tool_call>!") == 12


def test_scanner_refuses_to_go_on_after_closing():
    scanner = JsonCallScanner()
    assert scanner.feed("{}</tool_call>") == 14
    with pytest.raises(ValueError):
        scanner.feed("more")


def test_empty_pieces_are_fine():
    scanner = JsonCallScanner()
    assert scanner.feed("") is None
    assert scanner.feed("{}</") is None
    assert scanner.feed("") is None
    assert scanner.feed("tool_call>") == 10


def test_scanner_on_a_long_call_in_one_piece_and_in_characters():
    body = '{"name": "x", "arguments": {"a": "' + 'x\\"</tool_call>' * 20_000 + '"}}</tool_call>'
    assert scan(body, len(body)) == len(body)
    assert scan(body, 1) == len(body)


# --- describe --------------------------------------------------------------------


@dataclass
class Tool:
    name: str
    description: str
    input_schema: dict = field(default_factory=dict)


WEATHER = Tool(
    "get_weather",
    "Current weather for a US city.",
    {
        "type": "object",
        "properties": {
            "state": {"type": "string", "description": "Two-letter US state code, e.g. MT."},
            "city": {"type": "string", "description": "City name."},
        },
        "required": ["city", "state"],
    },
)
CLOCK = Tool("get_time", "The time in a zone — «UTC» by default.", {"type": "object", "properties": {}})


def test_describe_two_tools():
    assert SYNTAX.describe([WEATHER, CLOCK]) == (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        '{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a US city.", '
        '"parameters": {"type": "object", "properties": {"state": {"type": "string", "description": '
        '"Two-letter US state code, e.g. MT."}, "city": {"type": "string", "description": "City name."}}, '
        '"required": ["city", "state"]}}}\n'
        '{"type": "function", "function": {"name": "get_time", "description": "The time in a zone — «UTC» by '
        'default.", "parameters": {"type": "object", "properties": {}}}}\n'
        "</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def test_describe_nothing():
    assert SYNTAX.describe([]) == ""


def test_describe_keeps_one_line_per_tool():
    tool = Tool("x", "line one\nline two", {"type": "object", "properties": {"a": {"description": "a\nb"}}})
    lines = SYNTAX.describe([tool, CLOCK]).split("\n<tools>\n")[1].split("\n</tools>")[0].split("\n")
    assert [json.loads(line)["function"]["name"] for line in lines] == ["x", "get_time"]


def test_tool_schemas():
    assert SYNTAX.tool_schemas([WEATHER, Tool("bare", "")]) == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a US city.",
                "parameters": WEATHER.input_schema,
            },
        },
        {
            "type": "function",
            "function": {"name": "bare", "description": "", "parameters": {"type": "object", "properties": {}}},
        },
    ]
    assert list(SYNTAX.tool_schemas([WEATHER])[0]["function"]["parameters"]["properties"]) == ["state", "city"]


# --- properties ------------------------------------------------------------------

names = st.from_regex(r"[A-Za-z0-9_./-]+", fullmatch=True)
tricky = st.sampled_from(
    [
        '"',
        "\\",
        "</tool_call>",
        "</tool_",
        "call>",
        "<",
        "\n",
        "\r",
        "\t",
        "\x00",
        "\x1f",
        "\x7f",
        "\ud800",
        "\udc00",
        "\u2028",
        "é",
        "😀",
        '\\"',
        "\\u0022",
        "{",
        "}",
        "",
    ]
)
strings = st.one_of(st.text(), st.lists(st.one_of(tricky, st.text(max_size=3)), max_size=8).map("".join))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), strings)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(strings, inner, max_size=4)),
    max_leaves=16,
)
calls = st.builds(Call, names, st.dictionaries(strings, values, max_size=5))


@settings(max_examples=300)
@given(calls)
def test_parse_inverts_render(call):
    text = SYNTAX.render(call)
    parsed = SYNTAX.parse(text)
    assert parsed == call
    assert SYNTAX.render(parsed) == text  # the same types too: 1 stays 1, not 1.0 or True


@settings(max_examples=300)
@given(calls, st.randoms(use_true_random=False), st.one_of(st.just(""), strings))
def test_scanner_closes_exactly_at_the_end(call, rng: random.Random, tail):
    written = SYNTAX.render(call)[len(OPENER) :]
    body = written + tail
    scanner = SYNTAX.scanner()
    start = 0
    while start < len(body):
        size = rng.randint(1, max(1, len(body) - start))
        if rng.random() < 0.5:
            size = rng.randint(1, 3)
        piece = body[start : start + size]
        closed = scanner.feed(piece)
        if closed is not None:
            assert start + closed == len(written)
            assert scanner.length == len(written)
            return
        start += len(piece)
    pytest.fail(f"the call never closed: {body!r}")


junk = st.text(alphabet=st.one_of(st.sampled_from("{}[]\":,\\ \n\t'0123456789-+.eEtrufalsn<>/_"), st.characters()))


def mutate(text: str, rng: random.Random) -> str:
    """A few random edits: a character dropped, one inserted, a slice repeated."""
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(text))
        kind = rng.random()
        if kind < 0.4 and text:
            text = text[: max(0, at - 1)] + text[at:]
        elif kind < 0.8:
            text = text[:at] + rng.choice("{}[]\":,\\ \n'0-.eal<>/x\ud800\x00") + text[at:]
        else:
            other = rng.randint(0, len(text))
            text = text[:at] + text[min(at, other) : max(at, other)] + text[at:]
    return text


def parses_or_says_why(text: str):
    try:
        call = SYNTAX.parse(text)
    except ParseError as e:
        assert isinstance(str(e), str) and str(e)
        assert 1 <= e.column <= len(text) + 1, (e.column, str(e))
        str(e).encode("utf-8")  # lone surrogates in the text are shown escaped
        return None
    assert isinstance(call, Call)
    return call


@settings(max_examples=500)
@given(st.one_of(junk, junk.map(lambda t: OPENER + t), junk.map(lambda t: OPENER + t + CLOSER)))
def test_garbage_is_a_call_or_a_parse_error(text):
    parses_or_says_why(text)


def _no_duplicates(pairs):
    keys = [key for key, _ in pairs]
    assert len(keys) == len(set(keys))
    return dict(pairs)


def _reject(constant):
    raise ValueError(constant)


def json_reading(body: str):
    """The call the json module reads from `body`, None if it is not one (the reference for parse)."""

    def finite(value):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("too large")  # 1e999 reads as inf, which the call reader refuses
        for item in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
            finite(item)

    def strict(text):
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject)
        finite(value)
        return value

    try:
        value = strict(body.strip())
        if not isinstance(value, dict) or not set(value) <= {"name", "arguments"}:
            return None
        name, arguments = value.get("name"), value.get("arguments", {})
        if isinstance(arguments, str):
            arguments = strict(arguments)
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return None
        return Call(name, arguments) if re.fullmatch(r"[A-Za-z0-9_./-]+", name) else None
    except (ValueError, AssertionError, RecursionError):
        return None


@settings(max_examples=500)
@given(calls, st.booleans(), st.randoms(use_true_random=False))
def test_edited_calls_are_read_as_the_json_module_reads_them(call, as_string, rng: random.Random):
    arguments = json.dumps(call.arguments, ensure_ascii=False) if as_string else call.arguments
    body = mutate(json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False), rng)
    text = call_text(body)
    got = parses_or_says_why(text)
    expected = json_reading(body)
    if got is not None or expected is not None:
        assert got == expected
        assert SYNTAX.render(got) == SYNTAX.render(expected)
