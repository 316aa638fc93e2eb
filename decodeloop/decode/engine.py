"""Engines: what produces the next token. The loop consumes their steps.

A local engine owns a model that the harness runs itself: per step it runs the
forward pass (the model's cache serves the common prefix), lets the logits
processors rewrite the logits (masks, forced tokens, biases; never in place),
and samples. An engine that samples for itself (a server streaming tokens)
implements the same `Engine` protocol: `step` returns the next token it
produced for the context, and `stop` tells it that the harness stopped this
segment (a call closed, a stop string, the cap), so it can close its stream.
The loop (decode/loop.py) never knows which kind it drives: stop checks, events and
call handling stay in the loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from decodeloop.events import Emit
from decodeloop.sampling.processors import apply


@dataclass(slots=True)
class Step:
    """One token from an engine, and what it cost."""

    token: int
    computed: int  # positions computed for this token (a prefill counts them all)
    cached: int  # positions served from a cache
    logits: Any = None  # local engines: the logits the sampler drew from
    prob: float | None = None  # engines that sample for themselves may report these instead
    top: list[tuple[int, float]] | None = None
    masked: Any = None  # (token the model put first, tokens allowed) when a grammar masked it
    forced: bool = False  # appended without a forward: the grammar left no choice (jump-forward)


class Engine(Protocol):
    """`step` returns the next token for `context`; the Step is read before the next call (it may be reused).

    An engine subclasses this protocol to take the defaults of its optional members:
    `uses_state` (False when nothing it runs reads the loop's state: inside a call or
    not, tokens so far; the loop then skips updating it), `probs_at` (the fields token
    events carry to say which distribution `explain` reports: {"temperature": T} and
    top_k, top_p, min_p when they cut it) and `bind` (the harness's event sink, for an
    engine with events of its own).
    """

    uses_state: bool = True
    probs_at: Mapping[str, Any] = MappingProxyType({})

    def step(self, context: list[int], state: Any) -> Step: ...

    def explain(self, step: Step, n: int) -> tuple[float | None, list[tuple[int, float]]]: ...

    def stop(self) -> None: ...

    def bind(self, emit: Emit) -> None:
        """Take the harness's event sink; an engine without events of its own ignores it."""
        return None


@runtime_checkable
class Constraining(Protocol):
    """A logits processor that constrains calls (constrain.CallConstraint): the engine reports `override`,
    the (first choice, tokens allowed) of a step whose mask changed the model's choice, and asks `forced`
    for a token the grammar leaves no choice about."""

    override: tuple[int, int] | None

    def forced(self, state: Any) -> int | None: ...


class LocalEngine(Engine):
    """forward -> processors -> sample, over a model the harness runs itself."""

    def __init__(self, model, sampler, processors: Sequence = ()) -> None:
        self.model = model
        self.sampler = sampler
        self.processors = tuple(processors)
        self._step = Step(0, 0, 0)  # reused: a step is read before the next one is asked for
        self.probs_at = sampler.settings()  # what `explain` reports the probabilities of
        self._forward, self._sample, self._explain = model.forward, sampler.sample, sampler.explain
        self.uses_state = bool(self.processors)  # only processors read the loop's state
        # the call constraint says when its mask changed the model's choice, and names a token the grammar
        # leaves no choice about: appended without a forward, so the next forward computes the run of them
        # at once (jump-forward)
        self._report = next((p for p in self.processors if isinstance(p, Constraining)), None)
        self._jump = self._report.forced if self._report is not None else None
        self._chosen: int | None = None  # the next token, chosen by the caller (`choose`)

    def choose(self, token: int) -> None:
        """The next step appends `token` instead of a sampled one (a fork, taken by hand): the forward and the
        processors still run, so its event reports the distribution the token was taken from."""
        if not 0 <= token < self.model.vocab_size:
            raise ValueError(f"token {token} is not in the vocabulary (0..{self.model.vocab_size - 1})")
        self._chosen = token

    def step(self, context: list[int], state: Any) -> Step:
        step = self._step
        if self._jump is not None and self._chosen is None:
            token = self._jump(state)
            if token is not None:  # forced: no forward, no sampling
                step.token, step.computed, step.cached, step.logits = token, 0, len(context), None
                step.masked, step.forced = None, True
                return step
        logits = self._forward(context)  # 1. forward: only positions not in the cache
        logits = apply(self.processors, logits, state)  #    logits processors: masks, forced tokens
        chosen = self._chosen
        if chosen is None:
            step.token = self._sample(logits)  # 2. sample the next token
        else:  # the caller's choice, once
            step.token, self._chosen = chosen, None
        step.forced = False
        step.computed = computed = self.model.last_computed
        step.cached = len(context) - computed
        step.logits = logits
        if self._report is not None:
            step.masked = self._report.override
        return step

    def explain(self, step: Step, n: int) -> tuple[float | None, list[tuple[int, float]]]:
        """The token's probability and the n most probable tokens in the distribution it was drawn from
        (the sampler's temperature, top-k, top-p and min-p over the processed logits; at T = 0, the
        model's distribution at temperature 1): for the trace."""
        if step.forced:
            return 1.0, [(step.token, 1.0)]
        return self._explain(step.logits, step.token, n)

    def stop(self) -> None:
        pass  # nothing is in flight between steps
