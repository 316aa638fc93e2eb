"""Legend lines for the trace: what a learner cannot guess from a token line alone.

- Byte tokens. The lab tokenizer has a token per byte, and byte-level tokenizers
  split characters too, so `°` is sampled as `'\\xc2'` then `'\\xb0'`. The first
  time a token holds part of a character, `ByteLegend` waits for the character
  to complete (at most four bytes) and returns one line naming the tokens, the
  character and its bytes.
- The n-gram's cache. It keeps no state per position: `ngram_cache_note` says
  what its `fwd +N (M cached)` counts.
- The probabilities. `probs_note` says which distribution a token's `p` and
  alternatives are of: the one it was drawn from (temperature, top-k, top-p,
  min-p), or at T = 0 the model's own at temperature 1.
"""

from __future__ import annotations

import codecs
import re

PARTIAL_BYTE = re.compile(r"\\x[89a-fA-F][0-9a-fA-F]")  # a label's escape of a byte that is not ASCII
MAX_BYTES = 4  # UTF-8 writes a character in at most 4 bytes


def _label_bytes(label: str) -> bytes:
    """The bytes a trace label stands for ('\\xc2' -> b'\\xc2', 'a' -> b'a')."""
    try:
        return codecs.escape_decode(label.encode("utf-8"))[0]
    except ValueError:  # a lone backslash at the end: the label is its own text
        return label.encode("utf-8")


class ByteLegend:
    """Call with each token's label; returns a legend line once: when the first character split across
    tokens is complete (or turns out broken), else None."""

    def __init__(self) -> None:
        self.done = False
        self.labels: list[str] = []
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def __call__(self, label: str) -> str | None:
        if self.done or (not self.labels and not PARTIAL_BYTE.search(label)):
            return None
        self.labels.append(label)
        text = self.decoder.decode(_label_bytes(label))
        wide = [c for c in text if ord(c) > 127]
        if not wide:
            if len(self.labels) < MAX_BYTES:
                return None  # the character is not complete yet
            wide = ["\ufffd"]
        self.done = True
        char = wide[0]
        if char == "\ufffd" and len(self.labels) > 1 and not PARTIAL_BYTE.search(label):
            self.labels.pop()  # a token that is no byte (text, '<|eos|>') ended the character: not part of it
        tokens = " ".join(f"'{t}'" for t in self.labels)
        if char == "\ufffd":
            return (
                f"↳ {tokens}: bytes, not characters: UTF-8 writes a character outside ASCII as 2 to 4 "
                f"bytes, and these do not make a whole one, so the text shows \ufffd (U+FFFD) in its place"
            )
        raw = char.encode("utf-8")
        return (
            f"↳ {tokens}: bytes, not characters: {char} is {len(raw)} bytes in UTF-8 ({raw.hex(' ')}), "
            f"split across these tokens; the text shows {char} once its last byte is in"
        )


def ngram_cache_note(order: int) -> str:
    """What `fwd +N (M cached)` means for the n-gram, which has no KV cache."""
    memory = f"the last {order - 1} token{'s' if order != 2 else ''}" if order > 1 else "no token at all"
    return (
        f"order {order}: no KV cache, no state per position; every forward reads {memory} and nothing "
        f"else, so in `fwd +N (M cached)` N counts the positions new since the last forward and M the "
        f"common prefix it did not re-read, not work saved"
    )


def probs_note(
    temperature: float, top_k: int | None = None, top_p: float | None = None, min_p: float | None = None
) -> str:
    """What a token line's probabilities are: the distribution the token was drawn from, or at T = 0
    (greedy: a certain draw) the model's distribution at temperature 1."""
    if temperature == 0:
        return (
            "p: the model's probability of each token, softmax(logits) at temperature 1; sampling is "
            "greedy (T = 0): the most likely token is taken"
        )
    cuts = [
        f"{name} {value:g}"
        for name, value in (("top-k", top_k), ("top-p", top_p), ("min-p", min_p))
        if value is not None
    ]
    text = f"p: each token's probability in the distribution it was drawn from, softmax(logits / {temperature:g})"
    if cuts:
        text += f" cut to {', '.join(cuts)} and renormalised over the tokens kept (a token cut has p 0)"
    return text
