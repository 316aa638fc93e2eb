"""Constrained tool calls: a logits processor that keeps every call the model writes valid.

    --constrain off        the default: no processor at all, nothing costs anything
    --constrain calls      free text until the call opener is written (the stop
                           check's `in_call` turns true); inside the call every
                           token that cannot continue a valid call is masked;
                           after the closer, free again
    --constrain required   as `calls`, and the turn's first tokens are forced to
                           be the opener (tool_choice=required); once that call
                           is written nothing more is forced, so a model cannot
                           loop on forced calls (calls it opens itself later in
                           the turn are still constrained)

A valid call is one the harness would send: it parses in the active syntax
(compact `[call NAME key=value]` or JSON `<tool_call>{...}</tool_call>`), names
a tool that is registered right now, and has arguments that pass
`schema.validate_arguments` (with the compact syntax's conversions) and
`schema.check_value` (anyOf, oneOf, allOf) against its inputSchema. The grammar
(decodeloop/grammar/) admits a subset of those calls; what it cannot express
is reported at start-up as `notice` events (source "constrain"), never left
unconstrained silently.

The matcher interface. The processor talks to its matcher through four calls,
so another engine can stand in for the lab's own (llguidance or a token-trie
matcher for BPE vocabularies, later):

    matcher = ByteMatcher(tokenizer)      # or another implementation of `Matcher`
    problems = matcher.start(tools, syntax)   # compile; what cannot be enforced
    state = matcher.begin()               # a call just opened (its opener is written)
    state = matcher.advance(state, token) # the model wrote `token`; None: not in the grammar
    matcher.done(state)                   # the call's closer has been written
    logits, override = matcher.apply(logits, state)   # every token the grammar forbids at -inf

`apply` never changes the logits it is given and keeps their kind (list, numpy
array, torch tensor on its device) and dtype; `override` is (the model's most
likely token, how many tokens were allowed) when the mask ruled that token
out, else None: what the trace shows. `ByteMatcher` serves vocabularies in
which every token is one byte (the lab's `CharTokenizer`): its masks come from
the byte-level grammar (grammar/bytes.py), memoized per state, so a
constrained token costs a few dict lookups, one pass over the logits for their
maximum, and a loop over the allowed (or the forbidden) tokens, whichever are
fewer (bench/constrain.py).
A BPE vocabulary needs a matcher that maps the grammar's byte states to token
masks (each token's bytes walked through the grammar, or a compiled engine
such as llguidance); until one exists, `--constrain` refuses such models.

Standard library only; numpy and torch are touched only when their logits arrive.
"""

from __future__ import annotations

from math import inf
from operator import add
from typing import Any, Callable, Protocol, Sequence

from decodeloop.events import Notice
from decodeloop.grammar.bytes import ByteGrammar, ByteState
from decodeloop.grammar.compile import call_grammar
from decodeloop.processors import force
from decodeloop.sampling import array_kind

MODES = ("off", "calls", "required")
SOURCE = "constrain"


class Matcher(Protocol):
    """What the processor needs from a grammar engine (see the module docstring)."""

    def start(self, tools: Sequence, syntax: Any) -> list[str]: ...

    def begin(self) -> Any: ...

    def advance(self, state: Any, token: int) -> Any: ...

    def done(self, state: Any) -> bool: ...

    def apply(self, logits: Any, state: Any) -> tuple[Any, tuple[int, int] | None]: ...


def unsupported(tokenizer, syntax=None, closer_id: int | None = None) -> str | None:
    """Why calls of this bundle cannot be constrained yet, or None."""
    if closer_id is not None:
        return "the call closer is a special token; the grammar knows text closers only"
    vocab = getattr(tokenizer, "vocab_size", None)
    if not isinstance(vocab, int) or vocab > 4096:
        return ("constrained calls need a byte-level vocabulary (the lab models'); this model's tokens span "
                "several bytes, which needs a BPE grammar engine such as llguidance (not implemented yet)")
    seen = set()
    for token in range(vocab):
        data = tokenizer.token_bytes(token)
        if len(data) > 1:
            return "constrained calls need a vocabulary in which every token is one byte"
        seen.update(data)
    if len(seen) < 256:
        return "constrained calls need a token for every byte value"
    return None


