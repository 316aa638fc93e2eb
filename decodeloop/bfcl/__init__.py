"""The BFCL suite: the Berkeley Function Calling Leaderboard's single-turn Python categories, run through the harness.

Standard library only. The data and the checker come from the `bfcl-eval`
wheel, downloaded alone (never installed) into the cache (docs/bfcl.md):

    wheel.py     where the wheel is (`pip download --no-deps` into $DECODELOOP_CACHE/bfcl), its sha256, reading it
    entries.py   a category's entries and possible answers, checked as they are read
    tools.py     BFCL's function documents as MCP tools (its schema dialect to JSON Schema)
    checker.py   BFCL's own ast_checker, imported from the wheel without the package's dependencies

Each entry as one turn through `Harness`, against its own server process and scored from the events, is
decodeloop/lab/bfcl_suite.py, beside the lab's eval: it stands above the harness, this package below it.

`decodeloop eval --suite bfcl:CATEGORY[,CATEGORY...]` is the command line's way in (cli/commands.py).
"""

from __future__ import annotations

from decodeloop.bfcl.entries import CATEGORIES, Entry, load_entries, parse_categories
from decodeloop.bfcl.wheel import BfclError, Wheel, locate_wheel

__all__ = ["CATEGORIES", "BfclError", "Entry", "Wheel", "load_entries", "locate_wheel", "parse_categories"]
