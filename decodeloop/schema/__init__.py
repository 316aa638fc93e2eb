"""JSON Schema as the harness reads it: a call's arguments checked before the server sees them, a
tool's structured result checked against its outputSchema, and schemas described in words.

Two validators walk a value and a schema together, and they answer different questions:

    arguments.py  `validate_arguments`, `ArgumentError`: may these arguments go to the server? Converts
                  the compact syntax's strings to the types asked for, reports every problem in words
                  the model can act on, and refuses a key the arguments' properties (or a nested
                  object's, where it names some) do not name unless additionalProperties allows it:
                  absent reads as false, since a misspelt argument is almost always a mistake, and the
                  model should hear so rather than the server drop it. `text_value`: one value a
                  call format writes as raw text (an XML parameter) as the type its schema asks for.
    standard.py   `check_value`: does this JSON value keep its schema, as JSON Schema means it? For a
                  tool's structuredContent against its outputSchema (tools/dispatch.py) and for the
                  --constrain grammar's proof that what it admits is accepted (constrain/grammar/
                  compile.py). Converts nothing, and additionalProperties absent reads as true, JSON
                  Schema's own default: a server's extra output keys are its business.
    core.py       what both read alike: types and their aliases (`TYPE_ALIASES`, `declared_types`),
                  numeric bounds, local $refs, patterns in linear time, JSON equality, the step budget
                  (`MAX_SCHEMA_STEPS`) and the depth limit (`MAX_DEPTH`).
    describe.py   schemas in words: `describe_type`, `did_you_mean`, `type_notes`, `pattern_notes`.

Why two walks and not one walk with a policy object: the validators differ in more than the default
of additionalProperties. One converts values, the other does not; one takes anyOf's first branch that
fits and reads oneOf as anyOf, the other asks for any branch of anyOf and exactly one of oneOf; one
checks a schema's own type before following its $ref, the other after; one names arguments for the
model, the other JSON paths; one reports every problem, the other at most `limit`. A policy would need
a switch for each, tested inside every keyword, for two callers that never trade places. What they do
share, the reading of each keyword, is written once in core.py.

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
    properties, required checked for the value and, recursively, for nested objects
    additionalProperties keys no property or pattern names: checked against it
                         when it is a schema, allowed when it is true, refused
                         when it is false; when it is absent, see above
    patternProperties    keys matching a pattern are checked against its schema
    enum, const          equality as in JSON (true is not 1)
    minimum, maximum, exclusiveMinimum, exclusiveMaximum
                         (also the draft 4 form: exclusiveMinimum: true)
    minLength, maxLength in characters
    pattern              re.search's answer, so unanchored unless the pattern
                         anchors, worked out by patterns/regex.py in time linear
                         in the value (never Python's backtracking matcher, which
                         a server's ^(a+)+$ would hang): a value whose check
                         passes a step budget is refused with that reason
    items, minItems, maxItems
                         items as one schema for every element, or a list of
                         schemas for the elements by position
    anyOf, oneOf, allOf  as each validator reads them (arguments.py, standard.py)
    $ref                 local references only ("#", "#/$defs/Point",
                         "#/definitions/...", JSON-pointer escapes), followed
                         with their sibling keywords; a $ref that does not
                         resolve accepts anything; a cycle of $refs is followed
                         once. A recursive schema is followed MAX_DEPTH levels.

Every other keyword (format, if/then/else, remote $refs, ...) is ignored, and so
is a pattern the harness does not read (a lookahead, a backreference, one Python
cannot compile; `pattern_notes` lists them for a notice): those are the server's
to enforce.
"""

from decodeloop.schema.arguments import ArgumentError, text_value, validate_arguments
from decodeloop.schema.core import MAX_DEPTH, MAX_SCHEMA_STEPS, TYPE_ALIASES, declared_types, numeric_bounds
from decodeloop.schema.describe import describe_type, did_you_mean, pattern_notes, type_notes
from decodeloop.schema.standard import check_value

__all__ = [
    "MAX_DEPTH",
    "MAX_SCHEMA_STEPS",
    "TYPE_ALIASES",
    "ArgumentError",
    "check_value",
    "declared_types",
    "describe_type",
    "did_you_mean",
    "numeric_bounds",
    "pattern_notes",
    "text_value",
    "type_notes",
    "validate_arguments",
]
