"""The bundled time-zone server: which time zone a US city keeps, offline and deterministic.

Each state maps to the zone most of it keeps (states split between zones get
their majority zone). Run it as `python3 -m decodeloop.servers.timezone [--ood]`; with `--ood`
every city keeps a made-up zone with an unusual offset (see unusual.py).
"""

from __future__ import annotations

import sys

import decodeloop
from decodeloop.servers.base import READ_ONLY, ToolFailure, ToolServer
from decodeloop.servers.unusual import OOD_HELP, Unusual, ood_requested

# zone name, IANA id, standard UTC offset, summer UTC offset (None: no daylight saving)
ZONES = {
    "eastern": ("Eastern Time", "America/New_York", "-05:00", "-04:00"),
    "central": ("Central Time", "America/Chicago", "-06:00", "-05:00"),
    "mountain": ("Mountain Time", "America/Denver", "-07:00", "-06:00"),
    "arizona": ("Mountain Standard Time", "America/Phoenix", "-07:00", None),
    "pacific": ("Pacific Time", "America/Los_Angeles", "-08:00", "-07:00"),
    "alaska": ("Alaska Time", "America/Anchorage", "-09:00", "-08:00"),
    "hawaii": ("Hawaii-Aleutian Standard Time", "Pacific/Honolulu", "-10:00", None),
}
STATE_ZONE = {
    **dict.fromkeys(
        [
            "CT",
            "DE",
            "DC",
            "FL",
            "GA",
            "IN",
            "KY",
            "ME",
            "MD",
            "MA",
            "MI",
            "NH",
            "NJ",
            "NY",
            "NC",
            "OH",
            "PA",
            "RI",
            "SC",
            "VT",
            "VA",
            "WV",
        ],
        "eastern",
    ),
    **dict.fromkeys(
        ["AL", "AR", "IL", "IA", "KS", "LA", "MN", "MS", "MO", "NE", "ND", "OK", "SD", "TN", "TX", "WI"], "central"
    ),
    **dict.fromkeys(["CO", "ID", "MT", "NM", "UT", "WY"], "mountain"),
    "AZ": "arizona",
    **dict.fromkeys(["CA", "NV", "OR", "WA"], "pacific"),
    "AK": "alaska",
    "HI": "hawaii",
}

INPUT = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name, e.g. Polson", "minLength": 1},
        "state": {"type": "string", "description": "Two-letter US state code, e.g. MT"},
    },
    "required": ["city", "state"],
    "additionalProperties": False,
}


def time_zone(city: str, state: str, unusual: Unusual | None = None) -> dict:
    shown = " ".join(city.split())
    code = state.strip().upper()
    if not shown:
        raise ToolFailure("city must not be empty")
    if code not in STATE_ZONE:
        raise ToolFailure(f'unknown state code "{state.strip()}": use a two-letter US state code such as MT')
    name, iana, standard, summer = ZONES[STATE_ZONE[code]] if unusual is None else unusual.zone(shown, code)
    return {
        "city": shown,
        "state": code,
        "zone": name,
        "iana": iana,
        "utc_offset": standard,
        "summer_utc_offset": summer,
    }


def get_time_zone(city: str, state: str, unusual: Unusual | None = None) -> tuple[str, dict]:
    z = time_zone(city, state, unusual)
    summer = f", UTC{z['summer_utc_offset']} in summer" if z["summer_utc_offset"] else ", all year"
    return f"{z['city']}, {z['state']}: {z['zone']} ({z['iana']}), UTC{z['utc_offset']}{summer}", z


def build_server(page_size: int | None = None, ood: bool = False) -> ToolServer:
    """The server; `ood`: every answer holds values from the OOD side of unusual.py instead."""
    unusual = Unusual("ood") if ood else None
    server = ToolServer(
        "timezone",
        decodeloop.__version__,
        page_size=page_size,
        instructions="The time zone a US city keeps: name, IANA id and UTC offsets.",
    )
    server.tool(
        "get_time_zone",
        "The time zone of a US city: its name, IANA id and UTC offset.",
        INPUT,
        title="Time zone",
        annotations=READ_ONLY,
    )(lambda city, state: get_time_zone(city, state, unusual))
    server.options.append((("--ood",), {"action": "store_true", "help": OOD_HELP}))
    return server


def main(argv: list[str] | None = None) -> int:
    return build_server(ood=ood_requested(argv)).main(argv)


if __name__ == "__main__":
    sys.exit(main())
