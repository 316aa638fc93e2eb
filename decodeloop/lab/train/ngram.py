"""Counting character n-grams over the lab corpus: the whole of the n-gram model's training.

Tokens are counted as one-character strings (chr of the token id), so an
n-gram is a short str: slicing and hashing run at C speed and a Counter does the
tallying. The system prompt is identical in every transcript, so its n-grams are
counted once; each transcript then contributes from just before its user turn.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from decodeloop.formats.lab import USER, CharTokenizer


@dataclass
class NgramCounts:
    """For each context length k < order: context -> (total count, {next token: count})."""

    order: int
    followers: list[dict[str, tuple[int, dict[int, int]]]]


def as_text(ids: list[int]) -> str:
    return "".join(map(chr, ids))


def training_segments(system: str, transcripts: list[str], order: int) -> list[str]:
    """The token strings to count: the first transcript whole, the rest from their user turn on.

    Each later segment starts order-1 tokens before "<|user|>", so the user turn's
    first tokens still see the end of the system prompt as their context.
    """
    tokenizer = CharTokenizer()
    segments = []
    for i, markup in enumerate(transcripts):
        text = as_text(tokenizer.encode_markup(markup))
        if i:
            start = text.index(chr(tokenizer.special(USER)))
            text = text[max(0, start - (order - 1)) :]
        segments.append(text)
    return segments


def count(segments: list[str], order: int) -> NgramCounts:
    if order < 1:
        raise ValueError("the order of an n-gram model is at least 1")
    # Every position with a full order-1 context is one event; count the full-length
    # grams once, and a shorter gram's count is the sum over the full grams it ends.
    full: Counter[str] = Counter()
    for text in segments:
        full.update(text[i - order + 1 : i + 1] for i in range(order - 1, len(text)))
    followers: list[dict[str, tuple[int, dict[int, int]]]] = []
    for k in range(order):  # context length k predicts the token after it
        grams: Counter[str] = Counter()
        for gram, n in full.items():
            grams[gram[order - 1 - k :]] += n
        table: dict[str, tuple[int, dict[int, int]]] = {}
        for gram, n in grams.items():
            context = gram[:-1]
            entry = table.get(context)
            if entry is None:
                table[context] = (n, {ord(gram[-1]): n})
            else:
                entry[1][ord(gram[-1])] = n
                table[context] = (entry[0] + n, entry[1])
        followers.append(table)
    return NgramCounts(order, followers)
