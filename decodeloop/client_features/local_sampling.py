"""Sampling served by the local model: a server's `sampling/createMessage` answered by a nested turn.

A server may ask the client's model for a completion (MCP sampling). `LocalSampling` answers with the
decode loop every turn runs (decode/loop.py), on the run's model or on another bundle
(`--sampling-model`), in a context of its own: nothing of the conversation goes in, and nothing of the
nested turn comes out but the reply the server gets.

The spec's human in the loop: the user sees the request and approves it, then sees the reply and lets it
go (`approve`). With nobody to ask (no terminal) the request is denied, as the policy denies a call it
would confirm. A denial is the JSON-RPC error the spec shows, code -1.

What the request asks, and what the nested turn does with it (each `Sampling` event reports both):
- messages: user and assistant text, in order. Each is the server's text, admitted as a tool result is
  (capped, invisible characters removed, markers escaped), in spans named `prompt:SERVER/sampling`. An
  image or audio is left out with a notice: these models read text.
- systemPrompt: the nested turn's system prompt (the server's text, admitted).
- maxTokens: the nested turn's token cap, at most the run's own (`max_tokens`).
- stopSequences: stop strings. temperature: the sampler's (its other settings are the run's).
- modelPreferences, includeContext and metadata are reported as ignored: there is one model, and the
  conversation is never shared.
- tools and toolChoice (2025-11-25) are refused unless `with_tools`. Then the tools are described to the
  model (admitted like any server's tools), and a call it writes goes back as `tool_use`, never run here.

A sampled reply is that server's text from then on: if the server returns it in a tool result, it is a
`tool:` span like any result, and the policy treats it so. The nested turn has none of the
conversation's tools.

On a model the harness runs (one cache), the nested turn holds the model's lock
(`ModelBundle.generating`), as the conversation's turn does, so the two never step it at once. On the
conversation's own model the nested context replaces the cache, and the conversation's next forward
computes its context again.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from decodeloop.decode.context import Context
from decodeloop.decode.segment import Segment, SegmentSettings
from decodeloop.errors import RpcError
from decodeloop.events import Done, Emit, Nested, Notice, PromptAppended, SamplingStep, Stop
from decodeloop.formats.calls.base import Call
from decodeloop.formats.chat import Attachment, ToolReply
from decodeloop.mcp.client import Tool
from decodeloop.sampling.sampler import Sampler
from decodeloop.text.untrusted import MARGIN, quoted
from decodeloop.tools.turn import DEFAULT_MAX_RESULT_CHARS
from decodeloop.trust.admit import admit_result, admit_tool
from decodeloop.trust.markers import for_bundle

USER_REJECTED = -1  # the spec's code for a request the user rejected
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
MAX_MESSAGES = 100  # messages one request may hold
MAX_STOP_SEQUENCES = 16
MAX_TOOLS = 64
STOP_REASONS = {"eos": "endTurn", "stop_sequence": "stopSequence", "max_tokens": "maxTokens", "tool_call": "toolUse"}
SPAN = "sampling"  # the name in a request's spans: prompt:SERVER/sampling


@dataclass
class SamplingRequest:
    """A createMessage request, read and checked: what the nested turn uses, and what it says of the rest."""

    messages: list[tuple[str, list[dict]]]  # (role, content items)
    max_tokens: int
    system: str | None = None
    stop: list[str] = field(default_factory=list)
    temperature: float | None = None
    tools: list[Tool] = field(default_factory=list)
    tool_choice: str = "auto"  # auto, required or none
    mapped: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def read_request(params: dict, max_tokens: int, with_tools: bool) -> SamplingRequest:
    """The request's params checked against the spec's shape; RpcError (invalid params) naming what is wrong."""

    def invalid(message: str) -> RpcError:
        return RpcError(INVALID_PARAMS, f"sampling/createMessage: {message}")

    messages = params.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages must be a non-empty array")
    if len(messages) > MAX_MESSAGES:
        raise invalid(f"{len(messages)} messages; at most {MAX_MESSAGES} are read")
    read: list[tuple[str, list[dict]]] = []
    for n, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise invalid(f"message {n}: role must be user or assistant")
        content = message.get("content")
        items = content if isinstance(content, list) else [content]
        if not items or not all(isinstance(item, dict) and isinstance(item.get("type"), str) for item in items):
            raise invalid(f"message {n}: content must be a content block or an array of them")
        read.append((role, items))
    if read[0][0] != "user":
        raise invalid("the first message must be the user's")
    asked = params.get("maxTokens")
    if isinstance(asked, bool) or not isinstance(asked, int) or asked < 1:
        raise invalid("maxTokens must be a positive integer")
    request = SamplingRequest(read, min(asked, max_tokens))
    request.mapped.append(
        f"maxTokens {asked}" if asked <= max_tokens else f"maxTokens {asked}, capped at the run's {max_tokens}"
    )
    system = params.get("systemPrompt")
    if system is not None:
        if not isinstance(system, str):
            raise invalid("systemPrompt must be a string")
        request.system = system
        request.mapped.append("systemPrompt")
    stop = params.get("stopSequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
            raise invalid("stopSequences must be an array of non-empty strings")
        if len(stop) > MAX_STOP_SEQUENCES:
            raise invalid(f"{len(stop)} stopSequences; at most {MAX_STOP_SEQUENCES} are used")
        request.stop = list(stop)
        request.mapped.append(f"stopSequences ({len(stop)})")
    temperature = params.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature < 100:
            raise invalid("temperature must be a number from 0")
        request.temperature = float(temperature)
        request.mapped.append(f"temperature {temperature:g}")
    preferences = params.get("modelPreferences")
    if preferences is not None:
        hints = preferences.get("hints") if isinstance(preferences, dict) else None
        named = [str(h["name"]) for h in hints or [] if isinstance(h, dict) and isinstance(h.get("name"), str)]
        what = f" (hints {', '.join(named[:5])})" if named else ""
        request.ignored.append(f"modelPreferences{what}: one model answers every request")
    include = params.get("includeContext")
    if include not in (None, "none"):
        request.ignored.append(f"includeContext {include}: the conversation is never shared with a server")
    if params.get("metadata") is not None:
        request.ignored.append("metadata: nothing here reads it")
    tools = params.get("tools")
    if tools is not None:
        if not with_tools:
            raise invalid("tools are refused: this client offers tools in sampling only with --sampling-tools")
        request.tools = _tools(tools, invalid)
        request.mapped.append(f"tools ({len(request.tools)})")
        choice = params.get("toolChoice")
        if choice is not None:
            mode = choice.get("mode") if isinstance(choice, dict) else None
            if mode not in ("auto", "required", "none"):
                raise invalid("toolChoice.mode must be auto, required or none")
            request.tool_choice = mode
            if mode == "required":
                request.ignored.append("toolChoice required: the model is told of the tools, not made to call one")
            else:
                request.mapped.append(f"toolChoice {mode}")
    return request


def _tools(tools: Any, invalid: Callable[[str], RpcError]) -> list[Tool]:
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
        raise invalid(f"tools must be an array of at most {MAX_TOOLS} tool definitions")
    out = []
    for n, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise invalid(f"tool {n} has no name")
        schema = tool.get("inputSchema")
        if not isinstance(schema, dict):
            raise invalid(f"tool {tool['name']!r} has no inputSchema object")
        description = tool.get("description")
        out.append(Tool(tool["name"], description if isinstance(description, str) else "", schema))
    return out


class LocalSampling:
    """Answers sampling/createMessage with a nested turn of a local model bundle (ClientFeatures' `sampling`).

    `sampler` gives the settings a request does not (its temperature it may); `approve(question)` asks the
    user (None: nobody to ask, every request denied); `hold(who)`, when given, is entered for the whole
    request (the terminal's owner keeps chat's prompt down meanwhile, without holding the terminal itself
    while the model answers, which may wait for the model's lock); `max_tokens` caps a request's maxTokens.
    The nested
    turn holds what the bundle says a turn holds while it generates (`ModelBundle.generating`), as the
    conversation's turn does.
    """

    def __init__(
        self,
        bundle,
        sampler: Sampler,
        emit: Emit,
        *,
        approve: Callable[[str], bool] | None = None,
        hold: Callable[[str], AbstractContextManager[None]] | None = None,
        with_tools: bool = False,
        max_tokens: int = 256,
        detail: bool = True,
        max_message_chars: int = DEFAULT_MAX_RESULT_CHARS,
    ) -> None:
        self.bundle, self.sampler, self.emit = bundle, sampler, emit
        self.approve = approve
        self.hold = hold  # the terminal's owner, told that a server's request is answered (ui/terminal.py)
        self.with_tools = with_tools
        self.max_tokens = max_tokens
        self.detail = detail
        self.max_message_chars = max_message_chars
        self.markers = for_bundle(bundle, ())
        self._ids = itertools.count(1)

    def __call__(self, server: str, params: dict, calls: list[str]) -> dict:
        with self.hold(f"server {server}") if self.hold is not None and self.approve is not None else nullcontext():
            return self._answer(server, params, calls)

    def _answer(self, server: str, params: dict, calls: list[str]) -> dict:
        n = next(self._ids)
        try:
            request = read_request(params, self.max_tokens, self.with_tools)
        except RpcError as e:
            self.emit(SamplingStep(id=n, server=server, calls=calls, phase="failed", text=e.message))
            raise
        nested: Emit = lambda event: self.emit(Nested(sampling=n, server=server, event=event))  # noqa: E731
        context, shown = self._context(server, request, nested)
        self.emit(
            SamplingStep(
                id=n,
                server=server,
                calls=calls,
                phase="request",
                text=shown,
                max_tokens=request.max_tokens,
                mapped=request.mapped,
                ignored=request.ignored,
            )
        )
        asking = f" (for its call {', '.join(calls)})" if calls else ""
        report = "; ".join(request.mapped + [f"ignored {what}" for what in request.ignored])
        question = (
            f"{server} asks the model for a reply{asking}, in a context of its own:\n{MARGIN}{quoted(shown)}\n"
            f"{MARGIN}{quoted(report)}\nlet the model answer (sampling request #{n})"
        )
        self._decide(n, server, calls, question)
        try:
            with self.bundle.generating():
                answer, reason, called = self._generate(request, context, nested)
        except Exception as e:  # the model failed: the server reads why, the conversation goes on
            why = f"the model could not answer: {type(e).__name__}: {e}"
            self.emit(SamplingStep(id=n, server=server, calls=calls, phase="failed", text=why))
            raise RpcError(INTERNAL_ERROR, why) from None
        stop_reason = STOP_REASONS.get(reason, "endTurn")
        reply = answer if not called else answer + "".join(f"\n[tool_use {c['name']} {c['input']}]" for c in called)
        self.emit(SamplingStep(id=n, server=server, calls=calls, phase="reply", text=reply, stop_reason=stop_reason))
        self._decide(n, server, calls, f"the model's reply:\n{MARGIN}{quoted(reply)}\nsend it to {server} (#{n})")
        content: Any = {"type": "text", "text": answer}
        if called:
            content = ([{"type": "text", "text": answer}] if answer else []) + called
        self.emit(SamplingStep(id=n, server=server, calls=calls, phase="sent", text=reply, stop_reason=stop_reason))
        return {"role": "assistant", "content": content, "model": self.bundle.name, "stopReason": stop_reason}

    def _decide(self, n: int, server: str, calls: list[str], question: str) -> None:
        """Ask the user; a denial (or nobody to ask) is the spec's user-rejected error for the server."""
        if self.approve is None:
            why = "nobody to ask (no terminal): sampling needs the user's approval"
        else:
            if self.approve(question):
                return
            why = "the user said no"
        self.emit(SamplingStep(id=n, server=server, calls=calls, phase="denied", text=why))
        raise RpcError(USER_REJECTED, f"User rejected sampling request: {why}")

    def _context(self, server: str, request: SamplingRequest, nested: Emit) -> tuple[Context, str]:
        """The nested turn's context, rendered from the request's messages; and those messages as shown."""
        chat, syntax, tokenizer = self.bundle.chat, self.bundle.syntax, self.bundle.tokenizer
        what = f"{server}'s sampling request"

        def admit(text: str) -> str:
            return admit_result(
                text, what, nested, self.markers, limit=self.max_message_chars, cut="sampling message"
            ).text

        tools = [admit_tool(tool, nested, self.markers) for tool in request.tools]
        system = admit(request.system) if request.system is not None else None
        context = Context()
        shown: list[str] = []
        names: dict[str, str] = {}  # a tool_use id -> its tool, for the tool_result that answers it
        ended = True
        for role, items in request.messages:
            texts, uses, results = [], [], []
            for item in items:
                kind = item.get("type")
                if kind == "text" and isinstance(item.get("text"), str):
                    texts.append(admit(item["text"]))
                elif kind == "tool_use" and request.tools and role == "assistant":
                    uses.append(item)
                elif kind == "tool_result" and request.tools and role == "user":
                    results.append(item)
                else:
                    nested(
                        Notice(
                            source=server, message=f"left out a {kind!r} block of {what}: this model reads text only"
                        )
                    )
            text = "\n".join(texts)
            if role == "assistant":
                written = text + "".join(syntax.render(_call(use)) for use in uses)
                for use in uses:
                    names[str(use.get("id"))] = str(use.get("name"))
                context.extend(tokenizer.encode(written), f"prompt:{server}/{SPAN}")
                shown.append(f"assistant: {written}")
                ended = False
                continue
            if results:
                replies = [
                    ToolReply(
                        names.get(str(r.get("toolUseId")), "tool"),
                        server,
                        syntax.render_result(admit(_result_text(r)), bool(r.get("isError"))),
                        bool(r.get("isError")),
                    )
                    for r in results
                ]
                context.extend_pieces(chat.tool_results(replies, ended))
                shown.append("tool results: " + "; ".join(reply.text for reply in replies))
                ended = True
                if not text:
                    continue
            attached = [Attachment(server, SPAN, text, kind="prompt", heading="")]
            if not len(context):
                context.extend_pieces(chat.start(tools, "", system, attachments=attached))
            else:
                context.extend_pieces(chat.user_turn("", ended, attachments=attached))
            shown.append(f"user: {text}")
            ended = True
        if system is not None:
            shown.insert(0, f"system: {system}")
        return context, "\n".join(shown)

    def _generate(self, request: SamplingRequest, context: Context, nested: Emit) -> tuple[str, str, list[dict]]:
        """Run the nested turn: (the reply's text, why it stopped, the calls it wrote as tool_use blocks)."""
        bundle, syntax, tokenizer = self.bundle, self.bundle.syntax, self.bundle.tokenizer
        base = self.sampler
        temperature = base.temperature if request.temperature is None else request.temperature
        sampler = Sampler(temperature=temperature, top_k=base.top_k, top_p=base.top_p, min_p=base.min_p, seed=base.seed)
        engine = bundle.engine(sampler, ())
        engine.bind(nested)
        names = {tool.name for tool in request.tools}
        calls = bool(names) and request.tool_choice != "none"
        settings = SegmentSettings(
            max_tokens=request.max_tokens, stop_strings=tuple(request.stop), calls=calls, detail=self.detail
        )
        schemas = {tool.name: tool.input_schema for tool in request.tools}
        # the reply is the answer alone, never the reasoning (the segment keeps reasoning apart)
        segment = Segment(tokenizer, bundle.chat, syntax, settings, context, tools=schemas)
        nested(
            PromptAppended(
                text=tokenizer.decode(context.ids),
                tokens=len(context),
                tools=sorted(names),
                context=len(context),
                spans=_spans(context),
            )
        )
        shown: list[str] = []
        verdict = segment.run(engine, context, nested, shown)
        reason = verdict.reason or "eos"
        nested(Stop(reason=reason))
        used: list[dict] = []
        for k, parsed in enumerate(verdict.parsed if reason == "tool_call" else ()):
            call = parsed.call
            if call is None:
                nested(
                    Notice(
                        source="sampling", message=f"a call the model wrote does not parse, left out: {parsed.error}"
                    )
                )
                continue
            used.append({"type": "tool_use", "id": f"call_{k + 1}", "name": call.name, "input": call.arguments})
        answer = "".join(shown).strip()
        nested(Done(answer=answer, reason=reason, tokens=verdict.count, tool_calls=len(used)))
        return answer, reason if used or reason != "tool_call" else "eos", used


def _call(use: dict) -> Call:
    arguments = use.get("input")
    return Call(str(use.get("name")), arguments if isinstance(arguments, dict) else {})


def _result_text(result: dict) -> str:
    content = result.get("content")
    items = content if isinstance(content, list) else []
    return "\n".join(item["text"] for item in items if isinstance(item, dict) and isinstance(item.get("text"), str))


def _spans(context: Context) -> list[list[Any]]:
    return [span.to_json() for span in context.spans()]
