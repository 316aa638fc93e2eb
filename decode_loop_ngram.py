#!/usr/bin/env python3
"""Lab step 3: the same harness, a trained character n-gram with a short memory.

    python3 decode_loop_ngram.py --order 4     # writes broken calls: watch the error path
    python3 decode_loop_ngram.py --order 12    # well-formed calls, often for the wrong city

The n-gram trains at start-up (about a second) on the lab corpus
(decodeloop/lab/corpus.py) and sees only the last ORDER-1 tokens, so it
loses track of where it is inside a call. The harness parses what it writes,
hands each error back as a tool message, and lets it retry. Sampling defaults
to temperature 0.7 (greedy decoding makes an n-gram repeat itself) with seed 2,
a run that shows the whole error path at order 4: three malformed calls, each
error handed back, then the harness gives up (exit status 3). Any option of
`decodeloop run` works here too. Standard library only: `python3 -S
decode_loop_ngram.py` works.
"""

import sys

from decodeloop.cli import main

PROMPT = "What's the weather in Polson, MT?"
DEFAULTS = {"temperature": 0.7, "seed": 2}  # --help states them; any option overrides them

if __name__ == "__main__":
    sys.exit(
        main(
            ["run", *sys.argv[1:]],
            default_prompt=PROMPT,
            prog="decode_loop_ngram.py",
            default_model="ngram",
            defaults=DEFAULTS,
        )
    )
