"""The bundled unit-conversion server: lengths, masses, volumes and temperatures.

Run it as `python3 -m decodeloop.servers.units [--ood]`. Results are rounded to three
decimals, with trailing zeros dropped, so "12.5 km = 7.767 mi"; with `--ood` they are
written with exactly six decimals, "12.5 km = 7.767119 mi" (see unusual.py).
"""

from __future__ import annotations

import math
import sys

import decodeloop
from decodeloop.servers.base import READ_ONLY, ToolFailure, ToolServer
from decodeloop.servers.unusual import OOD_HELP, Unusual, fixed, ood_requested

# unit -> (quantity, size in the quantity's base unit)
UNITS = {
    "km": ("length", 1000.0),
    "m": ("length", 1.0),
    "cm": ("length", 0.01),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "l": ("volume", 1.0),
    "ml": ("volume", 0.001),
    "gal": ("volume", 3.785411784),
    "c": ("temperature", None),
    "f": ("temperature", None),
}
UNIT_NAMES = list(UNITS)

INPUT = {
    "type": "object",
    "properties": {
        "value": {"type": "number", "description": "The amount to convert, e.g. 12.5"},
        "from_unit": {"type": "string", "enum": UNIT_NAMES, "description": "The unit of the value"},
        "to_unit": {"type": "string", "enum": UNIT_NAMES, "description": "The unit to convert to"},
    },
    "required": ["value", "from_unit", "to_unit"],
    "additionalProperties": False,
}


def show_number(x: float) -> str:
    """Three decimals at most, no trailing zeros, no "-0"."""
    text = f"{x:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def converted(value: float, from_unit: str, to_unit: str) -> float:
    if not math.isfinite(value):
        raise ToolFailure("value must be a finite number")
    (kind, size), (to_kind, to_size) = UNITS[from_unit], UNITS[to_unit]
    if kind != to_kind:
        raise ToolFailure(f"cannot convert {from_unit} to {to_unit}: {from_unit} is a {kind}, {to_unit} is a {to_kind}")
    if kind == "temperature":
        celsius = value if from_unit == "c" else (value - 32) * 5 / 9
        return celsius if to_unit == "c" else celsius * 9 / 5 + 32
    assert size is not None and to_size is not None, "only temperatures have no size"
    return value * size / to_size


def result_text(value: float, from_unit: str, to_unit: str, unusual: Unusual | None = None) -> str:
    """The converted amount as the server writes it."""
    result = converted(value, from_unit, to_unit)
    if unusual is None:
        return show_number(result)
    return fixed(result, unusual.decimals(value, from_unit, to_unit))


def convert(value: float, from_unit: str, to_unit: str, unusual: Unusual | None = None) -> tuple[str, dict]:
    result = converted(value, from_unit, to_unit)
    shown = result_text(value, from_unit, to_unit, unusual)
    text = f"{show_number(value)} {from_unit} = {shown} {to_unit}"
    return text, {"value": value, "from_unit": from_unit, "to_unit": to_unit, "result": round(result, 3)}


def build_server(page_size: int | None = None, ood: bool = False) -> ToolServer:
    """The server; `ood`: results are written with exactly six decimals (unusual.py's OOD side)."""
    unusual = Unusual("ood") if ood else None
    server = ToolServer(
        "units",
        decodeloop.__version__,
        page_size=page_size,
        instructions="Unit conversion for lengths, masses, volumes and temperatures.",
    )
    server.tool(
        "convert",
        "Convert an amount from one unit to another of the same kind (length, mass, volume or temperature).",
        INPUT,
        title="Convert units",
        annotations=READ_ONLY,
    )(lambda value, from_unit, to_unit: convert(value, from_unit, to_unit, unusual))
    server.options.append((("--ood",), {"action": "store_true", "help": OOD_HELP}))
    return server


def main(argv: list[str] | None = None) -> int:
    return build_server(ood=ood_requested(argv)).main(argv)


if __name__ == "__main__":
    sys.exit(main())
