"""The servers' --ood values: every kind of value in every tool, never a value training can hold."""

import re
import subprocess
import sys

from conftest import ROOT

from decodeloop.lab import corpus
from decodeloop.lab.train.places import CITIES
from decodeloop.lab.train.transformer import made_up_place
from decodeloop.servers import timezone, units, weather
from decodeloop.servers.unusual import MODIFIERS, OOD_WORDS, OWN_DECIMALS, Unusual, fixed, is_ood

PLACES = CITIES[::7]


def weather_values(w: dict) -> list[tuple[str, str]]:
    return [
        ("temperature", str(w["temperature_f"])),
        ("word", w["conditions"]),
        ("humidity", str(w["humidity_pct"])),
        ("wind", str(w["wind_mph"])),
        ("direction", w["wind_dir"]),
    ]


def zone_values(z: dict) -> list[tuple[str, str]]:
    return [("word", z["zone"]), ("word", z["iana"]), ("offset", z["utc_offset"])]


def drawn(unusual_for) -> list[tuple[str, str]]:
    """(kind, value) of everything the tools answer for a sample of places, days and conversions."""
    out = []
    for i, (city, state) in enumerate(PLACES):
        u = unusual_for(i)
        out += weather_values(weather.current_weather(city, state, u))
        for day in weather.forecast(city, state, 7, u)["days"]:
            out += [("temperature", str(day["temperature_f"])), ("word", day["conditions"])]
        out += zone_values(timezone.time_zone(city, state, u))
        for from_unit, to_unit in corpus.CONVERSIONS:
            out.append(("decimals", units.result_text(1.5 + 37 * i, from_unit, to_unit, u)))
    return out


def test_the_servers_own_values_and_trainings_are_never_on_the_ood_side():
    own = drawn(lambda i: None)
    train = drawn(lambda i: Unusual("train", f"salt{i}"))
    assert not [v for v in own + train if is_ood(*v)]


def test_every_ood_value_is_on_the_ood_side():
    ood = drawn(lambda i: Unusual("ood"))
    assert all(is_ood(*v) for v in ood), [v for v in ood if not is_ood(*v)]


def test_ood_values_take_every_unusual_form():
    values = drawn(lambda i: Unusual("ood"))
    temperatures = [int(v) for kind, v in values if kind == "temperature"]
    assert min(temperatures) <= -100 and max(temperatures) >= 100 and any(-10 < t < 0 for t in temperatures)
    assert any(len(v) == 1 for kind, v in values if kind == "humidity")
    assert {len(v) for kind, v in values if kind == "direction"} == {1, 2, 3}
    conditions = [v for kind, v in values if kind == "word" and not v.endswith("Time") and "/" not in v]
    words = {w for c in conditions for w in c.split()}
    assert any(" " in c for c in conditions) and words - OOD_WORDS - set(MODIFIERS)  # made-up words too
    assert any(len(v) == 3 for kind, v in values if kind == "wind")
    assert all(len(v.split(".")[1]) == 6 for kind, v in values if kind == "decimals")


def test_ood_and_training_transcripts_share_no_value():
    """The strings themselves: no value an OOD answer must copy appears in any training transcript."""
    import random

    rng = random.Random(0)
    train = [made_up_place(e, rng) if rng.random() < 0.5 else e for e in corpus.episodes(0, 3000, "train", 0.5)]
    ood = corpus.episodes(0, 400, "ood")
    seen = {piece for e in train for piece in e.copied}
    wanted = {piece for e in ood for piece in e.copied}
    shared = seen & wanted
    assert wanted and not shared, sorted(shared)[:10]
    # and the training side does hold values of every unusual form
    assert any(p.startswith("-") and p.endswith("°F") and len(p) == 6 for p in seen)  # -123°F
    assert any(re.fullmatch(r"\d%", p) for p in seen)


def test_ood_split_asks_the_held_out_questions():
    held_out, ood = corpus.episodes(3, 60, "heldout"), corpus.episodes(3, 60, "ood")
    assert [(e.user, e.call, e.arguments) for e in held_out] == [(e.user, e.call, e.arguments) for e in ood]
    assert all(a.result != b.result for a, b in zip(held_out, ood))
    for e in ood:
        assert all(v in e.result and v in e.answer for v in e.values)


def test_the_same_question_gets_the_same_unusual_answer():
    def values(city, state, unusual):
        text = weather.get_weather(city, state, unusual)[0]
        return text.split(": ", 1)[1]

    assert values("Polson", "MT", Unusual("ood")) == values(" polson", "mt", Unusual("ood"))
    assert values("Polson", "MT", Unusual("train", "a")) != values("Polson", "MT", Unusual("train", "b"))
    assert values("Polson", "MT", Unusual("ood")) != values("Polson", "MT", None)


def test_fixed_keeps_zeros_and_never_writes_minus_zero():
    assert fixed(2.5, 6) == "2.500000" and fixed(-0.0000001, 3) == "0.000" and fixed(-1.25, 1) in ("-1.2", "-1.3")
    assert OWN_DECIMALS < 6


def test_ood_servers_over_stdio_answer_with_ood_values():
    """`--ood` on the real server processes: the results are the OOD split's, and --help documents it."""
    from decodeloop.tools.startup import start_stdio_servers

    with start_stdio_servers(corpus.lab_server_commands(ood=True), lambda e: None) as router:
        for e in corpus.episodes(2, 12, "ood"):
            assert router.call(e.tool, e.arguments).text() == e.result
    for name in ("weather", "timezone", "units"):
        done = subprocess.run(
            [sys.executable, "-m", f"decodeloop.servers.{name}", "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0 and "--ood" in done.stdout
