"""Checking a call's arguments against the tool's inputSchema, before the server sees them.

Owns `validate_arguments`: it converts the string values of the compact syntax
to the types the schema asks for, and reports every problem at once in one
message the model can act on (`ArgumentError`). Also `did_you_mean` and
`describe_type`, shared with the code that describes tools and routes calls.

The supported part of JSON Schema:

    type                 string, integer, number, boolean, null, object, array,
                         or a list of these (a value may be any of them).
                         Python's names, which function-calling datasets (BFCL)
                         and hand-written tools use, are read as the type they
                         mean (TYPE_ALIASES): float -> number, int -> integer,
                         bool -> boolean, str -> string, dict -> object,
                         list and tuple -> array; any is no type constraint.
                         Any other type ("datetime") is unknown and the value
                         may be anything (so is every value of a list of types
                         holding one): the harness cannot check what it does
                         not know. `type_notes` says which were read either way,
                         for a notice when the tools are taken (tools/router.py).
    properties, required checked for the arguments and, recursively, for
                         nested objects
    additionalProperties unknown keys are rejected unless it is true or a
                         schema (then they are checked against it). This is
                         stricter than JSON Schema's default on purpose: a
                         misspelt key is almost always a mistake. Nested objects
                         that declare no properties are free-form.
    patternProperties    keys matching a pattern are checked against its schema
    enum, const          equality as in JSON (true is not 1)
    minimum, maximum, exclusiveMinimum, exclusiveMaximum
                         (also the draft 4 form: exclusiveMinimum: true)
    minLength, maxLength in characters
    pattern              re.search's answer, so unanchored unless the pattern
                         anchors, worked out by grammar/regex.py in time linear
                         in the value (never Python's backtracking matcher, which
                         a server's ^(a+)+$ would hang): a value whose check
                         passes a step budget is refused with that reason
    items, minItems, maxItems
                         items as one schema for every element, or a list of
                         schemas for the elements by position
    anyOf, oneOf         the value must fit a branch; the first branch it fits
                         as it is wins, else the first it converts to (so
                         pydantic's optional `{"anyOf": [{"type": "integer"},
                         {"type": "null"}]}` turns "5" into 5 and "null" into
                         null). oneOf is read as anyOf: that no two branches
                         fit is the server's to enforce.
    allOf                the value must fit every branch, converted by each in turn
    $ref                 local references only ("#", "#/$defs/Point",
                         "#/definitions/...", JSON-pointer escapes), followed
                         with their sibling keywords; a $ref that does not
                         resolve accepts anything; a cycle of $refs is followed
                         once. A recursive schema is followed MAX_DEPTH levels.

Every other keyword (format, if/then/else, remote $refs, ...) is ignored, and so
is a pattern the harness does not read (a lookahead, a backreference, one Python
cannot compile; `pattern_notes` lists them for a notice): those are the server's
to enforce. An empty or missing schema accepts any arguments; any other schema names every argument
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

import difflib
import json
import math
import re
import urllib.parse
from typing import Any

from decodeloop.constrain.grammar import regex

_TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")
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
_WANTED = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
    "array": "a JSON array",
    "object": "a JSON object",
}
_PLURAL = {
    "string": "strings",
    "integer": "integers",
    "number": "numbers",
    "boolean": "booleans",
    "null": "nulls",
    "array": "arrays",
    "object": "objects",
}
_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
_NUMBER_RE = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_NO_MATCH = object()
MAX_DEPTH = 64  # levels of a value checked against a schema (only a recursive schema goes this deep)
# Schemas one check may visit: a server's anyOf of $refs to anyOfs multiplies the work at each level, so
# a check that would pass this fails, with _OVER_BUDGET, rather than run for minutes.
MAX_SCHEMA_STEPS = 100_000
_KINDS_STEPS = 2_000  # schemas one reading of a schema's types may visit
_OVER_BUDGET = (
    f"checking it against the tool's schema would take more than {MAX_SCHEMA_STEPS:,} steps "
    "(its anyOf branches and $refs multiply), so the harness refused it"
)


class _OverBudget(Exception):
    """A check that passed MAX_SCHEMA_STEPS."""


def _spend(steps: list[int], n: int = 1) -> None:
    steps[0] -= n
    if steps[0] < 0:
        raise _OverBudget


class ArgumentError(ValueError):
    """Arguments that break the tool's schema; `problems` lists each one."""

    def __init__(self, tool_name: str, problems: list[str]) -> None:
        super().__init__(f"{tool_name}: " + "; ".join(problems))
        self.tool_name = tool_name
        self.problems = problems


