"""The call grammar's pieces: character sets, patterns as DFAs, numbers within bounds, strings, whole calls.

The property that matters everywhere: a machine never lets a walk into a dead end (every state reached
through allowed characters can still be completed), and what it completes is what decodeloop/schema/ accepts.
"""

import json
import random
import re
from fractions import Fraction
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decodeloop.constrain.grammar.bytes import ByteGrammar, utf8_range
from decodeloop.constrain.grammar.compile import _bounds, _Schemas, call_grammar
from decodeloop.constrain.grammar.machines import BARE, UNICODE_SPACE, Number, Text
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.calls.json import JsonSyntax
from decodeloop.patterns import charset as cs
from decodeloop.patterns.regex import Unsupported, compile_pattern
from decodeloop.schema import validate_arguments
from decodeloop.servers.timezone import INPUT as TIMEZONE_INPUT
from decodeloop.servers.units import INPUT as UNITS_INPUT
from decodeloop.servers.weather import FORECAST_INPUT, WEATHER_INPUT

LAB_TOOLS = [
    SimpleNamespace(name="get_weather", input_schema=WEATHER_INPUT),
    SimpleNamespace(name="get_forecast", input_schema=FORECAST_INPUT),
    SimpleNamespace(name="get_time_zone", input_schema=TIMEZONE_INPUT),
    SimpleNamespace(name="convert", input_schema=UNITS_INPUT),
]


def walk(machine, rng: random.Random, limit: int = 400):
    """A random walk through allowed characters: (text, completed). Fails on a dead end."""
    s = machine.start
    out = []
    for _ in range(limit):
        chars = machine.chars(s)
        final = machine.final(s)
        assert chars or final, f"dead end after {''.join(out)!r}"
        if final and (not chars or rng.random() < 0.3):
            return "".join(out), True
        lo, hi = rng.choice(chars)
        c = rng.randint(lo, min(hi, lo + 300)) if rng.random() < 0.5 else lo
        out.append(chr(c))
        s = machine.step(s, c)
    return "".join(out), False


# --- character sets ---------------------------------------------------------------------------------


def test_charset_operations():
    a = cs.union(cs.span("a", "f"), cs.of("xz"))
    assert a == ((97, 102), (120, 120), (122, 122))
    assert cs.intersect(a, cs.span("e", "y")) == ((101, 102), (120, 120))
    assert cs.subtract(a, cs.of("b")) == ((97, 97), (99, 102), (120, 120), (122, 122))
    assert cs.contains(a, ord("x")) and not cs.contains(a, ord("y"))
    assert cs.overlaps(a, ord("g"), ord("x")) and not cs.overlaps(a, ord("g"), ord("w"))
    assert cs.complement(cs.complement(a)) == a
    assert not cs.contains(cs.TEXT, 0xD800) and cs.contains(cs.TEXT, 0x10FFFF)


def test_unicode_space_is_exactly_what_isspace_calls_whitespace():
    spaces = cs.normalize((c, c) for c in range(cs.MAX_CP + 1) if chr(c).isspace())
    assert spaces == UNICODE_SPACE
    assert not cs.contains(BARE, ord(" ")) and not cs.contains(BARE, 0x3000) and cs.contains(BARE, ord("é"))


def test_utf8_ranges():
    assert utf8_range(b"\xc3") == (0xC0, 0xFF, 2)
    assert utf8_range(b"\xe0") == (0x800, 0xFFF, 3)  # E0 80..9F would be overlong
    assert utf8_range(b"\xed\xa0") is not None  # surrogates are excluded by the caller
    assert utf8_range(b"\xf4\x90") is None  # past U+10FFFF
    assert utf8_range(b"\xc0") is None and utf8_range(b"\xff") is None


# --- patterns -------------------------------------------------------------------------------------------

PATTERNS = [
    r"^[A-Z]{2}$",
    r"\d+",
    r"^a|b$",
    r"^(foo|bar)+baz?$",
    r"[^a-c]x",
    r".",
    r"^\w+@\w+\.com$",
    r"a{2,3}",
    r"a{,2}b",
    r"x{}",
    r"[]a]",
    r"^$",
    r"^\S+$",
    r"(?:ab)*c",
    r"^[a-z]+(-[a-z]+)*$",
    r"^\d{3}-\d{4}$",
    r"^[^\W\d]+$",
    r"^(?P<x>a|bc)\Z",
    r"\Aab",
    r"[\x41-\x43]+",
    r"^[ -~]*$",
    r"^[^\"\\]*$",
    r"a.c",
    r"(a|b)*abb",
    r"^[0-9]{1,3}(\.[0-9]{1,3}){3}$",
    r"colou?r",
    r"[.-]",
    r"\n",
]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from(PATTERNS), st.text(alphabet="ab-cxyz019AZ@._ \n{}]ér.", max_size=8))
def test_a_pattern_accepts_only_what_re_search_matches(pattern, text):
    dfa = compile_pattern(pattern)
    if dfa.accepts(text):
        assert re.search(pattern, text)
    elif re.search(pattern, text) and "\n" not in text and "é" not in text:
        pytest.fail(f"{pattern!r} should accept {text!r}: on ASCII without line breaks the DFA is exact")


