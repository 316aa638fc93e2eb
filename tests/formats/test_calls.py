"""The compact call syntax: parsing, errors a model can act on, rendering, the end-of-call scanner."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decodeloop.formats.calls.compact import Call, CallScanner, CompactSyntax, ParseError, render_value

SYNTAX = CompactSyntax()
OPENER = CompactSyntax.opener


def parse(text: str) -> Call:
    return SYNTAX.parse(text)


def error(text: str) -> ParseError:
    with pytest.raises(ParseError) as caught:
        SYNTAX.parse(text)
    return caught.value


# --- valid forms ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text, name, arguments",
    [
        ("[call get_weather city=Polson state=MT]", "get_weather", {"city": "Polson", "state": "MT"}),
        ("[call get_time]", "get_time", {}),
        ("[call   get_time   ]", "get_time", {}),
        ("[call x\ta=1\t\tb=2\n]", "x", {"a": "1", "b": "2"}),
        ("[call fs/read_file path=/tmp/a.txt]", "fs/read_file", {"path": "/tmp/a.txt"}),
        ("[call a.b-c_d k.e-y_=v]", "a.b-c_d", {"k.e-y_": "v"}),
        ("[call x _k=v]", "x", {"_k": "v"}),
        ('[call x q="New York"]', "x", {"q": "New York"}),
        ('[call x q=""]', "x", {"q": ""}),
        ('[call x q="a=b [c] d"]', "x", {"q": "a=b [c] d"}),
        (r'[call x q="say \"hi\" \\ \n \t"]', "x", {"q": 'say "hi" \\ \n \t'}),
        ('[call x q="line one\nline two"]', "x", {"q": "line one\nline two"}),
        ("[call x q=héllo,wörld!]", "x", {"q": "héllo,wörld!"}),
        ("[call x a=1]  \n", "x", {"a": "1"}),
        ('[call x a="1" b=2]', "x", {"a": "1", "b": "2"}),
    ],
)
def test_parse_valid(text, name, arguments):
    assert parse(text) == Call(name, arguments)


def test_argument_order_is_kept():
    assert list(parse("[call x c=1 a=2 b=3]").arguments) == ["c", "a", "b"]


# --- errors: each says what was expected, where, what was found, and the right shape


def test_key_without_equals_names_column_found_and_shape():
    e = error("[call get_weather Polson MT]")
    assert str(e) == (
        'expected key=value after "get_weather" at column 19, found "Polson"; '
        "a call looks like [call get_weather key=value ...]"
    )
    assert e.column == 19


def test_key_without_equals_after_an_argument():
    e = error("[call get_weather city=Polson MT]")
    assert 'after "city=Polson" at column 31, found "MT"' in str(e)


@pytest.mark.parametrize(
    "text, column, words",
    [
        ("[call ]", 7, ["expected a tool name", 'found "]"', "[call NAME key=value ...]"]),
        ("[call    ]", 10, ["expected a tool name", 'found "]"']),
        ("[call city=Polson]", 7, ["expected a tool name", 'found the argument "city="']),
        ('[call "x"]', 7, ["expected a tool name", 'found a quote (")']),
        ("[call get,weather]", 10, ['unexpected ","', 'tool name "get,weather"', "letters, digits, _ . - and /"]),
        ("[call get_weather =Polson]", 19, ['expected an argument name before "="']),
        ("[call x 1city=a]", 9, ['argument name "1city"', "not valid", "starts with a letter or _"]),
        ("[call x ci,ty=a]", 9, ['argument name "ci,ty"', "not valid"]),
        ("[call x a=1 b=2 a=3]", 17, ['duplicate argument "a"']),
        ('[call x a="abc]', 11, ["unterminated quote", 'value of "a"', "column 11", 'closing quote (")']),
        ('[call x a="abc\\', 11, ["unterminated quote"]),
        (r'[call x a="a\qb"]', 13, [r'unknown escape "\q"', 'value of "a"', r"\" for a quote", r"\\ for a backslash"]),
        ("[call x a=1] and more", 14, ['unexpected text after the closing "]"', '"and"']),
        ("[call x a=1", 12, ["unclosed call", 'expected "]"', "the end of the text", "[call x key=value ...]"]),
        ("[call x", 8, ["unclosed call"]),
        ("[call x a=", 11, ["unclosed call"]),
        ("get_weather city=Polson", 1, ['expected a call to start with "[call "', 'found "get_weather"']),
        ("", 1, ['expected a call to start with "[call "', "found the end of the text"]),
        ("[call]", 6, ['expected a space after "[call"', 'found "]"']),
        ("[call x a= b]", 11, ['expected a value after "a="', "found a space", 'a=""']),
        ("[call x a=]", 11, ['expected a value after "a="', 'found "]"']),
        ("[call x q=[1,2]]", 11, ['expected a value after "q="', 'found "["', "double quotes"]),
        ('[call x a=b"c"]', 12, ['after the value of "a"', 'found a quote (")', 'a="..."']),
        ("[call x a=b=c]", 12, ['after the value of "a"', 'found "="']),
        ('[call x a="b"c=1]', 14, ['expected a space or "]" after the value of "a"', 'found "c"']),
        ('[call x "v"]', 9, ['expected key=value after "x"', 'found a quote (")']),
    ],
)
def test_errors(text, column, words):
    e = error(text)
    assert e.column == column, str(e)
    assert f"column {column}" in str(e)
    for word in words:
        assert word in str(e)


def test_parse_error_is_a_value_error():
    assert issubclass(ParseError, ValueError)


# --- render ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, written",
    [
        ("Polson", "Polson"),
        ("héllo,wörld!", "héllo,wörld!"),
        ("", '""'),
        ("New York", '"New York"'),
        ("a=b", '"a=b"'),
        ("[x]", '"[x]"'),
        ('say "hi"', r'"say \"hi\""'),
        ("C:\\dir", r'"C:\\dir"'),
        ("two\nlines\tx", r'"two\nlines\tx"'),
        ("\u00a0", '"\u00a0"'),
        (3, "3"),
        (True, "true"),
        (None, "null"),
        (["a", "b"], r'"[\"a\", \"b\"]"'),
    ],
)
def test_render_value_quotes_only_when_needed(value, written):
    assert render_value(value) == written


def test_render_call():
    call = Call("get_weather", {"city": "Great Falls", "state": "MT"})
    assert SYNTAX.render(call) == '[call get_weather city="Great Falls" state=MT]'
    assert SYNTAX.render(Call("get_time", {})) == "[call get_time]"


def test_render_rejects_what_cannot_be_parsed():
    with pytest.raises(ValueError):
        SYNTAX.render(Call("get weather", {}))
    with pytest.raises(ValueError):
        SYNTAX.render(Call("x", {"1a": "v"}))


def test_render_result():
    assert SYNTAX.render_result("72F and sunny", False) == "72F and sunny"
    assert SYNTAX.render_result("no such city", True) == "error: no such city"


# --- the scanner -----------------------------------------------------------------


def scan(body: str, size: int) -> int | None:
    """Feed `body` in pieces of `size`; the offset into `body` just past the close, or None."""
    scanner = CompactSyntax().scanner()
    for start in range(0, len(body), size):
        closed = scanner.feed(body[start : start + size])
        if closed is not None:
            assert scanner.closed and scanner.length == start + closed
            return start + closed
    assert not scanner.closed and scanner.length == len(body)
    return None


BODIES = [
    # (text after the opener, where the call ends in it)
    ("get_weather city=Polson state=MT] and then", 33),
    ('x q="a ] b"]tail', 12),
    (r'x q="say \"]\" ok"] more', 19),
    (r'x q="back\\"]rest', 13),
    ('x a=b"]', 7),  # a stray quote mid-value does not open a quote
    ('x "a]b"', 5),  # nor one where a key belongs
    ('x a="]"b="]"]', 13),
    ('x a=""]', 7),
]


@pytest.mark.parametrize("body, end", BODIES)
def test_scanner_finds_the_end_at_every_piece_size(body, end):
    for size in range(1, len(body) + 2):
        assert scan(body, size) == end, size


@pytest.mark.parametrize("size", [1, 2, 7])
def test_scanner_stays_open_inside_quotes(size):
    assert scan('x q="never ] closed', size) is None
    assert scan(r'x q="escaped \"]', size) is None


def test_scanner_quote_split_from_its_equals_sign():
    scanner = CallScanner()
    assert scanner.feed("x q=") is None
    assert scanner.feed('"]') is None  # the quote opened a value: "]" is inside it
    assert scanner.feed('"') is None
    assert scanner.feed("]") == 1
    assert scanner.length == len('x q="]"]')


def test_scanner_escape_split_across_pieces():
    scanner = CallScanner()
    for piece in ['x q="a', "\\", '"', "]", '"']:
        assert scanner.feed(piece) is None
    assert scanner.feed("]!") == 1


def test_scanner_refuses_to_go_on_after_closing():
    scanner = CallScanner()
    assert scanner.feed("x]") == 2
    with pytest.raises(ValueError):
        scanner.feed("more")


def test_scanner_counts_length_for_giving_up():
    scanner = CallScanner()
    for _ in range(10):
        scanner.feed('x q="' if scanner.length == 0 else "abcd")
    assert scanner.length == 5 + 9 * 4


def test_empty_pieces_are_fine():
    scanner = CallScanner()
    assert scanner.feed("") is None
    assert scanner.feed("x]") == 2


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
            "city": {"type": "string", "description": "City name."},
            "state": {"type": "string", "description": "Two-letter US state code, e.g. MT."},
        },
        "required": ["city", "state"],
    },
)


def test_describe_one_tool():
    assert SYNTAX.describe([WEATHER]) == (
        "To use a tool, write a call on its own: [call NAME key=value ...]. Put a value that contains "
        'spaces, quotes, brackets or = in double quotes, writing \\" for a quote and \\\\ for a backslash. '
        "The result comes back in a tool message; then answer the user.\n\n"
        "get_weather: Current weather for a US city. Arguments: city (string, required): City name. "
        "state (string, required): Two-letter US state code, e.g. MT."
    )


def test_describe_enum_default_bounds_optional_and_order():
    forecast = Tool(
        "get_forecast",
        "Daily forecast\n   for a US city",
        {
            "type": "object",
            "properties": {
                "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 3, "description": "How many days"},
                "unit": {"type": "string", "enum": ["f", "c"], "default": "f"},
                "place": {"type": "string", "enum": ["New York", "a,b"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "note": {"type": ["string", "null"], "exclusiveMinimum": 0},
            },
            "required": ["days"],
        },
    )
    clock = Tool("get_time", "", {"type": "object", "properties": {}})
    text = SYNTAX.describe([forecast, clock])
    paragraphs = text.split("\n\n")
    assert len(paragraphs) == 3
    assert paragraphs[1] == (
        "get_forecast: Daily forecast for a US city. Arguments: "
        "days (integer, required, 1 to 7, default 3): How many days. "
        "unit (string, optional, one of f, c, default f). "
        'place (string, optional, one of "New York", "a,b"). '
        "tags (JSON array of strings, optional). "
        "note (string or null, optional, greater than 0)."
    )
    assert paragraphs[2] == "get_time: Takes no arguments."
    assert SYNTAX.describe([forecast, clock]) == text


def test_describe_nothing():
    assert SYNTAX.describe([]) == ""


# --- properties: render and parse agree; the scanner closes exactly at the end ----

names = st.from_regex(r"[A-Za-z0-9_./-]+", fullmatch=True)
keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]*", fullmatch=True)
tricky = st.sampled_from(['"', "\\", "[", "]", "=", " ", "\n", "\t", "\r", '\\"', '"]', "\u00a0", ""])
values = st.one_of(st.text(), st.lists(st.one_of(tricky, st.text(max_size=3)), max_size=8).map("".join))
calls = st.builds(Call, names, st.dictionaries(keys, values, max_size=5))


@settings(max_examples=300)
@given(calls)
def test_parse_inverts_render(call):
    assert SYNTAX.parse(SYNTAX.render(call)) == call


@settings(max_examples=300)
@given(calls, st.randoms(use_true_random=False))
def test_scanner_closes_exactly_at_the_end(call, rng: random.Random):
    body = SYNTAX.render(call)[len(OPENER) :]
    scanner = SYNTAX.scanner()
    start = 0
    while start < len(body):
        size = rng.randint(1, max(1, len(body) - start))
        if rng.random() < 0.5:
            size = rng.randint(1, 3)
        piece = body[start : start + size]
        closed = scanner.feed(piece)
        if closed is not None:
            assert start + closed == len(body)
            assert scanner.length == len(body)
            return
        start += len(piece)
    pytest.fail(f"the call never closed: {body!r}")