def numeric_bounds(schema: dict) -> tuple:
    """(minimum, maximum, exclusiveMinimum, exclusiveMaximum), reading draft 4's flag form too."""
    low, high = schema.get("minimum"), schema.get("maximum")
    low_open, high_open = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    # draft 4 wrote exclusiveness as a flag on minimum/maximum
    if low_open is True:
        low, low_open = None, low
    if high_open is True:
        high, high_open = None, high
    return low, high, low_open, high_open


def did_you_mean(word: str, choices: list[str] | tuple[str, ...], n: int = 3) -> list[str]:
    """The choices closest to a misspelt word, best first (a case-only difference counts most)."""
    choices = list(choices)
    same_but_case = [c for c in choices if c.lower() == word.lower() and c != word]
    close = difflib.get_close_matches(word, choices, n=n, cutoff=0.6)
    return (same_but_case + [c for c in close if c not in same_but_case])[:n]


def validate_arguments(tool_name: str, arguments: dict, schema: dict | None) -> dict:
    """The arguments converted to the schema's types; raises ArgumentError listing every problem."""
    if not isinstance(arguments, dict):
        raise TypeError(f"arguments must be a dict, not {type(arguments).__name__}")
    if not schema or not isinstance(schema, dict):
        return dict(arguments)
    check = _Checker(tool_name, root=schema)
    try:  # the arguments themselves are always an object whose keys the schema names
        converted = check.object(arguments, schema, "", strict=True)
    except _OverBudget:
        raise ArgumentError(tool_name, [f"the arguments could not be checked: {_OVER_BUDGET}"]) from None
    if check.problems:
        raise ArgumentError(tool_name, check.problems)
    return converted


def describe_type(schema: Any, root: Any = None) -> str:
    """A schema's type in words: "integer", "string or null", "JSON array of strings"; "" if untyped.

    Types are read through anyOf, oneOf, allOf and (given the whole schema as
    `root`) local $refs, so pydantic's optional `{"anyOf": [{"type": "integer"},
    {"type": "null"}]}` is "integer or null".
    """
    words = []
    for kind in _kinds(schema, root):
        if kind == "array":
            item_types = _kinds(_array_items(schema, root), root)
            words.append("JSON array of " + " or ".join(_PLURAL[t] for t in item_types) if item_types else "JSON array")
        elif kind == "object":
            words.append("JSON object")
        else:
            words.append(kind)
    return " or ".join(words)


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
        if kind not in _TYPES:
            return []
        if kind not in types:
            types.append(kind)
    return types


def _subschemas(schema: Any, limit: int = 10_000):
    """(path, node) for `schema` and every schema inside it (properties, patternProperties,
    additionalProperties, items, anyOf/oneOf/allOf branches, top-level $defs), at most `limit` of them,
    MAX_DEPTH levels deep; path as in argument errors ("" for the arguments themselves)."""
    todo = [(schema, "", 0)]
    while todo and limit > 0:
        node, path, depth = todo.pop()
        if not isinstance(node, dict) or depth > MAX_DEPTH:
            continue
        limit -= 1
        yield path, node
        found = []
        properties = node.get("properties")
        for key, sub in properties.items() if isinstance(properties, dict) else ():
            found.append((sub, f"{path}.{key}" if path else str(key)))
        patterns = node.get("patternProperties")
        for key, sub in patterns.items() if isinstance(patterns, dict) else ():
            found.append((sub, f"{path}.<{key}>" if path else f"<{key}>"))
        found.append((node.get("additionalProperties"), f"{path}.*" if path else "*"))
        items = node.get("items")
        if isinstance(items, list):
            found.extend((sub, f"{path}[{i}]") for i, sub in enumerate(items))
        else:
            found.append((items, f"{path}[]"))
        for keyword in ("anyOf", "oneOf", "allOf"):
            branches = node.get(keyword)
            found.extend((sub, path) for sub in (branches if isinstance(branches, list) else ()))
        for keyword in ("$defs", "definitions"):
            defs = node.get(keyword)
            found.extend(
                (sub, f"#/{keyword}/{key}")
                for key, sub in (defs.items() if isinstance(defs, dict) and depth == 0 else ())
            )
        todo.extend((sub, sub_path, depth + 1) for sub, sub_path in reversed(found))


