#!/usr/bin/env python3
"""CanIToolCall's table for docs/call-shapes.md: each family's fixtures judged by the suite's own checks.

Every fixture of `canitoolcall==0.1.1` (the test extra) is read whole and as each of the suite's default
streams, through the decode loop's own stop check (tests/formats/cit_replay.py, the same replay as the
test tier), and given the status the suite's runner gives a case: pass, soft pass (a difference in
whitespace only) or fail. Prints the table, then every fixture that did not pass strictly, with why.

    .venv/bin/python scripts/canitoolcall_table.py
"""

from __future__ import annotations

import collections
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "formats"))


def main() -> int:
    from canitoolcall import checks
    from canitoolcall.fixtures import load_fixtures
    from canitoolcall.pytest_plugin import family_for
    from cit_replay import format_name, observe

    fixtures = load_fixtures(None)
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    others = []
    for fixture in fixtures:
        if format_name(fixture) is None:
            counts[fixture.family]["no format"] += 1
            continue
        rows = checks.run_checks(fixture, family_for(fixture), observe(fixture))
        status = checks.case_status(rows).value
        counts[fixture.family][status] += 1
        if status != "pass":
            worst = [r for r in rows if r.status.value == status]
            others.append((fixture.id, status, worst[0].check, (worst[0].detail or "")[:160]))
    print("| family | fixtures | pass | soft pass | fail |")
    print("|---|---:|---:|---:|---:|")
    total: collections.Counter = collections.Counter()
    for family in sorted(counts):
        c = counts[family]
        n = sum(c.values())
        total.update(c)
        print(f"| {family} | {n} | {c['pass']} | {c['soft_pass']} | {c['fail'] + c['error'] + c['no format']} |")
    n = sum(total.values())
    fails = total["fail"] + total["error"] + total["no format"]
    print(f"| **all** | **{n}** | **{total['pass']}** | **{total['soft_pass']}** | **{fails}** |")
    print()
    for fixture_id, status, check, detail in others:
        print(f"- `{fixture_id}`: {status} ({check}: {detail})")
    return 0 if fails == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
