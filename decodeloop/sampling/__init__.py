"""Turning next-token logits into one token id: the sampler and what it draws from.

`sampler.py` owns `Sampler` and the module functions the trace uses (`softmax`,
`top_tokens`, `explain`). The public names are re-exported here, so
`from decodeloop.sampling import Sampler` is the import to use from outside.
"""

from decodeloop.sampling.sampler import Sampler, array_kind, explain, softmax, top_tokens

__all__ = ["Sampler", "array_kind", "explain", "softmax", "top_tokens"]
