"""Invisible characters: which they are, and taking them out of data before the model reads it.

Some characters render as nothing at all, yet a model reads them: Unicode tag
characters (U+E0020-E007E) spell ASCII one to one, so a tool result can carry
"ignore previous instructions" that no user ever sees (ASCII smuggling);
variation selectors can carry a byte each after any character. The user never
saw, so never approved, what such characters say. `strip` removes them from
data on its way into the context and says how many of each kind it removed
(and what tag characters spelled), for a notice; the terminal, the JSON Lines
and the viewer show them escaped instead (untrusted.py, ui/). The kinds:

    tag characters                U+E0000-E007F
    variation selectors           U+FE00-FE0F, U+E0100-E01EF
    zero-width characters         U+200B-200D, U+2060-2064, U+FEFF, U+180E
    soft hyphens                  U+00AD
    combining grapheme joiners    U+034F
    deprecated format characters  U+206A-206F
    musical format characters     U+1D173-1D17A

Bidirectional controls (U+200E, U+200F, U+061C, U+202A-202E, U+2066-2069) are
not among them: they hide no text, they reorder what is shown; they stay in the
context, and every view shows them escaped.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any

# (singular, plural, code point ranges): the order is the order of a notice
KINDS = (
    ("tag character", "tag characters", ((0xE0000, 0xE007F),)),
    ("variation selector", "variation selectors", ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF))),
    (
        "zero-width character",
        "zero-width characters",
        ((0x200B, 0x200D), (0x2060, 0x2064), (0xFEFF, 0xFEFF), (0x180E, 0x180E)),
    ),
    ("soft hyphen", "soft hyphens", ((0x00AD, 0x00AD),)),
    ("combining grapheme joiner", "combining grapheme joiners", ((0x034F, 0x034F),)),
    ("deprecated format character", "deprecated format characters", ((0x206A, 0x206F),)),
    ("musical format character", "musical format characters", ((0x1D173, 0x1D17A),)),
)
RANGES = tuple(span for _, _, spans in KINDS for span in spans)
SPELLED_CHARS = 60  # of the text tag characters spell, quoted in a notice


def char_class(ranges) -> str:
    """A regular expression character class (Python's syntax) of code point ranges."""
    return "[" + "".join(re.escape(chr(a)) + ("" if a == b else "-" + re.escape(chr(b))) for a, b in ranges) + "]"


INVISIBLE = re.compile(char_class(RANGES))


def kind_of(char: str) -> int:
    """The index in KINDS of an invisible character's kind."""
    code = ord(char)
    return next(n for n, (_, _, spans) in enumerate(KINDS) if any(a <= code <= b for a, b in spans))


@dataclasses.dataclass
class Removed:
    """What `strip` took out: how many of each kind, and the ASCII the tag characters spelled."""

    counts: list[int] = dataclasses.field(default_factory=lambda: [0] * len(KINDS))
    spelled: list[str] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return any(self.counts)

    @property
    def total(self) -> int:
        return sum(self.counts)

    def add(self, chars: list[str]) -> None:
        for char, count in Counter(chars).items():  # few distinct characters, however many in all
            self.counts[kind_of(char)] += count
        for char in chars:
            if len(self.spelled) > SPELLED_CHARS:  # enough to quote
                break
            code = ord(char) - 0xE0000
            if 0x20 <= code <= 0x7E:  # a tag character for a printable ASCII character
                self.spelled.append(chr(code))

    def describe(self) -> str:
        """Each kind removed and how many: '57 tag characters (spelling '...'), 1 soft hyphen'."""
        parts = []
        for (one, many, _), count in zip(KINDS, self.counts):
            if count:
                part = f"{count} {one if count == 1 else many}"
                if one == "tag character" and self.spelled:
                    text = "".join(self.spelled)
                    cut = text[:SPELLED_CHARS] + ("…" if len(text) > SPELLED_CHARS else "")
                    part += f" (spelling {cut!r})"
                parts.append(part)
        return ", ".join(parts)


def notice(removed: Removed, what: str) -> str:
    """What a notice says of characters removed from `what` ('the result of get_weather')."""
    total = removed.total
    return f"removed {total} invisible character{'' if total == 1 else 's'} from {what}: {removed.describe()}"


def strip(text: str, removed: Removed | None = None) -> tuple[str, Removed]:
    """The text without its invisible characters, and what was removed (added to `removed` when given)."""
    removed = removed if removed is not None else Removed()
    found = [] if text.isascii() else INVISIBLE.findall(text)  # the common case: one C-speed check
    if not found:
        return text, removed
    removed.add(found)
    return INVISIBLE.sub("", text), removed


def strip_value(value: Any, removed: Removed | None = None) -> tuple[Any, Removed]:
    """A JSON value with invisible characters removed from every string in it, object keys too (a copy)."""
    removed = removed if removed is not None else Removed()
    out = map_strings(value, lambda text: strip(text, removed)[0])
    return (out, removed) if removed else (value, removed)


def map_strings(value: Any, change) -> Any:
    """A copy of a JSON value with `change(text)` in place of every string in it, object keys too."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {
            map_strings(key, change) if isinstance(key, str) else key: map_strings(item, change)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [map_strings(item, change) for item in value]
    return value


def strip_tool(tool: Any) -> tuple[Any, Removed]:
    """A tool as the prompt may describe it: title, description and inputSchema without invisible characters."""
    removed = Removed()
    title = strip(tool.title, removed)[0] if tool.title else tool.title
    description = strip(tool.description, removed)[0] if tool.description else tool.description
    schema = strip_value(tool.input_schema, removed)[0]
    if not removed:
        return tool, removed
    return dataclasses.replace(tool, title=title, description=description, input_schema=schema), removed
