"""Constrained tool calls: a logits processor that keeps every call the model writes valid.

    --constrain off        the default: no processor at all, nothing costs anything
    --constrain calls      free text until the call opener is written (the stop
                           check's `in_call` turns true); inside the call every
                           token that cannot continue a valid call is masked;
                           after the closer, free again
    (lazy triggers)        with --call-shapes lenient, the grammar also starts at
                           the opener of an alternate shape (formats/calls/shapes.py) the
                           stop check is holding (a ```json or ``` block, <tools>,
                           bare JSON) once the model wrote {"name": "NAME" for a tool
                           that exists (a call to one that does not is left alone,
                           not bent into one that does). The call then follows the grammar and
                           the shape is closed as it opened (the fence's ```); an
                           array of calls and <function=NAME> are not followed
    --constrain required   as `calls`, and the turn's first tokens are forced to
                           be the opener (tool_choice=required); once that call
                           is written nothing more is forced, so a model cannot
                           loop on forced calls (calls it opens itself later in
                           the turn are still constrained)

A valid call is one the harness would send: it parses in the active syntax
(compact `[call NAME key=value]`, JSON `<tool_call>{...}</tool_call>`, or a
family's own format whose arguments are one JSON object: Mistral's, DeepSeek's,
Kimi K2's, Llama 3's, Harmony's, each as its `grammar` declares it,
formats/calls/form.py), names
a tool that is registered right now, and has arguments that pass
`schema.validate_arguments` (with the compact syntax's conversions) and
`schema.check_value` (anyOf, oneOf, allOf) against its inputSchema. The grammar
(decodeloop/constrain/grammar/) admits a subset of those calls; what it cannot express
is reported at start-up as `notice` events (source "constrain"), never left
unconstrained silently.

The matcher interface is in matchers.py: `ByteMatcher` for one-byte vocabularies,
token_matcher.py's `TokenMatcher` (numpy) for BPE ones.

A call opener written as text can end inside a token (`>{"` after
`<tool_call`): the bytes after the opener are fed to the grammar when the call
begins. A closer that is one special token (Qwen's `</tool_call>`) is a
character no text can spell in the grammar (bytes.CLOSER_TOKEN), so only that
token closes a call.

A family's format (its syntax's `grammar` is a CallForm) has a template per
shape it constrains: which one a call follows is the shape the stop check opened
its span with (ProcessorState.call), so each call of a section (DeepSeek's
<｜tool▁call▁begin｜>, one after another) is followed from its own opener. Each
special token the template writes is a pseudo code point of the grammar, which
the matcher maps to the token's id. A template may begin within its span
(Harmony's header: once `to=functions.` is written, before `<|message|>`; the
span is free until then) and may go on after a call (Llama 3.2's `;` begins
another call in the same span). `required` writes the form's `required` text
and tokens first: the canonical opener, for Harmony the header up to the tool's
name.

Standard library only; numpy and torch are touched only when their logits arrive.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from math import inf
from typing import Any

from decodeloop.constrain.matchers import Matcher, TemplateSyntax, matcher_for, unsupported
from decodeloop.errors import Misconfigured
from decodeloop.events import Notice
from decodeloop.formats.calls.form import CallForm, Template, Token
from decodeloop.sampling.common import array_kind
from decodeloop.sampling.processors import force

MODES = ("off", "calls", "required")
# tokens before the cap at which an open call starts to look for its shortest end (the search costs up to a
# few hundred ms, once per call, so it is not run while the cap is far); a call whose shortest end is longer
# than this can still be cut by the cap
FINISH_HORIZON = 64
FINISH_SLACK = 8
FINISH_CHECKED = 64  # near the cap, the allowed tokens of a state are checked one by one up to this many
SOURCE = "constrain"


class Unconstrainable(Misconfigured, ValueError):
    """Calls of this model cannot be constrained (matchers.unsupported says why): the model cannot be used as
    asked, so the CLI refuses to start with the reason, as for any model that cannot be used."""


class CallConstraint:
    """The logits processor of `--constrain calls|required` (see the module docstring).

    `override` is set on every call: (the token the model's logits put first,
    how many tokens were allowed) when the mask ruled that token out, else None.
    The engine copies it onto its step, the loop onto the token event.
    """

    def __init__(
        self,
        bundle,
        tools: Callable[[], Sequence],
        *,
        mode: str = "calls",
        emit: Callable | None = None,
        version: Callable[[], int] | None = None,
        matcher: Matcher | None = None,
        max_tokens: int | None = None,
    ) -> None:
        if mode not in ("calls", "required"):
            raise ValueError(f"constrain must be one of {', '.join(MODES)}, got {mode!r}")
        reason = unsupported(bundle.tokenizer, bundle.syntax, bundle.closer_id) if matcher is None else None
        if reason is not None:
            raise Unconstrainable(reason)
        self.mode = mode
        self.max_tokens = max_tokens  # the turn's cap: a call still open near it is closed the short way
        self.syntax = bundle.syntax
        grammar = getattr(bundle.syntax, "grammar", None)
        self.form: CallForm | None = grammar if isinstance(grammar, CallForm) else None
        closer_id = bundle.closer_id if self.form is None else None  # a template maps its tokens itself
        self.matcher = matcher if matcher is not None else matcher_for(bundle.tokenizer, closer_id)
        self._tokenizer = bundle.tokenizer
        # the text of every special token, for what a call span holds (Harmony's header, an opener's tail)
        self._special_text = {i: t.encode("utf-8") for t, i in getattr(bundle.tokenizer, "special_tokens", {}).items()}
        self._tools = tools
        self._version = version or (lambda: 0)
        self._emit = emit if emit is not None else (lambda event: None)
        self._compiled_version: int | None = None
        if self.form is not None:
            self.opener_ids = self._required_ids(self.form)
            self._opener_bytes = None
        elif bundle.opener_id is not None:
            self.opener_ids = [bundle.opener_id]
            self._opener_bytes = None  # a special token: the call begins right after it
        else:
            self.opener_ids = list(bundle.tokenizer.encode(bundle.syntax.opener))
            self._opener_bytes = bundle.syntax.opener.encode("utf-8")
        self._template_matchers: dict[str, Matcher] = {}  # a family's other templates, by their shape's opener
        self._template: Template | None = None  # the template the current span follows (a family's format)
        self._follows: Any = None  # ... and its matcher
        self._span: int | None = None  # which span of the turn that is (ProcessorState.call), -1: not said
        self._header: bytes | None = None  # the span's text while its template waits to begin (`after`)
        self._again: bytes | None = None  # after a call, what the span holds since (while `again` may follow)
        self.override: tuple[int, int] | None = None
        self._shape_matchers: dict[str, Matcher] = {}  # by the shape's closer: the lazy triggers' grammars
        self._shape_version: int | None = None
        self._run = None  # what the current call follows: None (the syntax's own) or a Shape
        self._state = None  # the matcher's state inside a call
        self._closed = False  # the call closed (or cannot be followed): free until in_call turns false
        self._seen = 0  # context length when the matcher last advanced
        self._forcing = False  # required: still forcing the turn's opener
        self._no_end = False  # the call's shortest end was searched for near the cap and not found
        self._plan: list[int] = []  # the tokens of the text the grammar forces next (forced_text)
        self.jump_forward = True  # a local engine appends planned tokens without a forward each
        self._followed_at, self._followed_context, self._followed = None, None, None
        self.compile()

    def __repr__(self) -> str:
        return f"CallConstraint({self.mode!r})"

    def rewound(self) -> None:
        """The context was cut back (a turn rewound): follow the call, if one is open there, afresh from its text
        in the context on the next token, as at a call's first token."""
        self._template, self._follows, self._span, self._header, self._again = None, None, None, None, None
        self.override = None
        self._run, self._state, self._closed, self._seen = None, None, False, 0
        self._forcing, self._no_end, self._plan = False, False, []
        self._followed_at, self._followed_context, self._followed = None, None, None

    def compile(self) -> None:
        """Compile the grammar for the tools registered now; report what it cannot enforce."""
        self._compiled_version = self._version()
        tools = list(self._tools())
        self._release_templates()
        problems = self.matcher.start(tools, self._main_syntax())
        for problem in problems:
            self._emit(Notice(source=SOURCE, message=problem))
        callable_tools = self.matcher.tools
        if callable_tools:
            self._emit(
                Notice(
                    source=SOURCE,
                    message=f"{self.mode}: calls in the {self.syntax.name} syntax are constrained to "
                    f"{', '.join(callable_tools)} and their inputSchema",
                )
            )
        else:
            self._emit(
                Notice(
                    source=SOURCE,
                    message="no tool can be called validly, so calls are not constrained"
                    + (" and none is required" if self.mode == "required" else ""),
                )
            )

    def __call__(self, logits, state):
        self.override = None
        followed = self._follow(state)
        if followed is None:
            # a header the opener begins (Harmony's) is forced on inside its span, up to the tool's name
            if self.mode == "required" and (not state.in_call or self._forcing) and state.alternate is None:
                return self._require(logits, state)
            return logits
        matcher, current = followed
        if self.max_tokens is not None and self.max_tokens - state.step <= FINISH_HORIZON and not self._no_end:
            self._plan = []  # near the cap the shortest end comes first
            ending = matcher.finish(current)
            self._no_end = ending is None  # no end found: not searched again in this call
            # the tokens left (this one included) barely fit the shortest end: write it, so the call closes. The
            # slack is for a token the model writes meanwhile that lengthens the end (a character begun, a key)
            if ending and len(ending) + FINISH_SLACK >= self.max_tokens - state.step:
                return self._force(logits, ending[0])
            # a family's template may hold a token that begins a whole call more (a call list's ","): checked
            # throughout the horizon
            if ending and (self.form is not None or 2 * len(ending) + FINISH_SLACK >= self.max_tokens - state.step):
                logits, self.override = matcher.apply(logits, current)
                return self._within_budget(matcher, logits, current, self.max_tokens - state.step - 1)
        if self._plan:  # text the grammar forces: its tokens, one by one
            return self._force(logits, self._plan[0])
        logits, self.override = matcher.apply(logits, current)
        return logits

    def forced(self, state) -> int | None:
        """The next token when the grammar leaves no choice (a planned token of forced text), else None: the
        engine appends it without a forward (jump-forward), and the next forward computes it with the rest."""
        if not self.jump_forward:
            return None
        followed = self._follow(state)
        if followed is None or not self._plan:
            return None
        if self.max_tokens is not None and self.max_tokens - state.step <= FINISH_HORIZON:
            return None  # near the cap the shortest end decides, with the logits
        return self._plan[0]

    def _force(self, logits, token: int):
        wanted = _argmax(logits)
        if wanted != token:
            self.override = (wanted, 1)
        return force(logits, token)

    def _follow(self, state):
        """Bring the grammar up to the context (once per context length): (matcher, state) inside a call it
        follows, or None where it is free. Keeps `_plan`, the tokens of the text the grammar forces next."""
        n = len(state.context)
        key = (n, state.in_call, state.alternate, state.call)
        if self._followed_at == key and self._followed_context is state.context:
            return self._followed
        self._followed_at, self._followed_context = key, state.context
        self._followed = followed = self._advance(state, n) if self.form is None else self._advance_form(state, n)
        return followed

    def _advance(self, state, n: int):
        shape = None if state.in_call else state.alternate
        if shape is not None and shape.grammar_closer is None:
            shape = None  # a shape the grammar does not follow: free, as text
        if not state.in_call and shape is None:
            if self._state is not None or self._closed:
                self._state, self._closed, self._plan = None, False, []
            return None
        if self._run is not shape:  # from one shape to another within a step: start afresh
            self._run, self._state, self._closed, self._plan = shape, None, False, []
        if self._closed:
            return None
        self._forcing = False
        context = state.context
        current = self._state
        matcher = self.matcher if shape is None else self._shape_matcher(shape)
        if current is None:
            if self._version() != self._compiled_version:
                self.compile()  # tools changed: calls name the tools registered now
                matcher = self.matcher if shape is None else self._shape_matcher(shape)
            current = matcher.begin()
            self._no_end = False
            self._plan = []
            tail = (
                (self._after_opener(state) if shape is None else self._after_shape_opener(state, shape))
                if current is not None
                else b""
            )
            if tail:
                current = matcher.advance_bytes(current, tail)
        elif n == self._seen + 1:
            token = context[-1]
            current = matcher.advance(current, token)
            if self._plan:
                self._plan = self._plan[1:] if self._plan[0] == token else []
        else:
            current = None  # something other than one sampled token was appended
        if current is None or matcher.done(current):
            # the call is over, or it was written outside the grammar (another rule forced a token)
            self._state, self._closed, self._plan = None, True, []
            return None
        self._state, self._seen = current, n
        if not self._plan:
            prev = self._tokenizer.token_bytes(context[-1])[-1:] if n > state.generated else b""
            self._plan = self._forced_tokens(matcher, current, shape, prev)
        return matcher, current

    # --- a family's format: a template per shape ------------------------------------------------------------

    def _main_syntax(self):
        """What the main matcher compiles: the syntax, or a family's first template (its canonical shape's)."""
        if self.form is None:
            return self.syntax
        return TemplateSyntax(self.syntax.name, next(iter(self.form.templates.values())))

    def _required_ids(self, form: CallForm) -> list[int]:
        """The tokens `required` writes first: each special token by its id (its text where the vocabulary has
        no such token), the text between as the tokenizer encodes it."""
        specials = getattr(self._tokenizer, "special_tokens", {})
        ids: list[int] = []
        text = ""
        for part in form.required:
            if isinstance(part, Token) and part.text in specials:
                ids += self._tokenizer.encode(text) if text else []
                ids.append(specials[part.text])
                text = ""
            else:
                text += part.text
        return ids + (list(self._tokenizer.encode(text)) if text else [])

    def _template_matcher(self, opener: str) -> Matcher:
        """The matcher of the template of the shape `opener` opens: the main one for the canonical shape, else
        a copy (sharing the vocabulary's tables) compiled once per tools version."""
        assert self.form is not None
        if opener == next(iter(self.form.templates)):
            return self.matcher
        matcher = self._template_matchers.get(opener)
        if matcher is None:
            matcher = copy.copy(self.matcher)
            matcher.start(list(self._tools()), TemplateSyntax(self.syntax.name, self.form.templates[opener]))
            self._template_matchers[opener] = matcher  # its problems are the main grammar's, said already
        return matcher

    def _release_templates(self) -> None:
        for matcher in self._template_matchers.values():
            matcher.release()
        self._template_matchers = {}

    def _forget(self) -> None:
        """Out of the span: nothing followed."""
        self._state, self._closed, self._plan, self._follows = None, False, [], None
        self._span, self._template, self._header, self._again = None, None, None, None

    def _advance_form(self, state, n: int):
        """_advance for a family's format: the template of the span's shape, from where it begins."""
        if not state.in_call:
            if self._span is not None:
                self._forget()
            return None
        if state.call is not None:
            span, shape = state.call
        else:  # the token that closed the span followed (its verdict is still in the call), or a span not said
            span, shape = (self._span, None) if self._span is not None else (-1, None)
        if span != self._span:  # a new span: its shape says which template it follows
            self._forget()
            self._span = span
            assert self.form is not None
            shape = shape if shape is not None else self.syntax.shapes[0]
            template = self.form.templates.get(shape.opener)
            if template is None:
                self._closed = True  # a shape the grammar does not write (Llama's bare JSON): free
                return None
            if self._version() != self._compiled_version:
                self.compile()  # tools changed: calls name the tools registered now
            self._template, self._follows = template, self._template_matcher(shape.opener)
            self._seen = n
            head = self._span_head(state, shape.opener)
            if template.after:
                self._header = head
                return self._wait(state, n)
            return self._begin(state, n, head[len(shape.opener.encode("utf-8")) :])
        if self._closed:
            if self._again is not None and n == self._seen + 1:
                self._seen = n
                return self._after_call(state, n, self._token_bytes(state.context[-1]))
            return None
        if n != self._seen + 1:  # something other than one sampled token was appended
            self._state, self._closed, self._plan = None, True, []
            return None
        token = state.context[-1]
        if self._header is not None:  # waiting for the template's beginning
            self._seen = n
            self._header += self._token_bytes(token)
            return self._wait(state, n)
        matcher, before, template = self._follows, self._state, self._template
        assert template is not None
        current = matcher.advance(before, token)
        if self._plan:
            self._plan = self._plan[1:] if self._plan[0] == token else []
        if current is None:
            self._state, self._closed, self._plan = None, True, []
            return None
        if matcher.done(current):
            self._state, self._closed, self._plan = None, True, []
            if template.again:
                self._seen, self._again = n, b""
                return self._after_call(state, n, self._leftover(matcher, before, token))
            return None
        self._state, self._seen = current, n
        return self._planned(state, n, matcher, current)

    def _planned(self, state, n: int, matcher, current):
        if not self._plan:
            prev = self._token_bytes(state.context[-1])[-1:] if n > state.generated else b""
            self._plan = self._template_forced(matcher, current, prev)
        return matcher, current

    def _begin(self, state, n: int, tail: bytes):
        """The template begins: `tail` is what the span already holds of the call."""
        matcher = self._follows
        current = matcher.begin()
        if current is not None and tail:
            current = matcher.advance_bytes(current, tail)
        self._header, self._no_end, self._plan = None, False, []
        if current is None or matcher.done(current):
            self._state, self._closed = None, True
            return None
        self._forcing = False  # the call has begun: what follows is the grammar's
        self._state, self._seen = current, n
        return self._planned(state, n, matcher, current)

    def _wait(self, state, n: int):
        """The span's header so far: the template begins just after its `after`, unless `before` came first."""
        template, header = self._template, self._header
        assert template is not None and header is not None
        at = header.find(template.after.encode("utf-8"))
        stop = header.find(template.before.encode("utf-8")) if template.before else -1
        if at >= 0 and not 0 <= stop < at:
            return self._begin(state, n, header[at + len(template.after.encode("utf-8")) :])
        if stop >= 0 or len(header) > 4096:  # the header ended without a call: the span is text
            self._header, self._closed = None, True
        return None

    def _after_call(self, state, n: int, data: bytes):
        """After a call in a span that may hold another (`again`): whitespace, then `again` begins the next."""
        template = self._template
        assert template is not None and self._again is not None
        self._again += data
        written = self._again.lstrip(b" \t\n\r")
        again = template.again.encode("utf-8")
        if written.startswith(again):
            self._again, self._closed = None, False
            return self._begin(state, n, written[len(again) :])
        if written and not again.startswith(written):
            self._again = None  # other text: the span ends there
        return None

    def _leftover(self, matcher, before, token: int) -> bytes:
        """What the token that ended a call wrote after the call's end."""
        data, st = self._tokenizer.token_bytes(token), before
        for i, byte in enumerate(data):
            if st is None or st.final:
                return data[i:]
            st = matcher.grammar.advance(st, byte)
        return b""

    def _span_head(self, state, opener: str) -> bytes:
        """The span's text from its opener through the token that completed it (specials as their text)."""
        want = opener.encode("utf-8")
        context = state.context
        n = len(context)
        tokens = context[max(state.generated, n - len(want) - 1) : n]
        written = b"".join(self._token_bytes(t) for t in tokens)
        at = written.rfind(want)
        return written[at:] if at >= 0 else want

    def _token_bytes(self, token: int) -> bytes:
        special = self._special_text.get(token)
        return special if special is not None else self._tokenizer.token_bytes(token)

    def _template_forced(self, matcher, current, prev: bytes) -> list[int]:
        """_forced_tokens for a template: its text forced as written, its arguments as in the JSON syntax."""
        grammar = matcher.grammar
        if grammar is None or current is None:
            return []
        text = forced_text(grammar, current, json=True, prev=prev, template=True)
        return self._tokens_of(text)

    def _forced_tokens(self, matcher, current, shape, prev: bytes) -> list[int]:
        """The tokens of the text the grammar forces from `current` (forced_text), as the tokenizer encodes it,
        less the last token (which the model may join to what follows); [] when nothing is forced."""
        grammar = matcher.grammar
        if grammar is None or current is None:
            return []
        closer = (self.syntax.closer if shape is None else shape.grammar_closer) or ""
        text = forced_text(grammar, current, json=self.syntax.grammar == "json", closer=closer, prev=prev)
        return self._tokens_of(text)

    def _tokens_of(self, text: str) -> list[int]:
        """The tokens of forced text as the tokenizer encodes it, less the last; [] when nothing is forced."""
        if not text:
            return []
        tokens = list(self._tokenizer.encode(text))[:-1]
        written = b"".join(self._tokenizer.token_bytes(t) for t in tokens)
        return tokens if tokens and text.encode("utf-8").startswith(written) else []

    def _within_budget(self, matcher, logits, current, left: int):
        """Near the cap, where few tokens are allowed (a name, a key, a literal), rule out those after which the
        call's shortest end no longer fits in the `left` tokens that follow."""
        allowed = matcher.allowed_ids(current)
        if len(allowed) > FINISH_CHECKED:
            return logits  # a free string: the slack covers what one token can add
        too_long = []
        for token in allowed:
            after = matcher.advance(current, token)
            ending = None if after is None else ([] if matcher.done(after) else matcher.finish(after))
            if ending is None or len(ending) > left:
                too_long.append(token)
        if not too_long or len(too_long) == len(allowed):
            return logits
        return _forbid(logits, too_long)

    def release(self) -> None:
        """Free the grammars now (their masks and states), not when the cycle collector finds this processor
        and its harness: for a process that runs many tool sets one after another (eval over BFCL)."""
        for matcher in (self.matcher, *self._shape_matchers.values()):
            matcher.release()
        self._release_templates()
        self._shape_matchers, self._state, self._plan = {}, None, []

    def _shape_matcher(self, shape) -> Matcher:
        """The grammar of a call in an alternate shape: the same tools, its own closer (compiled once per
        closer and tools version; the vocabulary's tables are shared with the main matcher)."""
        version = self._compiled_version
        if self._shape_version != version:
            self._shape_matchers, self._shape_version = {}, version
        closer = shape.grammar_closer
        matcher = self._shape_matchers.get(closer)
        if matcher is None:
            matcher = copy.copy(self.matcher)  # shares the vocabulary's tables; start() sets its own grammar
            matcher.closer_id = None
            matcher.start(list(self._tools()), _ShapeSyntax(closer))
            self._shape_matchers[closer] = matcher
        return matcher

    def _after_shape_opener(self, state, shape) -> bytes:
        """What the model wrote of the call after an alternate's opener (bare JSON's "{" is the call's own)."""
        token_bytes = self._tokenizer.token_bytes
        written = b"".join(token_bytes(t) for t in state.context[state.generated :])
        opener = shape.opener.encode("utf-8")
        at = written.rfind(opener)
        if at < 0:
            return b""
        return written[at:] if shape.opener == "{" else written[at + len(opener) :]

    def _after_opener(self, state) -> bytes:
        """What the token that completed the opener wrote after it (a BPE token can hold `>{"`)."""
        if self._opener_bytes is None:
            return b""
        token_bytes = self._tokenizer.token_bytes
        written = b"".join(token_bytes(t) for t in state.context[state.generated :])
        at = written.rfind(self._opener_bytes)
        return written[at + len(self._opener_bytes) :] if at >= 0 else b""

    def _require(self, logits, state):
        """Force the opener as the turn's first tokens."""
        step = state.step
        if step == 0:
            self._forcing = bool(self.matcher.tools)
        if not self._forcing:
            return logits
        ids = self.opener_ids
        if step >= len(ids) or state.context[state.generated : state.generated + step] != ids[:step]:
            self._forcing = False
            return logits
        token = ids[step]
        wanted = _argmax(logits)
        if wanted != token:
            self.override = (wanted, 1)
        return force(logits, token)


