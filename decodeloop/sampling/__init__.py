"""Turning next-token logits into one token id: the sampler, its three paths, and the logits processors.

- `sampler.py`: `Sampler` (settings, seeded generators, the draw) and its pure-Python
  path for a list of logits; `softmax`, `top_tokens` and `explain` for the trace.
- `numpy_backend.py`: the kernels for a 1-D numpy array.
- `torch_backend.py`: the kernels for a 1-D torch tensor, on its device.
- `common.py`: what the three share (`array_kind`, the top-p cut's slack).

The backends are named `numpy_backend` and `torch_backend`, not `numpy` and
`torch`: a submodule is bound as an attribute of its package, so
`decodeloop.sampling.numpy` would read as the library itself, and a module of
this folder run as a script puts the folder first on `sys.path`, where
`import numpy` would find the package's own file instead of numpy.

Importing this package imports only the standard library: numpy and torch come in
inside the backends' functions, when an array of theirs arrives, so the lab's
list path runs under `python3 -S`. The public names are re-exported here:
`from decodeloop.sampling import Sampler` is the import to use from outside.
"""

from decodeloop.sampling.common import array_kind
from decodeloop.sampling.sampler import Sampler, explain, softmax, top_tokens

__all__ = ["Sampler", "array_kind", "explain", "softmax", "top_tokens"]
