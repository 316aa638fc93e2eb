"""Logits processors: the hook between forward and sample.

    logits = model.forward(context)                 # 1. forward
    logits = apply(processors, logits, state)       #    processors, in order
    token = sampler.sample(logits)                  # 2. sample

A processor is any callable `(logits, state) -> logits`. The contract:

- It never changes the array it was given: a model may hand out its cached
  logits (PrefixCachedModel returns the same object again when nothing new was
  computed), and the trace reads them after sampling. To change anything it
  returns a new list / numpy array / torch tensor, of the same kind and dtype,
  on the same device. Returning the input itself means "no change".
- It works on all three kinds of logits the sampler takes: a Python list, a
  1-D numpy array, a 1-D torch tensor (changed on its own device, never copied
  to a Python list).
- What it may look at is `ProcessorState`: the context so far, where this turn's
  tokens begin, whether the model is inside a tool call (and which span, in which
  shape), and the step.

Like the sampler, this module imports only the standard library; numpy and
torch are imported inside, when an array of theirs arrives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import inf, isfinite, isnan
from typing import Any

from decodeloop.sampling.common import array_kind

Logits = Any  # a list of floats, a 1-D numpy array or a 1-D torch tensor
Processor = Callable[[Logits, "ProcessorState"], Logits]


@dataclass(slots=True)
class ProcessorState:
    """What a processor may know about the turn, for the logits of the next token."""

    context: list[int]  # every token id so far: prompt, this turn's tokens, injected tool messages
    generated: int = 0  # index in context where this turn's tokens begin (context[generated:])
    in_call: bool = False  # the model is inside a tool call (the stop check's verdict for the last token)
    step: int = 0  # tokens generated this turn so far: 0 for the turn's first token
    alternate: Any = None  # the call shape (call_shapes.Shape) whose span the model is writing, if any
    call: Any = None  # inside a call span: (which span of the turn, from 1; its CallShape), else None

    @property
    def turn_tokens(self) -> list[int]:
        """The tokens of this turn so far, context[generated:]."""
        return self.context[self.generated :]


def apply(processors: Sequence[Processor], logits: Logits, state: ProcessorState) -> Logits:
    """Run the processors in order; with none, the logits come back untouched (the same object)."""
    for processor in processors:
        logits = processor(logits, state)
    return logits


class RepetitionPenalty:
    """Hugging Face's repetition penalty over the tokens of this turn (context[generated:]).

    For each distinct token id already generated this turn, a positive logit is
    divided by the penalty and a negative one multiplied by it (so a penalty > 1
    always makes the token less likely); 1.0 is off. Computed in the logits' own
    dtype, by gather and scatter on arrays: the same numbers as
    transformers.RepetitionPenaltyLogitsProcessor given the turn's tokens.
    """

    def __init__(self, penalty: float) -> None:
        if not (isfinite(penalty) and penalty > 0.0):
            raise ValueError(f"penalty must be a finite number > 0 (1 = off), got {penalty!r}")
        self.penalty = float(penalty)

    def __repr__(self) -> str:
        return f"RepetitionPenalty({self.penalty})"

    def __call__(self, logits: Logits, state: ProcessorState) -> Logits:
        if self.penalty == 1.0:
            return logits
        vocab = len(logits)
        # ids past the logits (an embedding table larger than the output layer) cannot be sampled: skipped, as HF does
        ids = sorted(i for i in set(state.context[state.generated :]) if 0 <= i < vocab)
        if not ids:
            return logits
        penalty = self.penalty
        kind = array_kind(logits)
        if kind == "numpy":
            import numpy as np

            index = np.asarray(ids, dtype=np.intp)
            out = logits.copy()
            score = out[index]
            out[index] = np.where(score < 0, score * penalty, score / penalty)
            return out
        if kind == "torch":
            import torch

            index = torch.tensor(ids, dtype=torch.long, device=logits.device)
            out = logits.clone()
            score = out.index_select(0, index)
            return out.index_copy_(0, index, torch.where(score < 0, score * penalty, score / penalty))
        out = list(logits)
        for i in ids:  # the turn's distinct tokens, never the vocabulary
            score = out[i]
            out[i] = score * penalty if score < 0 else score / penalty
        return out


class LogitBias:
    """Add a fixed bias to some token ids' logits ({id: bias}; -inf bans a token)."""

    def __init__(self, bias: Mapping[int, float]) -> None:
        for token, value in bias.items():
            if isinstance(token, bool) or not isinstance(token, int) or token < 0:
                raise ValueError(f"token ids must be ints >= 0, got {token!r}")
            if isnan(value) or value == inf:
                raise ValueError(f"bias for token {token} must be a number or -inf, got {value!r}")
        self.bias = {token: float(value) for token, value in sorted(bias.items())}
        self._arrays: dict = {}  # (kind, dtype, device) -> (ids, biases), made once each

    def __repr__(self) -> str:
        return f"LogitBias({self.bias!r})"

    def __call__(self, logits: Logits, state: ProcessorState) -> Logits:
        if not self.bias:
            return logits
        kind = array_kind(logits)
        if kind == "numpy":
            index, values = self._as_arrays(kind, logits.dtype, None)
            out = logits.copy()
            out[index] += values
            return out
        if kind == "torch":
            index, values = self._as_arrays(kind, logits.dtype, logits.device)
            return logits.clone().index_add_(0, index, values)
        out = list(logits)
        for token, value in self.bias.items():
            out[token] += value
        return out

    def _as_arrays(self, kind: str, dtype, device):
        key = (kind, dtype, device)
        arrays = self._arrays.get(key)
        if arrays is None:
            if kind == "numpy":
                import numpy as np

                arrays = (np.asarray(list(self.bias), dtype=np.intp), np.asarray(list(self.bias.values()), dtype=dtype))
            else:
                import torch

                arrays = (
                    torch.tensor(list(self.bias), dtype=torch.long, device=device),
                    torch.tensor(list(self.bias.values()), dtype=dtype, device=device),
                )
            self._arrays[key] = arrays
        return arrays


def force(logits: Logits, token: int) -> Logits:
    """New logits in which only `token` can be chosen: every other logit -inf, token's 0.

    Greedy and every sampling setting then pick `token`, and the trace shows it
    with probability 1.
    """
    vocab = len(logits)
    if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < vocab:
        raise ValueError(f"token to force must be an id in [0, {vocab}), got {token!r}")
    kind = array_kind(logits)
    if kind == "numpy":
        import numpy as np

        dtype = logits.dtype if logits.dtype.kind == "f" else np.float64
        out = np.full(logits.shape, -np.inf, dtype=dtype)
    elif kind == "torch":
        import torch

        dtype = logits.dtype if logits.is_floating_point() else torch.float32
        out = torch.full(logits.shape, -inf, dtype=dtype, device=logits.device)
    else:
        out = [-inf] * vocab
    out[token] = 0.0
    return out


class ForcedTokens:
    """Force tokens[i] as the turn's i-th token (state.step == i); after the last, change nothing."""

    def __init__(self, tokens: Iterable[int]) -> None:
        self.tokens = list(tokens)

    def __repr__(self) -> str:
        return f"ForcedTokens({self.tokens!r})"

    def __call__(self, logits: Logits, state: ProcessorState) -> Logits:
        if state.step < len(self.tokens):
            return force(logits, self.tokens[state.step])
        return logits
