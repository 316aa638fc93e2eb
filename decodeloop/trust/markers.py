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
small `﹤`: NFKD), accents, a few look-alikes NFKD keeps (Cyrillic letters, bars and
angle brackets), characters inside a marker that show nothing or next to nothing
(zero-width and other format characters, tag characters, combining marks such as
variation selectors and the combining grapheme joiner, the Hangul fillers), and
escapes spelling one of its characters: JSON `\\uXXXX`, and HTML character
references however a browser would still read them (`&lt;`, `&LT;`, `&lt`,
`&#60`, `&#X3C;`, `&vert;`). The whole disguised span is replaced by the escaped
marker.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Iterable
from html.entities import html5
from typing import Any

from decodeloop.text.invisible import map_strings

HERMES_TAGS = ("<tools>", "</tools>", "<tool_response>", "</tool_response>")
# characters NFKC leaves alone that read as a marker's characters
LOOK_ALIKES = {
    "а": "a",
    "с": "c",
    "е": "e",
    "о": "o",
    "р": "p",
    "х": "x",
    "і": "i",
    "ӏ": "l",
    "ѕ": "s",
    "ԁ": "d",
    "ⅼ": "l",
    "ǀ": "|",
    "∣": "|",
    "│": "|",
    "‖": "|",
    "‹": "<",
    "›": ">",
    "〈": "<",
    "〉": ">",
    "⟨": "<",
    "⟩": ">",
    "❬": "<",
    "❭": ">",
}
# a JSON escape; an HTML character reference, numeric or named, with or without its semicolon
_ESCAPES = re.compile(r"\\u([0-9a-fA-F]{4})|&#([0-9]{1,7}|[xX][0-9a-fA-F]{1,6});?|&([A-Za-z][A-Za-z0-9]{0,31})(;?)")
_LEGACY_ENTITY_CHARS = max(len(name) for name in html5 if not name.endswith(";"))  # `&lt` with no `;`
HIDDEN_CATEGORIES = {"Cf", "Mn", "Me"}  # format characters and combining marks: nothing, or a mark, on screen
HANGUL_FILLERS = "\u115f\u1160\u3164\uffa0"  # letters to Unicode, blank to the eye


def escape(marker: str) -> str:
    """The marker as data: its first character, a backslash, the rest."""
    return marker[0] + "\\" + marker[1:]


def fold(text: str) -> tuple[str, list[int]]:
    """The normalised view of `text`, and for each of its characters the index in `text` it came from."""
    out: list[str] = []
    where: list[int] = []
    at = 0
    while at < len(text):
        decoded = _unescape(text, at) if text[at] in "\\&" else None
        chars, end = decoded if decoded is not None else (text[at], at + 1)
        for char in chars:
            for folded in unicodedata.normalize("NFKD", LOOK_ALIKES.get(char, char)).casefold():
                if unicodedata.category(folded) in HIDDEN_CATEGORIES or folded in HANGUL_FILLERS:
                    continue  # shows nothing inside a marker, or only a mark on one of its characters
                out.append(LOOK_ALIKES.get(folded, folded))
                where.append(at)
        at = end
    return "".join(out), where


def _unescape(text: str, at: int) -> tuple[str, int] | None:
    """The text an escape at `at` spells and where it ends, or None when none starts there."""
    match = _ESCAPES.match(text, at)
    if match is None:
        return None
    if match.group(1):
        return chr(int(match.group(1), 16)), match.end()
    if match.group(2):
        number = match.group(2)
        code = int(number[1:], 16) if number[0] in "xX" else int(number)
        return (chr(code), match.end()) if code <= 0x10FFFF else None
    name, semicolon = match.group(3), match.group(4)
    for key in (name + semicolon, (name + semicolon).lower()):
        if semicolon and key in html5:
            return html5[key], match.end()
    # no `;` (or no such name): the longest legacy entity the name starts with, as a browser reads `&ltfoo`
    for length in range(min(len(name), _LEGACY_ENTITY_CHARS), 1, -1):
        for key in (name[:length], name[:length].lower()):
            if key in html5:
                return html5[key], at + 1 + length
    return None


class Markers:
    def __init__(self, markers: Iterable[str]) -> None:
        self.markers: dict[str, str] = {}  # normalised form -> the marker as the harness writes it
        for marker in markers:
            if marker and marker.strip():
                self.markers.setdefault(fold(marker)[0], marker)
        forms = sorted(self.markers, key=len, reverse=True)  # the longest first where two overlap
        self._pattern = re.compile("|".join(map(re.escape, forms))) if forms else None

    def neutralize(self, text: str) -> tuple[str, list[str]]:
        """The text with every marker (however disguised) escaped, and the markers found, in order."""
        if self._pattern is None:
            return text, []
        if text.isascii() and "\\u" not in text and "&" not in text:
            view, where = text.lower(), None  # the common case: one C-speed pass
        else:
            view, where = fold(text)
        found: list[str] = []
        out: list[str] = []
        last = 0
        for match in self._pattern.finditer(view):
            start = match.start() if where is None else where[match.start()]
            end = match.end() if where is None else where[match.end() - 1] + 1
            if where is not None:  # an escape sequence spelling the marker's last character ends after it
                escaped = _unescape(text, end - 1) if text[end - 1] in "\\&" else None
                end = escaped[1] if escaped else end
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

        def change(text: str) -> str:
            text, hits = self.neutralize(text)
            found.extend(hits)
            return text

        out = map_strings(value, change)
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
