"""Heatmaps of attention weights with the characters on both axes: terminal and SVG.

Owns drawing only; the weights come from the caller as rows of floats in [0, 1]
(one row per query character, one column per key character). Standard library
only. In a terminal each cell is one character wide, so the column labels are
the key text itself, spelled along the top; each row is labelled with its query
character at the left, so the answer reads down the margin.

Colour is ANSI 256-colour backgrounds on a terminal; with NO_COLOR set, or when
the output is not a terminal, the cells are plain shading characters. Both
scale to the brightest cell: `scale_legend` says what each shade stands for,
and the SVG draws the same scale, and any notes on the glyphs, below the map.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape

SHADES = " ░▒▓█"
GREYS = range(232, 256)  # the 256-colour palette's grey ramp, dark to light


def visible(ch: str) -> str:
    """One printable column for a character: spaces as '·', line breaks as '⏎'."""
    return {" ": "·", "\n": "⏎", "\t": "⇥"}.get(ch, ch if ch.isprintable() else "?")


GLYPHS = (("·", "a space"), ("⏎", "a line break"), ("⇥", "a tab"))


def _top(rows: Sequence[Sequence[float]]) -> float:
    return max((max(r) for r in rows if len(r)), default=1.0) or 1.0


def scale_points(rows: Sequence[Sequence[float]], steps: int = len(SHADES)) -> list[float]:
    """The attention weight each of `steps` evenly spaced shades stands for, darkest last."""
    top = _top(rows)
    return [top * i / (steps - 1) for i in range(steps)]


def scale_legend(rows: Sequence[Sequence[float]], color: bool) -> str:
    """One line saying which attention weight each shade stands for (a cell shows the nearest)."""
    points = scale_points(rows)
    if color:
        cells = [
            f"\x1b[48;5;{GREYS[round(i / (len(points) - 1) * (len(GREYS) - 1))]}m  \x1b[0m {w:.2f}"
            for i, w in enumerate(points)
        ]
    else:
        cells = [f"{'blank' if shade == ' ' else shade * 2} {w:.2f}" for shade, w in zip(SHADES, points)]
    return "shading, attention weight (scaled to the brightest cell): " + "  ".join(cells) + "\n"


def terminal(
    rows: Sequence[Sequence[float]], row_labels: Sequence[str], col_labels: Sequence[str], color: bool, title: str = ""
) -> str:
    top = _top(rows)  # scale to the brightest cell
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


def svg(
    rows: Sequence[Sequence[float]],
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    title: str = "",
    cell: int = 12,
    notes: Sequence[str] = (),
) -> str:
    """A standalone SVG document: one square per weight, darker for more attention; below the map,
    the shading scale and `notes` (what the glyphs stand for), a line each."""
    top = _top(rows)
    left, head = 2 * cell, 3 * cell + (cell if title else 0)
    foot = head + cell * len(rows) + cell  # where the scale and the notes start
    width, height = left + cell * len(col_labels) + cell, foot + cell * (3 + len(notes))
    longest = max([len(title), 60, *map(len, notes)])
    width = max(width, left + longest * (cell - 2) * 3 // 5 + cell)  # room for the text (monospace ~0.6 em)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="{cell - 2}">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    if title:
        out.append(f'<text x="{left}" y="{cell}">{escape(title)}</text>')
    for j, ch in enumerate(col_labels):
        out.append(
            f'<text x="{left + j * cell + cell // 2}" y="{head - cell // 2}" '
            f'text-anchor="middle">{escape(visible(ch))}</text>'
        )
    for i, (label, row) in enumerate(zip(row_labels, rows)):
        y = head + i * cell
        out.append(
            f'<text x="{left - cell // 2}" y="{y + cell - 2}" text-anchor="middle">{escape(visible(label))}</text>'
        )
        for j, w in enumerate(row):
            shade = round(255 * (1 - min(1.0, max(0.0, w / top))))
            if shade < 255:  # white cells are the background
                out.append(
                    f'<rect x="{left + j * cell}" y="{y}" width="{cell}" height="{cell}" '
                    f'fill="rgb({shade},{shade},{shade})"><title>{w:.3f}</title></rect>'
                )
    out.append(
        f'<text x="{left}" y="{foot + cell - 2}">shading, attention weight (scaled to the brightest cell):</text>'
    )
    for i, w in enumerate(scale_points(rows)):
        x, shade = left + i * 5 * cell, round(255 * (1 - w / top))
        out.append(
            f'<rect x="{x}" y="{foot + cell}" width="{cell}" height="{cell}" '
            f'fill="rgb({shade},{shade},{shade})" stroke="grey"/>'
        )
        out.append(f'<text x="{x + cell + 2}" y="{foot + 2 * cell - 2}">{w:.2f}</text>')
    for i, note in enumerate(notes):
        out.append(f'<text x="{left}" y="{foot + (3 + i) * cell - 2}">{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
