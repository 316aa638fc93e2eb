"""Heatmaps of attention weights with the characters on both axes: terminal and SVG.

Owns drawing only; the weights come from the caller as rows of floats in [0, 1]
(one row per query character, one column per key character). Standard library
only. In a terminal each cell is one character wide, so the column labels are
the key text itself, spelled along the top; each row is labelled with its query
character at the left, so the answer reads down the margin.

Colour is ANSI 256-colour backgrounds on a terminal; with NO_COLOR set, or when
the output is not a terminal, the cells are plain shading characters.
"""

from __future__ import annotations

from typing import Sequence
from xml.sax.saxutils import escape

SHADES = " ░▒▓█"
GREYS = range(232, 256)  # the 256-colour palette's grey ramp, dark to light


def visible(ch: str) -> str:
    """One printable column for a character: spaces as '·', line breaks as '⏎'."""
    return {" ": "·", "\n": "⏎", "\t": "⇥"}.get(ch, ch if ch.isprintable() else "?")


def terminal(rows: Sequence[Sequence[float]], row_labels: Sequence[str], col_labels: Sequence[str],
             color: bool, title: str = "") -> str:
    top = max((max(r) for r in rows if len(r)), default=1.0) or 1.0  # scale to the brightest cell
    lines = [title] if title else []
    lines.append("  " + "".join(visible(c) for c in col_labels))
    for label, row in zip(row_labels, rows):
        cells = []
        for w in row:
            level = min(1.0, max(0.0, w / top))
            if color:
                cells.append(f"\x1b[48;5;{GREYS[round(level * (len(GREYS) - 1))]}m \x1b[0m")
            else:
                cells.append(SHADES[round(level * (len(SHADES) - 1))])
        lines.append(visible(label) + " " + "".join(cells))
    return "\n".join(lines) + "\n"


def svg(rows: Sequence[Sequence[float]], row_labels: Sequence[str], col_labels: Sequence[str],
        title: str = "", cell: int = 12) -> str:
    """A standalone SVG document: one square per weight, darker for more attention."""
    top = max((max(r) for r in rows if len(r)), default=1.0) or 1.0
    left, head = 2 * cell, 3 * cell + (cell if title else 0)
    width, height = left + cell * len(col_labels) + cell, head + cell * len(rows) + cell
    width = max(width, left + len(title) * (cell - 2) * 3 // 5 + cell)  # room for the title (monospace ~0.6 em)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="monospace" font-size="{cell - 2}">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    if title:
        out.append(f'<text x="{left}" y="{cell}">{escape(title)}</text>')
    for j, ch in enumerate(col_labels):
        out.append(f'<text x="{left + j * cell + cell // 2}" y="{head - cell // 2}" '
                   f'text-anchor="middle">{escape(visible(ch))}</text>')
    for i, (label, row) in enumerate(zip(row_labels, rows)):
        y = head + i * cell
        out.append(f'<text x="{left - cell // 2}" y="{y + cell - 2}" text-anchor="middle">'
                   f'{escape(visible(label))}</text>')
        for j, w in enumerate(row):
            shade = round(255 * (1 - min(1.0, max(0.0, w / top))))
            if shade < 255:  # white cells are the background
                out.append(f'<rect x="{left + j * cell}" y="{y}" width="{cell}" height="{cell}" '
                           f'fill="rgb({shade},{shade},{shade})"><title>{w:.3f}</title></rect>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
