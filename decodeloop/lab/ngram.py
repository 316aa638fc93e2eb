"""The character n-gram model: the last order-1 tokens predict the next, with backoff.

Probabilities are Witten-Bell interpolated from the longest context down to a
uniform distribution over the vocabulary, so no token ever has probability
zero and every step can be sampled. The model's memory is exactly order-1
tokens: with a small order it loses track of where it is inside a call, which
is what makes it write malformed and off-target calls. Its "cache" holds no
state (the context is the state), but it keeps the contract every model keeps:
positions served from the cache are not recomputed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from decodeloop.decode.model import PrefixCachedModel
from decodeloop.lab.train.ngram import NgramCounts, as_text, count, training_segments

DEFAULT_ORDER = 8
DEFAULT_EPISODES = 1500
DEFAULT_SEED = 0


class NgramModel(PrefixCachedModel):
    name = "ngram"

    def __init__(self, counts: NgramCounts, vocab_size: int) -> None:
        super().__init__()
        self.counts = counts
        self.order = counts.order
        self.vocab_size = vocab_size

    @classmethod
    def trained(
        cls, tokenizer, order: int = DEFAULT_ORDER, episodes: int = DEFAULT_EPISODES, seed: int = DEFAULT_SEED
    ) -> NgramModel:
        """Train on the lab corpus (seconds; nothing is saved)."""
        from decodeloop.lab import corpus

        system = corpus.system_prompt()
        transcripts = [e.markup(system) for e in corpus.episodes(seed, episodes, "train")]
        return cls(count(training_segments(system, transcripts, order), order), tokenizer.vocab_size)

    def _truncate(self, n: int) -> None:
        pass  # no per-position state: the context itself is the state

    def _compute(self, start: int) -> Sequence[float]:
        return self.logits_after(self.cached_tokens[-(self.order - 1) :] if self.order > 1 else [])

    def logits_after(self, context: Sequence[int]) -> list[float]:
        """log P(next | context), Witten-Bell interpolated over every context length."""
        text = as_text(list(context))
        uniform = 1.0 / self.vocab_size
        dense = uniform  # P(w) = dense + sparse.get(w, 0)
        sparse: dict[int, float] = {}
        for k, table in enumerate(self.counts.followers):
            if k > len(text):
                break
            seen = table.get(text[len(text) - k :] if k else "")
            if seen is None:
                break  # a longer context cannot have been seen either
            total, nexts = seen
            distinct = len(nexts)
            keep = distinct / (total + distinct)  # mass left for the shorter context's estimate
            dense *= keep
            for w in sparse:
                sparse[w] *= keep
            for w, n in nexts.items():
                sparse[w] = sparse.get(w, 0.0) + n / (total + distinct)
        base = math.log(dense)
        logits = [base] * self.vocab_size
        for w, p in sparse.items():
            logits[w] = math.log(dense + p)
        return logits
