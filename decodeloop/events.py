"""The events of one turn: the single stream every front end reads.

The decode loop and the tool dispatch emit these; the terminal trace, step mode
and the JSON Lines output (ui/) are three views of the same stream. Each event
knows its JSON form (`to_json`), which is the documented machine interface; every
credential the process holds is redacted from it (text/credentials.py), so neither
the JSON Lines nor the viewer's page, both made from it, can show one a server echoed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from decodeloop.text.credentials import redact_value


@dataclass(slots=True)
class Event:
    kind = "event"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.kind}
        for f in fields(self):
            out[f.name] = getattr(self, f.name)
        return redact_value(out)


Emit = Callable[[Event], None]


@dataclass(slots=True)
class ServerReady(Event):
    """An MCP server answered initialize and tools/list."""

    kind = "server"
    server: str
    protocol_version: str
    server_name: str
    tools: list[str]


@dataclass(slots=True)
class PromptAppended(Event):
    """What a user turn appends to the context: the whole prompt on a conversation's first turn."""

    kind = "prompt"
    text: str
    tokens: int  # tokens appended
    tools: list[str]
    context: int = 0  # context length after them
    spans: list[list[Any]] = field(default_factory=list)  # [start, end, source] of what was appended


@dataclass(slots=True)
class Token(Event):
    """One iteration of the decode loop: forward, sample, append, stop check."""

    kind = "token"
    index: int  # tokens generated so far in this turn, 1-based
    id: int
    text: str  # this token's text (a label for special tokens)
    prob: float | None  # its probability in the distribution it was drawn from (see `temperature`)
    top: list[list[Any]] | None  # the most probable tokens of that distribution: [[text, prob], ...]
    computed: int  # positions the forward pass computed
    cached: int  # positions served from the cache
    context: int  # context length after the append
    delta: str  # text released to the user at this step
    held: str  # text held back (may start a stop string or a call)
    in_call: bool  # the model is writing a tool call
    checks: Sequence[str]  # stop conditions checked
    stop: str | None  # the condition that fired, if any
    masked: str | None = None  # --constrain: the token the model put first, which the call grammar masked
    masked_id: int | None = None
    allowed: int | None = None  # --constrain: how many tokens the grammar allowed at this step
    forced: bool = False  # --constrain: appended without a forward, the grammar left no choice (jump-forward)
    # the distribution `prob` and `top` are of, when the engine says (a local engine does): the sampling
    # temperature (0: greedy, and then `prob`/`top` are the model's softmax at temperature 1, since the
    # draw itself is certain), and top-k / top-p / min-p when they cut it (renormalised over what they keep)
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    reasoning: str = ""  # reasoning text released at this step (never part of the answer)
    in_reasoning: bool = False  # the model is writing a reasoning block
    top_ids: list[int] | None = None  # the ids of `top`'s tokens, in its order (a fork takes one of them)

    def to_json(self) -> dict[str, Any]:
        out = Event.to_json(self)
        if self.top_ids is None:
            del out["top_ids"]
        if self.masked is None:  # only tokens the grammar changed carry the three fields
            del out["masked"], out["masked_id"], out["allowed"]
        if not self.forced:
            del out["forced"]
        if not self.reasoning and not self.in_reasoning:  # only a model that reasons has them
            del out["reasoning"], out["in_reasoning"]
        # only the settings the engine reported: the temperature, and top-k, top-p and
        # min-p where they cut the distribution
        for name in ("temperature", "top_k", "top_p", "min_p"):
            if out[name] is None:
                del out[name]
        return out


@dataclass(slots=True)
class Stop(Event):
    """Generation stopped: eos, stop_sequence, tool_call, max_tokens, max_retries or repeated_call."""

    kind = "stop"
    reason: str


@dataclass(slots=True)
class ToolCall(Event):
    """A call the model wrote, parsed and validated, about to be sent."""

    kind = "tool_call"
    name: str
    arguments: dict[str, Any]
    server: str
    text: str
    # each argument value's path -> the context's sources that contain it ("user", "system",
    # "tool:SERVER/TOOL"); an empty list: the model wrote the value itself (provenance.py)
    origins: dict[str, list[str]] = field(default_factory=dict)
    shape: str = "tool_call"  # how the call was written: its syntax's own shape or an alternate (calls/shapes.py)


