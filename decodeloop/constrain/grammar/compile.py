"""From tools and their inputSchema to the machine of a whole call, in either call syntax.

What a call must satisfy is what the harness checks before a server sees it:
`schema.validate_arguments` (which converts the compact syntax's strings to
the schema's types, through anyOf/oneOf/allOf branches and local $refs of a
value) and `schema.check_value` on the converted arguments (which also holds
oneOf to exactly one branch, and the top-level anyOf/oneOf/allOf that
validate_arguments leaves alone). The grammar admits a subset of what they
accept, never more.

A schema first becomes `Spec`s: flat sets of constraints, one per
alternative of its anyOf/oneOf (allOf merged in), each remembering the schema
pieces it came from. Then each Spec becomes a machine for the syntax: a JSON
value, or the text of a compact value that converts to a right value. Enum
and const members are filtered through the real validators, so they are
exact; everything else is built from the constraints.

What cannot be expressed is said in `problems` (one line each, naming tool
and argument), never dropped silently: unsupported keywords (not enforced),
patterns the regex layer cannot enforce (not enforced), oneOf branches that
may overlap (enforced as anyOf), tools that cannot be called validly at all
(left out of the grammar).

Types are read by `schema.declared_types`, as the validators read them:
Python's names through `schema.TYPE_ALIASES` (`float` is a number, `dict` an
object), and a type nobody knows as any JSON value, which the validators
accept there too; the router's start-up notice says where (`schema.type_notes`).
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import partial
from typing import Any, TypeGuard

from decodeloop.constrain.grammar.machines import (
    BARE,
    CompactArgs,
    CompactCall,
    CompactValue,
    Fields,
    JsonArray,
    JsonCall,
    JsonObject,
    JsonString,
    Machine,
    Nothing,
    Number,
    Text,
    Trie,
    union,
)
from decodeloop.formats.calls.base import TOOL_NAME
from decodeloop.patterns import charset as cs
from decodeloop.patterns.charset import TEXT
from decodeloop.patterns.regex import Dfa, Unsupported, compile_pattern
from decodeloop.schema.arguments import ArgumentError, validate_arguments
from decodeloop.schema.core import declared_types, numeric_bounds
from decodeloop.schema.standard import check_value

KINDS = frozenset({"string", "integer", "float", "boolean", "null", "array", "object"})
_TYPE_KINDS = {
    "string": {"string"},
    "integer": {"integer"},
    "number": {"integer", "float"},
    "boolean": {"boolean"},
    "null": {"null"},
    "array": {"array"},
    "object": {"object"},
}
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")
MAX_DEPTH = 32  # objects and arrays nest at most this deep in a call (the JSON reader allows 100)
MAX_RECURSION = 3  # levels a recursive $ref is followed
MAX_INT_DIGITS = 4000  # integers stay below 10**4000 (int() refuses more than 4300 digits)
_BIG_INT = Fraction(10) ** MAX_INT_DIGITS
_BIG_FLOAT = Fraction(1.7976931348623157e308)

# annotation keywords, and those read elsewhere in this module
_KNOWN = {
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "patternProperties",
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$anchor",
    "contentMediaType",
    "contentEncoding",
}
ANY = "any"


@dataclass
class Spec:
    """One alternative's constraints on a value (see the module docstring)."""

    conv: tuple | None = None  # the types schema/arguments.py converts a compact string to, in order; None: untyped
    kinds: frozenset | None = None  # kinds the final value may have; None: any
    enum: tuple | None = None  # candidate members (filtered through `checks`)
    checks: tuple = ()  # ((schema, validator_side), ...): every piece the value must pass
    min_len: int = 0
    max_len: int | None = None
    patterns: tuple = ()
    lower: tuple = ()  # ((bound, exclusive), ...)
    upper: tuple = ()
    items: tuple = ((), ANY)  # (per-position alternatives, alternatives for the rest)
    min_items: int = 0
    max_items: int | None = None
    props: dict = field(default_factory=dict)  # key -> alternatives ([] : no value allowed)
    required: frozenset = frozenset()
    additional: Any = ANY  # alternatives for other keys, ANY, or None (not allowed)
    path: tuple = ()  # where in the arguments it applies, for messages
    captured: bool = False  # compact: a string branch may keep the text a string (see alternatives)


