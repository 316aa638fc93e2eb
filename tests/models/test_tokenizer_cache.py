"""The tokenizer and facts kept in the conversion cache (models/tokenizer_cache.py): written whole, read back
only as written, anything else read past."""

from __future__ import annotations

import json

import pytest

from decodeloop.models.tokenizer_cache import FACTS, VERSION, read, write

GOOD = {
    "version": VERSION,
    "name": "m",
    "chat_template": "{{ messages }}",
    "eos_id": 2,
    "stops": [2, 7],
    "vocab_size": 100,
    "variables": {"eos_token": "</s>"},
    "added": ["<tool_call>", "</s>"],
}


PREPARED = '{"model": {"type": "BPE"}}'


@pytest.fixture
def folder(tmp_path):
    return tmp_path


def test_facts_are_read_back_as_written(folder):
    write(str(folder), GOOD, PREPARED)
    assert read(str(folder)) == (GOOD, PREPARED)
    assert [p.name for p in folder.iterdir() if p.name.startswith(".facts-")] == []  # no temporary file left


@pytest.mark.parametrize(
    "change",
    [
        {"version": VERSION + 1},
        {"eos_id": "2"},
        {"stops": [2, "7"]},
        {"stops": None},
        {"vocab_size": 1.5},
        {"variables": {"eos_token": 2}},
        {"added": "<tool_call>"},
        {"chat_template": None},
        {"name": 3},
    ],
)
def test_facts_that_do_not_read_as_written_are_read_past(folder, change):
    (folder / FACTS).write_text(json.dumps({**GOOD, **change, "prepared": PREPARED}))
    assert read(str(folder)) is None


def test_no_prepared_tokenizer_or_no_json_at_all_is_nothing_kept(folder):
    (folder / FACTS).write_text("{not json")
    assert read(str(folder)) is None
    (folder / FACTS).write_text(json.dumps(GOOD))
    assert read(str(folder)) is None
    (folder / FACTS).write_text(json.dumps({**GOOD, "prepared": {"model": {}}}))
    assert read(str(folder)) is None
    (folder / FACTS).write_text(json.dumps({**GOOD, "prepared": PREPARED}))
    assert read(str(folder)) == (GOOD, PREPARED)


def test_a_folder_that_cannot_be_written_is_left_alone(tmp_path):
    write(str(tmp_path / "missing"), GOOD, PREPARED)  # no error: the cache is only speed
    assert not (tmp_path / "missing").exists()
