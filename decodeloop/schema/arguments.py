"""Checking a call's arguments against the tool's inputSchema, before the server sees them.

Owns `validate_arguments`: it converts the string values of the compact syntax
to the types the schema asks for, and reports every problem at once in one
message the model can act on (`ArgumentError`); and `text_value`, the same
conversion for one value an XML-style call format writes as raw text, before
validation. The keywords it reads are listed
in the package's docstring; how it reads the ones where it parts from JSON Schema:

    additionalProperties unknown keys are rejected unless it is true or a
                         schema (then they are checked against it). This is
                         stricter than JSON Schema's default on purpose: a
                         misspelt key is almost always a mistake. Nested objects
                         that declare no properties are free-form.
    anyOf, oneOf         the value must fit a branch; the first branch it fits
                         as it is wins, else the first it converts to (so
                         pydantic's optional `{"anyOf": [{"type": "integer"},
                         {"type": "null"}]}` turns "5" into 5 and "null" into
                         null). oneOf is read as anyOf: that no two branches
                         fit is the server's to enforce.
    allOf                the value must fit every branch, converted by each in turn

An empty or missing schema accepts any arguments; any other schema names every argument
the tool takes, so {"type": "object"} alone means it takes none. `default` is
never filled in: the server applies its own defaults.

Conversion of a string value, when the schema's types do not include string:

    integer   "3" -> 3, "-2" -> -2; "3.0" and "three" are errors
    number    "2.5" -> 2.5, "3" -> 3, "1e3" -> 1000.0; nan and infinity are errors
    boolean   "true" / "false" in any case; anything else is an error
    null      "null" -> None
    array     a string of JSON that is an array, e.g. "[\\"a\\", \\"b\\"]"
    object    a string of JSON that is an object

With a list of types, the first the string converts to wins. With no type but
an enum or const, a string matches the member it spells ("2" is 2). A value that is
already of an allowed type (from a JSON call syntax) passes unchanged, except
that a whole float where an integer is wanted becomes an int.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from decodeloop.patterns import regex
from decodeloop.schema.core import (
    MAX_DEPTH,
    MAX_SCHEMA_STEPS,
    OVER_BUDGET,
    WANTED,
    OverBudget,
    allowed_types,
    array_items,
    declared_types,
    has_type,
    is_number,
    json_equal,
    matches,
    matches_key,
    numeric_bounds,
    ref_target,
    resolved,
    show,
    spend,
)
from decodeloop.schema.describe import describe_type, did_you_mean

_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
_NUMBER_RE = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_NO_MATCH = object()


class ArgumentError(ValueError):
    """Arguments that break the tool's schema; `problems` lists each one."""

    def __init__(self, tool_name: str, problems: list[str]) -> None:
        super().__init__(f"{tool_name}: " + "; ".join(problems))
        self.tool_name = tool_name
        self.problems = problems


def validate_arguments(tool_name: str, arguments: dict, schema: dict | None) -> dict:
    """The arguments converted to the schema's types; raises ArgumentError listing every problem."""
    if not isinstance(arguments, dict):
        raise TypeError(f"arguments must be a dict, not {type(arguments).__name__}")
    if not schema or not isinstance(schema, dict):
        return dict(arguments)
    check = _Checker(tool_name, root=schema)
    try:  # the arguments themselves are always an object whose keys the schema names
        converted = check.object(arguments, schema, "", strict=True)
    except OverBudget:
        raise ArgumentError(tool_name, [f"the arguments could not be checked: {OVER_BUDGET}"]) from None
    if check.problems:
        raise ArgumentError(tool_name, check.problems)
    return converted


