"""Server-controlled text on its way into the context, the JSON Lines and a terminal.

A server decides the text of its results, error messages, notices, tool names,
descriptions and schemas. This module owns what such text may become:

- caps: `cap_text` cuts a text to a number of characters with a visible note
  saying how long it was; `cap_strings` does the same to every long string
  inside a JSON value (the JSON Lines' copy of a message); `cap_tool` bounds
  a tool's description and schema before they are rendered into a prompt.
- terminal safety: `visible` spells control and format characters as escapes
  (ESC as \\x1b, a right-to-left override as \\u202e, a tag character as
  \\U000e0041), so a result cannot retitle, recolour or rewrite a terminal, nor
  hide text in it (invisible.py); `quoted` also puts a margin before
  every line after the first, so server text can never start a line the way
  the harness's own lines start. `json_escaped` writes the same characters as
  JSON escapes, for the JSON Lines and the viewer's page.
- credentials: `visible` (and so `quoted` and `visible_line`) and every cut
  `cap_text` makes redact the secrets this process holds (credentials.py), so a
  server that echoes a token shows a marker; a cut never leaves a secret's
  beginning behind.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from decodeloop.text import invisible
from decodeloop.text.credentials import clip, redact

DEFAULT_MAX_DESCRIPTION_CHARS = 4_000  # a tool's description, and each description or title in its schemas
DEFAULT_MAX_SCHEMA_CHARS = 16_000  # a tool's inputSchema as JSON, after its descriptions are capped
MARGIN = "  │ "  # starts every continuation line of server text in a terminal view

# C0 controls but newline and tab, DEL, C1 controls (0x9b is a one-byte CSI to some terminals), the
# format characters that reorder text (bidi marks, overrides and isolates), line and paragraph separators,
# interlinear annotation marks, and every invisible character (invisible.py: tag characters, variation
# selectors, zero-width characters, soft hyphen...)
UNSAFE_RANGES = (
    (0x00, 0x08),
    (0x0B, 0x1F),
    (0x7F, 0x9F),
    (0x061C, 0x061C),
    (0x200E, 0x200F),
    (0x2028, 0x202E),
    (0x2066, 0x2069),
    (0xFFF9, 0xFFFB),
    *invisible.RANGES,
)
UNSAFE = re.compile(invisible.char_class(UNSAFE_RANGES))
_NAMED = {"\r": "\\r", "\x1b": "\\x1b"}


def escaped(char: str) -> str:
    """One character as the views spell it: \\r, \\x1b, \\x9b, \\u202e, \\U000e0041."""
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _escape(match: re.Match) -> str:
    return escaped(match.group())


def visible(text: str) -> str:
    """The text with every control and format character but newline and tab spelled as an escape, and every
    held credential redacted."""
    return UNSAFE.sub(_escape, redact(text))


def json_escaped(dumped: str) -> str:
    """JSON text (`json.dumps`) with every unsafe character written as a \\u escape: the same JSON, no raw
    control, format or invisible character for a viewer to render (a surrogate pair above U+FFFF)."""
    return UNSAFE.sub(_json_escape, dumped)


def _json_escape(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def visible_line(text: str) -> str:
    """`visible`, with newlines and tabs spelled too: the text stays on one line."""
    return visible(text).replace("\n", "\\n").replace("\t", "\\t")


def quoted(text: str, margin: str = MARGIN) -> str:
    """Server text for a terminal: control characters visible, every line after the first behind `margin`."""
    return visible(text).replace("\n", "\n" + margin)


def cap_text(text: str, limit: int, what: str = "result") -> str:
    """Keep at most `limit` characters of a text, saying so visibly when cut (a held credential that the cut
    falls inside is redacted, so no part of it is kept)."""
    if len(text) <= limit:
        return text
    return clip(text, limit) + f"\n[... {what} truncated: showing {limit:,} of {len(text):,} characters]"


def cap_strings(value: Any, limit: int) -> Any:
    """A JSON value with every string longer than `limit` cut with a note (a copy; the value is not changed)."""
    if isinstance(value, str):
        return cap_text(value, limit, "text") if len(value) > limit else value
    if isinstance(value, dict):
        return {key: cap_strings(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [cap_strings(item, limit) for item in value]
    return value


def cap_tool(
    tool: Any, max_description: int = DEFAULT_MAX_DESCRIPTION_CHARS, max_schema: int = DEFAULT_MAX_SCHEMA_CHARS
) -> tuple[Any, str | None]:
    """A tool whose description and schema text fit the caps, and what was done to it.

    The description, and every `description` and `title` string in the input and
    output schemas, are cut to `max_description` characters with a note. A tool
    whose inputSchema is still longer than `max_schema` characters of JSON is
    refused: `(None, why)`. Otherwise `(tool, None)` when nothing was cut, or
    `(capped copy, what was cut)`.
    """
    cut: list[str] = []
    description = tool.description or ""
    if len(description) > max_description:
        cut.append(f"description ({len(description):,} characters)")
        description = cap_text(description, max_description, "description")
    input_schema = _cap_schema_text(tool.input_schema, max_description, cut, "inputSchema")
    output_schema = (
        None
        if tool.output_schema is None
        else _cap_schema_text(tool.output_schema, max_description, cut, "outputSchema")
    )
    size = len(json.dumps(input_schema, ensure_ascii=False, default=str))
    if size > max_schema:
        return None, (
            f"tool {visible_line(tool.name)!r} refused: its inputSchema is {size:,} characters of JSON, "
            f"over the cap of {max_schema:,}"
        )
    if not cut:
        return tool, None
    capped = dataclasses.replace(tool, description=description, input_schema=input_schema, output_schema=output_schema)
    return capped, (f"tool {visible_line(tool.name)!r}: cut to {max_description:,} characters: " + ", ".join(cut))


def _cap_schema_text(schema: Any, limit: int, cut: list[str], where: str) -> Any:
    """The schema with long `description` and `title` strings cut; the schema itself is returned when none is."""
    found: list[str] = []

    def walk(node: Any, path: str) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, item in node.items():
                if key in ("description", "title") and isinstance(item, str) and len(item) > limit:
                    found.append(f"{where}{path}.{key} ({len(item):,} characters)")
                    out[key] = cap_text(item, limit, key)
                else:
                    out[key] = walk(item, f"{path}.{key}")
            return out
        if isinstance(node, list):
            return [walk(item, f"{path}[{n}]") for n, item in enumerate(node)]
        return node

    capped = walk(schema, "")
    if not found:
        return schema
    cut.extend(found[:3] + ([f"{len(found) - 3} more"] if len(found) > 3 else []))
    return capped
