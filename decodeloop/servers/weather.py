"""The bundled weather server: offline, deterministic current weather and forecasts for US cities.

Nothing here is real weather. Each answer is derived from a hash of the
normalized city and state, around a rough annual mean temperature for the state,
so the same question always gets the same plausible answer: good for golden
transcripts and for models learning when to call a tool.

It offers resources too: `weather://cities`, the sample cities (text), `weather://forecast/{state}/{city}`,
a template whose every URI is a city's forecast as text, and `weather://icon/{conditions}`, a small PNG for
a condition (a blob).

And prompts: `weather_report` (`city` and `state` required), a request for a short report with the city's
forecast embedded as a text resource, and `what_to_wear` (`city`, `state`, an optional `activity`), one text.
`completion/complete` suggests their `state` (the known codes) and `city` (the sample cities, of the state
chosen), and the forecast template's variables alike.

Run it as `python3 -m decodeloop.servers.weather [--page-size N] [--ood]`. With `--ood` it answers
with values no training transcript holds (see unusual.py): the same city always gets the same
unusual answer.
"""

from __future__ import annotations

import hashlib
import sys

import decodeloop
from decodeloop.servers.base import READ_ONLY, Completer, ToolFailure, ToolServer
from decodeloop.servers.unusual import OOD_HELP, Unusual, ood_requested

# Rough annual mean temperature (°F) by state, the baseline every reading varies around.
STATE_MEAN_F = {
    "AL": 63,
    "AK": 27,
    "AZ": 60,
    "AR": 60,
    "CA": 59,
    "CO": 45,
    "CT": 49,
    "DE": 55,
    "DC": 58,
    "FL": 71,
    "GA": 64,
    "HI": 70,
    "ID": 44,
    "IL": 52,
    "IN": 52,
    "IA": 48,
    "KS": 54,
    "KY": 56,
    "LA": 66,
    "ME": 41,
    "MD": 54,
    "MA": 48,
    "MI": 44,
    "MN": 41,
    "MS": 63,
    "MO": 54,
    "MT": 43,
    "NE": 49,
    "NV": 50,
    "NH": 44,
    "NJ": 53,
    "NM": 53,
    "NY": 45,
    "NC": 59,
    "ND": 40,
    "OH": 51,
    "OK": 60,
    "OR": 48,
    "PA": 49,
    "RI": 50,
    "SC": 62,
    "SD": 45,
    "TN": 58,
    "TX": 65,
    "UT": 49,
    "VT": 43,
    "VA": 55,
    "WA": 48,
    "WV": 52,
    "WI": 43,
    "WY": 42,
}
SWING_F = 15  # current temperature is the state mean plus up to this much either way
DAILY_STEP_F = 6  # forecast days drift from one to the next by at most this much
WIND_DIRECTIONS = ("N", "NE", "E", "SE", "S", "SW", "W", "NW")
DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # forecasts always start on Mon
HUMIDITY_RANGE = {  # percent, by conditions: wet skies are humid ones
    "sunny": (15, 55),
    "partly cloudy": (30, 70),
    "overcast": (50, 85),
    "fog": (85, 100),
    "light rain": (70, 95),
    "rain": (80, 98),
    "thunderstorms": (75, 98),
    "light snow": (70, 92),
    "snow": (75, 95),
}

CITY = {"type": "string", "description": "City name, e.g. Polson", "minLength": 1}
STATE = {"type": "string", "description": "Two-letter US state code, e.g. MT"}

WEATHER_INPUT = {
    "type": "object",
    "properties": {"city": CITY, "state": STATE},
    "required": ["city", "state"],
    "additionalProperties": False,
}
WEATHER_OUTPUT = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "state": {"type": "string"},
        "temperature_f": {"type": "integer"},
        "conditions": {"type": "string"},
        "humidity_pct": {"type": "integer"},
        "wind_mph": {"type": "integer"},
        "wind_dir": {"type": "string"},
    },
    "required": ["city", "state", "temperature_f", "conditions", "humidity_pct", "wind_mph", "wind_dir"],
}
FORECAST_INPUT = {
    "type": "object",
    "properties": {
        "city": CITY,
        "state": STATE,
        "days": {
            "type": "integer",
            "description": "How many days to forecast, 1 to 7 (default 3)",
            "minimum": 1,
            "maximum": 7,
            "default": 3,
        },
    },
    "required": ["city", "state"],
    "additionalProperties": False,
}
FORECAST_OUTPUT = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "state": {"type": "string"},
        "days": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "day": {"type": "string"},
                    "temperature_f": {"type": "integer"},
                    "conditions": {"type": "string"},
                },
                "required": ["day", "temperature_f", "conditions"],
            },
        },
    },
    "required": ["city", "state", "days"],
}


# -- the deterministic "weather" ---------------------------------------------------------


