"""What the three paths of the sampler share: telling the kinds of logits apart, and the top-p cut's slack.

The kind comes from `type(logits).__module__` alone, so telling a numpy array or a
torch tensor from a list never imports numpy or torch. The processors and the call
grammar's processor use the same test to work on each kind in its own way.
"""

from __future__ import annotations

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