class ByteMatcher:
    """The Matcher for vocabularies whose tokens are single bytes (special tokens are never allowed in a call)."""

    def __init__(self, tokenizer) -> None:
        self.vocab = tokenizer.vocab_size
        self.byte_of = [-1] * self.vocab
        self.id_of = [-1] * 256
        for token in range(self.vocab):
            data = tokenizer.token_bytes(token)
            if len(data) == 1:
                self.byte_of[token] = data[0]
                self.id_of[data[0]] = token
        self.grammar: ByteGrammar | None = None
        self.tools: list[str] = []
        self._negative = [-inf] * self.vocab

    def start(self, tools: Sequence, syntax: Any) -> list[str]:
        compiled = call_grammar(tools, syntax.name, getattr(syntax, "closer", "]"))
        self.grammar = ByteGrammar(compiled.machine)
        self.tools = compiled.tools
        return compiled.problems

    def begin(self) -> ByteState | None:
        return self.grammar.start if self.grammar is not None and self.tools else None

    def advance(self, state: ByteState, token: int) -> ByteState | None:
        byte = self.byte_of[token] if 0 <= token < self.vocab else -1
        found = state.next.get(byte)
        if found is None and byte >= 0:
            found = self.grammar.advance(state, byte)
        return found

    def done(self, state: ByteState) -> bool:
        return state.final

    def allowed_ids(self, state: ByteState) -> list[int]:
        return sorted(self.id_of[b] for b in state.allowed if self.id_of[b] >= 0)

    def _plan(self, state: ByteState) -> tuple:
        """(sparse, runs, allowed count, bias) for list logits, made once per state.

        `runs` are [lo, hi) spans of consecutive token ids. Sparse: the allowed
        tokens, copied into a row of -inf; else the forbidden ones, set to -inf
        in a copy of the logits. Either way a token costs slice copies over the
        shorter side (a few spans: bytes come in ranges), never a Python loop over
        the vocabulary.
        """
        allowed = self.allowed_ids(state)
        bias = [-inf] * self.vocab
        for token in allowed:
            bias[token] = 0.0
        sparse = len(allowed) <= self.vocab // 2
        ids = allowed if sparse else [t for t in range(self.vocab) if bias[t] != 0.0]
        runs = []
        for token in ids:
            if runs and runs[-1][1] == token:
                runs[-1][1] = token + 1
            else:
                runs.append([token, token + 1])
        plan = (sparse, [tuple(r) for r in runs], len(allowed), bias)
        state.masks["plan"] = plan
        return plan

    def apply(self, logits, state: ByteState):
        """(new logits with every forbidden token at -inf, override): override is (the model's most likely token,
        tokens allowed) when the mask ruled that token out, else None. The logits given are never changed."""
        plan = state.masks.get("plan") or self._plan(state)
        if type(logits) is list and len(logits) == self.vocab:
            sparse, runs, count, bias = plan
            top = max(logits)
            if sparse:
                out = self._negative[:]
                best = -inf
                for lo, hi in runs:
                    out[lo:hi] = part = logits[lo:hi]
                    m = max(part)
                    if m > best:
                        best = m
                ruled_out = best < top
            else:
                out = logits[:]
                negative = self._negative
                ruled_out = False
                for lo, hi in runs:
                    if not ruled_out and max(logits[lo:hi]) >= top:
                        ruled_out = True
                    out[lo:hi] = negative[lo:hi]
            if ruled_out:
                wanted = logits.index(top)
                if bias[wanted] != 0.0:
                    return out, (wanted, count)
            return out, None
        return self._apply_array(logits, state, plan)

    def _apply_array(self, logits, state: ByteState, plan: tuple):
        kind = array_kind(logits)
        if kind == "list":
            return self.apply(list(logits), state)
        key = (kind, logits.dtype, getattr(logits, "device", None), len(logits))
        array = state.masks.get(key)
        if array is None:
            bias = plan[3] + [-inf] * (len(logits) - self.vocab)   # ids past the tokenizer's are never allowed
            if kind == "numpy":
                import numpy as np

                array = np.asarray(bias, dtype=logits.dtype if logits.dtype.kind == "f" else np.float64)
            else:
                import torch

                dtype = logits.dtype if logits.is_floating_point() else torch.float32
                array = torch.tensor(bias, dtype=dtype, device=logits.device)
            state.masks[key] = array
        wanted = int(logits.argmax())
        override = (wanted, plan[2]) if wanted >= self.vocab or plan[3][wanted] != 0.0 else None
        return logits + array, override


