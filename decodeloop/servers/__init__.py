"""Bundled MCP servers, standard library only, each runnable as `python3 -m decodeloop.servers.NAME`.

base.py is the small framework they share (tool registry, MCP dispatch, stdio loop).
"""

import sys


def command(name: str) -> list[str]:
    """The stdio command that runs bundled server NAME with this same Python (and its -S, if any)."""
    flags = ["-S"] if sys.flags.no_site else []
    return [sys.executable, *flags, "-m", f"decodeloop.servers.{name}"]
