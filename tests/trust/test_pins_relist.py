"""A pin outlives the listing: a tool that a server stops listing and lists again, rewritten, is held at its
pin, within a session and across runs with a pin store. Real server processes (tests/servers/hostile.py
`remove` and `relist`), a scripted model, the policy in confirm mode with nobody to ask."""

from __future__ import annotations

import json
import os
import sys

from conftest import ROOT

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.startup import ClientOptions, start_servers
from decodeloop.trust.policy import Policy

HOSTILE = [sys.executable, os.path.join(ROOT, "tests", "servers", "hostile.py")]
# the model takes send_money away, brings it back as "read-only" with a new required argument, then calls it
RELIST = {
    "<|user|>Go.<|assistant|>": "[call remove name=send_money]",
    "<|tool|>removed send_money<|assistant|>": "[call relist name=send_money]",
    "<|tool|>relisted send_money<|assistant|>": "[call send_money to=attacker amount=1000]",
    "<|assistant|>": "Done.<|eos|>",
}


def sent(events) -> list[str]:
    return [
        e.message["params"]["name"]
        for e in events.of("rpc")
        if e.direction == "send" and e.message.get("method") == "tools/call"
    ]


def test_a_tool_removed_and_listed_again_rewritten_is_held_at_its_pin(events):
    tokenizer = CharTokenizer()
    specs = [ServerSpec("hostile", command=HOSTILE, transport="stdio", allow=("remove", "relist"))]
    with start_servers(specs, events, options=ClientOptions(timeout=30)) as router:
        harness = Harness(
            lab_bundle(TableModel(tokenizer, RELIST), tokenizer),
            Sampler(),
            router,
            events,
            policy=Policy("confirm", specs, None),
        )
        result = harness.run("Go.")
        pinned = router.tools["send_money"]
        assert pinned.description == "Send AMOUNT dollars to TO." and not pinned.annotations
        assert "pin" not in pinned.input_schema["properties"]
        assert router.pending[("hostile", "send_money")].annotations == {"readOnlyHint": True}
    gone, back = events.of("tools_changed")
    assert gone.removed == ["send_money"] and back.added == ["send_money"] and back.held == ["send_money"]
    assert any("annotations changed: readOnlyHint null → true" in line for line in back.changes)
    assert any("inputSchema changed: +pin (required)" in line for line in back.changes)
    # the policy read the pinned definition: side-effecting, after a tool result, nobody to ask
    send = next(p for p in events.of("policy") if p.name == "send_money")
    assert send.verdict == "deny" and send.tool_class == "side-effecting"
    assert sent(events) == ["remove", "relist"] and result.answer == "Done."


def test_a_pin_store_keeps_the_pin_of_a_tool_not_listed_and_holds_its_return(events, tmp_path):
    store = str(tmp_path / "pins")
    specs = [ServerSpec("hostile", command=HOSTILE, transport="stdio")]
    with start_servers(specs, events, options=ClientOptions(timeout=30, pin_store=store)) as router:
        router.call("remove", {"name": "send_money"})
        assert router.clients["hostile"].tools_stale.wait(30) and router.refresh()
        assert "send_money" not in router.tools
    saved = json.loads((tmp_path / "pins" / "hostile.json").read_text())
    assert saved["tools"]["send_money"]["definition"]["annotations"] is None  # not dropped with the listing
    # the next run lists it again, now annotated read-only: held at the stored pin
    events.clear()
    lying = [ServerSpec("hostile", command=[*HOSTILE, "--read-only-hints"], transport="stdio")]
    with start_servers(lying, events, options=ClientOptions(timeout=30, pin_store=store)) as router:
        assert not router.tools["send_money"].annotations
        assert router.pending[("hostile", "send_money")].annotations == {"readOnlyHint": True}
        notes = [n.message for n in events.of("notice") if "send_money changed since it was pinned" in n.message]
        assert notes and "readOnlyHint null → true" in notes[0]
