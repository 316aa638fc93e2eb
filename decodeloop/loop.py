"""The decode loop and the turn around it. Start reading here.

`generate` is the whole of what happens per token: forward, sample, append,
stop check. `Harness.run` is one assistant turn: generate until something
stops it; if a tool call stopped it, dispatch the call, inject the result as a
tool message and generate again. Nothing here knows which model is running:
the model is only `forward(context) -> logits`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from decodeloop.calls import CompactSyntax
from decodeloop.chat import ChatFormat
from decodeloop.dispatch import DEFAULT_MAX_RESULT_CHARS, dispatch
from decodeloop.events import Done, Emit, Inject, Prompt, Stop, Token
from decodeloop.router import ConfigError, Router
from decodeloop.sampling import Sampler, explain
from decodeloop.stops import Stops, Verdict
from decodeloop.tokenize import StreamDecoder


def generate(model, sampler: Sampler, stops: Stops, context: list[int], decoder: StreamDecoder,
             tokenizer, emit: Emit, shown: list[str], detail: bool = True) -> Verdict:
    """Generate tokens into `context` until a stop condition fires.

    Text safe to show the user is appended to `shown` as it is released.
    """
    while True:
        logits = model.forward(context)                       # 1. forward: only positions not in the cache
        token = sampler.sample(logits)                        # 2. sample the next token
        context.append(token)                                 # 3. append it to the context
        verdict = stops.check(token, decoder.piece(token))    # 4. stop check, incremental
        prob, top = describe_choice(logits, token, tokenizer) if detail else (None, None)
        computed = model.last_computed
        emit(Token(verdict.count, token, tokenizer.token_text(token), prob, top, computed,
                   len(context) - 1 - computed, len(context), verdict.delta, verdict.held,
                   verdict.in_call, stops.conditions, verdict.reason))
        if verdict.delta:
            shown.append(verdict.delta)
        if verdict.reason is not None:
            return verdict


def describe_choice(logits, token: int, tokenizer, n: int = 3):
    """The chosen token's probability and the n most probable tokens, for the trace."""
    prob, top = explain(logits, token, n)
    return prob, [[tokenizer.token_text(t), p] for t, p in top]


@dataclass
class TurnConfig:
    max_tokens: int = 256            # cap on tokens the model writes in one turn, across tool calls
    stop_strings: tuple[str, ...] = ()
    max_retries: int = 3             # consecutive failed calls that end the turn
    timeout: float | None = None     # per tool call; None: the client's default
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    detail: bool = True              # probabilities in token events (one softmax per token)


@dataclass
class TurnResult:
    answer: str
    reason: str
    tokens: int
    tool_calls: int
    error: str | None = None
    context: list[int] = field(default_factory=list, repr=False)


class Harness:
    """One model, one tokenizer, the tools of a router: runs assistant turns."""

    def __init__(self, model, tokenizer, sampler: Sampler, router: Router, emit: Emit, *,
                 config: TurnConfig | None = None, syntax=None, chat: ChatFormat | None = None,
                 tools: list[str] | None = None) -> None:
        self.model, self.tokenizer, self.sampler, self.router, self.emit = model, tokenizer, sampler, router, emit
        self.config = config or TurnConfig()
        self.syntax = syntax or CompactSyntax()
        self.chat = chat or ChatFormat(tokenizer, self.syntax)
        names = list(router.tools) if tools is None else tools
        unroutable = [name for name in names if name not in router.tools]
        if unroutable:
            # a tool the model is told about but cannot reach would fail silently at call time
            raise ConfigError(f"tools described to the model but served by no server: {', '.join(unroutable)}")
        self.tools = [router.tools[name] for name in names]
        self.system = self.chat.system_text(self.tools)
        self._named = tools                    # the tools asked for by name, or None for all
        self._tools_version = router.version

    def _refresh_tools(self) -> None:
        """Re-render the system prompt if a server's tools changed since it was rendered."""
        self.router.refresh()
        if self.router.version == self._tools_version:
            return
        self._tools_version = self.router.version
        names = list(self.router.tools) if self._named is None else [n for n in self._named if n in self.router.tools]
        self.tools = [self.router.tools[name] for name in names]
        self.system = self.chat.system_text(self.tools)

    def run(self, user: str) -> TurnResult:
        started = time.perf_counter()
        config, emit = self.config, self.emit
        self._refresh_tools()  # tools a server changed since the last turn are described from this one
        context = self.chat.prompt(self.system, user)
        emit(Prompt(self.tokenizer.decode(context), len(context), [t.name for t in self.tools]))
        stops = Stops(eos_ids=self.tokenizer.stop_ids, stop_strings=config.stop_strings,
                      opener=self.syntax.opener, scanner_factory=self.syntax.scanner,
                      max_tokens=config.max_tokens)
        decoder = StreamDecoder(self.tokenizer)
        answer: list[str] = []
        calls = failures = 0
        error = None
        while True:
            verdict = generate(self.model, self.sampler, stops, context, decoder,
                               self.tokenizer, emit, answer, config.detail)
            reason = verdict.reason or "eos"
            emit(Stop(reason))
            if reason != "tool_call":
                break
            calls += 1
            outcome = dispatch(verdict.call_text or "", self.syntax, self.router, emit,
                               timeout=config.timeout, max_result_chars=config.max_result_chars)
            self.router.refresh()  # route the next call to a server's changed tools; the prompt waits a turn
            failures = failures + 1 if outcome.is_error else 0
            if failures >= config.max_retries:
                reason = "max_retries"
                error = (f"gave up after {failures} consecutive failed tool calls; "
                         f"last error: {outcome.text}")
                emit(Stop(reason))
                break
            injected = self.chat.tool_message(self.syntax.render_result(outcome.text, outcome.is_error))
            context.extend(injected)
            stops.new_segment()
            decoder.reset()
            emit(Inject(self.tokenizer.decode(injected), len(injected), len(context)))
        text = "".join(answer).strip()
        emit(Done(text, reason, verdict.count, calls, error, round(time.perf_counter() - started, 4)))
        return TurnResult(text, reason, verdict.count, calls, error, context)
