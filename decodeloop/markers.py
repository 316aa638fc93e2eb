"""Forged markers in data: text that spells harness markup is rendered so the model reads it as data.

The tokenizer already guarantees that data never becomes a special id, and only
model-sampled tokens are scanned for calls, so a forged marker in a tool result
cannot end a turn, open a role or run a call. But the model reads text: a
result that spells `<|im_end|>` or `[call send_money` looks to it like the
harness's own markup. `Markers.neutralize` rewrites every occurrence in data
(tool results, user text, a tool's title, description and every string of its
inputSchema: property descriptions, titles, enum values, defaults, property
names) by the escape scheme:

    a marker M is written as M[0] + "\\" + M[1:]
    <|im_end|>  ->  <\\|im_end|>      [call   ->  [\\call      </tool_call>  ->  <\\/tool_call>

The markers of a bundle (`for_bundle`): the text of every special token of its
tokenizer, its call syntax's opener (and a closer longer than one character),
the Hermes tags `<tools>`, `<tool_response>` (and their closers), and the
turn's stop strings that hold more than letters, digits and spaces (`Observation:`,
not `overcast`). The harness's own messages (an error about a call no server
answered) are not data and are left as written. Occurrences are found in a normalised view of the text,
so disguises are caught too: letter case, compatibility forms (fullwidth `＜`,
small `﹤`: NFKC), a few look-alikes NFKC keeps (Cyrillic letters, bars and
angle brackets), zero-width and other format characters inside a marker, and
JSON `\\uXXXX` or HTML `&lt;` escapes spelling one of its characters. The
whole disguised span is replaced by the escaped marker.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from typing import Any, Iterable

HERMES_TAGS = ("<tools>", "</tools>", "<tool_response>", "</tool_response>")
# characters NFKC leaves alone that read as a marker's characters
LOOK_ALIKES = {"а": "a", "с": "c", "е": "e", "о": "o", "р": "p", "х": "x", "і": "i", "ӏ": "l", "ѕ": "s",
               "ԁ": "d", "ⅼ": "l", "ǀ": "|", "∣": "|", "│": "|", "‖": "|", "‹": "<", "›": ">", "〈": "<",
               "〉": ">", "⟨": "<", "⟩": ">", "❬": "<", "❭": ">"}
_ESCAPES = re.compile(r"\\u([0-9a-fA-F]{4})|&(lt|gt|#0*60|#0*62|#x0*3[cCeE]);")
_ENTITIES = {"lt": "<", "gt": ">"}


def escape(marker: str) -> str:
    """The marker as data: its first character, a backslash, the rest."""
    return marker[0] + "\\" + marker[1:]


def fold(text: str) -> tuple[str, list[int]]:
    """The normalised view of `text`, and for each of its characters the index in `text` it came from."""
    out: list[str] = []
    where: list[int] = []
    at = 0
    while at < len(text):
        match = _ESCAPES.match(text, at) if text[at] in "\\&" else None
        if match:
            char, end = _unescape(match), match.end()
        else:
            char, end = text[at], at + 1
        if unicodedata.category(char) != "Cf":        # zero-width and other format characters vanish
            for folded in unicodedata.normalize("NFKC", LOOK_ALIKES.get(char, char)).casefold():
                out.append(LOOK_ALIKES.get(folded, folded))
                where.append(at)
        at = end
    return "".join(out), where


def _unescape(match: re.Match) -> str:
    if match.group(1):
        return chr(int(match.group(1), 16))
    entity = match.group(2).lower()
    if entity in _ENTITIES:
        return _ENTITIES[entity]
    number = entity.lstrip("#")
    return chr(int(number[1:], 16) if number.startswith("x") else int(number))


class Markers:
    def __init__(self, markers: Iterable[str]) -> None:
        self.markers: dict[str, str] = {}            # normalised form -> the marker as the harness writes it
        for marker in markers:
            if marker and marker.strip():
                self.markers.setdefault(fold(marker)[0], marker)
        forms = sorted(self.markers, key=len, reverse=True)   # the longest first where two overlap
        self._pattern = re.compile("|".join(map(re.escape, forms))) if forms else None

    def neutralize(self, text: str) -> tuple[str, list[str]]:
        """The text with every marker (however disguised) escaped, and the markers found, in order."""
        if self._pattern is None:
            return text, []
        if text.isascii() and "\\u" not in text and "&" not in text:
            view, where = text.lower(), None           # the common case: one C-speed pass
        else:
            view, where = fold(text)
        found: list[str] = []
        out: list[str] = []
        last = 0
        for match in self._pattern.finditer(view):
            start = match.start() if where is None else where[match.start()]
            end = match.end() if where is None else where[match.end() - 1] + 1
            if where is not None:   # an escape sequence spelling the marker's last character ends after it
                escaped = _ESCAPES.match(text, end - 1) if text[end - 1] in "\\&" else None
                end = escaped.end() if escaped else end
            marker = self.markers[match.group()]
            out += [text[last:start], escape(marker)]
            found.append(marker)
            last = end
        if not found:
            return text, []
        out.append(text[last:])
        return "".join(out), found

    def neutralize_value(self, value: Any) -> tuple[Any, list[str]]:
        """A JSON value with every string in it, object keys too, neutralized (a copy), and the markers found.

        A key or an enum value the model must write back exactly cannot then be written as the server spelled
        it: a call that tries fails validation, and the model reads that error.
        """
        found: list[str] = []

        def walk(node: Any) -> Any:
            if isinstance(node, str):
                text, hits = self.neutralize(node)
                found.extend(hits)
                return text
            if isinstance(node, dict):
                return {walk(key) if isinstance(key, str) else key: walk(item) for key, item in node.items()}
            if isinstance(node, list):
                return [walk(item) for item in node]
            return node

        out = walk(value)
        return (out, found) if found else (value, [])

    def neutralize_tool(self, tool: Any) -> tuple[Any, list[str]]:
        """A tool as the prompt may describe it: title, description and inputSchema neutralized (a copy)."""
        title, in_title = self.neutralize(tool.title) if tool.title else (tool.title, [])
        description, in_description = self.neutralize(tool.description or "")
        schema, in_schema = self.neutralize_value(tool.input_schema)
        found = in_title + in_description + in_schema
        if not found:
            return tool, []
        return dataclasses.replace(tool, title=title, description=description, input_schema=schema), found


def for_bundle(bundle, stop_strings: Iterable[str] = ()) -> Markers:
    """The markers a bundle's model could mistake for the harness's: specials, call syntax, tags, stops."""
    syntax = bundle.syntax
    # a stop string of plain words ("overcast") is data, not markup: only one with other characters counts
    stops = [stop for stop in stop_strings if not all(c.isalnum() or c.isspace() for c in stop)]
    markers = [*bundle.tokenizer.special_tokens, syntax.opener, *HERMES_TAGS, *stops]
    if len(syntax.closer or "") > 1:
        markers.append(syntax.closer)
    return Markers(markers)
