"""Unusual values for the bundled servers: two disjoint sets, one for training, one for the OOD split.

The servers' own values are narrow: temperatures of two digits, humidity of two
or three, nine condition words, eight wind directions, seven time zones,
conversions rounded to three decimals. A model can learn those as a vocabulary
instead of copying them. Under `--ood` the servers answer the same questions
with values drawn from `Unusual("ood")`: negative, one-digit and three-digit
numbers, one-digit percentages, made-up and multi-word condition words, wind
directions of one to three letters, made-up time zones with unusual offsets,
conversions to exactly six decimals. Training draws from `Unusual("train")`:
values of the same kinds and forms, never one the OOD side can draw.

`is_ood(kind, text)` is the partition. A value is on the OOD side when it is
none of the servers' own values and either belongs to a fixed list (the
sixteen-point compass's three-letter directions, a few real weather words, the
one-digit humidities 0, 3, 5 and 8) or its hash puts it in one bucket of four;
made-up words are partitioned one by one, so a multi-word condition is on the
OOD side when any of its words is. Each side draws only values on its side.

Values are a function of the question (and, for training, a salt): the same
question always gets the same answer, as with the servers' own values.
"""

from __future__ import annotations

import hashlib
import random
import string
import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# -- the servers' own values: never on the OOD side ---------------------------------
OWN_TEMPERATURES = range(7, 92)  # state means 27..71, plus or minus 15 and a forecast's 5
OWN_HUMIDITY = range(15, 101)
OWN_WIND = range(1, 31)
OWN_DIRECTIONS = frozenset(("N", "NE", "E", "SE", "S", "SW", "W", "NW"))
OWN_WORDS = frozenset(
    (
        "sunny",
        "partly",
        "cloudy",
        "overcast",
        "fog",
        "light",
        "rain",
        "thunderstorms",
        "snow",
        # the words of the time zones' names and IANA ids
        "eastern",
        "central",
        "mountain",
        "pacific",
        "alaska",
        "hawaii-aleutian",
        "america",
        "new",
        "york",
        "chicago",
        "denver",
        "phoenix",
        "los",
        "angeles",
        "anchorage",
        "honolulu",
    )
)
OWN_OFFSETS = frozenset(("-05:00", "-04:00", "-06:00", "-07:00", "-08:00", "-09:00", "-10:00"))
OWN_DECIMALS = 3  # units rounds to three decimals, trailing zeros dropped

# -- fixed members of each side ------------------------------------------------------
OOD_DIRECTIONS = frozenset(("NNE", "ENE", "ESE", "SSE", "SSW", "WSW", "WNW", "NNW"))
OOD_WORDS = frozenset(("sleet", "hail", "drizzle", "haze", "smoke", "squalls", "graupel", "dust", "ash", "mist"))
TRAIN_WORDS = ("showers", "flurries", "breezy", "clear", "windy", "humid", "frost", "storms", "gusts", "spray")
MODIFIERS = ("light", "heavy", "scattered", "patchy", "freezing", "blowing", "isolated")  # either side
OOD_HUMIDITY = frozenset((0, 3, 5, 8, 11, 13))
OOD_DECIMALS = 6  # the OOD side writes a conversion with exactly six decimals
TRAIN_DECIMALS = (
    0,
    1,
    2,
    4,
    5,
    7,
    8,
)  # on both sides of six: training learns to stop after the last digit, not at a count
REGIONS = ("America", "Pacific", "Atlantic", "Arctic", "Etc")
SYLLABLES = ("an", "ar", "el", "en", "er", "qu", "ix", "ot", "zu", "va", "ro", "li", "mo", "ka", "te", "sh", "y")


def _bucket(kind: str, text: str) -> bool:
    """One value in four, by a hash: the OOD side's share of values that are on neither fixed list."""
    return hashlib.sha256(f"{kind}|{text}".encode()).digest()[0] % 4 == 0


def is_ood(kind: str, text: str) -> bool:
    """Whether a value (as the server writes it) is on the OOD side."""
    if kind == "temperature":
        value = int(text)
        return value not in OWN_TEMPERATURES and _bucket(kind, text)
    if kind == "humidity":
        return int(text) in OOD_HUMIDITY
    if kind == "wind":
        value = int(text)
        return value not in OWN_WIND and _bucket(kind, text)
    if kind == "direction":
        return text in OOD_DIRECTIONS or (text not in OWN_DIRECTIONS and _bucket(kind, text))
    if kind == "word":  # a condition or a time zone: OOD when any of its words is
        return any(_ood_word(w) for w in text.replace("/", " ").replace("_", " ").split())
    if kind == "offset":
        return text not in OWN_OFFSETS and _bucket(kind, text)
    if kind == "decimals":  # a conversion's result: OOD when it has exactly six decimals
        return "." in text and len(text.split(".", 1)[1]) == OOD_DECIMALS
    raise ValueError(f"unknown kind {kind!r}")


def _ood_word(word: str) -> bool:
    w = word.lower()
    if w in OWN_WORDS or w in MODIFIERS or w in TRAIN_WORDS or w in ("time", "standard") or word in REGIONS:
        return False
    return w in OOD_WORDS or _bucket("word", w)


