"""The lab corpus: seeded transcripts of tool-using turns, in the harness's own chat format.

Each `Episode` is one turn: a user question in one of several phrasings, the
compact call the model should write, the result exactly as the bundled server
returns it (the servers run in-process through the real MCP client, so the
text is the text the harness would inject), and an answer that uses the
result's values. `system_prompt()` is the system prompt the harness renders
for the lab servers, byte for byte (a test holds it to that).

Held-out episodes use cities, and whole states, that training never sees:
`episodes(seed, n, "heldout")`. The same seed always gives the same episodes.
`episodes(seed, n, "ood")` asks the same held-out questions of the servers run
with `--ood`: the answers hold values no training transcript holds (see
decodeloop/servers/unusual.py). With `varied`, that share of training episodes
holds values from the training side of unusual.py instead of the servers' own.

    python3 -m decodeloop.lab.corpus --episodes 5 --seed 0           # print transcripts
    python3 -m decodeloop.lab.corpus --episodes 5 --split ood
    python3 -m decodeloop.lab.corpus --episodes 1000 --jsonl > c.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from decodeloop.formats.calls.compact import Call, CompactSyntax
from decodeloop.formats.lab import USER, CharTokenizer, LabChat, lab_transcript
from decodeloop.lab.train.places import CITIES
from decodeloop.servers import command, timezone, units, weather
from decodeloop.servers.unusual import Unusual

# The lab servers, in the order their tools appear in the system prompt.
LAB_SERVERS = (("weather", weather), ("timezone", timezone), ("units", units))
# States no training episode mentions: a model must copy them from the question.
HELDOUT_STATES = frozenset({"VT", "NM", "ND", "DE", "WV"})
HELDOUT_CITY_SHARE = 5  # one city in five of the other states is held out too

UNIT_WORDS = {
    "km": "kilometers",
    "m": "meters",
    "cm": "centimeters",
    "mi": "miles",
    "ft": "feet",
    "in": "inches",
    "kg": "kilograms",
    "g": "grams",
    "lb": "pounds",
    "oz": "ounces",
    "l": "liters",
    "ml": "milliliters",
    "gal": "gallons",
    "c": "degrees Celsius",
    "f": "degrees Fahrenheit",
}
CONVERSIONS = [
    ("km", "mi"),
    ("mi", "km"),
    ("m", "ft"),
    ("ft", "m"),
    ("cm", "in"),
    ("in", "cm"),
    ("kg", "lb"),
    ("lb", "kg"),
    ("g", "oz"),
    ("oz", "g"),
    ("l", "gal"),
    ("gal", "l"),
    ("l", "ml"),
    ("c", "f"),
    ("f", "c"),
]

WEATHER_QUESTIONS = (
    "What's the weather in {place}?",
    "What is the weather like in {place} right now?",
    "How's the weather in {place}?",
    "Is it cold in {place} today?",
    "Current conditions in {place}, please.",
    "weather {place}",
)
FORECAST_QUESTIONS = (
    "What's the forecast for {place}?",
    "Will it rain in {place} this week?",
    "Give me a {days}-day forecast for {place}.",
    "What will the weather be in {place} over the next {days} days?",
)
TIMEZONE_QUESTIONS = (
    "What time zone is {place} in?",
    "Which time zone does {place} use?",
    "What's the UTC offset in {place}?",
)
CONVERT_QUESTIONS = (
    "Convert {value} {from_unit} to {to_unit}.",
    "How many {to_words} is {value} {from_words}?",
    "What is {value} {from_unit} in {to_unit}?",
)


@dataclass
class Episode:
    user: str  # the question
    tool: str  # the tool a correct model calls
    arguments: dict  # its arguments, as the schema converts them
    call: str  # the compact call text
    result: str  # the tool result, as the server returns it
    answer: str  # an answer that uses the result's values
    values: list[str] = field(default_factory=list)  # what a correct answer must contain
    copied: list[str] = field(default_factory=list)  # every piece of the result the answer copies (values too)

    def markup(self, system: str) -> str:
        return lab_transcript(system, self.user, self.call, self.result, self.answer)


def is_heldout(city: str, state: str) -> bool:
    if state in HELDOUT_STATES:
        return True
    digest = hashlib.sha256(f"{city}|{state}".encode()).digest()
    return digest[0] % HELDOUT_CITY_SHARE == 0


def lab_server_commands(ood: bool = False) -> list[list[str]]:
    """The stdio commands of the lab servers, run by this same Python (with --ood: the OOD split's)."""
    return [command(name) + (["--ood"] if ood else []) for name, _ in LAB_SERVERS]


@lru_cache(maxsize=2)
def _connected(ood: bool = False) -> tuple[list, dict]:
    """The lab servers in-process behind the real MCP client: (tools in prompt order, tool name -> client)."""
    from decodeloop.mcp.client import McpClient
    from decodeloop.mcp.transports.memory import MemoryTransport

    tools, owner = [], {}
    for name, module in LAB_SERVERS:
        client = McpClient(MemoryTransport(module.build_server(ood=ood)), name=name)
        client.initialize()
        for tool in client.list_tools():
            tools.append(tool)
            owner[tool.name] = client
    return tools, owner


def lab_tools() -> list:
    """The lab servers' tools as the MCP client lists them."""
    return list(_connected()[0])


def system_prompt() -> str:
    return LabChat(CharTokenizer(), CompactSyntax()).system_text(lab_tools())


SPLITS = ("train", "heldout", "ood")
TOOLS: dict[str, Callable[..., tuple[str, dict]]] = {
    "get_weather": weather.get_weather,
    "get_forecast": weather.get_forecast,
    "get_time_zone": timezone.get_time_zone,
    "convert": units.convert,
}


def call_tool(name: str, arguments: dict, unusual: Unusual | None = None) -> str:
    """The result text the harness would inject for this call: the servers' own values, the OOD
    servers' (unusual on the "ood" side), or training's unusual values (the tool's own code, salted)."""
    if unusual is None or unusual.side == "ood":
        return _served(name, json.dumps(arguments, sort_keys=True), unusual is not None)
    return TOOLS[name](**arguments, unusual=unusual)[0]


@lru_cache(maxsize=1 << 16)
def _served(name: str, arguments: str, ood: bool) -> str:
    """A result through the MCP client, once per call: the servers answer the same call alike, and
    a training corpus asks about the same few hundred cities tens of thousands of times."""
    return _connected(ood)[1][name].call_tool(name, json.loads(arguments)).text()


def episodes(
    seed: int, n: int, split: str = "train", varied: float = 0.0, forecasts: float | None = None
) -> list[Episode]:
    """n episodes of a split; `varied`: the share of them (train only) holding training's unusual values;
    `forecasts`: the share of forecasts (train only; by default one in five, as in every split)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    places = [p for p in CITIES if is_heldout(*p) == (split != "train")]
    # the split is part of the seed, so train and held-out never share a random stream;
    # the OOD split asks the held-out questions
    rng = random.Random(f"{'heldout' if split == 'ood' else split}:{seed}")
    rolls = random.Random(f"varied:{seed}")  # a stream of its own: the questions do not depend on `varied`
    mix = random.Random(f"forecasts:{seed}")
    makers = (_weather, _weather, _forecast, _timezone, _convert)
    others = tuple(m for m in makers if m is not _forecast)
    out = []
    for i in range(n):
        if split == "ood":
            unusual = Unusual("ood")
        elif varied and rolls.random() < varied:
            unusual = Unusual("train", f"{seed}:{i}")
        else:
            unusual = None
        if forecasts is None or split != "train":
            maker = rng.choice(makers)
        else:
            maker = _forecast if mix.random() < forecasts else rng.choice(others)
        out.append(maker(rng, places, unusual))
    return out


# -- one episode per tool ---------------------------------------------------------------


def _episode(
    user: str, tool: str, arguments: dict, answer: str, values: list[str], unusual, copied: Sequence[str] = ()
) -> Episode:
    call = CompactSyntax().render(Call(tool, {k: str(v) for k, v in arguments.items()}))
    return Episode(user, tool, arguments, call, call_tool(tool, arguments, unusual), answer, values, [*values, *copied])


def _weather(rng: random.Random, places, unusual: Unusual | None = None) -> Episode:
    city, state = rng.choice(places)
    user = rng.choice(WEATHER_QUESTIONS).format(place=f"{city}, {state}")
    w = weather.current_weather(city, state, unusual)
    answer = (
        f"In {city}, {state} it's {w['temperature_f']}°F right now ({w['conditions']}), with "
        f"{w['humidity_pct']}% humidity and wind at {w['wind_mph']} mph from the {w['wind_dir']}."
    )
    return _episode(
        user,
        "get_weather",
        {"city": city, "state": state},
        answer,
        [f"{w['temperature_f']}°F", w["conditions"]],
        unusual,
        [f"{w['humidity_pct']}%", f"{w['wind_mph']} mph", w["wind_dir"]],
    )


def _forecast(rng: random.Random, places, unusual: Unusual | None = None) -> Episode:
    city, state = rng.choice(places)
    template = rng.choice(FORECAST_QUESTIONS)
    days = rng.randint(2, 5) if "{days}" in template else 3
    user = template.format(place=f"{city}, {state}", days=days)
    arguments = {"city": city, "state": state} | ({"days": days} if "{days}" in template else {})
    f = weather.forecast(city, state, days, unusual)
    # the days as the tool writes them, a line each: the answer quotes the result verbatim
    lines = [f"{d['day']} {d['temperature_f']}°F, {d['conditions']}" for d in f["days"]]
    answer = f"Here's the forecast for {city}, {state}:\n" + "\n".join(lines)
    return _episode(
        user,
        "get_forecast",
        arguments,
        answer,
        [f"{d['temperature_f']}°F" for d in f["days"]],
        unusual,
        [d["conditions"] for d in f["days"]],
    )


def _timezone(rng: random.Random, places, unusual: Unusual | None = None) -> Episode:
    city, state = rng.choice(places)
    user = rng.choice(TIMEZONE_QUESTIONS).format(place=f"{city}, {state}")
    z = timezone.time_zone(city, state, unusual)
    answer = f"{city}, {state} is on {z['zone']} ({z['iana']}), UTC{z['utc_offset']}."
    return _episode(
        user,
        "get_time_zone",
        {"city": city, "state": state},
        answer,
        [z["zone"], f"UTC{z['utc_offset']}"],
        unusual,
        [z["iana"]],
    )


def _convert(rng: random.Random, places, unusual: Unusual | None = None) -> Episode:
    from_unit, to_unit = rng.choice(CONVERSIONS)
    value = round(rng.uniform(0.5, 500), rng.choice((0, 1, 2)))
    value = int(value) if value == int(value) else value
    shown = str(value)
    user = rng.choice(CONVERT_QUESTIONS).format(
        value=shown,
        from_unit=from_unit,
        to_unit=to_unit,
        from_words=UNIT_WORDS[from_unit],
        to_words=UNIT_WORDS[to_unit],
    )
    result = units.result_text(value, from_unit, to_unit, unusual)
    answer = f"{shown} {from_unit} is {result} {to_unit}."
    return _episode(
        user, "convert", {"value": value, "from_unit": from_unit, "to_unit": to_unit}, answer, [result], unusual
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print lab corpus transcripts (deterministic for a seed).")
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=SPLITS, default="train")
    parser.add_argument(
        "--varied",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="share of train episodes holding training's unusual values (default: 0)",
    )
    parser.add_argument("--jsonl", action="store_true", help="one JSON object per episode, with its markup")
    args = parser.parse_args(argv)
    system = system_prompt()
    for episode in episodes(args.seed, args.episodes, args.split, args.varied):
        if args.jsonl:
            print(json.dumps(asdict(episode) | {"markup": episode.markup(system)}, ensure_ascii=False))
        else:
            print(episode.markup(system).split(USER, 1)[1].replace("<|", "\n<|"), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
