"""Arguments against a tool's inputSchema: conversion from compact strings, every keyword, whole-message errors."""

from __future__ import annotations

import json

import pytest

from decodeloop.schema import (
    MAX_DEPTH,
    ArgumentError,
    check_value,
    describe_type,
    did_you_mean,
    text_value,
    validate_arguments,
)

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name."},
        "state": {"type": "string", "description": "Two-letter US state code"},
    },
    "required": ["city", "state"],
}

FORECAST = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name."},
        "state": {"type": "string", "description": "Two-letter US state code"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 3},
    },
    "required": ["city", "state"],
}


def ok(arguments: dict, schema: dict, tool: str = "t") -> dict:
    return validate_arguments(tool, arguments, schema)


def problems(arguments: dict, schema: dict, tool: str = "t") -> list[str]:
    with pytest.raises(ArgumentError) as caught:
        validate_arguments(tool, arguments, schema)
    error = caught.value
    assert str(error) == f"{tool}: " + "; ".join(error.problems)
    return error.problems


def one(property_schema: dict) -> dict:
    """A tool schema with a single optional argument "x"."""
    return {"type": "object", "properties": {"x": property_schema}}


# --- the whole message ---------------------------------------------------------------


def test_every_problem_in_one_message():
    with pytest.raises(ArgumentError) as caught:
        validate_arguments("get_forecast", {"city": "Polson", "days": "three"}, FORECAST)
    assert str(caught.value) == (
        'get_forecast: argument "days" must be an integer, got "three"; '
        'missing required argument "state" (string: Two-letter US state code)'
    )
    assert caught.value.tool_name == "get_forecast"
    assert len(caught.value.problems) == 2


def test_argument_error_is_a_value_error():
    assert issubclass(ArgumentError, ValueError)


def test_valid_arguments_come_back_converted():
    assert ok({"city": "Polson", "state": "MT", "days": "3"}, FORECAST) == {"city": "Polson", "state": "MT", "days": 3}


def test_defaults_are_not_filled_in():
    assert ok({"city": "Polson", "state": "MT"}, FORECAST) == {"city": "Polson", "state": "MT"}


@pytest.mark.parametrize("schema", [None, {}])
def test_no_schema_accepts_anything(schema):
    assert validate_arguments("t", {"anything": "goes", "n": "1"}, schema) == {"anything": "goes", "n": "1"}


def test_arguments_must_be_a_dict():
    with pytest.raises(TypeError):
        validate_arguments("t", ["a"], WEATHER)  # type: ignore[arg-type]


def test_missing_required_without_description():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "required": ["a", "b", "c"]}
    assert problems({}, schema) == [
        'missing required argument "a" (integer)',
        'missing required argument "b"',
        'missing required argument "c"',
    ]


# --- additionalProperties and did-you-mean -----------------------------------------


def test_unknown_argument_is_rejected_with_suggestion():
    assert problems({"cty": "Polson", "state": "MT"}, WEATHER, "get_weather") == [
        'unknown argument "cty" (did you mean "city"?); get_weather takes city, state',
        'missing required argument "city" (string: City name)',
    ]


def test_unknown_argument_without_a_close_match():
    assert problems({"city": "a", "state": "b", "zzz": "1"}, WEATHER, "get_weather") == [
        'unknown argument "zzz"; get_weather takes city, state'
    ]


def test_tool_without_arguments():
    for schema in ({"type": "object"}, {"type": "object", "properties": {}}):
        assert problems({"tz": "UTC"}, schema, "get_time") == ['unknown argument "tz"; get_time takes no arguments']
        assert ok({}, schema) == {}


def test_additional_properties_true_passes_unknown_keys_through():
    schema = dict(WEATHER, additionalProperties=True)
    assert ok({"city": "a", "state": "b", "extra": "1"}, schema) == {"city": "a", "state": "b", "extra": "1"}


def test_additional_properties_schema_checks_unknown_keys():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}}
    assert ok({"a": "x", "b": "2"}, schema) == {"a": "x", "b": 2}
    assert problems({"b": "two"}, schema) == ['argument "b" must be an integer, got "two"']


def test_additional_properties_false():
    schema = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    assert problems({"b": "1"}, schema) == ['unknown argument "b"; t takes a']


def test_pattern_properties():
    schema = {"type": "object", "properties": {}, "patternProperties": {"^n_": {"type": "integer"}}}
    assert ok({"n_one": "1"}, schema) == {"n_one": 1}
    assert problems({"n_one": "x", "other": "1"}, schema) == [
        'argument "n_one" must be an integer, got "x"',
        'unknown argument "other"; t takes no arguments',
    ]