def type_notes(schema: Any, limit: int = 8) -> list[str]:
    """How the types of a tool's inputSchema were read, where not as JSON Schema writes them, for a notice.

    At most two lines: the aliases read as JSON Schema types (`"radius" float -> number`) and the types
    nobody knows (accepted as any value). Each lists at most `limit` places, then how many more; paths
    and types are shown as JSON with every character past ASCII escaped, and cut short, so a server's
    text cannot reach a terminal as it is. [] when every type is JSON Schema's.
    """
    aliases: list[tuple[str, Any]] = []
    unknown: list[tuple[str, Any]] = []
    for path, node in _subschemas(schema):
        if len(aliases) + len(unknown) > 10 * limit:
            break
        if "type" in node:
            declared = node["type"]
            for kind in declared if isinstance(declared, list) else [declared]:
                if isinstance(kind, str) and kind in TYPE_ALIASES:
                    aliases.append((path, kind))
                elif not (isinstance(kind, str) and kind in _TYPES):
                    unknown.append((path, kind))

    def listed(found: list[tuple[str, Any]], show) -> str:
        shown = ", ".join(show(path, kind) for path, kind in found[:limit])
        return shown + (f", and {len(found) - limit} more" if len(found) > limit else "")

    lines = []
    if aliases:
        lines.append(
            "types read as JSON Schema's: "
            + listed(
                aliases,
                lambda path, kind: f"{_shown(path or '(arguments)')} {kind} -> {TYPE_ALIASES[kind] or 'any type'}",
            )
        )
    if unknown:
        lines.append(
            "unknown types, so any value is accepted there (by argument checking and the --constrain "
            "grammar): " + listed(unknown, lambda path, kind: f"{_shown(path or '(arguments)')} {_shown(kind)}")
        )
    return lines


def pattern_notes(schema: Any, limit: int = 4) -> list[str]:
    """The patterns in `schema` (`pattern`, `patternProperties` keys) the harness does not check, for a
    notice: one line, or [] when it reads them all.

    Patterns are checked by grammar/regex.py's `search`, never by Python's backtracking matcher; one it
    does not read (a lookahead, a backreference, one Python cannot compile, a very long one) is left to
    the server: a value is not refused for it, and a patternProperties key matches no key. Shown as
    JSON, escaped and cut short, as in `type_notes`.
    """
    unread = []
    for path, node in _subschemas(schema):
        patterns = node.get("patternProperties")
        keys = [p for p in (patterns if isinstance(patterns, dict) else ()) if isinstance(p, str)]
        for pattern, where in [
            (node.get("pattern"), path),
            *((key, f"{path}.<{key}>" if path else f"<{key}>") for key in keys),
        ]:
            if not isinstance(pattern, str):
                continue
            try:
                regex.search(pattern, "")
            except regex.Unsupported as e:
                unread.append(f"{_shown(where or '(arguments)')} ({_shown(str(e))})")
            if len(unread) > limit:
                break
    if not unread:
        return []
    more = ", and more" if len(unread) > limit else ""
    return ["patterns not checked by the harness (the server's to enforce): " + ", ".join(unread[:limit]) + more]


def _matches(pattern: str, text: str) -> bool | None:
    """Whether re.search(pattern, text) matches, worked out in linear time (grammar/regex.py); None when
    the pattern is one the harness does not read (pattern_notes says so at start-up).

    Raises regex.TooCostly when the check of this value would exceed the step budget.
    """
    try:
        return regex.search(pattern, text)
    except regex.TooCostly:
        raise
    except regex.Unsupported:
        return None


def _shown(value: Any, limit: int = 60) -> str:
    """A server's text in a notice: a JSON string, ASCII only (every other character escaped), cut short."""
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=True)
        except (TypeError, ValueError):
            value = repr(value)
    return json.dumps(value[:limit] + ("..." if len(value) > limit else ""), ensure_ascii=True)


def _target(ref: str, root: Any) -> Any:
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


def _resolved(schema: Any, root: Any) -> Any:
    """`schema` with a chain of bare $refs followed (as far as they resolve, never round a cycle)."""
    seen: set[str] = set()
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"] not in seen:
        if declared_types(schema):
            break  # typed itself: what it says counts as much as where it points
        seen.add(schema["$ref"])
        target = _target(schema["$ref"], root)
        if target is None:
            break
        schema = target
    return schema


