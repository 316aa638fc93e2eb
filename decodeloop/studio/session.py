"""A studio session: one conversation whose turns the page drives a step at a time, and the events it made.

The session holds a `Harness` and the `Turn` in progress (turn.py), and takes the same steps `Harness.run`
takes, one per request:
- `ask` renders a message; `step` lets the model write a few tokens; `to_stop` lets it write until a stop
  fires, holding a message that ended in calls before they are dispatched; `to_end` takes every step;
- `send` dispatches the held calls (their arguments edited or not) and holds their results; `inject` puts
  them into the context (a result a person edited goes through the trust boundary again, as the server's did);
- `fork` goes back to a token the model wrote this turn and takes another candidate there (the context and the
  engine's cache rewound to it: only what follows is computed again), keeping the branch it leaves; `back`
  returns to such a branch, the results it had injected put back as they were (no server called again);
- `distribution` and `attention` show the model's own distribution and (the numpy transformer's) heads at a
  token; `use` switches to another model, in a conversation of its own.
Nothing here samples, parses, decides or calls a server: the harness's own steps do, exactly as in
`decodeloop run`.

`EventLog` is the harness's emit: each event in its JSON form (a server's raw text capped as in JSON Lines),
numbered, kept up to a bound (the oldest go first, with a count of how many went), for the page to read from
any number onwards, waiting for new ones.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import secrets
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from decodeloop.decode.model import RecordsAttention
from decodeloop.errors import McpError, MissingDependency
from decodeloop.events import Edited, Event, Notice, ToolCall, ToolReturned
from decodeloop.formats.calls.base import Call
from decodeloop.schema.arguments import ArgumentError, validate_arguments
from decodeloop.text.untrusted import cap_strings, cap_text
from decodeloop.tools.apps import app_tool, result_json, server_tools
from decodeloop.tools.dispatch import call_key
from decodeloop.tools.router import UnknownTool
from decodeloop.trust.policy import EVIDENCE
from decodeloop.trust.provenance import Provenance, origins, provenance
from decodeloop.ui.html import add_attention
from decodeloop.ui.jsonl import CAPPED, DEFAULT_MAX_CHARS  # a server's raw text in an event, capped as there

MAX_EVENTS = 20_000  # events a session keeps for the page; older ones are dropped (and counted)
MAX_TOKENS_A_STEP = 4_096  # `step`'s tokens at most, per request
MAX_BRANCHES = 20  # the branches forks left that a session keeps (the oldest go first)
DISTRIBUTION_TOP = 40  # the most likely tokens `distribution` gives the page to reshape
MAX_QUESTION_CHARS = 2_000  # a question put to the person about an app's call (its arguments are the app's)


@dataclasses.dataclass(frozen=True)
class _AppQuestion:
    """An app's call the policy puts to the user: held, unsent, until the page's person answers (`app_answer`)."""

    server: str
    app: str
    name: str
    arguments: dict


@dataclasses.dataclass(frozen=True)
class _Round:
    """A message of calls this turn and what went back after it: the model's tokens as it wrote them (before
    any rewrite into the template's form), the outcomes injected (a person's edits included), and where the
    next segment began. A branch that crosses it puts the same outcomes back."""

    tokens: tuple[int, ...]
    outcomes: tuple
    after: int


class StudioError(ValueError):
    """A step the session cannot take now (no turn, a turn that is over, a call not held): said to the page."""


class EventLog:
    """The harness's emit: every event numbered and kept (bounded) for readers that wait for the next ones."""

    def __init__(self, max_events: int = MAX_EVENTS, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._events: deque[tuple[int, dict]] = deque(maxlen=max_events)
        self._next = 0
        self._changed = threading.Condition()
        self.closed = False

    def __call__(self, event: Event) -> None:
        data = event.to_json()
        field = CAPPED.get(event.kind)
        if field is not None:
            data[field] = cap_strings(data[field], self.max_chars)
        with self._changed:
            self._events.append((self._next, data))
            self._next += 1
            self._changed.notify_all()

    @property
    def dropped(self) -> int:
        """How many of the oldest events are no longer kept."""
        with self._changed:
            return self._events[0][0] if self._events else self._next

    def since(self, first: int, wait: float = 0.0) -> list[tuple[int, dict]]:
        """The events numbered `first` on (those still kept), waiting up to `wait` seconds for one if none is
        there yet; [] on a timeout or once the log is closed."""
        with self._changed:
            if wait > 0 and self._next <= first and not self.closed:
                self._changed.wait_for(lambda: self._next > first or self.closed, timeout=wait)
            return [(n, data) for n, data in self._events if n >= first]

    def close(self) -> None:
        """Wake every reader: the studio is shutting down."""
        with self._changed:
            self.closed = True
            self._changed.notify_all()


class StudioSession:
    """One conversation driven step by step (see the module docstring). One step runs at a time; a request for
    another while one runs is refused with StudioError."""

    def __init__(
        self,
        harness: Any,
        log: EventLog,
        *,
        model: str = "model",
        others: Mapping[str, Callable[[], Any]] | None = None,
    ) -> None:
        """`harness` runs the conversation of `model`; `others` make the harness of each other model the page
        may choose (`use`), loaded the first time it is chosen."""
        self.harness, self.log, self.model = harness, log, model
        _record_attention(harness)
        self._harnesses: dict[str, Any] = {model: harness}
        self._makers = dict(others or {})
        self.turn: Any = None  # the Turn in progress, or the last one
        self.verdict: Any = None  # the held message's verdict (calls not yet dispatched, or their results held)
        self.outcomes: list | None = None  # the held calls' outcomes, not yet injected
        self.branches: list[dict[str, Any]] = []  # what forks left: {"at", "steps", "text", "results"}, oldest first
        self.rounds: list[_Round] = []  # the turn's messages of calls so far, with what was injected after each
        self.questions: dict[str, _AppQuestion] = {}  # an app's calls waiting for the person's yes, by their id
        self._busy = threading.Lock()

    # -- what the page reads ----------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Where the conversation stands: its phase, the context's length and, when calls are held, each as
        parsed (its tool and arguments, or the error the model will be told)."""
        turn = self.turn
        if turn is None:
            phase = "idle"
        elif turn.over:
            phase = "over"
        elif self.outcomes is not None:
            phase = "results"
        elif self.verdict is not None:
            phase = "held"
        else:
            phase = "writing"
        context = self.harness.context
        held = []
        if self.verdict is not None and self.outcomes is None:
            for parsed in self.verdict.parsed:
                call = parsed.call
                held.append(
                    {"text": parsed.text, "shape": parsed.shape}
                    | (
                        {"name": call.name, "arguments": call.arguments, "handoff": self._handoff(call)}
                        if call is not None
                        else {"error": str(parsed.error)}
                    )
                )
        return {
            "phase": phase,
            "context": 0 if context is None else len(context),
            "reason": turn.reason if phase in ("held", "over") else None,
            "held": held,
            "results": [
                {
                    "name": o.name,
                    "server": o.server,
                    "is_error": o.is_error,
                    "stage": o.stage,
                    "text": o.text,
                    "editable": _editable(o),
                }
                for o in self.outcomes or ()
            ],
            "result_cap": None if turn is None or turn.state is None else turn.state.limit,
            "spans": [] if context is None else [span.to_json() for span in context.spans()],
            "branches": [{"at": b["at"], "text": b["text"], "results": b["results"]} for b in self.branches],
            "model": self.model,
            "attention": isinstance(self.harness.bundle.model, RecordsAttention),
            "models": [*self._harnesses, *(name for name in self._makers if name not in self._harnesses)],
            "answer": "" if turn is None else "".join(turn.answer).strip(),
        }

    # -- an app's page (MCP Apps) ------------------------------------------------------------------------------

    def app_page(self, n: Any) -> str:
        """The HTML of the app event numbered `n` in the log, for its frame (its own URL, its own policy)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise StudioError("app: an event's number")
        found = self.log.since(n)[:1]
        if not found or found[0][0] != n or found[0][1].get("event") != "app":
            raise StudioError(f"event {n} is not an app's page")
        return str(found[0][1]["html"])

    def app_call(self, server: Any, app: Any, name: Any, arguments: Any) -> dict[str, Any]:
        """A tool call the page of `app` (a tool of `server` with an app of its own) asked for: allowed only for a
        tool of that same server whose visibility includes "app", its arguments checked against its schema, and
        decided by the policy as a call whose values came from that server's text. Where the policy would ask
        the user (a side effect under confirm or plan), the call is held and put to the page's person as a
        question: {"confirm": {"id", "question"}}, answered with `app_answer`. Marked in the trace as the app's
        (`tool_call` with shape "app"); its result goes back to the page only, never into the context.
        {"result": CallToolResult} or {"error": why}."""
        if not all(isinstance(v, str) for v in (server, app, name)) or not isinstance(arguments, dict):
            raise StudioError("app-call: server, app and name as strings, arguments as an object")
        with self._step():
            router = self.harness.router
            owner = next((t for t in server_tools(router, server) if t.name == app), None)
            try:
                if owner is None or owner.ui is None:
                    raise LookupError(f"{app} is not a tool of {server} with an app")
                tool = app_tool(router, server, name)
                checked = validate_arguments(name, arguments, tool.input_schema)
            except (LookupError, ArgumentError) as e:
                return self._app_refused(server, app, name, str(e))
            asked = _AppQuestion(server, app, name, checked)
            if any(q.server == server and q.app == app for q in self.questions.values()):
                return self._app_refused(server, app, name, "a call of this app is already waiting for your answer")
            decided, question = self._app_policy(asked, tool, None)
            if question is not None:  # nothing sent: the person answers first
                question = cap_text(question, MAX_QUESTION_CHARS, "question")  # the app's values are in it
                key = secrets.token_hex(8)
                self.questions[key] = asked
                self.harness.emit(
                    Notice(source="studio", message=f"the app of {server}/{app} asks to call {name}: {question}")
                )
                return {"confirm": {"id": key, "question": question}}
            return self._app_run(asked, decided)

    def app_answer(self, key: Any, allow: Any) -> dict[str, Any]:
        """The person's answer to an app's call held as a question (`app_call`): the policy decides again with
        that answer (the context as it is now), and the call runs if it allows it. {"result": ...} or
        {"error": why}."""
        if not isinstance(key, str) or not isinstance(allow, bool):
            raise StudioError("app-answer: id as a string, allow as true or false")
        with self._step():
            asked = self.questions.pop(key, None)
            if asked is None:
                raise StudioError("no app's call is waiting for that answer")
            try:
                tool = app_tool(self.harness.router, asked.server, asked.name)
            except LookupError as e:  # the server's tools changed meanwhile
                return self._app_refused(asked.server, asked.app, asked.name, str(e))
            decided, _ = self._app_policy(asked, tool, allow)
            return self._app_run(asked, decided)

    def _app_policy(self, asked: _AppQuestion, tool: Any, answer: bool | None) -> tuple[Any, str | None]:
        """The policy's decision on an app's call, with `answer` as the person's answer where it asks one; with
        no answer yet, (None, the question) where it would ask. (None, None) with no policy at all."""
        policy = self.harness.policy
        if policy is None or policy.mode == "off":
            return None, None
        questions: list[str] = []

        def confirm(question: str) -> bool:
            questions.append(question)
            return bool(answer)

        seen = Provenance([(f"tool:{asked.server}/{asked.app}", json.dumps(asked.arguments, ensure_ascii=False))], "")
        decided = policy.asking(confirm).check(
            asked.name, asked.server, asked.name, tool, asked.arguments, lambda: seen, None
        )
        if answer is None and questions:
            return None, questions[0]
        return decided, None

    def _app_run(self, asked: _AppQuestion, decided: Any) -> dict[str, Any]:
        """An app's call the policy decided (`decided`; None: no policy): refused, or sent to its server."""
        harness, (server, app, name) = self.harness, (asked.server, asked.app, asked.name)
        if decided is not None:
            harness.emit(decided)
            if decided.verdict != "allow":
                return self._app_refused(server, app, name, f"the policy denies it: {decided.reason}")
        harness.emit(
            ToolCall(
                name=name,
                arguments=asked.arguments,
                server=server,
                text=f"asked by the app of {app}",
                origins={},
                shape="app",
            )
        )
        try:
            result = harness.router.clients[server].call_tool(name, asked.arguments, timeout=harness.config.timeout)
        except McpError as e:
            return self._app_refused(server, app, name, f"{name} failed: {e}")
        harness.emit(
            ToolReturned(
                name=name,
                content=result.content,
                is_error=result.is_error,
                text=cap_text(result.text(), harness.config.max_result_chars),
            )
        )
        return {"result": result_json(result)}

    def _app_refused(self, server: str, app: str, name: str, why: str) -> dict[str, Any]:
        self.harness.emit(
            Notice(source="studio", message=f"the app of {server}/{app} asked to call {name}: refused: {why}")
        )
        return {"error": why}

    # -- the steps ----------------------------------------------------------------------------------------------

    def ask(self, prompt: Any) -> dict[str, Any]:
        """A new user message. The conversation goes on; a turn still in progress ends first, as Ctrl-C ends one
        (cut back to its last whole state: held calls are dropped, never sent)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise StudioError("the message is empty")
        with self._step():
            if self.turn is not None and not self.turn.over:
                self.turn.interrupt()
                self.turn.finish()
            self.verdict = self.outcomes = None
            self.branches, self.rounds = [], []  # a fork's branches are of the turn it forked
            self.turn = self.harness.begin(prompt)
            return self.state()

    def use(self, model: Any) -> dict[str, Any]:
        """Another model, in a conversation of its own (its harness is kept: choosing a model again goes on
        with its conversation). A turn still in progress ends first, as with `ask`."""
        if model == self.model:
            return self.state()
        if not isinstance(model, str) or (model not in self._harnesses and model not in self._makers):
            raise StudioError(f"model: one of {', '.join(self.state()['models'])}")
        with self._step():
            harness = self._harnesses.get(model)
            if harness is None:
                try:
                    harness = self._makers[model]()
                except (ValueError, OSError, MissingDependency) as e:  # a model that does not load here
                    raise StudioError(f"{model} does not load: {e}") from None
                _record_attention(harness)
                self._harnesses[model] = harness
            if self.turn is not None and not self.turn.over:
                self.turn.interrupt()
                self.turn.finish()
            self.harness, self.model, self.turn = harness, model, None
            self.verdict = self.outcomes = None
            self.branches, self.rounds = [], []
            self.log(Notice(source="studio", message=f"model: {model}"))
            return self.state()

    def step(self, tokens: int = 1) -> dict[str, Any]:
        """The model writes `tokens` more tokens at most (a stop may end the message first)."""
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_TOKENS_A_STEP:
            raise StudioError(f"tokens: a whole number from 1 to {MAX_TOKENS_A_STEP}")
        with self._step():
            self._generate(tokens)
            return self.state()

    def to_stop(self) -> dict[str, Any]:
        """The model writes until a stop fires: a message that ended in calls is held before dispatch."""
        with self._step():
            self._generate(None)
            return self.state()

    def send(self, arguments: Any = None) -> dict[str, Any]:
        """The held calls through the policy to their servers; their outcomes (results, or errors for the
        model) are held before they are injected.

        `arguments`: for each held call in order, its arguments as the person edited them, or None to send
        the model's. An edited call goes through the schema and the policy as the model's would (arguments the
        schema refuses come back to the model as its error); an `edit` event says what changed."""
        with self._step():
            if arguments is not None:
                self._edit(arguments)
            self._dispatch()
            return self.state()

    def inject(self, results: Any = None) -> dict[str, Any]:
        """The held outcomes into the context, and the model writes on from there at the next step.

        `results`: for each outcome in order, the text a person wants the server to have answered, or None to
        keep it. An edited result is admitted as the server's was (invisible characters removed, the chat
        format's markers escaped, cut to the result cap, each with a notice), and an `edit` event says what
        changed; only a server's answer can be edited, not the harness's own errors."""
        with self._step():
            if results is not None:
                self._edit_results(results)
            self._inject()
            return self.state()

    def to_end(self) -> dict[str, Any]:
        """Every step until the turn is over (held calls are sent first)."""
        with self._step():
            self._writing()
            while True:
                if self.verdict is not None and self.outcomes is None:
                    self._dispatch()
                if self.outcomes is not None:
                    self._inject()
                if self.turn.over:
                    return self.state()
                self._generate(None)

    def fork(self, at: Any, token: Any) -> dict[str, Any]:
        """Go back to context position `at` (where a token of this turn was appended) and append `token` there
        instead: the turn as those tokens left it, the stop check read again, the cache rewound; held calls
        past `at` are dropped. A call the fork closes is held, as the model's would be."""
        for name, value in (("at", at), ("token", token)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise StudioError(f"{name}: a whole number, 0 or more")
        harness = self.harness
        if getattr(harness.engine, "choose", None) is None:
            raise StudioError("this engine samples for itself: a token cannot be chosen for it")
        if token >= harness.tokenizer.vocab_size:
            raise StudioError(f"token {token} is not in the vocabulary (0..{harness.tokenizer.vocab_size - 1})")
        with self._step():
            self._take_instead(at, [[token]])
            return self.state()

    def back(self, n: Any) -> dict[str, Any]:
        """Back to branch `n` (`state()["branches"]`): the model's tokens a fork left there, taken again in order
        from its position (the stop check reads them again), the results the branch had injected after each of
        its messages of calls put back as they were (counted as the turn counts them, no server called again),
        and the branch this leaves kept in its place. Where the tokens read differently now (another count of
        calls), the message is held there instead."""
        with self._step():
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < len(self.branches):
                raise StudioError(
                    f"branch: a number from 0 to {len(self.branches) - 1}" if self.branches else "no branch"
                )
            branch = self.branches.pop(n)
            self._take_instead(branch["at"], branch["steps"])
            return self.state()

    def _take_instead(self, at: int, steps: list) -> None:
        """Rewind the turn to `at` and take `steps` there (token lists, and rounds whose outcomes go back after
        the message before them), keeping what the rewind cuts as a branch."""
        turn = self.turn
        if turn is None:
            raise StudioError("no turn yet: ask something first")
        left = self._branch_from(at)
        try:
            turn.rewind(at)
        except ValueError as e:  # outside this turn, or inside what the harness injected
            raise StudioError(str(e)) from None
        self.verdict = self.outcomes = None
        self.rounds = [r for r in self.rounds if r.after <= at]
        if left != [[]]:
            decode = self.harness.tokenizer.decode
            rounds = [s for s in left if isinstance(s, _Round)]
            text = decode([t for s in left if not isinstance(s, _Round) for t in s])
            self.branches.append({"at": at, "steps": left, "text": text, "results": len(rounds)})
            del self.branches[:-MAX_BRANCHES]
        verdict = None
        for step in steps:
            if isinstance(step, _Round):
                if verdict is None or verdict.reason != "tool_call" or len(verdict.parsed) != len(step.outcomes):
                    break  # the tokens read differently this time: their message is held as they left it
                self.verdict, self.outcomes = verdict, list(turn.redo(verdict, list(step.outcomes)))
                self.harness.emit(
                    Notice(
                        source="studio",
                        message=f"back to a branch: {len(step.outcomes)} result(s) it had injected put back, "
                        "not sent again",
                    )
                )
                self._inject()
                verdict = None
                if turn.over:
                    return
                continue
            for token in step:
                try:
                    verdict = turn.take(token)
                except ValueError as e:  # not in the vocabulary, or an engine that samples for itself
                    raise StudioError(str(e)) from None
                if verdict.reason is not None:
                    break
        if verdict is not None:
            self._verdict(verdict)

    def _branch_from(self, at: int) -> list:
        """What a rewind to `at` cuts, as steps to take again: the model's tokens from `at` to the end of its
        message, then for each message of calls after it the round (its outcomes) and the next message's tokens
        as the model wrote them."""
        context = self.harness.context
        cut = [r for r in self.rounds if r.after > at]
        steps: list = [_written_from(context, at)]
        for n, round_ in enumerate(cut):
            following = list(cut[n + 1].tokens) if n + 1 < len(cut) else _written_from(context, round_.after)
            steps += [round_, following]
        return steps

    def distribution(self, at: Any, n: Any = DISTRIBUTION_TOP) -> dict[str, Any]:
        """The model's own distribution for the token at context position `at` (after the context before it):
        the `n` most likely tokens with their logits, before any logits processor and any sampling setting, for
        the page to reshape with a temperature, top-k and top-p. It runs the model over the context up to `at`:
        the cache keeps what that shares with the rest, and the next token computes the rest again (its event
        says so)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= DISTRIBUTION_TOP:
            raise StudioError(f"n: a whole number from 1 to {DISTRIBUTION_TOP}")
        if isinstance(at, bool) or not isinstance(at, int):
            raise StudioError("at: a whole number")
        harness = self.harness
        if getattr(harness.engine, "choose", None) is None:
            raise StudioError("this engine samples for itself: its distribution is not here to show")
        with self._step():
            context = harness.context
            if context is None or not 1 <= at <= len(context):
                raise StudioError(f"at: a position from 1 to {0 if context is None else len(context)}")
            logits = harness.bundle.model.forward(context.ids[:at])
            values = logits.tolist() if hasattr(logits, "tolist") else list(logits)
            if values and isinstance(values[0], list):  # a batch of one
                values = values[0]
            best = heapq.nlargest(n, range(len(values)), key=values.__getitem__)
            label = harness.tokenizer.token_text
            return {"at": at, "top": [[label(i), i, float(values[i])] for i in best]}

    def attention(self, at: Any) -> dict[str, Any]:
        """For a model that keeps its attention maps (the numpy transformer): every head's weights from the
        position that chose the token at context position `at`, over the keys in its window, and which head
        copied most from tool results this conversation (the copy head), as the viewer's page shows them
        (ui/html.py's `add_attention`, the data `attention_peek.py` draws)."""
        if isinstance(at, bool) or not isinstance(at, int):
            raise StudioError("at: a whole number")
        harness = self.harness
        if not isinstance(harness.bundle.model, RecordsAttention):
            raise StudioError(f"{self.model} keeps no attention maps: the numpy transformer does")
        with self._step():
            events = [data for _, data in self.log.since(0) if data["event"] in ("prompt", "inject", "token")]
            chosen = [e for e in events if e["event"] == "token" and e["context"] == at + 1]
            if not chosen:
                raise StudioError(f"at: no token of this conversation was appended at position {at}")
            events = [dict(e) for e in events]  # the log's own stay as they were emitted
            add_attention(events, harness.bundle.model, harness.tokenizer)
            found = [e for e in events if e["event"] == "token" and e["context"] == at + 1][-1].get("attention")
            if found is None:
                raise StudioError(f"the model no longer holds the maps of position {at - 1} (the cache moved on)")
            return {"at": at, **found}

    # -- inside -------------------------------------------------------------------------------------------------

    def _step(self) -> _Busy:
        return _Busy(self._busy)

    def _writing(self) -> Any:
        turn = self.turn
        if turn is None:
            raise StudioError("no turn yet: ask something first")
        if turn.over:
            raise StudioError(f"the turn is over ({turn.reason}): ask something else")
        return turn

    def _generate(self, limit: int | None) -> None:
        turn = self._writing()
        if self.outcomes is not None:
            raise StudioError("the results are held: inject them first")
        if self.verdict is not None:
            raise StudioError("the message's calls are held: send them first")
        self._verdict(turn.generate(limit))

    def _verdict(self, verdict: Any) -> None:
        """A segment's verdict: calls held, a turn that is over finished, a pause left as it is."""
        if verdict.reason == "tool_call":
            self.verdict = verdict
        elif self.turn.over:
            self.turn.finish()

    def _handoff(self, call: Call) -> dict[str, Any]:
        """What dispatch will do with a held call, found as it finds it and changing nothing: the schema's
        verdict, the repeat guard's, the policy's decision with its reason, and the JSON-RPC request the server
        would get. Where the decision cannot be known yet (the masked mode's re-run, a question to the user),
        it says so; the decision that counts is made when the call is sent."""
        router, state = self.harness.router, self.turn.state
        try:
            tool = router.resolve(call.name)
        except UnknownTool as e:
            return {"refused": "route", "why": str(e)}
        try:
            arguments = validate_arguments(call.name, call.arguments, tool.input_schema)
        except ArgumentError as e:
            return {"refused": "arguments", "why": str(e)}
        if state.repeated(call_key(call.name, arguments)):
            return {"refused": "repeat", "why": f"{call.name} was already called with these arguments in this turn"}
        route = router.routes[call.name]
        request = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": route.remote, "arguments": arguments}}
        seen = provenance(state.context, state.tokenizer)  # the context as it is now (dispatch reads it anew too)
        policy = state.policy
        if policy is None or policy.mode == "off":
            decision = {"verdict": "allow", "reason": "no policy: every call runs"}
        elif policy.mode == "confirm" and policy.confirm is not None:  # asking now would ask for nothing
            decision = {"verdict": "ask", "reason": "a side-effecting call after a tool result is put to you"}
        else:
            made = policy.check(call.name, route.server, route.remote, tool, arguments, lambda: seen, state.masked)
            if made.verdict == EVIDENCE:
                decision = {"verdict": "later", "reason": "the masked mode decides after a masked re-run, on send"}
            else:
                decision = {"verdict": made.verdict, "reason": made.reason, "class": made.tool_class}
        # where each argument's value occurs in the context: the user's message, a tool's result (an edited one
        # included), or nowhere (the model wrote it itself): what the policy reads after a tool result
        return {"server": route.server, "policy": decision, "request": request, "origins": origins(arguments, seen)}

    def _edit(self, arguments: Any) -> None:
        verdict = self.verdict
        if verdict is None:
            raise StudioError("no calls are held: the model has not closed a call")
        if not isinstance(arguments, list) or len(arguments) != len(verdict.parsed):
            raise StudioError(f"arguments: a list of {len(verdict.parsed)} (one per held call, null to keep one)")
        parsed = list(verdict.parsed)
        for n, (held, edited) in enumerate(zip(parsed, arguments)):
            if edited is None:
                continue
            if held.call is None:
                raise StudioError(f"call {n + 1} does not parse: it goes back to the model as its error, unedited")
            if not isinstance(edited, dict):
                raise StudioError(f"call {n + 1}'s arguments: a JSON object")
            if edited != held.call.arguments:
                self.harness.emit(
                    Edited(what="arguments", tool=held.call.name, before=held.call.arguments, after=edited)
                )
                parsed[n] = dataclasses.replace(held, call=Call(held.call.name, edited))
        self.verdict = dataclasses.replace(verdict, parsed=tuple(parsed))

    def _dispatch(self) -> None:
        turn, verdict = self._writing(), self.verdict
        if self.outcomes is not None:
            raise StudioError("the results are held: inject them first")
        if verdict is None:
            raise StudioError("no calls are held: the model has not closed a call")
        self.outcomes = turn.dispatch(verdict)

    def _edit_results(self, results: Any) -> None:
        outcomes, state = self.outcomes, self.turn.state
        if outcomes is None:
            raise StudioError("no results are held: send the calls first")
        if not isinstance(results, list) or len(results) != len(outcomes):
            raise StudioError(f"results: a list of {len(outcomes)} (one per result, null to keep one)")
        for n, (outcome, text) in enumerate(zip(outcomes, results)):
            if text is None or text == outcome.text:
                continue
            if not isinstance(text, str):
                raise StudioError(f"result {n + 1}: a string")
            if not _editable(outcome):
                raise StudioError(f"result {n + 1} is the harness's own error ({outcome.stage}), not a server's answer")
        for n, (outcome, text) in enumerate(zip(outcomes, results)):
            if text is None or text == outcome.text:
                continue
            name = outcome.name or "a tool"
            self.harness.emit(Edited(what="result", tool=name, before=outcome.text, after=text))
            what = f"the {'error for' if outcome.is_error else 'result of'} {name} (edited)"
            _, admitted = state.admit(text, what, server_text=True, cut="result")
            outcomes[n] = dataclasses.replace(outcome, text=admitted)

    def _inject(self) -> None:
        turn, verdict, outcomes = self._writing(), self.verdict, self.outcomes
        if outcomes is None:
            raise StudioError("no results are held: send the calls first")
        self.verdict = self.outcomes = None
        context = self.harness.context
        written = tuple(context.ids[turn.segment_at :])  # the message as the model wrote it, before any rewrite
        if not turn.inject(verdict, outcomes):
            turn.finish()  # the turn gave up (the repeat guard, or too many failed calls)
            return
        self.rounds.append(_Round(written, tuple(outcomes), len(context)))


def _written_from(context: Any, at: int) -> list[int]:
    """The model's tokens from `at` on, up to the first token it did not write (an injected message)."""
    out: list[int] = []
    for span in context.spans(at) if context is not None else ():
        if span.source not in ("model", "reasoning"):
            break
        out += context.ids[span.start : span.end]
    return out


def _record_attention(harness: Any) -> None:
    """A model that can keep its attention maps keeps them, for `attention`."""
    model = harness.bundle.model
    if isinstance(model, RecordsAttention):
        model.record_attention = True


def _editable(outcome: Any) -> bool:
    """A server's answer (a result, or the error it answered with), which a person may change; not the
    harness's own refusals (a call that did not parse, route, validate or pass the policy)."""
    return outcome.server is not None and outcome.stage in (None, "call")


class _Busy:
    """The session's one step at a time: a second request while a step runs is refused, not queued."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise StudioError("a step is running: wait for it to end")

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


__all__ = ["EventLog", "StudioError", "StudioSession"]