def test_did_you_mean():
    assert did_you_mean("cty", ["city", "state"]) == ["city"]
    assert did_you_mean("City", ["city", "cite"])[0] == "city"
    assert did_you_mean("get_wether", ["get_weather", "get_forecast"]) == ["get_weather"]
    assert did_you_mean("zzz", ["city"]) == []


# --- type conversion from compact strings -------------------------------------------


@pytest.mark.parametrize(
    "kind, text, value",
    [
        ("integer", "3", 3),
        ("integer", "-2", -2),
        ("integer", "+7", 7),
        ("number", "2.5", 2.5),
        ("number", "3", 3),
        ("number", "-.5", -0.5),
        ("number", "1e3", 1000.0),
        ("boolean", "true", True),
        ("boolean", "FALSE", False),
        ("boolean", "True", True),
        ("null", "null", None),
        ("array", '["a", "b"]', ["a", "b"]),
        ("array", "[]", []),
        ("object", '{"k": 1}', {"k": 1}),
        ("string", "3", "3"),
        ("string", "", ""),
    ],
)
def test_conversions(kind, text, value):
    converted = ok({"x": text}, one({"type": kind}))["x"]
    assert converted == value and type(converted) is type(value)


@pytest.mark.parametrize(
    "kind, text, wanted",
    [
        ("integer", "3.0", "an integer"),
        ("integer", "three", "an integer"),
        ("integer", "1_000", "an integer"),
        ("integer", " 3", "an integer"),
        ("integer", "٣", "an integer"),
        ("number", "nan", "a number"),
        ("number", "inf", "a number"),
        ("number", "-Infinity", "a number"),
        ("number", "1e999", "a number"),
        ("number", "2.5.1", "a number"),
        ("boolean", "yes", "true or false"),
        ("boolean", "1", "true or false"),
        ("null", "none", "null"),
        ("array", "a,b", 'a JSON array, written like ["a", "b"]'),
        ("array", '{"a": 1}', 'a JSON array, written like ["a", "b"]'),
        ("object", "[1]", 'a JSON object, written like {"key": "value"}'),
    ],
)
def test_conversion_errors(kind, text, wanted):
    got = json.dumps(text, ensure_ascii=False)
    assert problems({"x": text}, one({"type": kind})) == [f'argument "x" must be {wanted}, got {got}']


def test_list_of_types_takes_the_first_that_fits():
    schema = one({"type": ["integer", "null"]})
    assert ok({"x": "4"}, schema) == {"x": 4}
    assert ok({"x": "null"}, schema) == {"x": None}
    assert problems({"x": "four"}, schema) == ['argument "x" must be an integer or null, got "four"']
    # a string stays a string when strings are allowed
    assert ok({"x": "4"}, one({"type": ["string", "integer"]})) == {"x": "4"}
    assert ok({"x": "4"}, one({"type": ["boolean", "number"]})) == {"x": 4}


def test_native_values_pass_through():
    schema = {
        "type": "object",
        "properties": {
            "i": {"type": "integer"},
            "n": {"type": "number"},
            "b": {"type": "boolean"},
            "z": {"type": "null"},
            "a": {"type": "array"},
            "o": {"type": "object"},
            "s": {"type": "string"},
        },
    }
    arguments = {"i": 3, "n": 2.5, "b": False, "z": None, "a": [1], "o": {"k": "v"}, "s": "x"}
    assert ok(arguments, schema) == arguments
    assert ok({"i": 4.0}, schema) == {"i": 4} and type(ok({"i": 4.0}, schema)["i"]) is int


def test_native_values_of_the_wrong_type():
    schema = {
        "type": "object",
        "properties": {"i": {"type": "integer"}, "s": {"type": "string"}, "n": {"type": "number"}},
    }
    assert problems({"i": True, "s": 3, "n": float("nan")}, schema) == [
        'argument "i" must be an integer, got true',
        'argument "s" must be a string, got 3',
        'argument "n" must be a number, got NaN',
    ]


def test_unknown_types_and_keywords_are_ignored():
    assert ok({"x": "anything"}, one({"type": "any", "format": "email", "oneOf": [{}]})) == {"x": "anything"}


# --- the other keywords ------------------------------------------------------------


def test_enum():
    schema = one({"type": "string", "enum": ["c", "f"]})
    assert ok({"x": "c"}, schema) == {"x": "c"}
    assert problems({"x": "k"}, schema) == ['argument "x" must be one of "c", "f", got "k"']


