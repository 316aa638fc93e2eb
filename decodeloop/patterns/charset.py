"""Sets of characters as sorted, disjoint, non-adjacent (lo, hi) code point ranges.

Everything in the grammar speaks of characters as code points (ints). A set
of them is a tuple of inclusive ranges, so "any character but a quote" is two
ranges, not a million members, and the byte layer can ask whether any
character whose UTF-8 form starts with some bytes is in a set (`overlaps`).
Standard library only.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

MAX_CP = 0x10FFFF
_ABOVE = 1 << 62  # above every member a set may hold (a special token's pseudo code point too, bytes.SPECIAL)
Ranges = tuple  # tuple[tuple[int, int], ...], normalized

EMPTY: Ranges = ()
ALL: Ranges = ((0, MAX_CP),)
SURROGATES: Ranges = ((0xD800, 0xDFFF),)


def normalize(pairs: Iterable[tuple[int, int]]) -> Ranges:
    """Ranges sorted, with overlapping and adjacent ones merged; empty ones dropped."""
    out: list[list[int]] = []
    for lo, hi in sorted(p for p in pairs if p[0] <= p[1]):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def of(text: str) -> Ranges:
    """The characters of a string."""
    return normalize((ord(c), ord(c)) for c in text)


def span(lo: str | int, hi: str | int) -> Ranges:
    lo = ord(lo) if isinstance(lo, str) else lo
    hi = ord(hi) if isinstance(hi, str) else hi
    return ((lo, hi),) if lo <= hi else EMPTY


def union(*sets: Ranges) -> Ranges:
    parts = [s for s in sets if s]
    if not parts:
        return EMPTY
    if len(parts) == 1:
        return parts[0]
    return normalize(p for s in parts for p in s)


def complement(a: Ranges) -> Ranges:
    out = []
    at = 0
    for lo, hi in a:
        if lo > at:
            out.append((at, lo - 1))
        at = hi + 1
    if at <= MAX_CP:
        out.append((at, MAX_CP))
    return tuple(out)


def intersect(a: Ranges, b: Ranges) -> Ranges:
    if not a or not b:
        return EMPTY
    if a == ALL:
        return b
    if b == ALL:
        return a
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def subtract(a: Ranges, b: Ranges) -> Ranges:
    return intersect(a, complement(b))


def contains(a: Ranges, c: int) -> bool:
    i = bisect_right(a, (c, _ABOVE)) - 1
    return i >= 0 and a[i][0] <= c <= a[i][1]


def overlaps(a: Ranges, lo: int, hi: int) -> bool:
    """Whether any character in [lo, hi] is in the set."""
    i = bisect_right(a, (hi, _ABOVE)) - 1
    return i >= 0 and a[i][1] >= lo


def size(a: Ranges) -> int:
    return sum(hi - lo + 1 for lo, hi in a)


def chars(a: Ranges, limit: int = 64) -> list[int]:
    """The members, for small sets (at most `limit` of them)."""
    out = []
    for lo, hi in a:
        for c in range(lo, hi + 1):
            out.append(c)
            if len(out) >= limit:
                return out
    return out


# Every Unicode scalar value: what a string may hold once it has gone through UTF-8.
TEXT: Ranges = complement(SURROGATES)
