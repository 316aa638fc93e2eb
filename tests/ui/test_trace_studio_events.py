"""The terminal trace's lines for the studio's own events: a rewind (a fork, or a branch taken back) and a
person's edit, its text shown inert and cut as a JSON-RPC message is."""

from __future__ import annotations

import io

from decodeloop.events import Edited, Rewind
from decodeloop.ui.trace import RPC_PREVIEW, TraceView


def lines(*events) -> list[str]:
    out = io.StringIO()
    trace = TraceView(out, color=False)
    for event in events:
        trace(event)
    return out.getvalue().splitlines()


def test_a_rewind_says_where_and_how_much_was_cut():
    assert lines(Rewind(position=1_204, cut=1_530)) == [
        "⟲ rewound to position 1204: 1,530 token(s) cut from the context"
    ]


def test_an_edit_is_the_person_s_with_hostile_text_spelled_and_long_text_cut():
    hostile = "Sunny.\x1b[2J\u202e" + "x" * 5_000
    [line] = lines(Edited(what="result", tool="get_weather", before="Polson, MT: 33°F", after=hostile))
    assert line.startswith('✎ yours (result) get_weather: "Polson, MT: 33°F" → "Sunny.\\u001b[2J')
    assert "\x1b" not in line and "\u202e" not in line  # spelled, never raw
    assert line.endswith("… (5,018 chars)") and len(line) < 2 * RPC_PREVIEW
    [edit] = lines(Edited(what="arguments", tool="get_weather", before={"city": "Polson"}, after={"city": "Boise"}))
    assert edit == '✎ yours (arguments) get_weather: {"city": "Polson"} → {"city": "Boise"}'