def _cross(a, b):
    """Both sets of alternatives at once: ANY is neutral, None (not allowed) absorbs."""
    if a is None or b is None:
        return None
    if a is ANY:
        return b
    if b is ANY:
        return a
    return [m for x in a for y in b if (m := merge(x, y)) is not None]


def merge(a: Spec, b: Spec) -> Spec | None:
    """A value that satisfies both; None when no value can."""
    if a.kinds is None:
        kinds = b.kinds
    elif b.kinds is None:
        kinds = a.kinds
    else:
        kinds = a.kinds & b.kinds
        if not kinds:
            return None
    max_len = a.max_len if b.max_len is None else b.max_len if a.max_len is None else min(a.max_len, b.max_len)
    max_items = (
        a.max_items if b.max_items is None else b.max_items if a.max_items is None else min(a.max_items, b.max_items)
    )
    pos_a, rest_a = a.items
    pos_b, rest_b = b.items
    positions = [
        _cross(pos_a[i] if i < len(pos_a) else rest_a, pos_b[i] if i < len(pos_b) else rest_b)
        for i in range(max(len(pos_a), len(pos_b)))
    ]
    props = {}
    for key in dict.fromkeys([*a.props, *b.props]):
        merged = _cross(a.props.get(key, a.additional), b.props.get(key, b.additional))
        props[key] = [] if merged is None else merged
    return Spec(
        conv=a.conv if a.conv is not None else b.conv,
        kinds=kinds,
        enum=a.enum if a.enum is not None else b.enum,
        checks=a.checks + b.checks,
        min_len=max(a.min_len, b.min_len),
        max_len=max_len,
        patterns=a.patterns + b.patterns,
        lower=a.lower + b.lower,
        upper=a.upper + b.upper,
        items=(tuple(p if p is not None else [] for p in positions), _cross(rest_a, rest_b)),
        min_items=max(a.min_items, b.min_items),
        max_items=max_items,
        props=props,
        required=a.required | b.required,
        additional=_cross(a.additional, b.additional),
        path=a.path or b.path,
        captured=a.captured or b.captured,
    )


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Schemas:
    """Reads one tool's inputSchema into Specs, collecting what it cannot enforce."""

    def __init__(self, tool: str, root: Any) -> None:
        self.tool = tool
        self.root = root
        self.problems: list[str] = []
        self._refs: list[str] = []

    def note(self, path: list, message: str) -> None:
        where = f'argument "{".".join(str(p) for p in path)}"' if path else "arguments"
        line = f"{self.tool}: {where}: {message}"
        if line not in self.problems:
            self.problems.append(line)

    def alternatives(
        self, schema: Any, path: list, validator_side: bool, strict: bool = False, top: bool = False
    ) -> list[Spec]:
        if schema is True or schema is None:
            return [Spec()]
        if schema is False:
            return []
        if not isinstance(schema, dict):
            return [Spec()]
        if "$ref" in schema:
            return self.reference(schema, path, validator_side and not top)
        unsupported = sorted(k for k in schema if k not in _KNOWN)
        if unsupported:
            self.note(
                path,
                "not enforced by the grammar: " + ", ".join(f"{k} {json.dumps(schema[k])[:40]}" for k in unsupported),
            )
        alts = [self.flat(schema, path, validator_side, strict)]
        # schema/arguments.py converts through allOf, anyOf and oneOf branches (each by its own types) and $refs of a
        # value; at the top, validate_arguments reads only the object's own keywords and check_value the rest
        branch_side = validator_side and not top
        for sub in schema.get("allOf") or [] if isinstance(schema.get("allOf"), list) else []:
            alts = _cross(alts, self.alternatives(sub, path, branch_side))
        # A compact value under anyOf stays the string written when some branch takes it as it is, and the
        # schema's own string keywords then apply to that string: a text meant for a branch that converts it
        # (an integer, say) is safe only when no such keyword is there to refuse it.
        string_checks = any(k in schema for k in ("minLength", "maxLength", "pattern", "enum", "const", "allOf"))
        for keyword in ("anyOf", "oneOf"):
            branches = schema.get(keyword)
            if not isinstance(branches, list) or not branches:
                continue
            options = [self.alternatives(branch, path, branch_side) for branch in branches]
            if keyword == "oneOf":
                self.check_disjoint(options, path)
            merged = []
            for a in alts:
                for b in (spec for option in options for spec in option):
                    m = merge(a, b)
                    if m is not None:
                        m.captured = m.captured or (string_checks and a.conv is None and b.conv is not None)
                        merged.append(m)
            alts = merged
        return alts

    def reference(self, schema: dict, path: list, validator_side: bool) -> list[Spec]:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            self.note(path, f"$ref {ref!r} is not a local reference: not enforced (any value, as the check takes it)")
            return [Spec()]
        if self._refs.count(ref) >= MAX_RECURSION:
            # schema/arguments.py follows a recursive schema all the way down: values nested deeper are not offered
            self.note(path, f"$ref {ref} is recursive: followed {MAX_RECURSION} levels deep, no deeper")
            return []
        target: Any = self.root
        for part in [p.replace("~1", "/").replace("~0", "~") for p in urllib.parse.unquote(ref[1:]).split("/") if p]:
            if isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                target = target.get(part) if isinstance(target, dict) else None
        if not isinstance(target, (dict, bool)):
            self.note(path, f"$ref {ref} does not resolve: not enforced (any value, as the check takes it)")
            return [Spec()]
        self._refs.append(ref)
        try:
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            alts = self.alternatives(target, path, validator_side)
            if rest:
                alts = _cross(alts, self.alternatives(rest, path, validator_side))
            return alts
        finally:
            self._refs.pop()

    def flat(self, schema: dict, path: list, validator_side: bool, strict: bool) -> Spec:
        types = declared_types(schema)  # Python's type names read as schema/core.py reads them
        spec = Spec(checks=((schema, validator_side),), path=tuple(path))
        if types:
            spec.kinds = frozenset(k for t in types for k in _TYPE_KINDS[t])
            if validator_side:
                spec.conv = tuple(dict.fromkeys(types))
        if isinstance(schema.get("enum"), list):
            spec.enum = tuple(schema["enum"])
        elif "const" in schema:
            spec.enum = (schema["const"],)
        low, high = schema.get("minLength"), schema.get("maxLength")
        if _number(low) and low == low:
            spec.min_len = max(0, math.ceil(low)) if math.isfinite(low) else 1 << 62
        if _number(high) and high == high and math.isfinite(high):
            spec.max_len = max(-1, math.floor(high))
        if isinstance(schema.get("pattern"), str):
            spec.patterns = (schema["pattern"],)
        low, high, low_open, high_open = numeric_bounds(schema)
        spec.lower = tuple((b, s) for b, s in ((low, False), (low_open, True)) if _number(b))
        spec.upper = tuple((b, s) for b, s in ((high, False), (high_open, True)) if _number(b))
        items = schema.get("items")
        if isinstance(items, list):
            spec.items = (
                tuple(self.alternatives(item, path + [i], validator_side) for i, item in enumerate(items)),
                ANY,
            )
        elif "items" in schema:
            spec.items = ((), self.alternatives(items, path + ["[]"], validator_side))
        low, high = schema.get("minItems"), schema.get("maxItems")
        if _number(low) and low == low:
            spec.min_items = max(0, math.ceil(low)) if math.isfinite(low) else 1 << 62
        if _number(high) and high == high and math.isfinite(high):
            spec.max_items = max(-1, math.floor(high))
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        spec.props = {key: self.alternatives(sub, path + [key], validator_side) for key, sub in properties.items()}
        required = schema.get("required")
        spec.required = (
            frozenset(k for k in required if isinstance(k, str)) if isinstance(required, list) else frozenset()
        )
        # schema/arguments.py's rule for other keys, also where only check_value applies (anyOf branches, $ref targets):
        # it is the stricter of the two, so the grammar holds whichever of them a schema piece meets
        extra = schema.get("additionalProperties")
        strict = strict or "properties" in schema
        if extra is True or (extra is None and not strict):
            spec.additional = ANY
        elif isinstance(extra, dict):
            spec.additional = self.alternatives(extra, path + ["*"], validator_side)
        else:
            spec.additional = None
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict) and patterns and spec.additional is not None:
            self.note(path, "patternProperties: only the declared properties are offered")
            spec.additional = None
        return spec

    def check_disjoint(self, options: list[list[Spec]], path: list) -> None:
        """oneOf needs exactly one branch to match; the grammar enforces anyOf, so say when branches may overlap."""
        for i in range(len(options)):
            for j in range(i + 1, len(options)):
                if any(_may_overlap(a, b) for a in options[i] for b in options[j]):
                    self.note(path, f"oneOf: branches {i + 1} and {j + 1} may both match; enforced as anyOf")
                    return


