"""The terminal trace: every event of a turn as readable lines.

One line per token (the four steps: forward, sample, append, stop check), and a
block for each part of the call sequence: the JSON-RPC messages on the wire,
the parsed call, the result, the injected tool message. Step mode (step.py)
uses the same renderer with a fuller, multi-line frame per token.

Text a server or the model controls (results, errors, notices, descriptions in
the prompt, the answer) is printed through untrusted.py: control and format
characters as escapes, and every line after the first behind a `  │ ` margin,
so no content can change the terminal or print a line the harness would.
"""

from __future__ import annotations

import io
import json
import re
import sys
from typing import TextIO

from decodeloop.events import (
    Done,
    Elicitation,
    Event,
    Inject,
    Nested,
    Notice,
    PolicyDecision,
    Progress,
    PromptAppended,
    Rpc,
    SamplingStep,
    ServerReady,
    Stop,
    TaskUpdate,
    Token,
    ToolCall,
    ToolError,
    ToolReturned,
    ToolsChanged,
)
from decodeloop.formats.calls.shapes import DESCRIBED
from decodeloop.text.credentials import clip
from decodeloop.text.untrusted import MARGIN, quoted, visible, visible_line
from decodeloop.ui.legend import ByteLegend, probs_note
from decodeloop.ui.style import Style, use_color

RPC_PREVIEW = 600  # characters of a JSON-RPC message shown in the trace
ALT_MIN = 0.001  # alternatives less likely than this are not worth a column
SHORT = {"stop_sequence": "stop", "tool_call": "call", "max_tokens": "cap"}
_MARKER = re.compile(r"(?<!\n)<\|")  # a marker like <|user|> or <|im_start|> not already at a line start