@dataclass(slots=True)
class PolicyDecision(Event):
    """The policy's decision on a parsed, validated call, before it is sent (policy.py)."""

    kind = "policy"
    name: str
    server: str
    arguments: dict[str, Any]
    tool_class: str  # "read-only" or "side-effecting"
    verdict: str  # "allow" or "deny"
    reason: str


@dataclass(slots=True)
class ToolError(Event):
    """A call that could not be parsed, validated, routed or completed."""

    kind = "tool_error"
    message: str
    text: str  # what the model wrote
    stage: str  # where it failed: "parse", "route", "arguments", "repeat", "policy" or "call"
    name: str | None = None  # the tool it named, once the call parsed
    shape: str = "tool_call"  # how the call was written (formats/calls/shapes.py)
    arguments: dict[str, Any] | None = None  # the arguments as written, once the call parsed


@dataclass(slots=True)
class Rpc(Event):
    """A JSON-RPC message on the wire, in either direction."""

    kind = "rpc"
    server: str
    direction: str  # "send" or "recv"
    message: dict[str, Any]


@dataclass(slots=True)
class ToolReturned(Event):
    """What a tool returned, and the text that goes into the model's context."""

    kind = "tool_result"
    name: str
    content: list[dict[str, Any]]
    is_error: bool
    text: str


@dataclass(slots=True)
class Inject(Event):
    """Tool messages appended to the context; the next forward prefills them."""

    kind = "inject"
    text: str
    tokens: int
    context: int
    spans: list[list[Any]] = field(default_factory=list)  # [start, end, source] of what was appended
    computed: int | None = None  # positions the next forward computes, when a rewrite makes it other than tokens + 1

    def to_json(self) -> dict[str, Any]:
        out = Event.to_json(self)
        if self.computed is None:
            del out["computed"]
        return out


@dataclass(slots=True)
class Rewrite(Event):
    """The model's message, which ended in calls, written back as its chat template renders an assistant's
    tool calls (--history template): the context cut back to where the message began (`at`), the template's
    form appended (the Inject that follows holds it, with the results)."""

    kind = "rewrite"
    written: str  # the message as the model wrote it
    written_tokens: int
    rendered: str  # the message as the template renders it
    rendered_tokens: int
    at: int  # where the message began: the context is cut back to here
    kept: int  # of it, the tokens the rendering shares with what was written (the cache keeps those)


@dataclass(slots=True)
class Rewind(Event):
    """The turn went back to `position` (`Turn.rewind`: the studio's fork, or a branch taken back): the context
    and the engine's cache cut there, `cut` tokens dropped; what follows is written again from there."""

    kind = "rewind"
    position: int
    cut: int


@dataclass(slots=True)
class Edited(Event):
    """A person changed what the model wrote before the harness used it: a held call's arguments (the studio),
    before it went through the policy and the schema, or a server's result before the trust boundary admitted
    it. `before` is the model's (or the server's), `after` the person's."""

    kind = "edit"
    what: str  # "arguments" or "result"
    tool: str
    before: Any
    after: Any


@dataclass(slots=True)
class Notice(Event):
    """Something worth a line that is not part of the turn: server notifications, warnings."""

    kind = "notice"
    source: str
    message: str


@dataclass(slots=True)
class Progress(Event):
    """A server's progress notification for a call it is running (the call's progressToken)."""

    kind = "progress"
    server: str
    tool: str | None  # the tool of the call in flight that the token belongs to; None: no such call
    progress: float
    total: float | None = None
    message: str | None = None  # the server's text, capped


@dataclass(slots=True)
class AppView(Event):
    """MCP Apps: the interface a tool brings (its ui:// resource's HTML, the server's text), kept with the call
    it belongs to, for a page to show in a sandboxed frame: the viewer and the studio. Never in the context."""

    kind = "app"
    server: str
    tool: str
    uri: str
    html: str  # capped at tools/apps.py's MAX_APP_CHARS
    definition: dict  # the tool as the app is told it: name, description, inputSchema
    arguments: dict  # the call's arguments
    result: dict  # the call's result as the app is given it: content, isError, structuredContent