def test_enum_compares_as_json():
    assert problems({"x": "true"}, one({"type": "boolean", "enum": [False]})) == [
        'argument "x" must be one of false, got true'
    ]
    assert problems({"x": "1"}, one({"type": "integer", "enum": [True, 2]})) == [
        'argument "x" must be one of true, 2, got 1'
    ]


def test_enum_without_type_converts_by_member():
    schema = one({"enum": [1, 2, None, "three"]})
    assert ok({"x": "2"}, schema) == {"x": 2}
    assert ok({"x": "null"}, schema) == {"x": None}
    assert ok({"x": "three"}, schema) == {"x": "three"}
    assert problems({"x": "4"}, schema) == ['argument "x" must be one of 1, 2, null, "three", got "4"']


def test_const():
    assert ok({"x": "v"}, one({"const": "v"})) == {"x": "v"}
    assert ok({"x": "5"}, one({"type": "integer", "const": 5})) == {"x": 5}
    assert problems({"x": "w"}, one({"const": "v"})) == ['argument "x" must be "v", got "w"']


@pytest.mark.parametrize(
    "keywords, text, message",
    [
        ({"minimum": 1}, "0", "must be at least 1, got 0"),
        ({"maximum": 7}, "8", "must be at most 7, got 8"),
        ({"exclusiveMinimum": 0}, "0", "must be greater than 0, got 0"),
        ({"exclusiveMaximum": 10}, "10", "must be less than 10, got 10"),
        ({"minimum": 0, "exclusiveMinimum": True}, "0", "must be greater than 0, got 0"),
        ({"maximum": 1.5, "exclusiveMaximum": True}, "1.5", "must be less than 1.5, got 1.5"),
    ],
)
def test_number_bounds(keywords, text, message):
    assert problems({"x": text}, one({"type": "number", **keywords})) == [f'argument "x" {message}']


def test_number_bounds_that_hold():
    schema = one({"type": "integer", "minimum": 1, "maximum": 7, "exclusiveMinimum": 0, "exclusiveMaximum": 8})
    for text in ("1", "7"):
        assert ok({"x": text}, schema) == {"x": int(text)}


def test_string_length_and_pattern():
    schema = one({"type": "string", "minLength": 2, "maxLength": 2, "pattern": "^[A-Z]+$"})
    assert ok({"x": "MT"}, schema) == {"x": "MT"}
    assert problems({"x": "m"}, schema) == [
        'argument "x" must be at least 2 characters long, got "m" (1)',
        'argument "x" must match the pattern ^[A-Z]+$, got "m"',
    ]
    assert problems({"x": "MTX"}, schema) == ['argument "x" must be at most 2 characters long, got "MTX" (3)']


def test_pattern_is_a_search_and_a_bad_pattern_is_ignored():
    assert ok({"x": "abc1"}, one({"type": "string", "pattern": "[0-9]"})) == {"x": "abc1"}
    assert ok({"x": "abc"}, one({"type": "string", "pattern": "(unclosed"})) == {"x": "abc"}