def _may_overlap(a: Spec, b: Spec) -> bool:
    if a.kinds is not None and b.kinds is not None and not (a.kinds & b.kinds):
        return False
    if a.enum is not None and b.enum is not None:
        return any(json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True) for x in a.enum for y in b.enum)
    return True


def _float_floor(x: Fraction) -> Fraction:
    """The largest float <= x, exactly."""
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return Fraction(f)


def _bounds(spec: Spec, integer: bool):
    """(lower, upper, unsatisfiable): bounds as (Fraction, strict), exact for what the validators compare.

    An integer is compared exactly. A number that may be written with a
    fraction becomes a float before the validators compare it, so its bounds are
    ones rounding keeps: x <= B holds after rounding when x <= the largest float
    <= B; x < B when x is below both B and the midpoint between the largest
    float < B and the next float. Lower bounds mirror upper ones (rounding is
    symmetric). Integers stay below 10**4000 and other numbers within the
    float range, so every number the grammar allows can be read.
    """
    lower = upper = None
    unsat = False
    for is_lower, bounds in ((True, spec.lower), (False, spec.upper)):
        for bound, strict in bounds:
            if bound != bound:
                continue  # NaN: no comparison fails
            if math.isinf(bound):
                if (bound > 0) == is_lower:
                    unsat = True  # x >= inf, x <= -inf
                continue
            new = _one_bound(Fraction(bound), strict, is_lower, integer)
            if new is None:
                unsat = True
            elif is_lower:
                lower = _tighter(lower, new, True)
            else:
                upper = _tighter(upper, new, False)
    big = _BIG_INT if integer else _BIG_FLOAT
    lower = _tighter(lower, (-big, integer), True)
    upper = _tighter(upper, (big, integer), False)
    return lower, upper, unsat


