"""Request fields mirrored into HTTP headers (Streamable HTTP, MCP 2026-07-28).

This module owns what the 2026-07-28 revision asks a client to copy from a
request's body into its HTTP headers, so that proxies can route without
parsing JSON: `Mcp-Method` (every request), `Mcp-Name` (`params.name` or
`params.uri` of tools/call, prompts/get, resources/read; `params.taskId` of the tasks
extension's tasks/get, tasks/update and tasks/cancel), and `Mcp-Param-{Name}`
for the tool arguments a tool's inputSchema marks with `x-mcp-header`. It also
owns checking those marks: a tool whose marks break the rules is one the
client must not offer (`header_problem`). Values that are not plain visible
ASCII travel as `=?base64?...?=`.
"""

from __future__ import annotations

import base64
import re
from typing import Any

NAMED_METHODS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    **{method: "taskId" for method in ("tasks/get", "tasks/update", "tasks/cancel")},
}
MAX_SAFE_INTEGER = 2**53 - 1
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")  # RFC 9110 field-name token
_PLAIN = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?\Z")  # visible ASCII, inner spaces only


def encode_value(text: str) -> str:
    """A header value for `text`: as is when it is plain ASCII, else the base64 sentinel form."""
    if _PLAIN.match(text) and not (text.startswith("=?base64?") and text.endswith("?=")):
        return text
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


def standard_headers(message: dict) -> dict[str, str]:
    """Mcp-Method, and Mcp-Name where the method names something, for one request."""
    method = message.get("method")
    if not isinstance(method, str):
        return {}
    headers = {"Mcp-Method": encode_value(method)}
    params = message.get("params")
    key = NAMED_METHODS.get(method)
    if key is not None and isinstance(params, dict) and isinstance(params.get(key), str):
        headers["Mcp-Name"] = encode_value(params[key])
    return headers


def header_params(schema: dict) -> dict[tuple[str, ...], str]:
    """The `x-mcp-header` marks of an inputSchema: property path -> header name part (assumed valid)."""
    marks: dict[tuple[str, ...], str] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        properties = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(properties, dict):
            return
        for key, spec in properties.items():
            if isinstance(spec, dict):
                if isinstance(spec.get("x-mcp-header"), str):
                    marks[path + (key,)] = spec["x-mcp-header"]
                walk(spec, (*path, key))

    walk(schema, ())
    return marks


def header_problem(schema: dict) -> str | None:
    """Why the tool's `x-mcp-header` marks are invalid, or None when they are fine (or absent)."""
    seen: set[str] = set()
    for node, inside in _every_schema(schema):
        if not isinstance(node, dict) or "x-mcp-header" not in node:
            continue
        name = node["x-mcp-header"]
        if not isinstance(name, str) or not name:
            return "an x-mcp-header is empty or not a string"
        if not _TOKEN.match(name):
            return f"x-mcp-header {name!r} is not a valid header name"
        if name.lower() in seen:
            return f"x-mcp-header {name!r} appears twice"
        seen.add(name.lower())
        if inside:
            return f"x-mcp-header {name!r} is not on a property reached only through properties"
        kind = node.get("type")
        if kind not in ("string", "integer", "boolean"):
            return f"x-mcp-header {name!r} is on a property of type {kind!r}, not string, integer or boolean"
    return None


def param_headers(marks: dict[tuple[str, ...], str], arguments: Any) -> dict[str, str]:
    """Mcp-Param-{Name} headers for the marked arguments present in a call (absent or null: no header)."""
    headers: dict[str, str] = {}
    for path, name in marks.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None or isinstance(value, (dict, list)):
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            if abs(value) > MAX_SAFE_INTEGER:
                continue
            text = str(value)
        elif isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
            text = str(int(value))
        else:
            text = str(value)
        headers[f"Mcp-Param-{name}"] = encode_value(text)
    return headers


def _every_schema(node: Any, inside: bool = False):
    """Every object in a schema, with whether it sits under something other than `properties`."""
    if isinstance(node, dict):
        yield node, inside
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for spec in value.values():
                    yield from _every_schema(spec, inside)
            elif isinstance(value, (dict, list)):
                yield from _every_schema(value, True)
    elif isinstance(node, list):
        for item in node:
            yield from _every_schema(item, True)