def test_array_items_and_sizes():
    schema = one({"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "maxItems": 3})
    assert ok({"x": "[1, 2]"}, schema) == {"x": [1, 2]}
    assert ok({"x": ["1", 2]}, schema) == {"x": [1, 2]}  # string elements convert too
    assert problems({"x": "[]"}, schema) == ['argument "x" must have at least 1 item, got 0']
    assert problems({"x": "[1, 2, 3, 4]"}, schema) == ['argument "x" must have at most 3 items, got 4']
    assert problems({"x": '[1, "a", -1]'}, schema) == [
        'argument "x[1]" must be an integer, got "a"',
        'argument "x[2]" must be at least 0, got -1',
    ]
    assert problems({"x": "1,2"}, schema) == ['argument "x" must be a JSON array, written like [1, 2], got "1,2"']


def test_array_items_by_position():
    schema = one({"type": "array", "items": [{"type": "string"}, {"type": "integer"}]})
    assert ok({"x": '["a", 1, true]'}, schema) == {"x": ["a", 1, True]}
    assert problems({"x": "[1, 1]"}, schema) == ['argument "x[0]" must be a string, got 1']


def test_nested_objects():
    schema = one(
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        }
    )
    assert ok({"x": '{"city": "Polson", "days": 2}'}, schema) == {"x": {"city": "Polson", "days": 2}}
    assert problems({"x": {"cty": "Polson", "days": "two"}}, schema) == [
        'unknown argument "x.cty" (did you mean "city"?); "x" takes city, days',
        'argument "x.days" must be an integer, got "two"',
        'missing required argument "x.city" (string)',
    ]


def test_nested_object_without_properties_is_free_form():
    assert ok({"x": '{"any": [1]}'}, one({"type": "object"})) == {"x": {"any": [1]}}


def test_false_schema_rejects():
    assert problems({"x": "1"}, one(False)) == ['argument "x" is not allowed']  # type: ignore[arg-type]


def test_describe_type():
    assert describe_type({"type": "integer"}) == "integer"
    assert describe_type({"type": ["string", "null"]}) == "string or null"
    assert describe_type({"type": "array", "items": {"type": "string"}}) == "JSON array of strings"
    assert describe_type({"type": "array"}) == "JSON array"
    assert describe_type({"type": "object"}) == "JSON object"
    assert describe_type({}) == ""


# --- anyOf, oneOf, allOf and $ref: the shapes pydantic / FastMCP servers emit -----------------------

OPTIONAL_INT = {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None, "title": "Limit"}
OPTIONAL_TAGS = {"anyOf": [{"items": {"type": "string"}, "type": "array"}, {"type": "null"}], "default": None}
POINT = {
    "properties": {
        "x": {"title": "X", "type": "integer"},
        "y": {"default": 0.0, "type": "number"},
        "label": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["x"],
    "title": "Point",
    "type": "object",
}
MODELS = {
    "$defs": {
        "Point": POINT,
        "Box": {
            "properties": {"corner": {"$ref": "#/$defs/Point"}, "tags": {"items": {"type": "string"}, "type": "array"}},
            "required": ["corner"],
            "type": "object",
        },
    },
    "properties": {
        "p": {"$ref": "#/$defs/Point"},
        "box": {"anyOf": [{"$ref": "#/$defs/Box"}, {"type": "null"}], "default": None},
        "points": {"items": {"$ref": "#/$defs/Point"}, "type": "array"},
    },
    "type": "object",
}


def test_optional_parameters_are_converted_through_any_of():
    assert ok({"x": "5"}, one(OPTIONAL_INT)) == {"x": 5}
    assert ok({"x": "null"}, one(OPTIONAL_INT)) == {"x": None}
    assert ok({"x": 5}, one(OPTIONAL_INT)) == {"x": 5}
    assert ok({"x": '["a", "b"]'}, one(OPTIONAL_TAGS)) == {"x": ["a", "b"]}
    assert problems({"x": ["a", 1]}, one(OPTIONAL_TAGS)) == ['argument "x[1]" must be a string, got 1']
    assert problems({"x": "five"}, one(OPTIONAL_INT)) == ['argument "x" must be an integer or null, got "five"']
    assert problems({"x": "a, b"}, one(OPTIONAL_TAGS)) == [
        'argument "x" must be a JSON array or null, written like ["a", "b"], got "a, b"'
    ]


def test_one_of_is_read_as_any_of_and_a_value_that_fits_as_it_is_wins():
    either = one({"oneOf": [{"type": "integer"}, {"type": "string"}]})
    assert ok({"x": "5"}, either) == {"x": "5"}  # a string is allowed: it stays one, as with a list of types
    assert ok({"x": "5"}, one({"oneOf": [{"type": "boolean"}, {"type": "number"}]})) == {"x": 5}
    assert ok({"x": "2.5"}, one({"anyOf": [{"type": "number"}, {"type": "integer"}]})) == {"x": 2.5}


def test_the_problems_of_the_branch_of_the_values_type_are_reported():
    bounded = one({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]})
    assert problems({"x": "0"}, bounded) == ['argument "x" must be at least 1, got 0']
    mode = one({"anyOf": [{"enum": ["fast", "full"], "type": "string"}, {"type": "null"}]})
    assert ok({"x": "fast"}, mode) == {"x": "fast"}
    assert problems({"x": "slow"}, mode) == ['argument "x" must be one of "fast", "full", got "slow"']


def test_models_are_followed_through_ref_and_defs():
    assert ok({"p": '{"x": "3", "label": "origin"}'}, MODELS) == {"p": {"x": 3, "label": "origin"}}
    assert ok({"box": '{"corner": {"x": 1}, "tags": ["red"]}'}, MODELS) == {
        "box": {"corner": {"x": 1}, "tags": ["red"]}
    }
    assert ok({"box": "null"}, MODELS) == {"box": None}
    assert ok({"points": '[{"x": "1"}, {"x": 2, "y": "0.5"}]'}, MODELS) == {"points": [{"x": 1}, {"x": 2, "y": 0.5}]}
    assert problems({"p": '{"y": 1, "z": 2}'}, MODELS) == [
        'unknown argument "p.z"; "p" takes x, y, label',
        'missing required argument "p.x" (integer)',
    ]
    assert problems({"box": '{"corner": {"x": "one"}}'}, MODELS) == [
        'argument "box.corner.x" must be an integer, got "one"'
    ]


def test_refs_that_do_not_resolve_accept_and_cycles_end():
    assert ok({"x": "5"}, one({"$ref": "https://example.com/schema.json"})) == {"x": "5"}
    assert ok({"x": "5"}, one({"$ref": "#/$defs/missing"})) == {"x": "5"}
    looping = {
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "properties": {"x": {"$ref": "#/$defs/a"}},
    }
    assert ok({"x": "5"}, looping) == {"x": "5"}
    escaped = {
        "$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "boolean"}},
        "properties": {"x": {"$ref": "#/$defs/a~1b"}, "y": {"$ref": "#/$defs/c~0d"}},
    }
    assert ok({"x": "1", "y": "true"}, escaped) == {"x": 1, "y": True}


def test_a_recursive_schema_is_followed_to_a_bounded_depth():
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]},
                },
            }
        },
        "properties": {"list": {"$ref": "#/$defs/node"}},
    }
    assert ok({"list": '{"value": "1", "next": {"value": "2", "next": null}}'}, tree) == {
        "list": {"value": 1, "next": {"value": 2, "next": None}}
    }
    deep: dict = {"value": 0, "next": None}
    for n in range(1, 500):
        deep = {"value": n, "next": deep}
    found = problems({"list": deep}, tree)  # no RecursionError: a problem the model can read
    assert len(found) == 1 and f"nested more than {MAX_DEPTH} levels deep" in found[0]