def _place(city: str, state: str) -> tuple[str, str]:
    """The city as the caller wrote it (whitespace tidied) and the checked, upper-cased state code."""
    shown = " ".join(city.split())
    if not shown:
        raise ToolFailure("city must not be empty")
    code = state.strip().upper()
    if code not in STATE_MEAN_F:
        raise ToolFailure(f'unknown state code "{state.strip()}": use a two-letter US state code such as MT')
    return shown, code


def _rolls(city: str, code: str, *salt: object) -> bytes:
    # Case and spacing must not change the answer: "polson " is Polson.
    key = "|".join([city.casefold(), code, *map(str, salt)])
    return hashlib.sha256(key.encode("utf-8")).digest()


def _conditions(temperature: int, roll: int) -> str:
    choices: tuple[str, ...]
    if temperature <= 32:  # below freezing: snow, never rain
        choices = ("sunny", "partly cloudy", "overcast", "fog", "light snow", "snow")
    elif temperature <= 36:  # near freezing: either
        choices = ("sunny", "partly cloudy", "overcast", "fog", "light rain", "light snow")
    else:
        choices = ("sunny", "sunny", "partly cloudy", "partly cloudy", "overcast", "fog", "light rain", "rain")
        if temperature >= 65:
            choices += ("thunderstorms",)
    return choices[roll % len(choices)]


def _humidity(conditions: str, roll: int) -> int:
    low, high = HUMIDITY_RANGE[conditions]
    return low + roll % (high - low + 1)


def current_weather(city: str, state: str, unusual: Unusual | None = None) -> dict:
    """Today's weather for a city as the structured result of get_weather (unusual: values from that side)."""
    shown, code = _place(city, state)
    if unusual is not None:
        return {"city": shown, "state": code, **unusual.weather(shown, code)}
    rolls = _rolls(shown, code)
    temperature = STATE_MEAN_F[code] + rolls[0] % (2 * SWING_F + 1) - SWING_F
    conditions = _conditions(temperature, rolls[1])
    wind = 1 + rolls[3] % 22
    if conditions == "thunderstorms":
        wind += 8
    return {
        "city": shown,
        "state": code,
        "temperature_f": temperature,
        "conditions": conditions,
        "humidity_pct": _humidity(conditions, rolls[2]),
        "wind_mph": wind,
        "wind_dir": WIND_DIRECTIONS[rolls[4] % len(WIND_DIRECTIONS)],
    }


def forecast(city: str, state: str, days: int = 3, unusual: Unusual | None = None) -> dict:
    """A `days`-long forecast whose first day is today's weather, as the structured result of get_forecast."""
    if not 1 <= days <= len(DAY_NAMES):
        raise ToolFailure(f"days must be from 1 to {len(DAY_NAMES)}")
    today = current_weather(city, state, unusual)
    if unusual is not None:
        out = [{"day": DAY_NAMES[0], "temperature_f": today["temperature_f"], "conditions": today["conditions"]}]
        for index, day in enumerate(DAY_NAMES[1:days], 1):
            w = unusual.weather(today["city"], today["state"], "day", index)
            out.append({"day": day, "temperature_f": w["temperature_f"], "conditions": w["conditions"]})
        return {"city": today["city"], "state": today["state"], "days": out}
    mean = STATE_MEAN_F[today["state"]]
    temperature, conditions = today["temperature_f"], today["conditions"]
    out = []
    for index, day in enumerate(DAY_NAMES[:days]):
        if index:
            # A random walk around the state mean: days follow each other plausibly.
            rolls = _rolls(today["city"], today["state"], "day", index)
            step = rolls[0] % (2 * DAILY_STEP_F + 1) - DAILY_STEP_F
            temperature = max(mean - SWING_F - 5, min(mean + SWING_F + 5, temperature + step))
            conditions = _conditions(temperature, rolls[1])
        out.append({"day": day, "temperature_f": temperature, "conditions": conditions})
    return {"city": today["city"], "state": today["state"], "days": out}


# -- the resources ---------------------------------------------------------------------------

SAMPLE_CITIES = (("Polson", "MT"), ("Boise", "ID"), ("Portland", "OR"), ("Austin", "TX"), ("Burlington", "VT"))


def cities_text() -> str:
    return "Sample cities (any US city and state works):\n" + "\n".join(f"{c}, {s}" for c, s in SAMPLE_CITIES)


def icon(conditions: str) -> bytes:
    """A 1x1 PNG whose one grey pixel depends on the conditions: bytes to exercise blob resources."""
    import struct
    import zlib

    if conditions not in HUMIDITY_RANGE:
        raise ToolFailure(f"no icon for {conditions!r}")
    grey = hashlib.sha256(conditions.encode()).digest()[0]

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes([0, grey])))
        + chunk(b"IEND", b"")
    )


# -- the prompt and completion ----------------------------------------------------------------


def complete_state(value: str, chosen: dict) -> list[str]:
    """The state codes that begin with `value` (any case)."""
    return [code for code in sorted(STATE_MEAN_F) if code.startswith(value.strip().upper())]