_SPACE = frozenset(b" \t\n\r")


def forced_text(
    grammar, state, *, json: bool, closer: str = "", prev: bytes = b"", limit: int = 256, template: bool = False
) -> str:
    """The text a byte grammar forces from `state`: each next byte while it is the only one allowed.

    In the JSON syntax whitespace between tokens is free, so a byte is forced when it is the only one
    allowed besides whitespace, and the forced text is written with json.dumps' spacing (a space after
    ":" and ",", none elsewhere): after a tool's name, `", "arguments": {"`. The walk stops at a choice,
    at a character beyond ASCII, where the call ends, and before the closer once the object is whole
    (the model spaces its closer as it likes). `prev` is the last byte already written. A family's
    `template` (JSON arguments between its own text) leaves the model its own spacing: where whitespace may
    come first, and after a "}" where it may follow, nothing is forced (Mistral v3 writes `[TOOL_CALLS] [`);
    a whitespace character that is the only one allowed is its text's (DeepSeek's "\n```json\n") and forced.
    """
    out = bytearray()
    stop = closer[:1].encode("utf-8")
    while not state.final and len(out) < limit:
        allowed = state.allowed
        solid = allowed - _SPACE if json and not (template and not out) else allowed
        if template and not solid and len(allowed) == 1:
            solid = allowed
        if len(solid) != 1:
            break
        [byte] = solid
        last = out[-1:] or prev
        if byte >= 0x80 or (json and bytes((byte,)) == stop and last in (b"}", b"")):
            break
        if template and last == b"}" and allowed & _SPACE:
            break
        if json and last in (b":", b",") and 0x20 in allowed:
            state = grammar.advance(state, 0x20)  # json.dumps' space after ":" and ","
            out.append(0x20)
            if state is None or len(state.allowed - _SPACE) != 1:
                break
        nxt = grammar.advance(state, byte)
        if nxt is None:
            break
        out.append(byte)
        state = nxt
    return out.decode("ascii")


def _forbid(logits, tokens: list[int]):
    """A copy of `logits` (already a processor's own copy) with `tokens` at -inf."""
    if type(logits) is list:
        for token in tokens:
            logits[token] = -inf
        return logits
    logits[tokens] = -inf
    return logits


def _argmax(logits) -> int:
    if type(logits) is list:
        return logits.index(max(logits))
    if array_kind(logits) == "list":
        logits = list(logits)
        return logits.index(max(logits))
    return int(logits.argmax())


class _ShapeSyntax:
    """The JSON syntax with an alternate shape's closer, for compiling that shape's grammar."""

    name = grammar = "json"

    def __init__(self, closer: str) -> None:
        self.closer = closer