@dataclass(slots=True)
class TaskUpdate(Event):
    """A call the server runs as a task (MCP Tasks) changed status: working, input_required, then completed,
    failed or cancelled. Said once per change of status or message; the result comes as any call's."""

    kind = "task"
    server: str
    tool: str
    task_id: str  # the server's id, capped
    status: str
    message: str | None = None  # the server's statusMessage, capped


@dataclass(slots=True)
class ToolsChanged(Event):
    """A server announced notifications/tools/list_changed and its tools were listed again.

    Calls route to the new tools at once; the system prompt that describes them
    is rendered again at the start of the next conversation (the current context is
    never rewritten, so its cache stays valid). A tool whose definition changed
    keeps its pinned definition until approved: `held` names it, `changes` says what changed.
    """

    kind = "tools_changed"
    server: str
    added: list[str]  # exposed names new since the last listing
    removed: list[str]  # exposed names gone
    tools: list[str]  # every exposed tool now
    held: list[str] = field(default_factory=list)  # tools whose changed definition is held, not used
    changes: list[str] = field(default_factory=list)  # "tool: what changed", one line per difference
    declared: bool = True  # the server declared the listChanged capability


@dataclass(slots=True)
class Request(Event):
    """One request to an engine that samples for itself (models/openai/engine.py), when its stream ends."""

    kind = "request"
    url: str
    sent: str  # how the prompt went: "ids" or "text"
    prompt: int  # tokens of context sent
    cached: int | None  # prompt tokens the server says its cache served; None: it does not say
    server_prompt: int | None  # prompt tokens the server says it read
    generated: int  # tokens streamed and appended
    finish: str  # "closed" (the harness hung up), or the server's finish reason
    seconds: float


@dataclass(slots=True)
class SamplingStep(Event):
    """A server's sampling/createMessage, step by step (client_features/local_sampling.py).

    `phase`: "request" (what the server asks; `text` its messages as the model will read them), "denied"
    (by the user, or nobody to ask; `text` why), "reply" (the model's reply, before the user lets it go),
    "sent" (the reply the server got) or "failed" (`text` why). The nested turn between request and reply
    comes as `Nested` events carrying the same `id`.
    """

    kind = "sampling"
    id: int  # the run's n-th sampling request
    server: str
    calls: list[str]  # the tools of the server's calls in flight when it asked: the call that asked
    phase: str
    text: str
    max_tokens: int | None = None
    mapped: list[str] = field(default_factory=list)  # the request's parameters, as the nested turn uses them
    ignored: list[str] = field(default_factory=list)  # the request's parameters not used, and why
    stop_reason: str | None = None  # the reply's: endTurn, stopSequence, maxTokens or toolUse


@dataclass(slots=True)
class Nested(Event):
    """An event of a nested turn (the model answering a sampling request), kept apart from the conversation's:
    its context is not the conversation's, and nothing in it enters the conversation's."""

    kind = "nested"
    sampling: int  # the SamplingStep event's id
    server: str
    event: Event

    def to_json(self) -> dict[str, Any]:
        return {"event": self.kind, "sampling": self.sampling, "server": self.server, "inner": self.event.to_json()}


@dataclass(slots=True)
class Done(Event):
    """The turn is over. `answer` is what the user sees: all text outside calls, stop strings and reasoning;
    `reasoning` what the model wrote in its reasoning blocks (empty for a model that writes none)."""

    kind = "done"
    answer: str
    reason: str
    tokens: int
    tool_calls: int
    error: str | None = None
    seconds: float = field(default=0.0)
    reasoning: str = ""

    def to_json(self) -> dict[str, Any]:
        out = Event.to_json(self)
        if not self.reasoning:
            del out["reasoning"]
        return out


@dataclass(slots=True)
class Elicitation(Event):
    """A server's elicitation/create and its answer (client_features/elicitation.py).

    `action` is what the server was told: "accept", "decline" or "cancel" ("error": a mode this client
    does not offer, refused as invalid params); `reason` says why in words. `content` is what an accepted
    form sent, which the JSON-RPC traffic holds too.
    """

    kind = "elicitation"
    server: str
    mode: str  # "form" or "url"
    message: str  # the server's message, capped
    action: str
    reason: str
    fields: list[str] = field(default_factory=list)  # the form's field names
    url: str | None = None  # url mode: the URL, capped
    content: dict[str, Any] | None = None