def complete_city(value: str, chosen: dict) -> list[str]:
    """The sample cities that begin with `value`, of the state already chosen when there is one."""
    state = str(chosen.get("state", "")).strip().upper()
    return [
        city
        for city, code in SAMPLE_CITIES
        if city.casefold().startswith(value.strip().casefold()) and (not state or code == state)
    ]


COMPLETERS: dict[str, Completer] = {"state": complete_state, "city": complete_city}


def weather_report(city: str, state: str, unusual: Unusual | None = None) -> list[dict]:
    """The messages of the weather_report prompt: the request, then the forecast as an embedded resource."""
    shown, code = _place(city, state)
    return [
        {
            "role": "user",
            "content": {
                "type": "text",
                "text": f"Write a short weather report for {shown}, {code}: today and the next two days.",
            },
        },
        {
            "role": "user",
            "content": {
                "type": "resource",
                "resource": {
                    "uri": f"weather://forecast/{code}/{shown}",
                    "mimeType": "text/plain",
                    "text": get_forecast(shown, code, 3, unusual)[0],
                },
            },
        },
    ]


def what_to_wear(city: str, state: str, activity: str = "") -> str:
    shown, code = _place(city, state)
    doing = f" for {activity.strip()}" if activity.strip() else ""
    return f"What should I wear{doing} in {shown}, {code} today? Check the weather first."


# -- the tools -------------------------------------------------------------------------------


def get_weather(city: str, state: str, unusual: Unusual | None = None) -> tuple[str, dict]:
    w = current_weather(city, state, unusual)
    text = (
        f"{w['city']}, {w['state']}: {w['temperature_f']}°F, {w['conditions']}, "
        f"humidity {w['humidity_pct']}%, wind {w['wind_mph']} mph {w['wind_dir']}"
    )
    return text, w


def get_forecast(city: str, state: str, days: int = 3, unusual: Unusual | None = None) -> tuple[str, dict]:
    f = forecast(city, state, days, unusual)
    text = "\n".join(f"{d['day']} {d['temperature_f']}°F, {d['conditions']}" for d in f["days"])
    return text, f


def build_server(page_size: int | None = None, ood: bool = False) -> ToolServer:
    """The server; `ood`: every answer holds values from the OOD side of unusual.py instead."""
    unusual = Unusual("ood") if ood else None
    server = ToolServer(
        "weather",
        decodeloop.__version__,
        instructions=(
            "Offline, deterministic weather for US cities: the same city and state always give the same answer."
        ),
        page_size=page_size,
    )
    server.tool(
        "get_weather",
        "Current weather for a US city: temperature (°F), conditions, humidity and wind.",
        WEATHER_INPUT,
        output_schema=WEATHER_OUTPUT,
        title="Current weather",
        annotations=READ_ONLY,
    )(lambda city, state: get_weather(city, state, unusual))
    server.tool(
        "get_forecast",
        "Daily forecast for a US city, one line per day starting today: temperature (°F) and conditions.",
        FORECAST_INPUT,
        output_schema=FORECAST_OUTPUT,
        title="Weather forecast",
        annotations=READ_ONLY,
    )(lambda city, state, days=3: get_forecast(city, state, days, unusual))
    server.resource("weather://cities", "cities", "Sample cities the server is often asked about.")(cities_text)
    server.resource(
        "weather://forecast/{state}/{city}",
        "forecast",
        "A 3-day forecast for a US city, e.g. weather://forecast/MT/Polson.",
        template=True,
        complete=COMPLETERS,
    )(lambda state, city: get_forecast(city, state, 3, unusual)[0])
    server.resource(
        "weather://icon/{conditions}", "icon", "A tiny PNG for conditions such as sunny.", "image/png", template=True
    )(icon)
    server.prompt(
        "weather_report",
        "A short weather report for a US city, with its forecast attached.",
        [
            {"name": "city", "description": "City name, e.g. Polson", "required": True},
            {"name": "state", "description": "Two-letter US state code, e.g. MT", "required": True},
        ],
        title="Weather report",
        complete=COMPLETERS,
    )(lambda city, state: weather_report(city, state, unusual))
    server.prompt(
        "what_to_wear",
        "Ask what to wear in a US city today.",
        [
            {"name": "city", "description": "City name, e.g. Polson", "required": True},
            {"name": "state", "description": "Two-letter US state code, e.g. MT", "required": True},
            {"name": "activity", "description": "What you will be doing, e.g. hiking"},
        ],
        complete=COMPLETERS,
    )(what_to_wear)
    server.options.append((("--ood",), {"action": "store_true", "help": OOD_HELP}))
    return server


def main(argv: list[str] | None = None) -> int:
    return build_server(ood=ood_requested(argv)).main(argv)


if __name__ == "__main__":
    sys.exit(main())
