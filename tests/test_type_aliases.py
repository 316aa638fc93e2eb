"""Python's type names in a schema (BFCL's `float`, `dict`, `tuple`, hand-written `int`, `str`, ...): argument
checking and the --constrain grammar read them as the JSON Schema types they mean; a type nobody knows accepts
any value; the router says which, once per tool definition, in a notice a terminal can show safely."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from decodeloop.constrain.grammar.bytes import ByteGrammar
from decodeloop.constrain.grammar.compile import call_grammar
from decodeloop.events import Notice
from decodeloop.mcp.client import Tool
from decodeloop.schema import TYPE_ALIASES, ArgumentError, describe_type, type_notes, validate_arguments
from decodeloop.tools.router import Router

BFCL_LIKE = {
    "type": "dict",
    "properties": {
        "radius": {"type": "float"},
        "count": {"type": "int"},
        "exact": {"type": "bool"},
        "label": {"type": "str"},
        "sides": {"type": "tuple", "items": {"type": "float"}},
        "tags": {"type": "list", "items": {"type": "str"}},
        "options": {"type": "dict"},
        "anything": {"type": "any"},
        "when": {"type": "datetime"},
    },
    "required": ["radius"],
}
WHITESPACE = set(b" \t\n\r")


def grammar_state(schema: dict, written: str):
    """The byte grammar of a JSON call to tool `f` with `schema`, after `written`."""
    grammar = ByteGrammar(call_grammar([SimpleNamespace(name="f", input_schema=schema)], "json").machine)
    state = grammar.start
    for byte in written.encode():
        state = grammar.advance(state, byte)
        assert state is not None, written
    return grammar, state


def test_the_table_maps_each_alias_to_a_json_schema_type():
    assert TYPE_ALIASES == {
        "float": "number",
        "int": "integer",
        "bool": "boolean",
        "str": "string",
        "dict": "object",
        "list": "array",
        "tuple": "array",
        "any": None,
    }
    assert describe_type({"type": "float"}) == "number" and describe_type({"type": "tuple"}) == "JSON array"


@pytest.mark.parametrize(
    "key, wrong, message",
    [
        ("radius", "big", 'argument "radius" must be a number'),
        ("count", 2.5, 'argument "count" must be an integer'),
        ("exact", "maybe", 'argument "exact" must be true or false'),
        ("label", 3, 'argument "label" must be a string'),
        ("sides", {"a": 1}, 'argument "sides" must be a JSON array'),
        ("tags", [1], 'argument "tags[0]" must be a string'),
        ("options", [1], 'argument "options" must be a JSON object'),
    ],
)
def test_an_alias_makes_argument_checking_refuse_a_wrong_type(key, wrong, message):
    arguments = {"radius": 1.5, key: wrong} if key != "radius" else {"radius": wrong}
    with pytest.raises(ArgumentError) as raised:
        validate_arguments("f", arguments, BFCL_LIKE)
    assert message in str(raised.value)


def test_an_alias_converts_and_accepts_as_its_type_does():
    converted = validate_arguments(
        "f",
        {
            "radius": "2.5",
            "count": "3",
            "exact": "true",
            "sides": "[3, 4.5]",
            "tags": ["a"],
            "options": '{"k": 1}',
            "label": "x",
        },
        BFCL_LIKE,
    )
    assert converted == {
        "radius": 2.5,
        "count": 3,
        "exact": True,
        "sides": [3, 4.5],
        "tags": ["a"],
        "options": {"k": 1},
        "label": "x",
    }


def test_any_and_an_unknown_type_accept_every_value():
    for value in ("text", 3, None, [1], {"a": True}):
        assert validate_arguments("f", {"radius": 1, "anything": value, "when": value}, BFCL_LIKE)["when"] == value
    # a list of types holding one nobody knows: the value may be anything too
    assert validate_arguments("f", {"v": 3}, {"type": "object", "properties": {"v": {"type": ["string", "date"]}}})


def test_the_grammar_allows_only_a_number_where_an_alias_says_float():
    _, state = grammar_state(BFCL_LIKE, '{"name": "f", "arguments": {"radius": ')
    assert set(state.allowed) - WHITESPACE == set(b"-0123456789")
    grammar, _ = grammar_state(BFCL_LIKE, "")
    assert grammar.accepts(b'{"name": "f", "arguments": {"radius": 2.5, "sides": [3, 4.5]}}</tool_call>')
    assert not grammar.accepts(b'{"name": "f", "arguments": {"radius": "2.5"}}</tool_call>')
    assert not grammar.accepts(b'{"name": "f", "arguments": {"radius": 1, "options": [1]}}</tool_call>')
    assert not grammar.accepts(b'{"name": "f", "arguments": {"radius": 1, "count": 1.5}}</tool_call>')


def test_the_grammar_allows_any_value_where_the_type_is_unknown():
    _, state = grammar_state(BFCL_LIKE, '{"name": "f", "arguments": {"when": ')
    assert set(b'"-0123456789[{tfn') <= set(state.allowed)
    problems = call_grammar([SimpleNamespace(name="f", input_schema=BFCL_LIKE)], "json").problems
    assert not any("type" in p for p in problems), problems


def test_type_notes_name_each_path_with_its_mapping_and_each_unknown_type():
    aliases, unknown = type_notes(BFCL_LIKE, limit=20)
    for shown in (
        '"(arguments)" dict -> object',
        '"radius" float -> number',
        '"sides" tuple -> array',
        '"sides[]" float -> number',
        '"tags[]" str -> string',
        '"anything" any -> any type',
    ):
        assert shown in aliases
    assert unknown.startswith("unknown types, so any value is accepted there") and '"when" "datetime"' in unknown
    assert type_notes({"type": "object", "properties": {"a": {"type": "number"}}}) == []


def test_type_notes_are_capped_and_show_server_text_safely():
    many = {"type": "object", "properties": {f"p{i}": {"type": "float"} for i in range(30)}}
    (line,) = type_notes(many, limit=4)
    assert line.count("-> number") == 4 and line.endswith(", and 26 more")
    hostile = {"type": "object", "properties": {"x\x1b[2J\u202e": {"type": "date\ntime\x07" + "z" * 500}}}
    (line,) = type_notes(hostile)
    assert line.isascii() and line.isprintable() and len(line) < 300
    assert "\\u001b[2J\\u202e" in line


def _client(tools):
    return SimpleNamespace(tools_stale=threading.Event(), list_tools=lambda: list(tools), capabilities={})


def test_the_router_says_how_types_were_read_once_per_tool_definition():
    events = []
    router = Router(events.append)
    tools = [
        Tool("area", "", BFCL_LIKE),
        Tool("plain", "", {"type": "object", "properties": {"a": {"type": "string"}}}),
    ]
    client = _client(tools)
    router.add_server("calc", client, tools)
    notes = [e for e in events if isinstance(e, Notice)]
    assert [n.source for n in notes] == ["calc", "calc"]
    assert notes[0].message.startswith('tool area: types read as JSON Schema\'s: "(arguments)" dict -> object')
    assert notes[1].message.startswith("tool area: unknown types") and '"when" "datetime"' in notes[1].message
    events.clear()
    client.tools_stale.set()  # listed again, the same definitions: nothing said again
    router.refresh()
    assert not [e for e in events if isinstance(e, Notice)]
    changed = {"type": "dict", "properties": {"depth": {"type": "float"}}}
    client.list_tools = lambda: [Tool("area", "", changed)]
    client.tools_stale.set()  # a new definition is noted (and held until approved, as pins.py says)
    router.refresh()
    assert any(isinstance(e, Notice) and '"depth" float -> number' in e.message for e in events)