class CallConstraint:
    """The logits processor of `--constrain calls|required` (see the module docstring).

    `override` is set on every call: (the token the model's logits put first,
    how many tokens were allowed) when the mask ruled that token out, else None.
    The engine copies it onto its step, the loop onto the token event.
    """

    def __init__(self, bundle, tools: Callable[[], Sequence], *, mode: str = "calls",
                 emit: Callable | None = None, version: Callable[[], int] | None = None,
                 matcher: Matcher | None = None) -> None:
        if mode not in ("calls", "required"):
            raise ValueError(f"constrain must be one of {', '.join(MODES)}, got {mode!r}")
        reason = unsupported(bundle.tokenizer, bundle.syntax, bundle.closer_id) if matcher is None else None
        if reason is not None:
            raise ValueError(reason)
        self.mode = mode
        self.syntax = bundle.syntax
        self.matcher = matcher if matcher is not None else ByteMatcher(bundle.tokenizer)
        self._tools = tools
        self._version = version or (lambda: 0)
        self._emit = emit if emit is not None else (lambda event: None)
        self._compiled_version: int | None = None
        if bundle.opener_id is not None:
            self.opener_ids = [bundle.opener_id]
        else:
            self.opener_ids = list(bundle.tokenizer.encode(bundle.syntax.opener))
        self.override: tuple[int, int] | None = None
        self._state = None           # the matcher's state inside a call
        self._closed = False         # the call closed (or cannot be followed): free until in_call turns false
        self._seen = 0               # context length when the matcher last advanced
        self._forcing = False        # required: still forcing the turn's opener
        self.compile()

    def __repr__(self) -> str:
        return f"CallConstraint({self.mode!r})"

    def compile(self) -> None:
        """Compile the grammar for the tools registered now; report what it cannot enforce."""
        self._compiled_version = self._version()
        tools = list(self._tools())
        problems = self.matcher.start(tools, self.syntax)
        for problem in problems:
            self._emit(Notice(SOURCE, problem))
        callable_tools = getattr(self.matcher, "tools", [t.name for t in tools])
        if callable_tools:
            self._emit(Notice(SOURCE, f"{self.mode}: calls in the {self.syntax.name} syntax are constrained to "
                                      f"{', '.join(callable_tools)} and their inputSchema"))
        else:
            self._emit(Notice(SOURCE, "no tool can be called validly, so calls are not constrained"
                                      + (" and none is required" if self.mode == "required" else "")))

    def __call__(self, logits, state):
        self.override = None
        if not state.in_call:
            if self._state is not None or self._closed:
                self._state, self._closed = None, False
            if self.mode == "required":
                return self._require(logits, state)
            return logits
        if self._closed:
            return logits
        self._forcing = False
        context = state.context
        n = len(context)
        matcher = self.matcher
        current = self._state
        if current is None:
            if self._version() != self._compiled_version:
                self.compile()           # tools changed: calls name the tools registered now
            current = matcher.begin()
        elif n == self._seen + 1:
            current = matcher.advance(current, context[-1])
        else:
            current = None               # something other than one sampled token was appended
        if current is None or matcher.done(current):
            # the call is over, or it was written outside the grammar (another rule forced a token)
            self._state, self._closed = None, True
            return logits
        self._state, self._seen = current, n
        logits, self.override = matcher.apply(logits, current)
        return logits

    def _require(self, logits, state):
        """Force the opener as the turn's first tokens."""
        step = state.step
        if step == 0:
            self._forcing = bool(getattr(self.matcher, "tools", True))
        if not self._forcing:
            return logits
        ids = self.opener_ids
        if step >= len(ids) or state.context[state.generated:state.generated + step] != ids[:step]:
            self._forcing = False
            return logits
        token = ids[step]
        wanted = _argmax(logits)
        if wanted != token:
            self.override = (wanted, 1)
        return force(logits, token)


def _argmax(logits) -> int:
    if type(logits) is list:
        return logits.index(max(logits))
    if array_kind(logits) == "list":
        logits = list(logits)
        return logits.index(max(logits))
    return int(logits.argmax())