def _from_string(text: str, kind: str) -> Any:
    """`text` converted to `kind`, or _NO_MATCH."""
    if kind == "integer":
        return int(text) if _INTEGER_RE.match(text) else _NO_MATCH
    if kind == "number":
        if not _NUMBER_RE.match(text):
            return _NO_MATCH
        if _INTEGER_RE.match(text):
            return int(text)
        number = float(text)
        return number if math.isfinite(number) else _NO_MATCH
    if kind == "boolean":
        return {"true": True, "false": False}.get(text.lower(), _NO_MATCH)
    if kind == "null":
        return None if text.lower() == "null" else _NO_MATCH
    if kind in ("array", "object"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return _NO_MATCH
        return parsed if has_type(parsed, kind) else _NO_MATCH
    return _NO_MATCH


def text_value(text: str, schema: Any, root: Any = None, untyped: Callable[[str], Any] | None = None) -> Any:
    """A value a call format writes as raw text (an XML-style parameter) as the type its schema asks for: None
    for "null" where null is allowed, the text itself where a string is, else the first type it converts to
    (as a compact value is, above), else the text unchanged, for validation to report. `untyped` reads a
    value whose schema allows any type (default: the text itself); `root` is the tool's whole schema, for
    local $refs."""
    kinds = allowed_types(schema, root)
    if not kinds:
        return untyped(text) if untyped is not None else text
    if "null" in kinds and text == "null":
        return None
    if "string" in kinds:
        return text
    for kind in kinds:
        converted = _from_string(text.strip(), kind)
        if converted is not _NO_MATCH:
            return converted
    return text


def _example(schema: Any, kind: str, root: Any = None) -> str:
    """A short JSON example for an array or object, so the model sees the form."""
    if kind == "object":
        return '{"key": "value"}'
    items = allowed_types(array_items(schema, root), root)
    return {"integer": "[1, 2]", "number": "[1.5, 2]", "boolean": "[true, false]", "object": '[{"key": "value"}]'}.get(
        items[0] if items else "string", '["a", "b"]'
    )


class _Checker:
    """Walks a value and its schema together, collecting problems instead of stopping at the first.

    `root` is the whole schema, for local `$ref`s. With `convert` false, strings
    are taken as they are (the first pass over anyOf/oneOf branches).
    """

    def __init__(
        self, tool_name: str, root: Any = None, convert: bool = True, depth: int = 0, steps: list[int] | None = None
    ) -> None:
        self.tool_name = tool_name
        self.root = root
        self.converts = convert
        self.depth = depth
        self.steps = [MAX_SCHEMA_STEPS] if steps is None else steps  # shared with the sub-checkers
        self.problems: list[str] = []

    def value(self, value: Any, schema: Any, path: str, refs: frozenset = frozenset()) -> Any:
        """`value` checked against `schema` and converted; `refs` are the $refs followed at this level."""
        if schema is False:
            self.problems.append(f'argument "{path}" is not allowed')
            return value
        if not isinstance(schema, dict):
            return value
        spend(self.steps)
        if self.depth >= MAX_DEPTH:
            self.problems.append(f'argument "{path}" is nested more than {MAX_DEPTH} levels deep')
            return value
        self.depth += 1
        try:
            return self._value(value, schema, path, refs)
        finally:
            self.depth -= 1

    def _value(self, value: Any, schema: dict, path: str, refs: frozenset) -> Any:
        before = len(self.problems)
        types = declared_types(schema)
        if types:
            value, ok = self.convert(value, types)
            if not ok:
                self.problems.append(self.wrong_type(value, [(kind, schema) for kind in types], path))
                return value
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref not in refs:  # a $ref back to one followed here adds nothing
            target = ref_target(ref, self.root)
            if target is not None:  # one that does not resolve is the server's to check
                value = self.value(value, target, path, refs | {ref})
                if len(self.problems) > before:
                    return value
        for keyword in ("anyOf", "oneOf"):
            branches = schema.get(keyword)
            if isinstance(branches, list) and branches:
                value = self.alternatives(value, branches, path, refs)
                if len(self.problems) > before:
                    return value
        for keyword in ("enum", "const"):
            if keyword in schema and (keyword == "const" or isinstance(schema["enum"], list)):
                allowed = schema["enum"] if keyword == "enum" else [schema["const"]]
                member = self.member(value, allowed, untyped=not types and self.converts)
                if member is _NO_MATCH:
                    wanted = "one of " + ", ".join(show(v) for v in allowed) if keyword == "enum" else show(allowed[0])
                    self.problems.append(f'argument "{path}" must be {wanted}, got {show(value)}')
                    return value
                value = member
        if isinstance(value, str):
            self.string(value, schema, path)
        elif is_number(value):
            self.number(value, schema, path)
        elif isinstance(value, (list, tuple)):
            value = self.array(value, schema, path)
        elif isinstance(value, dict):
            value = self.object(value, schema, path, strict="properties" in schema)
        branches = schema.get("allOf")
        for branch in branches if isinstance(branches, list) else []:
            value = self.value(value, branch, path, refs)
        return value

    def alternatives(self, value: Any, branches: list, path: str, refs: frozenset) -> Any:
        """The first branch the value fits as it is, else the first it converts to (oneOf is read as anyOf)."""
        tried: list[tuple[Any, list[str]]] = []
        for convert in (False, True) if self.converts else (False,):
            tried = []
            for branch in branches:
                sub = _Checker(self.tool_name, self.root, convert, self.depth, self.steps)
                converted = sub.value(value, branch, path, refs)
                if not sub.problems:
                    return converted
                tried.append((branch, sub.problems))
        # None fits: the problems of the first branch of the value's type, else the types wanted.
        kinds: list[tuple[str, Any]] = []
        for branch, problems in tried:
            branch_kinds = allowed_types(branch, self.root, budget=self.steps)
            if not branch_kinds or self.convert(value, branch_kinds)[1]:
                self.problems.extend(problems)
                return value
            kinds += [(kind, resolved(branch, self.root)) for kind in branch_kinds if kind not in [k for k, _ in kinds]]
        self.problems.append(self.wrong_type(value, kinds, path))
        return value

    def convert(self, value: Any, types: list[str]) -> tuple[Any, bool]:
        for kind in types:
            if has_type(value, kind):
                if kind == "integer" and isinstance(value, float):
                    return int(value), True
                return value, True
        if isinstance(value, str) and self.converts:
            for kind in types:
                converted = _from_string(value, kind)
                if converted is not _NO_MATCH:
                    return converted, True
        return value, False

    def wrong_type(self, value: Any, kinds: list[tuple[str, Any]], path: str) -> str:
        """`kinds`: each type wanted, with the schema that wants it (for the example of an array's form)."""
        message = f'argument "{path}" must be {" or ".join(WANTED[kind] for kind, _ in kinds)}'
        shapes = [(kind, schema) for kind, schema in kinds if kind in ("array", "object")]
        if shapes and isinstance(value, str):
            message += ", written like " + " or ".join(_example(schema, kind, self.root) for kind, schema in shapes)
        return message + f", got {show(value)}"

    def member(self, value: Any, allowed: list, untyped: bool) -> Any:
        for option in allowed:
            if json_equal(value, option):
                return option
        # with no type to convert to, "2" can still name the member 2
        if untyped and isinstance(value, str):
            for option in allowed:
                if not isinstance(option, str) and show(option) == value:
                    return option
        return _NO_MATCH

    def string(self, value: str, schema: dict, path: str) -> None:
        low, high = schema.get("minLength"), schema.get("maxLength")
        if is_number(low) and len(value) < low:
            self.problems.append(
                f'argument "{path}" must be at least {low} characters long, got {show(value)} ({len(value)})'
            )
        if is_number(high) and len(value) > high:
            self.problems.append(
                f'argument "{path}" must be at most {high} characters long, got {show(value)} ({len(value)})'
            )
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                matched = matches(pattern, value)
            except regex.TooCostly as e:
                self.problems.append(f'argument "{path}" could not be checked against its pattern: {e}')
                return
            if matched is False:  # None: a pattern the harness does not read, the server's to enforce
                self.problems.append(f'argument "{path}" must match the pattern {pattern}, got {show(value)}')

    def number(self, value: float, schema: dict, path: str) -> None:
        low, high, low_open, high_open = numeric_bounds(schema)
        for bound, broken, words in (
            (low, lambda b: value < b, "at least"),
            (high, lambda b: value > b, "at most"),
            (low_open, lambda b: value <= b, "greater than"),
            (high_open, lambda b: value >= b, "less than"),
        ):
            if is_number(bound) and broken(bound):
                self.problems.append(f'argument "{path}" must be {words} {show(bound)}, got {show(value)}')

    def array(self, value: list | tuple, schema: dict, path: str) -> list:
        low, high = schema.get("minItems"), schema.get("maxItems")
        if is_number(low) and len(value) < low:
            self.problems.append(f'argument "{path}" must have at least {low} item{"s" * (low != 1)}, got {len(value)}')
        if is_number(high) and len(value) > high:
            self.problems.append(
                f'argument "{path}" must have at most {high} item{"s" * (high != 1)}, got {len(value)}'
            )
        items = schema.get("items")
        converted = []
        for i, element in enumerate(value):
            # a list of schemas checks elements by position; elements beyond it are unchecked
            if isinstance(items, list):
                each = items[i] if i < len(items) else None
            else:
                each = items
            converted.append(self.value(element, each, f"{path}[{i}]"))
        return converted

    def object(self, value: dict, schema: dict, path: str, strict: bool) -> dict:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        patterns = schema.get("patternProperties")
        patterns = patterns if isinstance(patterns, dict) else {}
        extra = schema.get("additionalProperties")
        converted = {}
        for key, element in value.items():
            where = f"{path}.{key}" if path else key
            if key in properties:
                converted[key] = self.value(element, properties[key], where)
                continue
            matching = [sub for pattern, sub in patterns.items() if matches_key(pattern, key)]
            if matching:
                for sub in matching:
                    element = self.value(element, sub, where)
                converted[key] = element
            # additionalProperties absent: false for the arguments and for an object that names its properties
            # (a misspelt key is a mistake), true for a free-form object
            elif extra is True or (extra is None and not strict):
                converted[key] = element
            elif isinstance(extra, dict):
                converted[key] = self.value(element, extra, where)
            else:
                self.problems.append(self.unknown(key, where, list(properties), path))
        required = schema.get("required")
        for key in required if isinstance(required, list) else []:
            if key not in value:
                where = f"{path}.{key}" if path else key
                self.problems.append(f'missing required argument "{where}"' + _about(properties.get(key), self.root))
        return converted

    def unknown(self, key: str, where: str, known: list[str], path: str) -> str:
        message = f'unknown argument "{where}"'
        close = did_you_mean(key, known)
        if close:
            message += " (did you mean " + " or ".join(f'"{c}"' for c in close) + "?)"
        owner = self.tool_name if not path else f'"{path}"'
        return message + (f"; {owner} takes " + ", ".join(known) if known else f"; {owner} takes no arguments")


def _about(schema: Any, root: Any = None) -> str:
    """(string: Two-letter US state code)  -- what a missing argument is, for the message."""
    if not isinstance(schema, dict):
        return ""
    kind = describe_type(schema, root)
    description = " ".join(str(schema.get("description") or "").split()).rstrip(".")
    if kind and description:
        return f" ({kind}: {description})"
    return f" ({kind or description})" if kind or description else ""
