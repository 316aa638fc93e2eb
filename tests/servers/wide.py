"""An MCP server with a tool surface too large for any prompt: many tools, each within the per-tool caps.

Run as `python3 tests/servers/wide.py [--tools N] [--description-chars N] [--name NAME]`: it offers N tools
(`tool0000`, `tool0001`, ...), each described in that many characters of varied words, each taking one
string argument. With `--grow-to N` its `grow` tool adds tools until it has N and announces
notifications/tools/list_changed, so a surface can become too large mid-session.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from decodeloop.servers.base import ToolServer

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
]
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def description(n: int, chars: int) -> str:
    """`chars` characters of words that vary with n (so no tokenizer folds them into a few tokens)."""
    words, size, i = [], 0, n
    while size < chars:
        word = WORDS[i % len(WORDS)] + str(i % 97)
        words.append(word)
        size += len(word) + 1
        i = i * 31 + 7
    return " ".join(words)[:chars]


def add_tools(server: ToolServer, start: int, stop: int, chars: int) -> None:
    for n in range(start, stop):
        server.tool(f"tool{n:04d}", description(n, chars), TEXT)(lambda text: text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=3_000, help="how many tools to offer")
    parser.add_argument("--description-chars", type=int, default=3_900, help="each tool's description length")
    parser.add_argument("--name", default="wide", help="the server's name")
    parser.add_argument("--grow-to", type=int, default=0, help="`grow` adds tools until there are this many")
    args = parser.parse_args()
    server = ToolServer(args.name, "0.0.1")
    add_tools(server, 0, args.tools, args.description_chars)
    if args.grow_to:

        @server.tool("grow", f"Add tools until there are {args.grow_to}.", {"type": "object", "properties": {}})
        def grow() -> str:
            add_tools(server, len(server.tools) - 1, args.grow_to, args.description_chars)
            os.write(1, (json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) + "\n").encode())
            return f"{len(server.tools)} tools now"

    return server.serve_stdio()


if __name__ == "__main__":
    sys.exit(main())