def preview(value) -> str:
    """A JSON value on one line, cut to RPC_PREVIEW characters (saying how long it was)."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= RPC_PREVIEW else clip(text, RPC_PREVIEW) + f"… ({len(text):,} chars)"


def label(token_text: str) -> str:
    """A token in single quotes, as the tokenizer labels it ('a', '\\n', '<|eos|>'), nothing in it invisible."""
    return f"'{visible_line(token_text)}'"


def show(text: str) -> str:
    """A string as a short quoted literal, with newlines and control and format characters visible."""
    return visible(json.dumps(text, ensure_ascii=False))


def names(items) -> str:
    """Tool names (a server's choice) on one line."""
    return ", ".join(visible_line(name) for name in items)


def progress_text(e: Progress) -> str:
    """progress 2/5: the server's message (escaped, on one line)."""
    amount = f"{e.progress:g}" + (f"/{e.total:g}" if e.total is not None else "")
    return f"progress {amount}" + (f": {visible_line(e.message)}" if e.message else "")


def task_text(e: TaskUpdate) -> str:
    """task ID: working: the server's message (escaped, on one line)."""
    return f"task {visible_line(clip(e.task_id, 40))}: {visible_line(e.status)}" + (
        f": {visible_line(e.message)}" if e.message else ""
    )


SAMPLING_PHASES = {
    "request": "asks the model",
    "denied": "denied",
    "reply": "the model's reply",
    "sent": "reply sent",
    "failed": "failed",
}


def sampling_head(e: SamplingStep) -> str:
    """A Sampling event's first line: which request, from which server, for which call, at which step."""
    call = f" (call {names(e.calls)})" if e.calls else ""
    stop = f", {e.stop_reason}" if e.stop_reason and e.phase == "reply" else ""
    return f"sampling #{e.id} from {visible_line(e.server)}{call}: {SAMPLING_PHASES.get(e.phase, e.phase)}{stop}"


def elicitation_text(e: Elicitation) -> str:
    """asking asked for input (form: name, age) "Your name?": accept {"name": "Ann"}, the user sent the answers"""
    what = "to open " + visible_line(e.url) if e.mode == "url" and e.url is not None else "for input"
    fields = f" ({visible_line(e.mode)}: {names(e.fields)})" if e.fields else f" ({visible_line(e.mode)})"
    sent = f" {visible(json.dumps(e.content, ensure_ascii=False))}" if e.content is not None else ""
    return (
        f"{visible_line(e.server)} asked {what}{fields} {show(e.message)}: "
        f"{visible_line(e.action)}{sent}, {visible_line(e.reason)}"
    )


class TraceView:
    def __init__(self, out: TextIO | None = None, color: bool | None = None, frames: bool = False) -> None:
        self.out = out or sys.stdout
        self.style = Style(use_color(self.out) if color is None else color)
        self.frames = frames  # multi-line frames per token (step mode)
        self.byte_legend = ByteLegend()  # once: what a token holding part of a character is
        self.probs_at: tuple | None = None  # the sampling settings the probabilities note last described
        self.no_kv_cache = False  # the n-gram said it keeps no state per position: its `cached` saves no work
        self._nested: dict[int, TraceView] = {}  # a view of each sampling request's nested turn, by its id

    def __call__(self, event: Event) -> None:
        render = getattr(self, "on_" + event.kind, None)
        if render is not None:
            text = render(event)
            if text is not None:
                self.out.write(text + "\n")
                self.out.flush()

    # -- start-up -----------------------------------------------------------
    def on_server(self, e: ServerReady) -> str:
        s = self.style
        return (
            s("● ", "blue") + s(visible_line(e.server), "bold") + f": MCP {e.protocol_version}, server "
            f"{show(e.server_name)}, tools: {names(e.tools) or 'none'}"
        )

    def on_prompt(self, e: PromptAppended) -> str:
        s = self.style
        body = _MARKER.sub("\n<|", e.text).lstrip("\n")  # each role marker on a line of its own
        body = MARGIN + quoted(body)  # it holds the servers' tool descriptions
        if e.context > e.tokens:  # a later turn of the conversation: only what it appends
            head = f"── next user turn ({e.tokens} tokens appended, context {e.context}) ──"
        else:
            head = f"── prompt ({e.tokens} tokens; tool schemas from tools/list rendered in the system prompt) ──"
        return s(head, "dim") + "\n" + body + "\n" + s("── generation ──", "dim")

    # -- the four steps -----------------------------------------------------
    def on_token(self, e: Token) -> str:
        text = self._frame(e) if self.frames else self._line(e)
        legend = self.byte_legend(e.text)
        if legend:
            text += "\n" + self.style(f"       {legend}", "dim")
        settings = (e.temperature, e.top_k, e.top_p, e.min_p)
        if e.prob is not None and e.temperature is not None and settings != self.probs_at:
            self.probs_at = settings  # before the first token line: what its probabilities are
            text = self.style(probs_note(e.temperature, e.top_k, e.top_p, e.min_p), "dim") + "\n" + text
        return text

    def _line(self, e: Token) -> str:
        s = self.style
        if e.forced:  # jump-forward: the grammar left no choice, so no forward ran for this token
            forward = "none: forced"
        else:
            forward = f"+{e.computed}" + (" prefill" if e.computed > 1 else "") + f" ({e.cached} cached)"
        sample = s(f"{label(e.text):>9}", "cyan")
        if e.prob is not None:
            sample += f" {e.prob:.3f}"
            alts = [f"{label(t)} {p:.3f}" for t, p in (e.top or []) if t != e.text and p >= ALT_MIN]
            sample += s("  alt " + " ".join(alts), "dim") if alts else ""
        checks = ",".join(SHORT.get(c, c) for c in e.checks)
        verdict = s("→ " + e.stop, "yellow", "bold") if e.stop else s("· " + self._state(e), "dim")
        line = (
            f"{s(f'{e.index:4d}', 'dim')} │ fwd {forward:<24} │ {sample} │ ctx {e.context:<5} │ "
            f"check {checks} {verdict}"
        )
        if e.masked is not None:  # --constrain changed the model's first choice
            line += s(f"  ⊘ {label(e.masked)} masked → {label(e.text)} ({e.allowed} allowed)", "magenta")
        return line

    def _state(self, e: Token) -> str:
        if e.in_call:
            return "in call"
        if e.in_reasoning or e.reasoning:  # the model's reasoning: never the answer
            return "reasoning" + (f" {show(e.reasoning)}" if e.reasoning else "")
        if e.held:
            return f"holding {show(e.held)}"
        return "none"

    def _frame(self, e: Token) -> str:
        s = self.style
        step = "prefill of the positions added since the last step" if e.computed > 1 else "one new position"
        forward = (
            f"1 forward  {e.computed} position(s) new since the last forward; {e.cached} of common prefix "
            "not re-read (no KV cache: the n-gram reads only its last ORDER-1 tokens)"
            if self.no_kv_cache
            else f"1 forward  computed {e.computed} position(s) ({step}); {e.cached} served from the cache"
        )
        lines = [
            s(f"── token {e.index} " + "─" * 40, "dim"),
            forward,
            f"2 sample   {s(label(e.text), 'cyan')}"
            + (
                f"  p={e.prob:.3f}   most likely: " + ", ".join(f"{label(t)} {p:.3f}" for t, p in e.top)
                if e.prob is not None and e.top
                else ""
            ),
            f"3 append   context is now {e.context} tokens",
            f"4 stop     checked {', '.join(e.checks)}: "
            + (s(f"{e.stop} fired", "yellow", "bold") if e.stop else f"none fired ({self._state(e)})"),
        ]
        if e.masked is not None:
            lines.insert(
                3,
                f"  grammar  the model put {label(e.masked)} first; the call grammar masked it and "
                f"allowed {e.allowed} token(s)",
            )
        if e.reasoning:
            lines.append(f"  reasoning {show(e.reasoning)} (not part of the answer)")
        if e.delta:
            lines.append(f"  shown    {show(e.delta)}")
        return "\n".join(lines)

    # -- the call sequence --------------------------------------------------
    def on_stop(self, e: Stop) -> str:
        return self.style(f"■ stop: {e.reason}", "yellow")

    def on_tool_call(self, e: ToolCall) -> str:
        line = (
            self.style("⚙ parsed ", "yellow") + f"{quoted(e.text)}  →  {visible_line(e.name)}("
            f"{visible(json.dumps(e.arguments, ensure_ascii=False))}) on server {visible_line(e.server)}"
        )
        if e.shape in DESCRIBED:  # not the syntax's own shape: say how it was written
            line += self.style(f"  [written as {DESCRIBED[e.shape]}: {e.shape}]", "dim")
        if e.origins:  # where each value occurs in the context: the user's words, a tool result, neither
            line += "\n" + self.style(
                "  values from: "
                + "; ".join(
                    f"{visible_line(path)} ← {', '.join(sources) or 'the model'}" for path, sources in e.origins.items()
                ),
                "dim",
            )
        return line

    def on_policy(self, e: PolicyDecision) -> str:
        mark = (
            self.style("⛨ policy allow ", "green")
            if e.verdict == "allow"
            else self.style("⛔ policy deny ", "red", "bold")
        )
        return mark + f"{visible_line(e.name)} on {visible_line(e.server)} ({e.tool_class}): {visible_line(e.reason)}"

    def on_tool_error(self, e: ToolError) -> str:
        return (
            self.style(f"✗ {e.stage} error ", "red", "bold")
            + f"in {show(e.text)}\n"
            + self.style("  the model is told: ", "red")
            + "error: "
            + quoted(e.message)
        )

    def on_rpc(self, e: Rpc) -> str:
        arrow = "→" if e.direction == "send" else "←"
        return self.style(f"  {arrow} {visible_line(e.server)} ", "magenta") + visible(preview(e.message))

    def on_tool_result(self, e: ToolReturned) -> str:
        label = "✗ error result: " if e.is_error else "✓ result: "
        return self.style(label, "red" if e.is_error else "green") + quoted(e.text)

    def on_rewrite(self, e) -> str:
        return (
            self.style("⟲ history ", "blue")
            + f"the message as written ({e.written_tokens} tokens) is kept as the template renders its call "
            f"({e.rendered_tokens} tokens): cache rewound to {e.at + e.kept}\n" + MARGIN + quoted(e.rendered)
        )

    def on_rewind(self, e) -> str:
        return self.style("⟲ rewound ", "blue") + f"to position {e.position}: {e.cut:,} token(s) cut from the context"

    def on_edit(self, e) -> str:
        return (
            self.style(f"✎ yours ({visible_line(e.what)}) ", "yellow")
            + f"{visible_line(e.tool)}: {visible(preview(e.before))} → {visible(preview(e.after))}"
        )

    def on_inject(self, e: Inject) -> str:
        if e.computed is not None:  # the model's message was written back: it is part of what was appended
            return (
                self.style("⇢ inject ", "blue") + f"{show(e.text)}: {e.tokens} tokens appended, context "
                f"{e.context}; the next forward computes {e.computed} positions and serves "
                f"{e.context - e.computed} from the cache"
            )
        # the call's last token was sampled but never run through the model, so it is prefilled too
        return (
            self.style("⇢ inject ", "blue") + f"{show(e.text)}: {e.tokens} tokens appended, context "
            f"{e.context}; the next forward computes {e.tokens + 1} positions (these and the call's "
            f"closing token) and serves {e.context - e.tokens - 1} from the cache"
        )

    def on_tools_changed(self, e: ToolsChanged) -> str:
        change = (
            " ".join(
                [
                    *(f"+{visible_line(name)}" for name in e.added),
                    *(f"-{visible_line(name)}" for name in e.removed),
                    *(f"~{visible_line(name)} held" for name in e.held),
                ]
            )
            or "nothing changed"
        )
        line = (
            self.style(f"⟳ {visible_line(e.server)}: tools changed ", "blue") + f"({change}); calls route to them now, "
            "the system prompt describes them from the next conversation"
        )
        if e.held:
            line += "; a changed definition is held at the pinned one until approved"
        if not e.declared:
            line += self.style("; the server had not declared listChanged", "red")
        return line + "".join("\n" + MARGIN + visible_line(what) for what in e.changes)

    def on_notice(self, e: Notice) -> str:
        if e.source == "ngram":
            self.no_kv_cache = True
        return self.style(f"· {visible_line(e.source)}: {quoted(e.message)}", "dim")

    def on_elicitation(self, e: Elicitation) -> str:
        return self.style("? ", "yellow") + elicitation_text(e)

    def on_progress(self, e: Progress) -> str:
        call = f"/{visible_line(e.tool)}" if e.tool is not None else " (no call in flight)"
        return self.style(f"· {visible_line(e.server)}{call}: {progress_text(e)}", "dim")

    def on_app(self, e) -> str:
        return self.style(f"▣ {visible_line(e.server)}/{visible_line(e.tool)} ", "blue") + (
            f"brings its own page ({visible_line(e.uri)}, {len(e.html):,} characters of HTML): kept with the call, "
            "shown by --html, view and the studio"
        )

    def on_task(self, e: TaskUpdate) -> str:
        return self.style(f"◷ {visible_line(e.server)}/{visible_line(e.tool)}: {task_text(e)}", "dim")

    def on_sampling(self, e: SamplingStep) -> str:
        s = self.style
        colour = "red" if e.phase in ("denied", "failed") else "magenta"
        lines = [s("⇄ " + sampling_head(e), colour, "bold")]
        if e.phase == "request":
            report = [*e.mapped, *(f"ignored {what}" for what in e.ignored)]
            lines.append(MARGIN + quoted("; ".join(report)))
        if e.phase != "sent":  # what was sent is the reply just shown
            lines.append(MARGIN + quoted(e.text))
        return "\n".join(lines)

    def on_nested(self, e: Nested) -> str | None:
        """A nested turn's event, drawn by a view of its own (its context is not the conversation's), indented."""
        view = self._nested.get(e.sampling)
        if view is None:
            view = self._nested[e.sampling] = TraceView(io.StringIO(), self.style.enabled, self.frames)
        out = view.out
        assert isinstance(out, io.StringIO)
        view(e.event)
        text, _ = out.getvalue(), (out.seek(0), out.truncate())
        if e.event.kind == "done":
            del self._nested[e.sampling]
        prefix = self.style(f"  #{e.sampling} ┆ ", "magenta")
        return "\n".join(prefix + line for line in text.splitlines()) or None

    def on_request(self, e) -> str:
        cached = "not reported" if e.cached is None else f"{e.cached:,} cached"
        return self.style(
            f"· request: {e.prompt:,} prompt tokens as {e.sent} ({cached}), {e.generated} "
            f"streamed, {visible_line(e.finish)}, {e.seconds:.2f}s",
            "dim",
        )

    def on_done(self, e: Done) -> str:
        s = self.style
        lines = [s(f"── done: {e.reason}, {e.tokens} tokens, {e.tool_calls} tool call(s), {e.seconds:.2f}s ──", "dim")]
        if e.error:
            lines.append(s("error: ", "red", "bold") + quoted(e.error))
        if e.reasoning:
            lines.append(s("reasoning: ", "dim") + s(quoted(e.reasoning), "dim"))
        lines.append(s("answer: ", "green", "bold") + quoted(e.answer))
        return "\n".join(lines)
