"""When, at which commit and on which machine a benchmark ran: one line for its table, one dict for its JSON.

    2026-12-03 · commit 8929017 (+ uncommitted changes) · Linux x86_64, 2 CPUs, Python 3.11.2

Standard library only. The commit is read with git in this repository; without git (or outside a checkout)
it says "commit unknown".
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def record() -> dict:
    """{"date", "commit", "dirty", "machine"}: commit and dirty are None where git cannot tell."""
    commit = _git("rev-parse", "--short", "HEAD")
    status = _git("status", "--porcelain") if commit else None
    return {
        "date": datetime.date.today().isoformat(),
        "commit": commit.strip() if commit else None,
        "dirty": bool(status.strip()) if status is not None else None,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
    }


def header(r: dict | None = None) -> str:
    """The record (a new one by default) as one line, printed above a benchmark's table."""
    r = r or record()
    commit = f"commit {r['commit']}" if r["commit"] else "commit unknown"
    if r["dirty"]:
        commit += " (+ uncommitted changes)"
    return f"{r['date']} · {commit} · {r['machine']}"


if __name__ == "__main__":
    print(header())
