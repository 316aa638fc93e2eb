"""Checking a JSON value against a schema under JSON Schema's own rules, converting nothing.

Owns `check_value`, for a tool's structuredContent against its outputSchema and for the --constrain
grammar's check that a value it admits is accepted. Where arguments.py is strict on purpose, this
follows the standard: additionalProperties absent means any extra key is fine (what a server adds to
its output is its own business), and oneOf means exactly one branch. The keywords it reads are listed
in the package's docstring.
"""

from __future__ import annotations

from typing import Any

from decodeloop.patterns import regex
from decodeloop.schema.core import (
    MAX_DEPTH,
    MAX_SCHEMA_STEPS,
    OVER_BUDGET,
    WANTED,
    OverBudget,
    declared_types,
    has_type,
    is_number,
    json_equal,
    matches,
    matches_key,
    numeric_bounds,
    ref_target,
    show,
    spend,
)


def check_value(value: Any, schema: Any, path: str = "", limit: int = 5, root: Any = None) -> list[str]:
    """Problems with a JSON value under standard JSON Schema rules, for a tool's `outputSchema`.

    Unlike `validate_arguments` this converts nothing and follows JSON Schema's
    defaults (extra keys are fine unless additionalProperties says otherwise);
    the keywords are those listed in the package's docstring (with oneOf as JSON Schema means it:
    exactly one branch). `root` is the whole schema for local $refs (by
    default `schema` itself). At most `limit` problems are reported.
    """
    problems: list[str] = []
    try:
        _check(
            value,
            schema,
            path or "$",
            problems,
            limit,
            schema if root is None else root,
            frozenset(),
            0,
            [MAX_SCHEMA_STEPS],
        )
    except OverBudget:
        problems = [f"{path or '$'} could not be checked: {OVER_BUDGET}"]
    return problems[:limit]


def _check(
    value: Any,
    schema: Any,
    path: str,
    problems: list[str],
    limit: int,
    root: Any,
    refs: frozenset,
    depth: int,
    steps: list[int],
) -> None:
    if len(problems) >= limit or not isinstance(schema, (dict, bool)) or schema is True:
        return
    spend(steps)
    if schema is False:
        problems.append(f"{path} is not allowed")
        return
    if depth >= MAX_DEPTH:
        problems.append(f"{path} is nested more than {MAX_DEPTH} levels deep")
        return
    depth += 1
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref not in refs:
        target = ref_target(ref, root)
        if target is not None:
            _check(value, target, path, problems, limit, root, refs | {ref}, depth, steps)
    types = declared_types(schema)
    if types and not any(
        has_type(value, t) and not (t == "integer" and isinstance(value, float) and not value.is_integer())
        for t in types
    ):
        problems.append(f"{path} must be {' or '.join(WANTED[t] for t in types)}, got {show(value)}")
        return
    if "const" in schema and not json_equal(value, schema["const"]):
        problems.append(f"{path} must be {show(schema['const'])}, got {show(value)}")
    if isinstance(schema.get("enum"), list) and not any(json_equal(value, m) for m in schema["enum"]):
        problems.append(f"{path} must be one of {', '.join(show(m) for m in schema['enum'])}, got {show(value)}")
    for key in ("allOf", "anyOf", "oneOf"):
        branches = schema.get(key)
        if not isinstance(branches, list) or not branches:
            continue
        results: list[list[str]] = []
        for branch in branches:
            results.append([])
            _check(value, branch, path, results[-1], 1, root, refs, depth, steps)
            passed = sum(not r for r in results)
            if (key == "anyOf" and passed) or (key == "oneOf" and passed > 1):
                break  # the answer is known: the other branches would only cost time
        if key == "allOf":
            for r in results:
                problems.extend(r)
        elif key == "oneOf" and passed > 1:
            problems.append(f"{path} matches more than one of the oneOf alternatives")
        elif passed == 0:
            problems.append(f"{path} matches 0 of the {key} alternatives")
    if isinstance(value, str):
        if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
            problems.append(f"{path} must have at least {schema['minLength']} characters")
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            problems.append(f"{path} must have at most {schema['maxLength']} characters")
        if isinstance(schema.get("pattern"), str):
            try:
                if matches(schema["pattern"], value) is False:
                    problems.append(f"{path} must match {schema['pattern']}")
            except regex.TooCostly as e:
                problems.append(f"{path} could not be checked against its pattern: {e}")
    elif is_number(value):
        low, high, low_open, high_open = numeric_bounds(schema)
        if (is_number(low) and value < low) or (is_number(low_open) and value <= low_open):
            problems.append(f"{path} is below its minimum: {show(value)}")
        if (is_number(high) and value > high) or (is_number(high_open) and value >= high_open):
            problems.append(f"{path} is above its maximum: {show(value)}")
    elif isinstance(value, list):
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            problems.append(f"{path} must have at least {schema['minItems']} items")
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            problems.append(f"{path} must have at most {schema['maxItems']} items")
        items = schema.get("items")
        for i, item in enumerate(value):
            branch = items[i] if isinstance(items, list) and i < len(items) else items
            if isinstance(branch, (dict, bool)):
                _check(item, branch, f"{path}[{i}]", problems, limit, root, frozenset(), depth, steps)
    elif isinstance(value, dict):
        declared = schema.get("properties")
        properties: dict = declared if isinstance(declared, dict) else {}
        for key in schema.get("required") or []:
            if isinstance(key, str) and key not in value:
                problems.append(f'{path} is missing required property "{key}"')
        extra = schema.get("additionalProperties", True)  # absent: JSON Schema's default, any extra key
        by_pattern = schema.get("patternProperties")
        patterns: dict = by_pattern if isinstance(by_pattern, dict) else {}
        for key, item in value.items():
            if key in properties:
                _check(item, properties[key], f"{path}.{key}", problems, limit, root, frozenset(), depth, steps)
                continue
            spend(steps, len(patterns))
            matched = [p for p in patterns if matches_key(p, key)]
            for p in matched:
                _check(item, patterns[p], f"{path}.{key}", problems, limit, root, frozenset(), depth, steps)
            if not matched and extra is not True:
                _check(item, extra, f"{path}.{key}", problems, limit, root, frozenset(), depth, steps)
