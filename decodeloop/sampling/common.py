"""What the three paths of the sampler share: its parameters, telling the kinds of logits apart, and the top-p
cut's slack.

The kind comes from `type(logits).__module__` alone, so telling a numpy array or a
torch tensor from a list never imports numpy or torch. The processors and the call
grammar's processor use the same test to work on each kind in its own way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# A set whose mass is this close (relatively) to top_p counts as reaching it, so
# float rounding in the cumulative sum never adds a token at an exact boundary.
# One value for the list, numpy and torch paths, so they keep the same nucleus.
TOP_P_SLACK = 1e-12


def array_kind(logits: Any) -> str:
    """'numpy', 'torch' or 'list' (any other sequence), from the type's module alone."""
    module = type(logits).__module__
    if module.startswith("numpy"):
        return "numpy"
    if module.startswith("torch"):
        return "torch"
    return "list"


@dataclass(frozen=True)
class SamplerParams:
    """What shapes the distribution a token is drawn from, fixed when the sampler is made (checked there):
    temperature (0: greedy), top-k (0: off), top-p (1: off), min-p (0: off). The array paths read these and
    return what they drew; none of them touches the sampler."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def inv_t(self) -> float:
        """1 / temperature (0 when greedy): logits are scaled by multiplying."""
        return 0.0 if self.greedy else 1.0 / self.temperature

    def unfiltered(self, vocab: int) -> bool:
        """No filter cuts a vocabulary of this size: the draw is from softmax(logits / T) whole."""
        return (self.top_k == 0 or self.top_k >= vocab) and self.top_p >= 1.0 and self.min_p <= 0.0