@pytest.mark.parametrize(
    "pattern, why",
    [
        (r"\bfoo", "word boundary"),
        (r"(?=a)", "lookahead"),
        (r"(a)\1", "backreference"),
        (r"(?i)abc", "inline flags"),
        (r"a(^b)", "anchor"),
        (r"a*+", "possessive"),
        (r"a{2000}", "1000"),
        (r"[", "cannot compile"),
    ],
)
def test_patterns_the_grammar_cannot_enforce_say_why(pattern, why):
    with pytest.raises(Unsupported, match=re.escape(why)):
        compile_pattern(pattern)


# --- strings and numbers -------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    st.sampled_from(PATTERNS + [None]),
    st.integers(0, 4),
    st.one_of(st.none(), st.integers(0, 8)),
    st.integers(0, 2**32),
)
def test_strings_with_a_pattern_and_lengths_never_dead_end(pattern, low, high, seed):
    dfa = None
    if pattern is not None:
        dfa = compile_pattern(pattern)
    text = Text(cs.TEXT, low, high, dfa)
    if text.empty():
        return
    rng = random.Random(seed)
    for _ in range(10):
        value, done = walk(text, rng)
        if done:
            assert low <= len(value) and (high is None or len(value) <= high)
            assert pattern is None or re.search(pattern, value)


bounds = st.one_of(
    st.none(),
    st.integers(-1000, 1000),
    st.floats(-1e3, 1e3, allow_nan=False),
    st.sampled_from([0, 0.1, -0.1, 1e-300, 5e-324, 1.7976931348623157e308, 2**60 + 1]),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from(["integer", "number"]), bounds, bounds, st.booleans(), st.booleans(), st.integers(0, 2**32))
def test_numbers_stay_within_bounds_as_schema_py_compares_them(kind, low, high, low_open, high_open, seed):
    schema = {"type": kind}
    if low is not None:
        schema["exclusiveMinimum" if low_open else "minimum"] = low
    if high is not None:
        schema["exclusiveMaximum" if high_open else "maximum"] = high
    spec = _Schemas("t", schema).alternatives(schema, [], True)[0]
    lower, upper, unsat = _bounds(spec, kind == "integer")
    if unsat:
        return
    machine = Number(kind == "integer", lower, upper)
    if machine.empty():
        return
    rng = random.Random(seed)
    wrapper = {"type": "object", "properties": {"v": schema}}
    for _ in range(10):
        text, done = walk(machine, rng, limit=60)
        if done:
            validate_arguments("t", {"v": text}, wrapper)  # the compact syntax: a string, converted
            validate_arguments("t", {"v": json.loads(text)}, wrapper)  # the JSON syntax: a number


def test_number_bounds_that_float_rounding_would_break():
    # 0.99999999999999999999 is below 1 exactly, but float() makes it 1.0, which exclusiveMaximum 1 refuses
    lower, upper, _ = _bounds(
        _Schemas("t", {}).alternatives({"type": "number", "exclusiveMaximum": 1}, [], True)[0], False
    )
    machine = Number(False, lower, upper)
    assert machine.run("0.99999999999999999999") is None or not machine.final(machine.run("0.99999999999999999999"))
    assert machine.accepts("0.5") and not machine.accepts("1") and not machine.accepts("1.0")
    ints = Number(True, (Fraction(1), False), (Fraction(7), False))
    assert [ints.accepts(str(n)) for n in range(0, 9)] == [False] + [True] * 7 + [False]
    assert ints.chars("") == cs.of("1234567")
    assert Number(True, (Fraction(50), False), (Fraction(55), False)).chars("") == cs.of("5")


# --- whole calls ---------------------------------------------------------------------------------------


def test_compact_calls_for_the_lab_tools():
    grammar = call_grammar(LAB_TOOLS, "compact")
    assert grammar.problems == [] and grammar.tools == [t.name for t in LAB_TOOLS]
    m = grammar.machine
    assert m.accepts("get_weather city=Polson state=MT]")
    assert m.accepts('get_forecast city="Los Angeles" state=CA days=7]')
    assert m.accepts('get_forecast  state=CA\tcity="a \\"b\\""]')
    assert m.accepts("convert value=-12.5 from_unit=km to_unit=mi]")
    assert not m.accepts("get_forecast city=X state=MT days=8]")  # maximum 7
    assert not m.accepts("get_forecast city=X state=MT days=2.0]")  # an integer
    assert not m.accepts("get_weather city=X]")  # state is required
    assert not m.accepts('get_weather city="" state=MT]')  # minLength 1
    assert not m.accepts("get_weather city=X state=MT zip=1]")  # additionalProperties false
    assert not m.accepts("get_weather city=X city=Y state=MT]")  # each key once
    assert not m.accepts("get_wether city=X state=MT]")  # no such tool
    assert not m.accepts("convert value=1 from_unit=furlong to_unit=m]")  # enum


