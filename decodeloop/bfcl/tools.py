"""BFCL function documents as MCP tools: BFCL's schema dialect converted to JSON Schema.

BFCL writes its parameters as `{"type": "dict", "properties": ..., "required":
...}` and uses Python's names for types. An MCP tool's `inputSchema` is JSON
Schema, so each schema is rewritten, recursively (properties, items):

    dict    -> object        float  -> number        tuple -> array
    any     -> no type constraint (the keyword is dropped)
    integer, string, boolean, array, number, object, null: as they are

`description`, `enum`, `items`, `properties`, `required`, `default`, `format`,
`minimum`/`maximum`, `minItems`/`maxItems` and the other JSON Schema
keywords are kept. BFCL's own `optional` marker is dropped (what is optional
is what `required` leaves out), and so is anything at the top of `parameters`
besides `type`, `properties` and `required` (a few entries carry `optional: []`
or a stray `default` there). A type this table does not know is a `BfclError`.

The tool's name is the function's name exactly, dots included (`math.factorial`):
MCP names allow `.`, decodeloop's router and both call syntaxes accept it, and
BFCL's checker then sees the name the model wrote.
"""

from __future__ import annotations

import copy
from typing import Any

from decodeloop.bfcl.wheel import BfclError

TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "any": None,
    "integer": "integer",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
    "number": "number",
    "object": "object",
    "null": "null",
}
DROPPED = ("optional",)  # BFCL's markers that are not JSON Schema
TOP_LEVEL = ("properties", "required")


def input_schema(parameters: object, where: str = "parameters") -> dict:
    """A BFCL `parameters` object as a JSON Schema object schema."""
    if not isinstance(parameters, dict) or parameters.get("type", "dict") not in ("dict", "object"):
        raise BfclError(f"{where}: parameters must be of type dict")
    schema: dict[str, Any] = {"type": "object"}
    for key in TOP_LEVEL:
        if key in parameters:
            schema[key] = copy.deepcopy(parameters[key])
    schema["properties"] = {
        name: convert(spec, f"{where}.{name}") for name, spec in (parameters.get("properties") or {}).items()
    }
    return schema


def convert(spec: object, where: str = "schema") -> dict:
    """One BFCL property schema as JSON Schema (a new object; the entry is left as it was)."""
    if not isinstance(spec, dict):
        raise BfclError(f"{where}: a property's schema must be an object")
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key in DROPPED:
            continue
        if key == "type":
            if not isinstance(value, str) or value not in TYPES:
                raise BfclError(f"{where}: unknown BFCL type {value!r} (known: {', '.join(TYPES)})")
            if TYPES[value] is not None:
                out["type"] = TYPES[value]
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {name: convert(sub, f"{where}.{name}") for name, sub in value.items()}
        elif key == "items" and isinstance(value, dict):
            out["items"] = convert(value, f"{where}[]")
        else:
            out[key] = copy.deepcopy(value)
    return out


def mcp_tool(function: dict) -> dict:
    """A BFCL function document as a tools/list entry: name, description, inputSchema."""
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise BfclError("a BFCL function has no name")
    return {
        "name": name,
        "description": str(function.get("description") or ""),
        "inputSchema": input_schema(function.get("parameters"), name),
    }


def mcp_tools(functions: list[dict]) -> list[dict]:
    """Every function of an entry as an MCP tool."""
    return [mcp_tool(f) for f in functions]