class Unusual:
    """Draws values on one side ("ood" or "train"), each a function of its key and the salt."""

    def __init__(self, side: str, salt: str = "") -> None:
        if side not in ("ood", "train"):
            raise ValueError(f"side must be 'ood' or 'train', not {side!r}")
        self.side, self.salt = side, salt

    def rng(self, *key: object) -> random.Random:
        return random.Random("|".join([self.side, self.salt, *map(str, key)]))

    def _mine(self, kind: str, value: object) -> bool:
        return is_ood(kind, str(value)) == (self.side == "ood")

    def _draw(self, kind: str, rng: random.Random, make: Callable[[random.Random], T]) -> T:
        for _ in range(10_000):
            value = make(rng)
            if self._mine(kind, value):
                return value
        raise RuntimeError(f"no {kind} on the {self.side} side")  # never: every kind has plenty on both

    # -- weather ---------------------------------------------------------------------
    def temperature(self, rng: random.Random) -> int:
        def make(r):  # as many of one, two and three digits, a third of them below zero
            digits = r.choice((1, 2, 3))
            value = r.randint(0 if digits == 1 else 10 ** (digits - 1), min(10**digits - 1, 199))
            return -value if r.random() < 1 / 3 else value

        return self._draw("temperature", rng, make)

    def humidity(self, rng: random.Random) -> int:
        return self._draw("humidity", rng, lambda r: r.randint(0, 9) if r.random() < 0.6 else r.randint(0, 100))

    def wind(self, rng: random.Random) -> int:
        return self._draw("wind", rng, lambda r: r.randint(0, 10 ** r.choice((1, 2, 3)) - 1) % 200)

    def direction(self, rng: random.Random) -> str:
        def make(r):
            letters = "NESW" if r.random() < 0.7 else string.ascii_uppercase
            return "".join(r.choice(letters) for _ in range(r.randint(1, 3)))

        if self.side == "ood" and rng.random() < 0.5:
            return rng.choice(sorted(OOD_DIRECTIONS))
        return self._draw("direction", rng, make)

    def word(self, rng: random.Random) -> str:
        """One made-up or real word on this side."""
        real = sorted(OOD_WORDS) if self.side == "ood" else TRAIN_WORDS
        if rng.random() < 0.25:
            return rng.choice(real)

        def make(r):
            if r.random() < 0.5:
                return "".join(r.choice(string.ascii_lowercase) for _ in range(r.randint(3, 10)))
            return "".join(r.choice(SYLLABLES) for _ in range(r.randint(2, 4)))

        return self._draw("word", rng, make)

    def conditions(self, rng: random.Random) -> str:
        """One to three words: made-up or real, sometimes after a modifier ("heavy qualzen")."""
        words = [self.word(rng) for _ in range(rng.choices((1, 2, 3), (50, 35, 15))[0])]
        if rng.random() < 0.3:
            words.insert(0, rng.choice(MODIFIERS))
        if self.side == "train" and rng.random() < 0.15:  # the servers' own words, in new company
            words.insert(rng.randint(0, len(words)), rng.choice(sorted(OWN_WORDS)))
        return " ".join(words)

    def weather(self, city: str, code: str, *salt: object) -> dict:
        rng = self.rng("weather", city.casefold(), code, *salt)
        return {
            "temperature_f": self.temperature(rng),
            "conditions": self.conditions(rng),
            "humidity_pct": self.humidity(rng),
            "wind_mph": self.wind(rng),
            "wind_dir": self.direction(rng),
        }

    # -- time zones ----------------------------------------------------------------
    def offset(self, rng: random.Random) -> str:
        def make(r):
            hours, minutes = r.randint(-12, 14), r.choice((0, 15, 30, 45))
            return f"{'-' if hours < 0 else '+'}{abs(hours):02d}:{minutes:02d}"

        return self._draw("offset", rng, make)

    def zone(self, city: str, code: str) -> tuple[str, str, str, str | None]:
        """(name, IANA-style id, standard offset, summer offset or None)."""
        rng = self.rng("zone", city.casefold(), code)
        words = [self.word(rng).capitalize() for _ in range(rng.choice((1, 1, 2)))]
        name = " ".join(words) + rng.choice((" Time", " Time", " Standard Time"))
        iana = f"{rng.choice(REGIONS)}/{'_'.join(words)}"
        summer = self.offset(rng) if rng.random() < 0.6 else None
        return name, iana, self.offset(rng), summer

    # -- conversions ---------------------------------------------------------------
    def decimals(self, value: float, from_unit: str, to_unit: str) -> int:
        if self.side == "ood":
            return OOD_DECIMALS
        return self.rng("convert", value, from_unit, to_unit).choice(TRAIN_DECIMALS)


def fixed(x: float, decimals: int) -> str:
    """x with exactly `decimals` decimals, trailing zeros kept, never "-0"."""
    text = f"{x:.{decimals}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def ood_requested(argv: list[str] | None) -> bool:
    """Whether a server's command line asks for --ood (the server's own parser checks the rest)."""
    return "--ood" in (sys.argv[1:] if argv is None else argv)


OOD_HELP = "answer with out-of-distribution values, never the training corpus's (see decodeloop.servers.unusual)"
