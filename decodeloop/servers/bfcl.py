"""The BFCL server: one BFCL entry's functions as MCP tools, over stdio.

BFCL's functions have no implementation; the benchmark scores the calls a
model writes, not what they return. This server lists an entry's functions
as tools (their schemas converted to JSON Schema by decodeloop/bfcl/tools.py)
and answers every call with a short neutral JSON text that echoes it:

    {"status": "ok", "function": "math.factorial", "arguments": {"number": 5}}

so a harness talking to it gets a real MCP round trip and a real result.

    python3 -m decodeloop.servers.bfcl TOOLS.json      a JSON list of MCP tools (name, description, inputSchema)
    python3 -m decodeloop.servers.bfcl --entry ID [--wheel PATH]
                                                       the functions of BFCL entry ID (e.g. simple_python_1),
                                                       read from the bfcl-eval wheel (decodeloop/bfcl/wheel.py)

`decodeloop eval --suite bfcl:...` starts one per entry with a tools file.
Standard library only, like every bundled server.
"""

from __future__ import annotations

import argparse
import json
import sys

import decodeloop
from decodeloop.servers.base import ToolServer


def build_server(tools: list[dict]) -> ToolServer:
    """A server whose tools are `tools` (tools/list entries), each answering with the call echoed."""
    server = ToolServer(
        "bfcl",
        decodeloop.__version__,
        instructions='BFCL functions: every call is answered with {"status": "ok"} and the call.',
    )
    for tool in tools:
        server.tool(tool["name"], tool.get("description", ""), tool["inputSchema"])(_echo(tool["name"]))
    return server


def _echo(name: str):
    # the name is bound here, not as a keyword of the tool: a BFCL argument may be called anything
    def answer(**arguments) -> str:
        return json.dumps({"status": "ok", "function": name, "arguments": arguments}, ensure_ascii=False)

    return answer


def read_tools(path: str) -> list[dict]:
    """The tools in a JSON file; a file that is not a list of {name, inputSchema} is a SystemExit with why."""
    try:
        with open(path, encoding="utf-8") as f:
            tools = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"bfcl server: cannot read tools from {path}: {e}") from None
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("inputSchema"), dict) for t in tools
    ):
        raise SystemExit(f"bfcl server: {path} is not a JSON list of tools with a name and an inputSchema")
    return tools


def entry_tools(entry_id: str, wheel: str | None = None) -> list[dict]:
    """The converted functions of BFCL entry `entry_id`, from the wheel (downloaded to the cache if missing)."""
    from decodeloop.bfcl.entries import CATEGORIES, load_entries
    from decodeloop.bfcl.tools import mcp_tools
    from decodeloop.bfcl.wheel import BfclError, Wheel, locate_wheel

    category, _, number = entry_id.rpartition("_")
    if category not in CATEGORIES or not number.isdigit():
        raise SystemExit(
            f"bfcl server: {entry_id!r} is not an entry id of {', '.join(CATEGORIES)} (e.g. simple_python_1)"
        )
    try:
        with Wheel(locate_wheel(wheel)) as opened:
            entries = load_entries(opened, category, int(number) + 1)
            found = [e for e in entries if e.id == entry_id]
            if not found:
                raise SystemExit(f"bfcl server: no entry {entry_id} in {category}")
            return mcp_tools(found[0].functions)
    except BfclError as e:
        raise SystemExit(f"bfcl server: {e}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One BFCL entry's functions as MCP tools (stdio).")
    parser.add_argument("tools", nargs="?", help="a JSON file: a list of MCP tools (name, description, inputSchema)")
    parser.add_argument("--entry", help="a BFCL entry id (e.g. simple_python_1): serve its functions")
    parser.add_argument("--wheel", help="the bfcl-eval wheel (default: $DECODELOOP_BFCL_WHEEL, else the cache's)")
    args = parser.parse_args(argv)
    if (args.tools is None) == (args.entry is None):
        parser.error("give a tools file or --entry ID (one of them)")
    tools = read_tools(args.tools) if args.tools else entry_tools(args.entry, args.wheel)
    try:
        server = build_server(tools)
    except ValueError as e:  # the same name twice
        raise SystemExit(f"bfcl server: {e}") from None
    return server.serve_stdio()


if __name__ == "__main__":
    sys.exit(main())
