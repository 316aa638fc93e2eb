"""What both validators read alike: JSON Schema's types and Python's aliases for them, numeric bounds,
local $refs, patterns, JSON equality, and the limits every walk of a schema keeps.

The walks themselves are in arguments.py and standard.py; each keyword here has one reading, so the two
cannot drift apart on what a type, a bound, a $ref or a pattern means.
"""

from __future__ import annotations

import json
import math
import urllib.parse
from typing import Any, TypeGuard

from decodeloop.patterns import regex

TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")
# Python's type names, as BFCL's function schemas and hand-written tools write them: the JSON Schema type each
# means (None: no type constraint). Argument checking and the --constrain grammar both read types through this.
TYPE_ALIASES = {
    "float": "number",
    "int": "integer",
    "bool": "boolean",
    "str": "string",
    "dict": "object",
    "list": "array",
    "tuple": "array",
    "any": None,
}
WANTED = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
    "array": "a JSON array",
    "object": "a JSON object",
}
MAX_DEPTH = 64  # levels of a value checked against a schema (only a recursive schema goes this deep)
# Schemas one check may visit: a server's anyOf of $refs to anyOfs multiplies the work at each level, so
# a check that would pass this fails, with OVER_BUDGET, rather than run for minutes.
MAX_SCHEMA_STEPS = 100_000
_KINDS_STEPS = 2_000  # schemas one reading of a schema's types may visit
OVER_BUDGET = (
    f"checking it against the tool's schema would take more than {MAX_SCHEMA_STEPS:,} steps "
    "(its anyOf branches and $refs multiply), so the harness refused it"
)


class OverBudget(Exception):
    """A check that passed MAX_SCHEMA_STEPS."""


def spend(steps: list[int], n: int = 1) -> None:
    steps[0] -= n
    if steps[0] < 0:
        raise OverBudget


def numeric_bounds(schema: dict) -> tuple[Any, Any, Any, Any]:
    """(minimum, maximum, exclusiveMinimum, exclusiveMaximum), reading draft 4's flag form too."""
    low, high = schema.get("minimum"), schema.get("maximum")
    low_open, high_open = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    # draft 4 wrote exclusiveness as a flag on minimum/maximum
    if low_open is True:
        low, low_open = None, low
    if high_open is True:
        high, high_open = None, high
    return low, high, low_open, high_open


def declared_types(schema: Any) -> list[str]:
    """The JSON Schema types a schema's own `type` allows, in its order, aliases read; [] for any.

    A type that is neither JSON Schema's nor an alias of one, or `any`, allows any value, and so does a
    list of types that holds one (see the module docstring).
    """
    if not isinstance(schema, dict):
        return []
    declared = schema.get("type")
    declared = [declared] if isinstance(declared, str) else declared
    if not isinstance(declared, list):
        return []
    types: list[str] = []
    for kind in declared:
        kind = TYPE_ALIASES.get(kind, kind) if isinstance(kind, str) else None
        if kind not in TYPES:
            return []
        if kind not in types:
            types.append(kind)
    return types


def matches(pattern: str, text: str) -> bool | None:
    """Whether re.search(pattern, text) matches, worked out in linear time (patterns/regex.py); None when
    the pattern is one the harness does not read (pattern_notes says so at start-up).

    Raises regex.TooCostly when the check of this value would exceed the step budget.
    """
    try:
        return regex.search(pattern, text)
    except regex.TooCostly:
        raise
    except regex.Unsupported:
        return None


def matches_key(pattern: str, key: str) -> bool:
    """Whether a patternProperties pattern matches a key (a pattern the harness cannot check matches none)."""
    try:
        return bool(matches(pattern, key))
    except regex.TooCostly:
        return False


def ref_target(ref: str, root: Any) -> Any:
    """The schema a local $ref ("#", "#/$defs/Point", "#/definitions/a~1b") points to; None if it does not resolve."""
    if not ref.startswith("#") or not isinstance(root, (dict, bool)):
        return None
    pointer = urllib.parse.unquote(ref[1:])
    if not pointer:
        return root
    if not pointer.startswith("/"):
        return None  # a named anchor: not supported
    node = root
    for part in pointer[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node if isinstance(node, (dict, bool)) else None


def resolved(schema: Any, root: Any) -> Any:
    """`schema` with a chain of bare $refs followed (as far as they resolve, never round a cycle)."""
    seen: set[str] = set()
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"] not in seen:
        if declared_types(schema):
            break  # typed itself: what it says counts as much as where it points
        seen.add(schema["$ref"])
        target = ref_target(schema["$ref"], root)
        if target is None:
            break
        schema = target
    return schema


def allowed_types(schema: Any, root: Any, depth: int = 0, budget: list[int] | None = None) -> list[str]:
    """The types a schema allows, through $ref, anyOf, oneOf and allOf, in order; [] for any (also when
    the walk would pass `budget`, by default _KINDS_STEPS schemas: branches of branches multiply)."""
    budget = [_KINDS_STEPS] if budget is None else budget
    budget[0] -= 1
    schema = resolved(schema, root)
    if not isinstance(schema, dict) or depth > 8 or budget[0] < 0:
        return []
    own = declared_types(schema)
    if own:
        return own
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list) and branches:
            kinds: list[str] = []
            for branch in branches:
                branch_kinds = allowed_types(branch, root, depth + 1, budget)
                if not branch_kinds:
                    return []  # a branch of any type: the whole is of any type
                kinds += [kind for kind in branch_kinds if kind not in kinds]
            return kinds
    every = schema.get("allOf")
    for branch in every if isinstance(every, list) else []:
        kinds = allowed_types(branch, root, depth + 1, budget)
        if kinds:
            return kinds
    return []


def array_items(schema: Any, root: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """The items schema of the array a schema allows (looking through $ref, anyOf and oneOf); None when
    there is none, or when finding it would pass `budget` (as in `allowed_types`)."""
    budget = [_KINDS_STEPS] if budget is None else budget
    budget[0] -= 1
    schema = resolved(schema, root)
    if not isinstance(schema, dict) or depth > 8 or budget[0] < 0:
        return None
    if "array" in declared_types(schema):
        return schema.get("items")
    for keyword in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(keyword)
        for branch in branches if isinstance(branches, list) else []:
            items = array_items(branch, root, depth + 1, budget)
            if items is not None:
                return items
    return None


def has_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        if isinstance(value, float):
            return math.isfinite(value) and value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        if isinstance(value, float):
            return math.isfinite(value)
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, (list, tuple))
    return isinstance(value, dict)


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: true is not 1, 1 is 1.0, containers compare by content."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def show(value: Any) -> str:
    """A value as it appears in a message: JSON, cut short if long."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_number(value: Any) -> TypeGuard[int | float]:
    """A JSON number: an int or a float, never a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
