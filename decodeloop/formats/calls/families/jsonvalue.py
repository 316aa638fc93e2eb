"""Strict JSON values read at a position of a call's text, for the families whose calls hold JSON.

`read_value(text, pos)` is one value (RFC 8259: no NaN or Infinity, no key twice, no raw control character
in a string) and where it ends; what is wrong is a ParseError whose column counts the call's first character
as 1, never the json module's own exception. Standard library only.
"""

from __future__ import annotations

import json
from typing import Any

from decodeloop.formats.calls.base import ParseError

WHITESPACE = " \t\n\r"


def _pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in items:
        if key in seen:
            raise _Twice(key)
        seen[key] = value
    return seen


def _constant(word: str) -> Any:
    raise _NotJson(word)


class _Twice(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _NotJson(ValueError):
    pass


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant)


def skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in WHITESPACE:
        pos += 1
    return pos


def object_in(text: str) -> dict | None:
    """The JSON object a string holds, and nothing else (arguments some models encode twice), or None."""
    try:
        value, end = read_value(text, skip_space(text, 0))
    except ParseError:
        return None
    return value if isinstance(value, dict) and skip_space(text, end) == len(text) else None


def read_value(text: str, pos: int, shape: str = "") -> tuple[Any, int]:
    """The JSON value at `pos` of `text` and the index just past it; `shape` ends each message (how a call looks)."""
    hint = f"; {shape}" if shape else ""
    try:
        return _DECODER.raw_decode(text, pos)
    except _Twice as e:
        raise ParseError(
            f"the key {json.dumps(e.key, ensure_ascii=False)[:40]} is given twice; give each key once{hint}", pos + 1
        ) from None
    except _NotJson as e:
        raise ParseError(f"{e} is not JSON (JSON has no NaN or Infinity){hint}", pos + 1) from None
    except RecursionError:
        raise ParseError(f"the JSON nests too deeply{hint}", pos + 1) from None
    except json.JSONDecodeError as e:
        if e.pos >= len(text) or e.msg.startswith("Unterminated string"):
            raise ParseError(
                f"the text ends in the middle of the JSON at column {len(text) + 1}; finish the JSON{hint}",
                len(text) + 1,
            ) from None
        what = e.msg[0].lower() + e.msg[1:]
        found = json.dumps(text[e.pos : e.pos + 12], ensure_ascii=False)
        raise ParseError(
            f"invalid JSON at column {e.pos + 1}: {what}, found {found}{_slip(text, e.pos)}{hint}", e.pos + 1
        ) from None


def _slip(text: str, pos: int) -> str:
    """A word on a common slip at `pos`, or ""."""
    if text.startswith("'", pos):
        return "; JSON writes strings and keys in double quotes"
    if text.startswith(("True", "False", "None"), pos):
        return "; JSON writes true, false and null in lower case"
    return ""
