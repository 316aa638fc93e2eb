"""attention_peek.py: the copying head is found, and its heatmap is drawn with the characters."""

from __future__ import annotations

import importlib.util
import os
import xml.etree.ElementTree as ET

import pytest
from conftest import ROOT

from decodeloop.ui.heatmap import svg, terminal

pytest.importorskip("numpy")


def load_peek():
    spec = importlib.util.spec_from_file_location("attention_peek", os.path.join(ROOT, "attention_peek.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_copying_head_beats_chance():
    from decodeloop.formats.lab import CharTokenizer
    from decodeloop.lab.corpus import episodes, system_prompt
    from decodeloop.lab.transformer import TransformerModel

    peek = load_peek()
    chosen = [e for e in episodes(0, 40, "heldout") if e.tool == "get_weather"][:3]
    scores, chance = peek.copy_scores(TransformerModel.load(), chosen, system_prompt(), CharTokenizer())
    assert 0 < chance < 0.05
    assert scores.max() > 5 * chance  # one head looks at the characters it copies
    assert scores.min() < scores.max() / 2  # and not every head does


def test_svg_is_well_formed_and_carries_the_characters(tmp_path, capsys):
    from decodeloop.lab.corpus import episodes

    peek = load_peek()
    path = tmp_path / "peek.svg"
    assert peek.main(["--episodes", "2", "--svg", str(path)]) == 0
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    episode = peek.unusual_first([e for e in episodes(0, 80, "ood") if e.tool == "get_weather"])[0]
    for ch in set(episode.result.replace(" ", "")):  # every character of the tool result labels a column
        assert ch in texts
    assert len(list(root.iter("{http://www.w3.org/2000/svg}rect"))) > 10
    out = capsys.readouterr().out
    assert "copy score" in out and episode.user in out and "(ood split)" in out
    # the legend, in the terminal and in the SVG: every glyph, and the shading scale with its weights
    for line in peek.legend_lines():
        assert line in out and line in texts
    assert "⁺" in "".join(peek.legend_lines()) and "shading" in out
    assert any(t and t.startswith("shading") for t in texts)
    weights = [float(t) for t in texts if t and len(t) == 4 and t[1] == "." and t.replace(".", "", 1).isdigit()]
    assert len(weights) == 5 and weights[0] == 0 and weights == sorted(weights)


def test_the_drawn_ood_episode_has_a_negative_three_digit_temperature_and_a_made_up_word():
    from decodeloop.lab.corpus import episodes
    from decodeloop.servers.unusual import MODIFIERS, OOD_WORDS, TRAIN_WORDS

    peek = load_peek()
    pool = [e for e in episodes(0, 160, "ood") if e.tool == "get_weather"]
    first = peek.unusual_first(pool)[0]
    temperature, conditions = first.values
    assert temperature.startswith("-") and len(temperature) == len("-123°F") and temperature in first.result
    assert set(conditions.split()) - OOD_WORDS - set(MODIFIERS) - set(TRAIN_WORDS)
    assert sorted(map(id, peek.unusual_first(pool))) == sorted(map(id, pool))  # the same episodes


def test_the_ood_copy_head_beats_chance():
    from decodeloop.formats.lab import CharTokenizer
    from decodeloop.lab.corpus import episodes, system_prompt
    from decodeloop.lab.transformer import TransformerModel

    peek = load_peek()
    chosen = peek.unusual_first([e for e in episodes(0, 80, "ood") if e.tool == "get_weather"])[:3]
    scores, chance = peek.copy_scores(TransformerModel.load(), chosen, system_prompt(), CharTokenizer())
    assert scores.max() > 20 * chance and scores.min() < scores.max() / 2


def test_the_shading_legend_names_each_shade_and_its_weight():
    from decodeloop.ui.heatmap import SHADES, scale_legend

    rows = [[0.0, 0.2], [0.4, 0.1]]
    plain = scale_legend(rows, color=False)
    assert "\x1b[" not in plain and "blank 0.00" in plain and "██ 0.40" in plain
    assert all(shade * 2 in plain for shade in SHADES[1:])
    assert plain.count("\x1b[48;5;") == 0 and scale_legend(rows, color=True).count("\x1b[48;5;") == len(SHADES)


def test_terminal_shading_without_colour_and_backgrounds_with_it():
    rows, labels, columns = [[0.0, 0.5, 1.0]], ["a"], ["x", " ", "\n"]
    plain = terminal(rows, labels, columns, color=False)
    assert "\x1b[" not in plain and plain.splitlines()[-1] == "a  ▒█" and "x·⏎" in plain
    assert "\x1b[48;5;" in terminal(rows, labels, columns, color=True)
    ET.fromstring(svg(rows, ["<"], ["&", '"', "]"], title="a < b"))  # escaped


def test_a_multi_byte_character_labels_its_first_column_only():
    from decodeloop.formats.lab import CharTokenizer

    tokenizer = CharTokenizer()
    ids = tokenizer.encode_markup("<|tool|>65°F")
    assert load_peek()._characters(tokenizer, ids) == ["§", "6", "5", "°", "⁺", "F"]
