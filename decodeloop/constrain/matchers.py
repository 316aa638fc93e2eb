"""Matchers: what the call constraint (processor.py) asks of a grammar engine, and the one for byte vocabularies.

The matcher interface. The processor talks to its matcher through these
calls, so another grammar engine can stand in:

    matcher = matcher_for(tokenizer)      # ByteMatcher or TokenMatcher, below
    problems = matcher.start(tools, syntax)   # compile; what cannot be enforced (a syntax, or the
                                          # TemplateSyntax of one of a family format's templates)
    state = matcher.begin()               # a call just opened (its opener is written)
    state = matcher.advance(state, token) # the model wrote `token`; None: not in the grammar
    state = matcher.advance_bytes(state, data)   # the same for bytes written with the opener
    matcher.done(state)                   # the call's closer has been written
    matcher.finish(state)                 # tokens that end the call soon (to close it within the token cap)
    logits, override = matcher.apply(logits, state)   # every token the grammar forbids at -inf
    matcher.closer_id                     # the special token that closes a call, or None (set to None in
                                          # the copy that serves an alternate shape, before its `start`)

`apply` never changes the logits it is given and keeps their kind (list, numpy
array, torch tensor on its device) and dtype; `override` is (the model's most
likely token, how many tokens were allowed) when the mask ruled that token
out, else None: what the trace shows. Two matchers share the one byte-level
grammar (grammar/bytes.py), so the guarantee tested for one holds for both:

- `ByteMatcher` serves vocabularies in which every token is one byte (the
  lab's `CharTokenizer`): its masks are memoized per state, so a constrained
  token costs a few dict lookups, one pass over the logits for their maximum,
  and a loop over the allowed (or the forbidden) tokens, whichever are fewer.
- `TokenMatcher` (token_matcher.py, numpy) serves BPE vocabularies: a
  token is allowed when its bytes walk through the grammar, and a state's
  mask is a vectorized walk of every token at once, memoized per state; a
  constrained token then costs one masked_fill and an argmax on the logits'
  own device (bench/constrain.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import inf
from typing import Any, Protocol

from decodeloop.constrain.grammar.bytes import CLOSER_TOKEN, ByteGrammar, ByteState
from decodeloop.constrain.grammar.compile import CallGrammar, call_grammar
from decodeloop.constrain.grammar.template import template_grammar
from decodeloop.formats.calls.form import CallForm, Template
from decodeloop.sampling.common import array_kind

# Why the call grammar cannot write a format's calls, by format: what `--constrain` is refused with. Each of
# these formats writes its arguments in a value syntax of its own, not as one JSON object.
_RAW_TEXT = (
    "whose value is raw text typed by the tool's schema (a string ends only where its closing tag is written), "
    "and the call grammar writes arguments as one JSON object"
)
UNEXPRESSED = {
    "qwen3-xml": f"qwen3-xml writes each argument in a <parameter=KEY> tag, {_RAW_TEXT}",
    "glm45": f"glm45 writes each argument as an <arg_key>/<arg_value> pair, {_RAW_TEXT}",
    "glm47": f"glm47 writes each argument as an <arg_key>/<arg_value> pair, {_RAW_TEXT}",
    "deepseek-v32": f"deepseek-v32 writes each argument in a DSML parameter tag, {_RAW_TEXT}",
    "deepseek-v4": f"deepseek-v4 writes each argument in a DSML parameter tag, {_RAW_TEXT}",
    "deepseek-v41": f"deepseek-v41 writes each argument in a DSML parameter tag, {_RAW_TEXT}",
    "kimi-k3": f"kimi-k3 writes each argument in an XTML argument element, {_RAW_TEXT}",
    "gemma4": (
        'gemma4 writes arguments in its own object notation (bare keys, strings between <|"|> tokens), '
        "and the call grammar writes arguments as one JSON object"
    ),
    "llama4-pythonic": (
        "llama4-pythonic writes calls as a Python list of calls whose arguments are Python literals "
        "(quoted strings, True, None), and the call grammar writes arguments as one JSON object"
    ),
}


class Matcher(Protocol):
    """What the processor needs from a grammar engine (see the module docstring)."""

    closer_id: int | None
    grammar: ByteGrammar | None  # None until `start`, and after `release`
    tools: list[str]  # the tools a call may name (those whose schemas compiled)

    def start(self, tools: Sequence, syntax: Any) -> list[str]: ...

    def release(self) -> None: ...  # free the grammar's tables now

    def begin(self) -> Any: ...

    def advance(self, state: Any, token: int) -> Any: ...

    def advance_bytes(self, state: Any, data: bytes) -> Any: ...

    def done(self, state: Any) -> bool: ...

    def finish(self, state: Any) -> list[int] | None: ...

    def apply(self, logits: Any, state: Any) -> tuple[Any, tuple[int, int] | None]: ...


def unsupported(tokenizer, syntax=None, closer_id: int | None = None) -> str | None:
    """Why calls of this bundle cannot be constrained, or None."""
    if syntax is not None and getattr(syntax, "grammar", None) is None:
        return UNEXPRESSED.get(syntax.name, f"the call grammar does not express calls in the {syntax.name} format yet")
    if syntax is not None and isinstance(syntax.grammar, CallForm):
        closer_id = None  # a family's template maps the special tokens it writes itself
    vocab = getattr(tokenizer, "vocab_size", None)
    if not isinstance(vocab, int) or vocab <= 0 or not callable(getattr(tokenizer, "token_bytes", None)):
        return "constrained calls need a tokenizer that gives every token's bytes (token_bytes)"
    if is_byte_vocabulary(tokenizer):
        if closer_id is not None:
            return "the call closer is a special token, which a byte vocabulary does not have"
    else:
        try:
            import numpy  # noqa: F401  (TokenMatcher's masks are numpy arrays)
        except ImportError:
            return "constrained calls on a multi-byte vocabulary need numpy: pip install -e '.[hf]'"
    return None


def is_byte_vocabulary(tokenizer) -> bool:
    """Every token is at most one byte and every byte value has a token: ByteMatcher's vocabulary."""
    vocab = tokenizer.vocab_size
    if vocab > 4096:
        return False
    seen = set()
    for token in range(vocab):
        data = tokenizer.token_bytes(token)
        if len(data) > 1:
            return False
        seen.update(data)
    return len(seen) == 256


