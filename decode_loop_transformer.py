#!/usr/bin/env python3
"""Lab step: the same harness, a transformer trained from scratch in numpy, with a KV cache.

    python3 decode_loop_transformer.py                      # a held-out city: Burlington, VT
    python3 decode_loop_transformer.py "Convert 12.5 km to mi."
    python3 decode_loop_transformer.py --step

A 4-layer transformer (decodeloop/lab/transformer.py) whose weights were
trained by `decodeloop train transformer` on the lab corpus, which never
mentions Burlington or any city in Vermont: the model copies the city and
state from the question into its call, and the temperature and conditions
from the tool result into its answer. The trace shows the KV cache at work:
the prompt is computed once, each token after it is one position, and after
the call only the injected tool message is prefilled. Any option of
`decodeloop run` works here too. Needs numpy: pip install -e '.[lab]' from
the clone (or pip install numpy).
"""

import sys

from decodeloop.cli import main

PROMPT = "What's the weather in Burlington, VT?"

if __name__ == "__main__":
    sys.exit(
        main(
            ["run", *sys.argv[1:]],
            default_prompt=PROMPT,
            prog="decode_loop_transformer.py",
            default_model="transformer",
        )
    )