def _one_bound(b: Fraction, strict: bool, is_lower: bool, integer: bool) -> tuple[Fraction, bool] | None:
    """One bound as (Fraction, strict); None when no finite number satisfies it."""
    if integer:
        return (b, strict)
    mb = -b if is_lower else b  # as an upper bound
    f = _float_floor(mb)
    if not strict:
        edge, edge_strict = f, False
    else:
        if f == mb:
            below = math.nextafter(float(f), -math.inf)
            if math.isinf(below):
                return None  # x < -max float: nothing finite
            f = Fraction(below)
        above = math.nextafter(float(f), math.inf)
        if math.isinf(above):
            edge, edge_strict = f, False  # x <= max float keeps x below a bound past it
        else:
            edge, edge_strict = min(mb, (f + Fraction(above)) / 2), True
    return (-edge, edge_strict) if is_lower else (edge, edge_strict)


def _tighter(current, new, is_lower: bool):
    if current is None:
        return new
    if new[0] == current[0]:
        return new if new[1] else current
    if is_lower:
        return new if new[0] > current[0] else current
    return new if new[0] < current[0] else current


def _serializable(value) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return None


def _accepts(value, spec: Spec, root: Any) -> bool:
    """Whether the harness accepts `value` (a JSON value, or a compact string) where `spec` applies.

    The real validators decide: schema/arguments.py's conversion and checks, then check_value on the result, for
    every schema piece the value must pass; local $refs resolve against the tool's whole schema.
    """
    converted = value
    defs = (
        {
            k: v
            for k, v in root.items()
            if k not in ("properties", "required", "additionalProperties", "patternProperties", "type")
        }
        if isinstance(root, dict)
        else {}
    )
    for piece, validator_side in spec.checks:
        if validator_side:
            wrapper = {**defs, "type": "object", "properties": {"v": piece}, "required": ["v"]}
            try:
                converted = validate_arguments("t", {"v": converted}, wrapper)["v"]
            except (ArgumentError, ValueError, TypeError, RecursionError):
                return False
    for piece, _ in spec.checks:
        try:
            if check_value(converted, piece, limit=1, root=root):
                return False
        except (ValueError, TypeError, RecursionError):
            return False
    return True


