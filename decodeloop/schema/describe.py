"""Schemas and names in words: a schema's type for a prompt or a message, the names closest to a
misspelt one, and the start-up notices about types and patterns the harness reads its own way.

`describe_type` and `did_you_mean` are shared by the argument checker's messages and by the code that
describes tools and routes calls; `type_notes` and `pattern_notes` are the router's notices.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from decodeloop.patterns import regex
from decodeloop.schema.core import MAX_DEPTH, TYPE_ALIASES, TYPES, allowed_types, array_items

_PLURAL = {
    "string": "strings",
    "integer": "integers",
    "number": "numbers",
    "boolean": "booleans",
    "null": "nulls",
    "array": "arrays",
    "object": "objects",
}


def did_you_mean(word: str, choices: list[str] | tuple[str, ...], n: int = 3) -> list[str]:
    """The choices closest to a misspelt word, best first (a case-only difference counts most)."""
    choices = list(choices)
    same_but_case = [c for c in choices if c.lower() == word.lower() and c != word]
    close = difflib.get_close_matches(word, choices, n=n, cutoff=0.6)
    return (same_but_case + [c for c in close if c not in same_but_case])[:n]


def describe_type(schema: Any, root: Any = None) -> str:
    """A schema's type in words: "integer", "string or null", "JSON array of strings"; "" if untyped.

    Types are read through anyOf, oneOf, allOf and (given the whole schema as
    `root`) local $refs, so pydantic's optional `{"anyOf": [{"type": "integer"},
    {"type": "null"}]}` is "integer or null".
    """
    words = []
    for kind in allowed_types(schema, root):
        if kind == "array":
            item_types = allowed_types(array_items(schema, root), root)
            words.append("JSON array of " + " or ".join(_PLURAL[t] for t in item_types) if item_types else "JSON array")
        elif kind == "object":
            words.append("JSON object")
        else:
            words.append(kind)
    return " or ".join(words)


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
                elif not (isinstance(kind, str) and kind in TYPES):
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

    Patterns are checked by patterns/regex.py's `search`, never by Python's backtracking matcher; one it
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


def _shown(value: Any, limit: int = 60) -> str:
    """A server's text in a notice: a JSON string, ASCII only (every other character escaped), cut short."""
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=True)
        except (TypeError, ValueError):
            value = repr(value)
    return json.dumps(value[:limit] + ("..." if len(value) > limit else ""), ensure_ascii=True)