def test_all_of_applies_every_branch_in_turn():
    schema = one({"allOf": [{"type": "integer"}, {"minimum": 10}]})
    assert ok({"x": "12"}, schema) == {"x": 12}
    assert problems({"x": "3"}, schema) == ['argument "x" must be at least 10, got 3']
    wrapped = {"$defs": {"P": POINT}, "properties": {"p": {"allOf": [{"$ref": "#/$defs/P"}], "description": "A point"}}}
    assert ok({"p": '{"x": "4"}'}, wrapped) == {"p": {"x": 4}}


def test_describe_type_through_any_of_and_refs():
    assert describe_type(OPTIONAL_INT) == "integer or null"
    assert describe_type(OPTIONAL_TAGS) == "JSON array of strings or null"
    assert describe_type(MODELS["properties"]["box"], MODELS) == "JSON object or null"
    assert describe_type(MODELS["properties"]["points"], MODELS) == "JSON array of objects"
    assert describe_type(MODELS["properties"]["box"]) == ""  # without the whole schema, a $ref is unknown
    assert describe_type({"anyOf": [{"type": "integer"}, {}]}) == ""  # a branch of any type
    assert problems({}, {"$defs": {"P": POINT}, "properties": {"p": {"$ref": "#/$defs/P"}}, "required": ["p"]}) == [
        'missing required argument "p" (JSON object)'
    ]


def test_check_value_follows_refs():
    schema = {"$defs": {"P": POINT}, "type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}}
    assert check_value({"p": {"x": 1}}, schema) == []
    assert check_value({"p": {"x": "1"}}, schema) == ['$.p.x must be an integer, got "1"']
    assert check_value(5, {"anyOf": [{"$ref": "#"}]}) == []  # a cycle of refs ends


@pytest.mark.parametrize(
    ("text", "schema", "value"),
    [
        ("3", {"type": "integer"}, 3),
        ("3", {"type": "string"}, "3"),
        ("02139", {"type": "string"}, "02139"),
        ("1e20", {"type": "number"}, 1e20),
        ("True", {"type": "boolean"}, True),
        ("null", {"type": ["string", "null"]}, None),
        ("gym", {"type": ["string", "null"]}, "gym"),
        ("5", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, 5),
        ("some text", {"anyOf": [{"type": "string"}, {"type": "integer"}]}, "some text"),
        ('["a", "b"]', {"type": "array"}, ["a", "b"]),
        ('{"a": 1}', {"$ref": "#/$defs/thing"}, {"a": 1}),
        ("three", {"type": "integer"}, "three"),  # left for validation to report
        ("c", {"enum": ["c", "f"]}, "c"),  # no type: the text
    ],
)
def test_text_value_types_raw_text_by_its_schema(text, schema, value):
    root = {"$defs": {"thing": {"type": "object"}}}
    assert text_value(text, schema, root) == value and type(text_value(text, schema, root)) is type(value)


def test_text_value_reads_an_untyped_value_as_it_is_told():
    assert text_value("[1]", {}, untyped=json.loads) == [1]
    assert text_value("[1]", {}) == "[1]"
