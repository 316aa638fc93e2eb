"""The conversation around the decode loop: `Harness`, its turns and their options.

`Harness.run` is one assistant turn of a conversation, turn.py's steps in order: render the message, run a
segment (decode/segment.py) until something stops it; if tool calls stopped it, decide and dispatch them,
inject the results as the chat format's tool messages and run the next segment. `Harness.begin` hands the
same steps to a caller to take one at a time. The harness owns what the steps share: the context, the
engine, the policy's masked re-run (`masked_evidence`), the history's rewrite. A user message may carry
resources (`run(user, attachments=[(SERVER, URI)])`): each is read from its
server before the turn and enters the user's message as data, admitted like a
tool result, in a span of its own (`resource:SERVER/URI`). A server's prompt may be
the user's turn (`prompt(NAME, arguments)`, then `run(turn.user, turn.attachments)`):
its text is the server's, in spans of their own (`prompt:SERVER/NAME`), admitted
and counted as data by the policy like a resource. The harness keeps the context
(and so the model's cache) from one user turn to the next; `reset` starts a new
conversation. Nothing here knows which model or engine is running.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from decodeloop.decode.context import AUTHORED, Context
from decodeloop.decode.segment import Segment, SegmentSettings
from decodeloop.decode.stops import DEFAULT_MAX_CALL_CHARS
from decodeloop.errors import ConfigError, RpcError
from decodeloop.events import Emit, Notice, Rewrite
from decodeloop.formats.chat import Attachment, ToolReply, WrittenCalls
from decodeloop.mcp.content import Prompt, ResourceContents, ToolResult
from decodeloop.tools.router import Router
from decodeloop.tools.turn import DEFAULT_MAX_RESULT_CHARS, DEFAULT_MAX_TURN_RESULT_CHARS
from decodeloop.trust.admit import admit_result
from decodeloop.trust.markers import for_bundle
from decodeloop.trust.policy import DEFAULT, MASKED_REQUEST, Policy
from decodeloop.trust.tool_budget import DEFAULT_MAX_TOOL_TOKENS, check_tools
from decodeloop.turn import Turn, TurnResult
from decodeloop.turn import run as run_turn


@dataclass
class TurnConfig:
    max_tokens: int = 256  # cap on tokens the model writes in one turn, across tool calls
    stop_strings: tuple[str, ...] = ()
    max_retries: int = 3  # consecutive failed calls that end the turn
    max_repeats: int = 2  # calls repeated after their result that end the turn
    timeout: float | None = None  # per tool call; None: the client's default
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    max_turn_result_chars: int = DEFAULT_MAX_TURN_RESULT_CHARS  # all tool-result text one turn may inject
    max_tool_tokens: int = DEFAULT_MAX_TOOL_TOKENS  # the tools' descriptions in the prompt (tool_budget.py)
    detail: bool = True  # probabilities in token events (one softmax per token)
    collect_calls: bool | None = None  # run every call of a message (None: the call syntax's default)
    constrain: str = "off"  # "calls": calls follow the grammar of valid calls; "required": and open the turn
    call_shapes: str | None = None  # "lenient": also the shapes real models write (formats/calls/shapes.py); "strict":
    # the syntax's own only; None: the chat format's default
    max_call_chars: int = DEFAULT_MAX_CALL_CHARS  # one call's text: longer is an error the model reads
    history: str | None = None  # "template": a message that ended in calls is written back as the chat template
    # renders an assistant's tool calls; "as-written": kept as the model wrote it; None: template where the chat
    # format can (a model's own template that writes tool calls), else as written
    on_repeat: str = "answer"  # a call repeated after its result: "answer" holds the next message to text (the
    # turn ends in an answer), "stop" ends the turn at max_repeats (the strict guard)
    answer_after: int = 1  # with "answer": repeats told the repeat guard's message before the next is held to text
    calls_in_reasoning: str | None = None  # a call inside a reasoning block: "ignore" (a notice) or "run"; None:
    # the call format's default (ignore, but for formats whose models may call straight from reasoning)


@dataclass
class PromptTurn:
    """A server's prompt made into a user turn: `run(turn.user, turn.attachments)` sends it.

    `user` is the harness's line naming the prompt and the arguments the user gave (the user's words);
    `attachments` the prompt's text (`prompt:SERVER/NAME`) and embedded resources (`resource:SERVER/URI`),
    admitted, in the prompt's order; `shown` each message as it will be sent, (what, text), for a view to
    show first; `left_out` what the model will not see (images, audio).
    """

    server: str
    name: str
    user: str
    attachments: list[Attachment]
    shown: list[tuple[str, str]]
    left_out: list[str]


class Harness:
    """A model bundle and the tools of a router: runs the assistant turns of a conversation."""

    def __init__(
        self,
        bundle,
        sampler,
        router: Router,
        emit: Emit,
        *,
        config: TurnConfig | None = None,
        tools: list[str] | None = None,
        system: str | None = None,
        processors=(),
        engine=None,
        policy: Policy | None = DEFAULT,
    ) -> None:
        self.bundle, self.router, self.emit = bundle, router, emit
        self.tokenizer, self.chat, self.syntax = bundle.tokenizer, bundle.chat, bundle.syntax
        self.config = config or TurnConfig()
        self.markers = for_bundle(bundle, self.config.stop_strings)  # what data may not spell (markers.py)
        if policy is None or policy.mode == "off":
            emit(
                Notice(
                    source="policy",
                    message="no policy: every call the model writes runs, whatever a tool result asked "
                    "for (policy=None or Policy.off() was given)",
                )
            )
        elif policy.rules is None:  # the rules of the servers routed to
            policy = policy.for_servers(router.specs)
        self.policy = policy if policy is not None and policy.mode != "off" else None
        self.system = system  # the system prompt's preamble; None: the chat format's own
        names = list(router.tools) if tools is None else tools
        unroutable = [name for name in names if name not in router.tools]
        if unroutable:
            # a tool the model is told about but cannot reach would fail silently at call time
            raise ConfigError(f"tools described to the model but served by no server: {', '.join(unroutable)}")
        self._named = tools  # the tools asked for by name, or None for all
        self.tools = [router.tools[name] for name in names]
        self._check_tools(self.tools)
        self._tools_version = router.version
        self.context: Context | None = None  # the conversation so far; None before its first turn
        self.ended = True  # the model closed its last message itself
        self._warned = 0  # the chat format's warnings already shown
        # the last masked re-run: ((context, where it was cut), calls)
        self._masked: tuple[tuple[int, int], list[tuple[str, Any]]] | None = None
        if self.config.on_repeat not in ("answer", "stop"):
            raise ValueError(f"on_repeat must be answer or stop, got {self.config.on_repeat!r}")
        if self.config.history not in (None, "template", "as-written"):
            raise ValueError(f"history must be template or as-written, got {self.config.history!r}")
        shapes = self.config.call_shapes or bundle.chat.call_shapes
        if shapes not in ("strict", "lenient"):
            raise ValueError(f"call_shapes must be strict or lenient, got {shapes!r}")
        self.call_shapes = shapes
        self.constraint = None
        if self.config.constrain != "off":
            if self.config.constrain not in ("calls", "required") or engine is not None:
                raise ValueError(
                    f"constrain must be off, calls or required (with the bundle's own engine), "
                    f"got {self.config.constrain!r}"
                )
            from decodeloop.constrain.processor import CallConstraint  # the grammar is loaded only when asked for

            self.constraint = CallConstraint(
                bundle,
                self._callable_tools,
                mode=self.config.constrain,
                emit=emit,
                version=lambda: router.version,
                max_tokens=self.config.max_tokens,
            )
            processors = (*processors, self.constraint)
        self.hold = None  # --on-repeat answer: holds a message to text (constrain/text_only.py), where logits are ours
        if engine is None and bundle.model is not None and self.config.on_repeat == "answer":
            from decodeloop.constrain.text_only import HoldToText

            shapes, alternates = self.syntax.shapes, self.syntax.alternates
            every = [*shapes, *alternates]
            self.hold = HoldToText(
                bundle.tokenizer,
                [s.opener for s in shapes if not s.message_start],
                [a.opener for a in alternates if not a.message_start],
                [s.opener for s in every if s.message_start],
            )
            processors = (*processors, self.hold)
        self.engine = engine if engine is not None else bundle.engine(sampler, processors)
        self.engine.bind(emit)  # an engine with events of its own (a remote one's requests) reports to the trace

    def _callable_tools(self) -> list:
        """The tools a call can name now (what routes, narrowed to `tools` when given): for --constrain."""
        names = list(self.router.tools) if self._named is None else [n for n in self._named if n in self.router.tools]
        return [self.router.tools[name] for name in names]

    def reset(self) -> None:
        """Start a new conversation: the next turn renders the system prompt with the tools as they are now."""
        self.context = None

    def chat_warnings(self) -> None:
        """Show what the chat format noticed (a template that is not append-only, say), once each."""
        warnings = self.chat.warnings
        for message in warnings[self._warned :]:
            self.emit(Notice(source="chat template", message=message))
        self._warned = len(warnings)

    def refresh_tools(self) -> None:
        """Take the servers' current tools (a new conversation describes them to the model)."""
        self.router.refresh()
        if self.router.version == self._tools_version:
            return
        names = list(self.router.tools) if self._named is None else [n for n in self._named if n in self.router.tools]
        tools = [self.router.tools[name] for name in names]
        self._check_tools(tools)  # raises, and the next new conversation checks again
        self.tools, self._tools_version = tools, self.router.version

    def _check_tools(self, tools: list) -> None:
        """Refuse tools whose descriptions overfill the prompt (ToolSurfaceError names the servers)."""
        check_tools(
            self.chat,
            tools,
            {name: route.server for name, route in self.router.routes.items()},
            self.system,
            max_tool_tokens=self.config.max_tool_tokens,
            context_length=self.bundle.context_length,
            max_tokens=self.config.max_tokens,
        )

    def attach(self, server: str, uri: str) -> Attachment:
        """Read a resource now, as the context may hold it: its text capped at `max_result_chars`, invisible
        characters removed, forged markers escaped. Raises ConfigError for a server that is not running and
        McpError for one that cannot answer (no resources, an unknown URI)."""
        client = self.router.clients.get(server)
        if client is None:
            running = ", ".join(self.router.clients) or "none"
            raise ConfigError(f"no server named {server!r} to read {uri} from (servers: {running})")
        try:
            read = client.read_resource(uri, timeout=self.config.timeout)
        except RpcError as e:  # the server's refusal names neither the server nor that it was a read
            raise RpcError(e.code, f"{server}: cannot read {uri}: {e.message}", e.data) from None
        what = f"the resource {uri} of {server}"
        text = admit_result(
            read.text(), what, self.emit, self.markers, limit=self.config.max_result_chars, cut="resource"
        ).text
        shown = admit_result(uri, f"the URI {uri}", self.emit, self.markers).text  # the URI names it in the message
        self.emit(Notice(source=server, message=f"attached {uri} ({len(text):,} characters) to the user's message"))
        return Attachment(server, shown, text)

    def find_prompt(self, name: str) -> tuple[str, Prompt]:
        """The server and the prompt `name` names: `NAME`, or `SERVER:NAME` when two servers offer it.
        ConfigError when no server offers it or when more than one does."""
        clients = self.router.clients
        server, _, bare = name.partition(":")
        if bare and server in clients:
            candidates = {server: clients[server]}
        else:
            candidates, bare = dict(clients), name
        found = []
        for server, client in candidates.items():
            if client.offers_prompts():
                found += [(server, p) for p in client.list_prompts(timeout=self.config.timeout) if p.name == bare]
        if not found:
            raise ConfigError(f"no server offers a prompt named {name!r} (/prompts lists them)")
        if len(found) > 1:
            names = " or ".join(f"{server}:{bare}" for server, _ in found)
            raise ConfigError(f"the prompt {bare!r} is offered by more than one server: write {names}")
        return found[0]

    def prompt(self, name: str, arguments: dict[str, str] | None = None) -> PromptTurn:
        """A server's prompt as a user turn, its text admitted like a resource's (capped at `max_result_chars`,
        invisible characters removed, forged markers escaped) and in spans that name the server as its author.

        A missing required argument, or one the prompt does not take, is a ConfigError naming it, before
        anything is asked of the server. A text message becomes the user's turn's text; an embedded
        resource an attachment (`resource:SERVER/URI`); an image or audio is left out, with a notice: these
        models take text only. An assistant-role message is included as quoted text inside the user's
        turn, with a notice, never as an assistant turn: the context's assistant turns are what the model
        wrote, which the plan policy trusts as the model's own plan, so a server's words there would speak
        for the model.
        """
        arguments = dict(arguments or {})
        server, found = self.find_prompt(name)
        missing = found.missing(arguments)
        if missing:
            raise ConfigError(
                f"the prompt {found.name} of {server} needs the required argument(s) {', '.join(missing)} "
                f"(as {' '.join(f'{m}=VALUE' for m in missing)})"
            )
        takes = [a.name for a in found.arguments]
        unknown = [key for key in arguments if key not in takes]
        if unknown:
            raise ConfigError(
                f"the prompt {found.name} of {server} takes no argument {', '.join(unknown)} "
                f"(it takes: {', '.join(takes) or 'none'})"
            )
        client = self.router.clients[server]
        try:
            got = client.get_prompt(found.name, arguments, timeout=self.config.timeout)
        except RpcError as e:  # the server's refusal names neither the server nor the prompt
            raise RpcError(e.code, f"{server}: cannot get the prompt {found.name}: {e.message}", e.data) from None
        what = f"the prompt {found.name} of {server}"
        attachments: list[Attachment] = []
        shown: list[tuple[str, str]] = []
        left_out: list[str] = []

        def admit(text: str) -> str:
            return admit_result(
                text, what, self.emit, self.markers, limit=self.config.max_result_chars, cut="prompt"
            ).text

        for message in got.messages:
            item = message.content
            kind = item.get("type")
            if kind in ("image", "audio"):
                mime = item.get("mimeType", "of unknown type")
                left_out.append(f"{kind} {mime}")
                self.emit(
                    Notice(source=server, message=f"left out the {kind} ({mime}) of {what}: this model takes text only")
                )
                continue
            if kind == "resource" and isinstance(item.get("resource"), dict):
                resource = item["resource"]
                uri = str(resource.get("uri", ""))
                text = admit(ResourceContents(uri, [resource]).text())
                shown_uri = admit_result(uri, f"a URI in {what}", self.emit, self.markers).text
                # the URI is the server's choice: it goes in the resource's span, not in the user's words
                attachments.append(
                    Attachment(server, uri, f"{shown_uri}\n{text}", heading="\n\nResource embedded in the prompt:\n")
                )
                shown.append((f"resource {shown_uri}", text))
                continue
            text = admit(ToolResult([item], False).text())  # text verbatim; a resource link as one line
            if message.role == "assistant":
                self.emit(
                    Notice(
                        source=server,
                        message=f"{what} holds an assistant message: sent as quoted text in the user's turn, not as "
                        "the model's own words",
                    )
                )
                heading = "\n\nThe prompt's assistant message, quoted:\n"
                shown.append(("assistant (quoted)", text))
            else:
                heading = "\n\n"
                shown.append(("user", text))
            attachments.append(Attachment(server, found.name, text, kind="prompt", heading=heading))
        given = ", ".join(f"{key}={value}" for key, value in arguments.items())
        user = f"Prompt {found.name} of {server}" + (f", with {given}" if given else "") + ":"
        return PromptTurn(server, found.name, user, attachments, shown, left_out)

    def run(self, user: str, attachments: Sequence[tuple[str, str] | Attachment] = ()) -> TurnResult:
        """One user message and the assistant's turn answering it, with every tool call it makes: `begin`'s
        turn run step by step to its end (turn.py's `run`).

        `attachments`: (server, URI) pairs, each resource read now and attached to the message (`attach`);
        one that cannot be read raises before anything enters the context. An `Attachment` (a prompt's,
        from `prompt`) is already admitted and goes in as it is.
        Ctrl-C during the turn ends it with reason "interrupted": the context is
        cut back to its last whole state (a token, or a whole injected message),
        so the conversation can go on.
        """
        return run_turn(Turn(self, user, self._attached(attachments)))

    def begin(self, user: str, attachments: Sequence[tuple[str, str] | Attachment] = ()) -> Turn:
        """The turn answering `user`, rendered into the context and ready for its first segment: the caller takes
        its steps (turn.py's `Turn`: generate, dispatch, inject, rewind, finish) one at a time."""
        turn = Turn(self, user, self._attached(attachments))
        turn.render()
        return turn

    def _attached(self, attachments: Sequence[tuple[str, str] | Attachment]) -> list[Attachment]:
        return [a if isinstance(a, Attachment) else self.attach(*a) for a in attachments]

    def segment(self, context: Context, *, detail: bool | None = None) -> Segment:
        """A segment runner for this conversation's turns, from `context`'s end (decode/segment.py)."""
        config = self.config
        settings = SegmentSettings(
            max_tokens=config.max_tokens,
            stop_strings=config.stop_strings,
            max_call_chars=config.max_call_chars,
            collect_calls=config.collect_calls,
            lenient=self.call_shapes == "lenient",
            calls_in_reasoning=config.calls_in_reasoning,
            detail=config.detail if detail is None else detail,
        )
        return Segment(self.tokenizer, self.chat, self.syntax, settings, context, tools=_Schemas(self.router))

    def hold_to_text(self, at: int, repeated: list[str]) -> bool:
        """--on-repeat answer: the model wrote a call again after its result: drop that message (from `at`) and
        hold the next one to text, so it answers from what it has. False where the logits are not the
        harness's (a remote engine): the repeat guard's message goes in instead, as under --on-repeat stop."""
        names = ", ".join(dict.fromkeys(repeated))
        if self.hold is None or self.context is None:
            self.emit(
                Notice(
                    source="calls",
                    message=f"{names} called again with the same arguments after its result; this engine samples for "
                    "itself, so the next message cannot be held to text and the repeat guard's message is sent",
                )
            )
            return False
        self.context.truncate(at)
        self.hold.hold(at)
        self.emit(
            Notice(
                source="calls",
                message=f"{names} called again with the same arguments after its result: that message is dropped "
                "and the next is held to text, so the model answers from what it has (--on-repeat answer)",
            )
        )
        return True

    def rewound(self, start: int, held: bool) -> None:
        """A turn was cut back into the segment that began at `start`: the call constraint follows afresh from
        the context, and the hold to text is as it was in that segment."""
        if self.constraint is not None:
            self.constraint.rewound()
        if self.hold is not None:
            if held:
                self.hold.hold(start)
            else:
                self.hold.release()

    def rewrite(self, at: int, replies: list[ToolReply], written: WrittenCalls, parsed: bool) -> Rewrite | None:
        """--history template: the model's message, from `at`, written back as the chat template renders its calls,
        then the results; None (and nothing done) where the history keeps the message as written: the option, a
        chat format that cannot render calls, or a call that did not parse (the model reads its own text and the
        error about it)."""
        context = self.context
        render = getattr(self.chat, "rendered_calls", None)
        wanted = self.config.history != "as-written" and getattr(self.chat, "renders_calls", False)
        if context is None or render is None or not wanted or not parsed or not written.calls:
            return None
        old = context.ids[at:]
        context.truncate(at)
        pieces = render(replies, written)
        if pieces is None:  # it could not after all: the message as written, then the results
            context.extend(old, "model")
            return None
        context.extend_pieces(pieces)
        new = context.ids[at:]
        kept = 0
        while kept < min(len(old) - 1, len(new)) and old[kept] == new[kept]:  # the cache holds all but the last
            kept += 1
        chat = self.chat
        event = Rewrite(
            written=self.tokenizer.decode(old),
            written_tokens=len(old),
            rendered=chat.rendered_message,
            rendered_tokens=chat.rendered_message_tokens,
            at=at,
            kept=kept,
        )
        self.emit(event)
        return event

    def masked_evidence(self) -> list[tuple[str, Any]]:
        """The calls, (tool, arguments), the model makes at this point of the turn with the user's request masked:
        the evidence the policy's `masked` mode asks for (the decision EVIDENCE) before it decides.

        The context is rebuilt from its spans with every user message replaced by MASKED_REQUEST and cut where
        the model's current message began, and the model generates its next message from there with the same
        engine and sampler, untraced. A call it makes again there came from the data. The context itself is
        untouched; an engine with one cache recomputes from the first user message on, there and back. One
        re-run per message: its calls answer for every call of the message.
        """
        context = self.context
        assert context is not None  # asked only inside a turn
        spans = context.spans()
        end = len(context)
        for span in reversed(spans):  # the model's current message: its reasoning and its text
            if span.source not in AUTHORED:
                break
            end = span.start
        if self._masked is not None and self._masked[0] == (id(context), end):
            return self._masked[1]
        request = self.tokenizer.encode(MASKED_REQUEST)
        masked = Context()
        for span in spans:
            if span.start >= end:
                break
            masked.extend(request if span.source == "user" else context.ids[span.start : span.end], span.source)
        with self.bundle.generating():
            verdict = self.segment(masked, detail=False).run(self.engine, masked, lambda event: None)
        # a call that does not parse makes nothing again
        parsed = verdict.parsed if verdict.reason == "tool_call" else ()
        calls = [(p.call.name, p.call.arguments) for p in parsed if p.call is not None]
        written = ", ".join(f"{name} with {arguments}" for name, arguments in calls) or "no call"
        self.emit(
            Notice(
                source="policy",
                message=f"masked re-run: with the user's request masked the model wrote "
                f"{verdict.count} tokens ending in {verdict.reason}: {written}",
            )
        )
        self._masked = ((id(context), end), calls)
        return calls


class _Schemas(Mapping):
    """Each routed tool's inputSchema by name, as the router has them now (a format types values by them)."""

    def __init__(self, router: Router) -> None:
        self._router = router

    def __getitem__(self, name: str) -> Any:
        return self._router.tools[name].input_schema

    def __iter__(self) -> Iterator[str]:
        return iter(self._router.tools)

    def __len__(self) -> int:
        return len(self._router.tools)