class TemplateSyntax:
    """One template of a family format (formats/calls/form.py), as a matcher's `start` takes a syntax."""

    closer = ""

    def __init__(self, name: str, template: Template) -> None:
        self.name = name
        self.grammar = template


def compile_call(tools: Sequence, syntax: Any, specials: Mapping[str, int], closer_id: int | None) -> CallGrammar:
    """The call grammar of `syntax` (a syntax, or a TemplateSyntax) for `tools`: `specials` are the vocabulary's
    special tokens (text -> id) a template may write, `closer_id` the JSON syntax's closer as one token."""
    grammar = syntax.grammar
    if isinstance(grammar, Template):
        return template_grammar(tools, grammar, specials)
    if closer_id is not None and grammar == "json":
        compiled = call_grammar(tools, grammar, (CLOSER_TOKEN,))
        compiled.tokens = {CLOSER_TOKEN: closer_id}
        return compiled
    return call_grammar(tools, grammar, syntax.closer)


def matcher_for(tokenizer, closer_id: int | None = None) -> Matcher:
    """ByteMatcher for a byte vocabulary, else TokenMatcher (numpy), which also takes a closer that is a token."""
    if is_byte_vocabulary(tokenizer):
        return ByteMatcher(tokenizer)
    from decodeloop.constrain.token_matcher import TokenMatcher

    return TokenMatcher(tokenizer, closer_id=closer_id)


class GrammarMatcher:
    """What every matcher keeps of its grammar: the grammar itself (None until `start` and after `release`)
    and the tools a call may name."""

    def __init__(self) -> None:
        self.grammar: ByteGrammar | None = None
        self.tools: list[str] = []

    def _started(self) -> ByteGrammar:
        """The grammar of the states this matcher is handed: `start` makes it, `release` drops it."""
        if self.grammar is None:
            raise RuntimeError("the matcher has no grammar: start it first")
        return self.grammar

    def begin(self) -> ByteState | None:
        return self.grammar.start if self.grammar is not None and self.tools else None


class ByteMatcher(GrammarMatcher):
    """The Matcher for vocabularies whose tokens are single bytes (special tokens are never allowed in a call)."""

    def __init__(self, tokenizer) -> None:
        super().__init__()
        self.vocab = tokenizer.vocab_size
        self.byte_of = [-1] * self.vocab
        self.id_of = [-1] * 256
        for token in range(self.vocab):
            data = tokenizer.token_bytes(token)
            if len(data) == 1:
                self.byte_of[token] = data[0]
                self.id_of[data[0]] = token
        self.closer_id: int | None = None  # a byte vocabulary has no special token to close a call with
        self._negative = [-inf] * self.vocab

    def start(self, tools: Sequence, syntax: Any) -> list[str]:
        compiled = compile_call(tools, syntax, {}, None)  # a template's tokens are written as their text
        self.grammar = ByteGrammar(compiled.machine)
        self.tools = compiled.tools
        return compiled.problems

    def release(self) -> None:
        """Free the grammar's states now rather than when the cycle collector finds them."""
        if self.grammar is not None:
            self.grammar.release()
        self.grammar, self.tools = None, []

    def advance_bytes(self, state: ByteState, data: bytes) -> ByteState | None:
        for byte in data:
            after = self._started().advance(state, byte)
            if after is None:
                return None
            state = after
        return state

    def advance(self, state: ByteState, token: int) -> ByteState | None:
        byte = self.byte_of[token] if 0 <= token < self.vocab else -1
        found = state.next.get(byte)
        if found is None and byte >= 0:
            found = self._started().advance(state, byte)
        return found

    def done(self, state: ByteState) -> bool:
        return state.final

    def finish(self, state: ByteState) -> list[int] | None:
        """The tokens of a short way to end the call from `state` (see ByteGrammar.finish), or None."""
        plan = self._started().finish(state)
        if plan is None or any(not 0 <= b < 256 or self.id_of[b] < 0 for b in plan):
            return None
        return [self.id_of[b] for b in plan]

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
        runs: list[list[int]] = []  # [lo, hi)
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
            bias = plan[3] + [-inf] * (len(logits) - self.vocab)  # ids past the tokenizer's are never allowed
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