def _kinds(schema: Any, root: Any, depth: int = 0, budget: list[int] | None = None) -> list[str]:
    """The types a schema allows, through $ref, anyOf, oneOf and allOf, in order; [] for any (also when
    the walk would pass `budget`, by default _KINDS_STEPS schemas: branches of branches multiply)."""
    budget = [_KINDS_STEPS] if budget is None else budget
    budget[0] -= 1
    schema = _resolved(schema, root)
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
                branch_kinds = _kinds(branch, root, depth + 1, budget)
                if not branch_kinds:
                    return []  # a branch of any type: the whole is of any type
                kinds += [kind for kind in branch_kinds if kind not in kinds]
            return kinds
    for branch in schema.get("allOf") if isinstance(schema.get("allOf"), list) else []:
        kinds = _kinds(branch, root, depth + 1, budget)
        if kinds:
            return kinds
    return []


def _array_items(schema: Any, root: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """The items schema of the array a schema allows (looking through $ref, anyOf and oneOf); None when
    there is none, or when finding it would pass `budget` (as in `_kinds`)."""
    budget = [_KINDS_STEPS] if budget is None else budget
    budget[0] -= 1
    schema = _resolved(schema, root)
    if not isinstance(schema, dict) or depth > 8 or budget[0] < 0:
        return None
    if "array" in declared_types(schema):
        return schema.get("items")
    for keyword in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(keyword) if isinstance(schema.get(keyword), list) else []:
            items = _array_items(branch, root, depth + 1, budget)
            if items is not None:
                return items
    return None


def _has_type(value: Any, kind: str) -> bool:
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
        return parsed if _has_type(parsed, kind) else _NO_MATCH
    return _NO_MATCH


def _json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: true is not 1, 1 is 1.0, containers compare by content."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _show(value: Any) -> str:
    """A value as it appears in a message: JSON, cut short if long."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _example(schema: Any, kind: str, root: Any = None) -> str:
    """A short JSON example for an array or object, so the model sees the form."""
    if kind == "object":
        return '{"key": "value"}'
    items = _kinds(_array_items(schema, root), root)
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
        _spend(self.steps)
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
            target = _target(ref, self.root)
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
                    wanted = (
                        "one of " + ", ".join(_show(v) for v in allowed) if keyword == "enum" else _show(allowed[0])
                    )
                    self.problems.append(f'argument "{path}" must be {wanted}, got {_show(value)}')
                    return value
                value = member
        if isinstance(value, str):
            self.string(value, schema, path)
        elif _number(value):
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
            branch_kinds = _kinds(branch, self.root, budget=self.steps)
            if not branch_kinds or self.convert(value, branch_kinds)[1]:
                self.problems.extend(problems)
                return value
            kinds += [
                (kind, _resolved(branch, self.root)) for kind in branch_kinds if kind not in [k for k, _ in kinds]
            ]
        self.problems.append(self.wrong_type(value, kinds, path))
        return value

    def convert(self, value: Any, types: list[str]) -> tuple[Any, bool]:
        for kind in types:
            if _has_type(value, kind):
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
        message = f'argument "{path}" must be {" or ".join(_WANTED[kind] for kind, _ in kinds)}'
        shapes = [(kind, schema) for kind, schema in kinds if kind in ("array", "object")]
        if shapes and isinstance(value, str):
            message += ", written like " + " or ".join(_example(schema, kind, self.root) for kind, schema in shapes)
        return message + f", got {_show(value)}"

    def member(self, value: Any, allowed: list, untyped: bool) -> Any:
        for option in allowed:
            if _json_equal(value, option):
                return option
        # with no type to convert to, "2" can still name the member 2
        if untyped and isinstance(value, str):
            for option in allowed:
                if not isinstance(option, str) and _show(option) == value:
                    return option
        return _NO_MATCH

    def string(self, value: str, schema: dict, path: str) -> None:
        low, high = schema.get("minLength"), schema.get("maxLength")
        if _number(low) and len(value) < low:
            self.problems.append(
                f'argument "{path}" must be at least {low} characters long, got {_show(value)} ({len(value)})'
            )
        if _number(high) and len(value) > high:
            self.problems.append(
                f'argument "{path}" must be at most {high} characters long, got {_show(value)} ({len(value)})'
            )
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                matched = _matches(pattern, value)
            except regex.TooCostly as e:
                self.problems.append(f'argument "{path}" could not be checked against its pattern: {e}')
                return
            if matched is False:  # None: a pattern the harness does not read, the server's to enforce
                self.problems.append(f'argument "{path}" must match the pattern {pattern}, got {_show(value)}')

    def number(self, value: float, schema: dict, path: str) -> None:
        low, high, low_open, high_open = numeric_bounds(schema)
        for bound, broken, words in (
            (low, lambda b: value < b, "at least"),
            (high, lambda b: value > b, "at most"),
            (low_open, lambda b: value <= b, "greater than"),
            (high_open, lambda b: value >= b, "less than"),
        ):
            if _number(bound) and broken(bound):
                self.problems.append(f'argument "{path}" must be {words} {_show(bound)}, got {_show(value)}')

    def array(self, value: list | tuple, schema: dict, path: str) -> list:
        low, high = schema.get("minItems"), schema.get("maxItems")
        if _number(low) and len(value) < low:
            self.problems.append(f'argument "{path}" must have at least {low} item{"s" * (low != 1)}, got {len(value)}')
        if _number(high) and len(value) > high:
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
            matching = [sub for pattern, sub in patterns.items() if _search(pattern, key)]
            if matching:
                for sub in matching:
                    element = self.value(element, sub, where)
                converted[key] = element
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


def _search(pattern: str, key: str) -> bool:
    """Whether a patternProperties pattern matches a key (a pattern the harness cannot check matches none)."""
    try:
        return bool(_matches(pattern, key))
    except regex.TooCostly:
        return False


def _about(schema: Any, root: Any = None) -> str:
    """(string: Two-letter US state code)  -- what a missing argument is, for the message."""
    if not isinstance(schema, dict):
        return ""
    kind = describe_type(schema, root)
    description = " ".join(str(schema.get("description") or "").split()).rstrip(".")
    if kind and description:
        return f" ({kind}: {description})"
    return f" ({kind or description})" if kind or description else ""


def check_value(value: Any, schema: Any, path: str = "", limit: int = 5, root: Any = None) -> list[str]:
    """Problems with a JSON value under standard JSON Schema rules, for a tool's `outputSchema`.

    Unlike `validate_arguments` this converts nothing and follows JSON Schema's
    defaults (extra keys are fine unless additionalProperties says otherwise);
    the keywords are those listed above (with oneOf as JSON Schema means it:
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
    except _OverBudget:
        problems = [f"{path or '$'} could not be checked: {_OVER_BUDGET}"]
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
    if len(problems) >= limit or schema is True or not isinstance(schema, (dict, bool)):
        return
    _spend(steps)
    if schema is False:
        problems.append(f"{path} is not allowed")
        return
    if depth >= MAX_DEPTH:
        problems.append(f"{path} is nested more than {MAX_DEPTH} levels deep")
        return
    depth += 1
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref not in refs:
        target = _target(ref, root)
        if target is not None:
            _check(value, target, path, problems, limit, root, refs | {ref}, depth, steps)
    types = declared_types(schema)
    if types and not any(
        _has_type(value, t) and not (t == "integer" and isinstance(value, float) and not value.is_integer())
        for t in types
    ):
        problems.append(f"{path} must be {' or '.join(_WANTED[t] for t in types)}, got {_show(value)}")
        return
    if "const" in schema and not _json_equal(value, schema["const"]):
        problems.append(f"{path} must be {_show(schema['const'])}, got {_show(value)}")
    if isinstance(schema.get("enum"), list) and not any(_json_equal(value, m) for m in schema["enum"]):
        problems.append(f"{path} must be one of {', '.join(_show(m) for m in schema['enum'])}, got {_show(value)}")
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
                if _matches(schema["pattern"], value) is False:
                    problems.append(f"{path} must match {schema['pattern']}")
            except regex.TooCostly as e:
                problems.append(f"{path} could not be checked against its pattern: {e}")
    elif _number(value):
        low, high, low_open, high_open = numeric_bounds(schema)
        if (_number(low) and value < low) or (_number(low_open) and value <= low_open):
            problems.append(f"{path} is below its minimum: {_show(value)}")
        if (_number(high) and value > high) or (_number(high_open) and value >= high_open):
            problems.append(f"{path} is above its maximum: {_show(value)}")
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
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        for key in schema.get("required") or []:
            if isinstance(key, str) and key not in value:
                problems.append(f'{path} is missing required property "{key}"')
        extra = schema.get("additionalProperties", True)
        patterns = schema.get("patternProperties") if isinstance(schema.get("patternProperties"), dict) else {}
        for key, item in value.items():
            if key in properties:
                _check(item, properties[key], f"{path}.{key}", problems, limit, root, frozenset(), depth, steps)
                continue
            _spend(steps, len(patterns))
            matched = [p for p in patterns if _search(p, key)]
            for p in matched:
                _check(item, patterns[p], f"{path}.{key}", problems, limit, root, frozenset(), depth, steps)
            if not matched and extra is not True:
                _check(item, extra, f"{path}.{key}", problems, limit, root, frozenset(), depth, steps)