def test_json_calls_for_the_lab_tools():
    m = call_grammar(LAB_TOOLS, "json").machine
    assert m.accepts('\n{"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}}\n</tool_call>')
    assert m.accepts('{"name":"get_forecast","arguments":{"days":7,"state":"B","city":"A\\u0007"}}</tool_call>')
    assert not m.accepts('{"name":"get_forecast","arguments":{"city":"A","state":"B","days":0}}</tool_call>')
    assert not m.accepts('{"name":"get_forecast","arguments":{"city":"A","state":"B","days":"3"}}</tool_call>')
    assert not m.accepts('{"arguments":{"city":"A","state":"B"},"name":"get_weather"}</tool_call>')  # name first
    assert not m.accepts('{"name":"get_weather"}</tool_call>')  # its arguments are required


def schema_tools(schema):
    return [SimpleNamespace(name="t", input_schema=schema)]


def test_what_the_grammar_cannot_express_is_reported():
    problems = call_grammar(
        schema_tools(
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "pattern": r"(?=x)x"},
                    "b": {"type": "string", "format": "date-time"},
                    "c": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
                    "d": {"type": "array", "uniqueItems": True},
                },
            }
        ),
        "json",
    ).problems
    text = "\n".join(problems)
    assert "lookahead" in text and "format" in text and "oneOf" in text and "uniqueItems" in text
    problems = call_grammar(
        schema_tools(
            {"type": "object", "properties": {"x": {"type": "integer", "minimum": 5, "maximum": 1}}, "required": ["x"]}
        ),
        "json",
    ).problems
    assert any("no arguments satisfy" in p for p in problems)
    problems = call_grammar([SimpleNamespace(name="a b", input_schema={})], "compact").problems
    assert any("cannot name this tool" in p for p in problems)


def test_anyof_oneof_allof_ref_and_nesting_in_json():
    schema = {
        "type": "object",
        "$defs": {
            "P": {
                "type": "object",
                "properties": {"x": {"type": "integer"}},
                "required": ["x"],
                "additionalProperties": False,
            }
        },
        "properties": {
            "opt": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
            "one": {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "boolean"}]},
            "both": {"allOf": [{"type": "integer", "minimum": 3}, {"maximum": 4}]},
            "point": {"$ref": "#/$defs/P"},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 2},
        },
        "additionalProperties": False,
    }
    grammar = call_grammar(schema_tools(schema), "json")
    assert grammar.problems == []
    m = grammar.machine
    ok = '{"name":"t","arguments":{"opt":null,"one":true,"both":4,"point":{"x":-3},"tags":["b","a"]}}</tool_call>'
    assert m.accepts(ok)
    for bad in (
        '"opt":-1',
        '"one":"abc"',
        '"both":5',
        '"point":{"x":1,"y":2}',
        '"tags":[]',
        '"tags":["a","c"]',
        '"point":{}',
    ):
        assert not m.accepts('{"name":"t","arguments":{' + bad + "}}</tool_call>"), bad


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(["compact", "json"]), st.integers(0, 2**32))
def test_random_walks_through_the_lab_grammar_parse_and_validate(syntax_name, seed):
    syntax = CompactSyntax() if syntax_name == "compact" else JsonSyntax()
    grammar = ByteGrammar(call_grammar(LAB_TOOLS, syntax_name).machine)
    schemas = {t.name: t.input_schema for t in LAB_TOOLS}
    rng = random.Random(seed)
    state, data = grammar.start, bytearray()
    while not state.final and len(data) < 5000:
        byte = rng.choice(sorted(state.allowed))
        data.append(byte)
        state = grammar.advance(state, byte)
    assert state.final
    call = syntax.parse(syntax.opener + data.decode("utf-8"))
    validate_arguments(call.name, call.arguments, schemas[call.name])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.integers(0, 0x10FFFF), st.integers(0, 3000)), max_size=4), st.binary(min_size=0, max_size=3)
)
def test_the_byte_layer_allows_exactly_the_utf8_of_allowed_characters(pairs, prefix):
    chars = cs.intersect(cs.normalize((lo, min(lo + n, cs.MAX_CP)) for lo, n in pairs), cs.TEXT)
    if prefix and utf8_range(prefix) is None:
        return
    if prefix and utf8_range(prefix)[2] == len(prefix):
        return
    allowed = ByteGrammar._allowed(chars, prefix)
    for byte in range(256):
        data = prefix + bytes((byte,))
        if not prefix and byte < 0x80:
            expected = cs.contains(chars, byte)
        else:
            found = utf8_range(data)
            expected = found is not None and any(
                cs.overlaps(chars, a, b) for a, b in cs.intersect(((found[0], found[1]),), cs.TEXT)
            )
        assert (byte in allowed) == expected, (hex(byte), data)
