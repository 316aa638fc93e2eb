#!/usr/bin/env python3
"""Lab steps 1-2: the decode loop, token by token, with a real MCP round trip.

    python3 decode_loop.py            # the full trace of one turn
    python3 decode_loop.py --step     # one frame at a time (Enter, t: next call, s: next stop, c, q)

A hand-written table model answers "What's the weather in Polson, MT?": it
writes a call, the harness sends it to the bundled weather server over stdio,
injects the result and resumes. Any option of `decodeloop run` works here too
(see --help). Standard library only: `python3 -S decode_loop.py` works.
"""

import sys

from decodeloop.cli import main

PROMPT = "What's the weather in Polson, MT?"

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]], default_prompt=PROMPT, prog="decode_loop.py"))
