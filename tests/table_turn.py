"""A turn of the lab's table model through `Harness`, against real MCP server processes: what the tests of the
loop, dispatch and the router drive."""

from __future__ import annotations

from conftest import WEATHER

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy

QUESTION = "What's the weather in Polson, MT?"


def run_turn(events, table=None, servers=(WEATHER,), question=QUESTION, **config):
    tokenizer = CharTokenizer()
    model = TableModel(tokenizer, table)
    with start_stdio_servers(
        [list(s) for s in servers], events, options=ClientOptions(timeout=config.pop("timeout", 10))
    ) as router:
        harness = Harness(
            lab_bundle(model, tokenizer), Sampler(), router, events, config=TurnConfig(**config), policy=Policy.off()
        )
        return harness.run(question)