class _Builder:
    """Specs to machines for one syntax ("json" or "compact")."""

    def __init__(self, schemas: _Schemas, syntax: str) -> None:
        self.s = schemas
        self.syntax = syntax

    def text(self, spec: Spec, alphabet) -> Machine:
        dfa: Dfa | None = None
        for pattern in spec.patterns:
            try:
                one = compile_pattern(pattern, alphabet)
            except Unsupported as e:
                self.s.note(list(spec.path), f"pattern {pattern!r} is not enforced by the grammar: {e}")
                continue
            dfa = one if dfa is None else Dfa.intersection(dfa, one)
        return Text(alphabet, spec.min_len, spec.max_len, dfa)

    def number(self, spec: Spec, integer: bool) -> Machine:
        lower, upper, unsat = _bounds(spec, integer)
        return Nothing() if unsat else Number(integer, lower, upper)

    def json_value(self, alts, depth: int) -> Machine:
        if alts is ANY:
            alts = [Spec()]
        return union(self.json_spec(spec, depth) for spec in alts)

    def json_spec(self, spec: Spec, depth: int) -> Machine:
        if spec.enum is not None:
            members = [m for m in spec.enum if _serializable(m) is not None and _accepts(m, spec, self.s.root)]
            return union(
                [
                    JsonString(Trie(m for m in members if isinstance(m, str))),
                    Trie(text for m in members if not isinstance(m, str) and (text := _serializable(m)) is not None),
                ]
            )
        kinds = spec.kinds if spec.kinds is not None else KINDS
        if spec.conv is not None:
            kinds = kinds & frozenset(k for t in spec.conv for k in _TYPE_KINDS[t])
        parts: list[Machine] = []
        if "string" in kinds:
            parts.append(JsonString(self.text(spec, TEXT)))
        if "float" in kinds:
            parts.append(self.number(spec, False))
        elif "integer" in kinds:
            parts.append(self.number(spec, True))
        if "boolean" in kinds:
            parts.append(Trie(["true", "false"]))
        if "null" in kinds:
            parts.append(Trie(["null"]))
        if depth < MAX_DEPTH:
            if "array" in kinds:
                parts.append(self.array(spec, depth))
            if "object" in kinds:
                parts.append(self.json_object(spec, depth))
        return union(parts)

    def array(self, spec: Spec, depth: int) -> Machine:
        positions, rest = spec.items

        def item(i: int) -> Machine | None:
            alts = positions[i] if i < len(positions) else rest
            return self.json_value(alts, depth + 1)

        return JsonArray(item, spec.min_items, spec.max_items, cap=len(positions))

    def fields(self, spec: Spec, depth: int, value: Callable[[Any, int], Machine]) -> Fields:
        values: dict[str, Callable[[], Machine]] = {}
        for key, alts in spec.props.items():
            if self.syntax == "compact" and not _KEY_RE.match(key):
                if key in spec.required:
                    self.s.note([key], "a required argument whose name the compact syntax cannot write")
                continue
            values[key] = partial(value, alts, depth + 1)
        additional = None if spec.additional is None else (lambda: value(spec.additional, depth + 1))
        if self.syntax == "compact":
            return Fields(values, spec.required, additional, lambda key: bool(_KEY_RE.match(key)))
        return Fields(values, spec.required, additional)

    def json_object(self, spec: Spec, depth: int) -> Machine:
        return JsonObject(self.fields(spec, depth, self.json_value))

    # --- the compact syntax: the text of a value, converted by schema/arguments.py ---

    def compact_value(self, alts, depth: int) -> Machine:
        if alts is ANY:
            alts = [Spec()]
        bare, quoted = [], []
        for spec in alts:
            b, q = self.compact_spec(spec, depth)
            bare.append(b)
            quoted.append(q)
        return CompactValue(union(bare), union(quoted))

    def compact_spec(self, spec: Spec, depth: int) -> tuple[Machine, Machine]:
        if spec.enum is not None:
            texts = []
            for m in spec.enum:
                text = m if isinstance(m, str) else _serializable(m)
                if text is not None and _accepts(text, spec, self.s.root):
                    texts.append(text)
            bare_texts = [t for t in texts if t and all(cs.contains(BARE, ord(ch)) for ch in t)]
            return Trie(bare_texts), Trie(texts)
        kinds = spec.kinds if spec.kinds is not None else KINDS
        if spec.conv is None or "string" in spec.conv or spec.captured:
            # the value stays the string the model wrote
            if "string" not in kinds:
                return Nothing(), Nothing()
            return self.text(spec, BARE), self.text(spec, TEXT)
        bare: list[Machine] = []
        quoted: list[Machine] = []
        for t in spec.conv:
            made = frozenset(_TYPE_KINDS[t]) & kinds
            if not made:
                continue
            if t in ("integer", "number"):
                m = self.number(spec, "float" not in made)
            elif t == "boolean":
                m = Trie(["true", "false"])
            elif t == "null":
                m = Trie(["null"])
            else:
                # an array or object is written as JSON inside the quoted value
                if depth < MAX_DEPTH:
                    only = replace(spec, kinds=frozenset({t}), conv=None)
                    quoted.append(self.json_spec(only, depth))
                continue
            bare.append(m)
            quoted.append(m)
        return union(bare), union(quoted)

    # --- the arguments of a call -------------------------------------------------------

    def arguments(self, schema: Any) -> Machine:
        if not isinstance(schema, dict) or not schema:
            alts = [Spec()]  # no schema: validate_arguments accepts any arguments
        else:
            alts = self.s.alternatives(schema, [], validator_side=True, strict=True, top=True)
        objects: list[Machine] = []
        for spec in alts:
            if spec.kinds is not None and "object" not in spec.kinds:
                continue
            if self.syntax == "compact":
                objects.append(CompactArgs(self.fields(spec, 1, self.compact_value)))
            else:
                objects.append(self.json_object(spec, 2))
        return union(objects)


@dataclass
class CallGrammar:
    """The machine of a whole call after its opener, for a set of tools; `problems` as documented above."""

    machine: Machine
    tools: list[str]  # the tools a constrained call can name
    problems: list[str]
    tokens: dict[int, int] = field(default_factory=dict)  # special tokens: pseudo code point (bytes.SPECIAL) -> id


def call_grammar(tools, syntax: str, closer: str | tuple[int, ...] = "</tool_call>") -> CallGrammar:
    """The grammar of a call in `syntax` ("compact" or "json") to any of `tools` (objects with .name, .input_schema);
    `closer` is text, or code points (bytes.CLOSER_TOKEN: a closer that is one special token)."""
    args, problems = tool_arguments(tools, syntax)
    machine = CompactCall(args) if syntax == "compact" else JsonCall(args, closer)
    return CallGrammar(machine, list(args), problems)


def tool_arguments(tools, syntax: str) -> tuple[dict[str, Machine], list[str]]:
    """Each tool a call can name, with the machine of its arguments in `syntax` ("compact" or "json"), and what
    cannot be expressed."""
    problems: list[str] = []
    args: dict[str, Machine] = {}
    for tool in tools:
        name = tool.name
        if not TOOL_NAME.match(name):
            problems.append(
                f"{name}: a call cannot name this tool (a tool name uses only letters, digits, "
                "_ . - and /); calls to it are not offered"
            )
            continue
        schemas = _Schemas(name, tool.input_schema)
        machine = _Builder(schemas, syntax).arguments(tool.input_schema)
        problems.extend(schemas.problems)
        if machine.empty():
            problems.append(
                f"{name}: no arguments satisfy its inputSchema in the {syntax} syntax; calls to it are not offered"
            )
            continue
        args[name] = machine
    return args, problems
