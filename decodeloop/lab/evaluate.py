"""`decodeloop eval`: run a model through the harness on held-out episodes and count what it did.

Each episode is one turn against the real MCP servers. The counting reads only
the turn's events, so it measures exactly what the trace shows:

- per call the model wrote: well formed (it parsed), correct tool (it named the
  episode's tool), correct arguments (right tool and, after schema conversion,
  exactly the episode's arguments);
- per episode: retries (calls written after a failed one), answered (the turn
  ended at eos with a non-empty answer), out of retries (the turn gave up),
  hit the token cap, value copy (answered, and the answer holds every value
  the episode lists),
  also per tool the episode needs, since the answers differ most by tool;
- with --constrain: tokens where the call grammar ruled out the model's most
  likely token (the token events that carry `masked`);
- tokens per second over all generated tokens and the wall time of the turns.

`evaluate` runs the episodes one after another through one harness.
`evaluate_concurrently` keeps K episodes in flight: K workers, each with its
own harness (its own engine, sampler and context) and its own MCP sessions,
take the episodes in order; the outcomes come back in episode order, so for a
deterministic engine they are the same as with one worker. Requests to a
remote engine go out from the workers' threads as they come, never one at a
time. A model that runs in this process (one KV cache, not thread-safe) is
never shared between workers: `serial_reason` says so, and the caller runs it
with one worker.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from decodeloop.events import Done, Event, Stop, Token, ToolCall, ToolError, ToolReturned
from decodeloop.harness import Harness


@dataclass
class EpisodeOutcome:
    tool: str = ""  # the tool the episode needs
    calls: int = 0
    well_formed: int = 0
    correct_tool: int = 0
    correct_arguments: int = 0
    retries: int = 0
    answered: bool = False
    out_of_retries: bool = False
    hit_token_cap: bool = False
    copied_values: bool = False
    masked: int = 0  # tokens whose first choice the call grammar ruled out (--constrain)
    tokens: int = 0
    seconds: float = 0.0
    answer: str = ""
    ended: str = ""  # the turn's Done reason: eos, tool_call_limit, max_tokens, error, ...


@dataclass
class Summary:
    episodes: int
    calls: int
    well_formed_rate: float
    correct_tool_rate: float
    correct_arguments_rate: float
    retries_per_episode: float
    answered: int
    out_of_retries: int
    hit_token_cap: int
    value_copy_rate: float
    tokens_per_second: float
    value_copy_by_tool: dict  # tool -> [episodes whose answer holds the values, episodes]
    masked_tokens: int = 0  # tokens whose first choice the call grammar ruled out (--constrain)
    concurrency: int = 1  # episodes in flight at once
    wall_seconds: float = 0.0  # from the first episode's start to the last one's end (all workers)
    ended: dict = field(default_factory=dict)  # Done reason -> episodes that ended so, most first

    def rows(self) -> list[tuple[str, str]]:
        n = self.episodes or 1
        return [
            ("episodes", f"{self.episodes}"),
            ("calls written", f"{self.calls}"),
            ("well-formed call rate", f"{self.well_formed_rate:.1%}"),
            ("correct-tool rate", f"{self.correct_tool_rate:.1%}"),
            ("correct-arguments rate", f"{self.correct_arguments_rate:.1%}"),
            ("retries per episode", f"{self.retries_per_episode:.2f}"),
            ("episodes answered", f"{self.answered} ({self.answered / n:.1%})"),
            ("out of retries", f"{self.out_of_retries} ({self.out_of_retries / n:.1%})"),
            ("hit the token cap", f"{self.hit_token_cap} ({self.hit_token_cap / n:.1%})"),
            ("turns ended by", ", ".join(f"{reason} {count}" for reason, count in self.ended.items()) or "-"),
            ("value copy (answer holds the result's values)", f"{self.value_copy_rate:.1%}"),
            *((f"  {tool}", f"{copied}/{total}") for tool, (copied, total) in self.value_copy_by_tool.items()),
            ("tokens per second", f"{self.tokens_per_second:,.0f}"),
            *(
                [(f"episodes per second ({self.concurrency} in flight)", f"{self.episodes / self.wall_seconds:,.2f}")]
                if self.concurrency > 1 and self.wall_seconds
                else []
            ),
            *([("tokens the call grammar overrode", f"{self.masked_tokens:,}")] if self.masked_tokens else []),
        ]


def score_episode(episode, events: list[Event]) -> EpisodeOutcome:
    """Count one turn's calls and outcome from its events."""
    out = EpisodeOutcome(tool=episode.tool)
    last_failed = False
    for event in events:
        if isinstance(event, Token):
            out.masked += event.masked is not None
        elif isinstance(event, Stop) and event.reason == "tool_call":
            out.retries += last_failed  # a message of calls written after a failed round
        elif isinstance(event, ToolError):
            last_failed = True
            if event.stage == "call":  # the server's failure of a call already counted at its ToolCall
                continue
            out.calls += 1  # a message may hold several calls: each is counted, as each has its event
            if event.stage != "parse":
                out.well_formed += 1
                out.correct_tool += event.name == episode.tool
        elif isinstance(event, ToolCall):
            out.calls += 1
            out.well_formed += 1
            out.correct_tool += event.name == episode.tool
            out.correct_arguments += event.name == episode.tool and event.arguments == episode.arguments
        elif isinstance(event, ToolReturned):
            last_failed = event.is_error
        elif isinstance(event, Done):
            out.answer, out.tokens, out.seconds, out.ended = event.answer, event.tokens, event.seconds, event.reason
            out.answered = event.reason == "eos" and bool(event.answer)
            out.out_of_retries = event.reason in ("max_retries", "repeated_call")
            out.hit_token_cap = event.reason == "max_tokens"
            out.copied_values = out.answered and all(v in event.answer for v in episode.values)
    return out


def summarize(outcomes: list[EpisodeOutcome]) -> Summary:
    calls = sum(o.calls for o in outcomes)
    n = len(outcomes)
    seconds = sum(o.seconds for o in outcomes)
    by_tool: dict[str, list[int]] = {}
    for o in sorted(outcomes, key=lambda o: o.tool):
        counts = by_tool.setdefault(o.tool, [0, 0])
        counts[0] += o.copied_values
        counts[1] += 1
    return Summary(
        episodes=n,
        calls=calls,
        well_formed_rate=sum(o.well_formed for o in outcomes) / calls if calls else 0.0,
        correct_tool_rate=sum(o.correct_tool for o in outcomes) / calls if calls else 0.0,
        correct_arguments_rate=sum(o.correct_arguments for o in outcomes) / calls if calls else 0.0,
        retries_per_episode=sum(o.retries for o in outcomes) / n if n else 0.0,
        answered=sum(o.answered for o in outcomes),
        out_of_retries=sum(o.out_of_retries for o in outcomes),
        hit_token_cap=sum(o.hit_token_cap for o in outcomes),
        value_copy_rate=sum(o.copied_values for o in outcomes) / n if n else 0.0,
        tokens_per_second=sum(o.tokens for o in outcomes) / seconds if seconds else 0.0,
        value_copy_by_tool=by_tool,
        masked_tokens=sum(o.masked for o in outcomes),
        ended=dict(Counter(o.ended for o in outcomes).most_common()),
    )


def evaluate(
    make_harness: Callable[[Callable[[Event], None]], Harness],
    episodes: list,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Summary, list[EpisodeOutcome]]:
    """Run every episode through a harness built around an event recorder, and count."""
    recorded: list[Event] = []
    harness = make_harness(recorded.append)
    outcomes = []
    for i, episode in enumerate(episodes):
        recorded.clear()
        harness.reset()  # each episode is a conversation of its own
        harness.run(episode.user)
        outcomes.append(score_episode(episode, recorded))
        if progress:
            progress(i + 1, len(episodes))
    return summarize(outcomes), outcomes


def serial_reason(bundle) -> str | None:
    """Why this bundle's episodes cannot be in flight together (None: they can).

    An engine that samples for itself (a server) is made once per harness and
    shares nothing between them; a model run in this process has one KV cache
    that every harness would step, so it is never shared between threads.
    """
    if bundle.model is None:
        return None
    return (
        f"the model {bundle.name!r} runs in this process with one KV cache and is not thread-safe; "
        "its episodes run one at a time"
    )


def evaluate_concurrently(
    open_worker, episodes: list, concurrency: int, progress: Callable[[int, int], None] | None = None
) -> tuple[Summary, list[EpisodeOutcome]]:
    """Run the episodes with `concurrency` in flight; outcomes in episode order.

    `open_worker(emit)` is a context manager that starts one worker's MCP
    servers and yields its Harness, built around `emit`. A worker takes the next
    episode when it finishes one (reset between them, as `evaluate` does). The
    first error any worker raises stops the others from taking more episodes
    and is raised here once they have shut their servers down.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    outcomes: list[EpisodeOutcome | None] = [None] * len(episodes)
    lock = threading.Lock()
    pending = iter(range(len(episodes)))
    errors: list[BaseException] = []
    stop = threading.Event()
    finished = 0

    def work() -> None:
        nonlocal finished
        recorded: list[Event] = []
        try:
            with open_worker(recorded.append) as harness:
                while not stop.is_set():
                    with lock:
                        i = next(pending, None)
                    if i is None:
                        return
                    recorded.clear()
                    harness.reset()
                    harness.run(episodes[i].user)
                    outcomes[i] = score_episode(episodes[i], recorded)
                    with lock:  # one progress line at a time, counts in order
                        finished += 1
                        if progress:
                            progress(finished, len(episodes))
        except BaseException as exc:  # raised on the caller's thread below
            with lock:
                errors.append(exc)
            stop.set()

    started = time.perf_counter()
    workers = [
        threading.Thread(target=work, name=f"eval-worker-{k}", daemon=True)
        for k in range(min(concurrency, len(episodes)))
    ]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            while worker.is_alive():
                worker.join(0.2)  # short joins, so Ctrl-C reaches this thread
    except KeyboardInterrupt:
        stop.set()  # workers finish the episode in hand, shut their servers and exit
        raise
    if errors:
        raise errors[0]
    summary = summarize(outcomes)  # type: ignore[arg-type]
    summary.concurrency, summary.wall_seconds = concurrency, time.perf_counter() - started
    return summary, outcomes  # type: ignore[return-value]


class ProgressBar:
    """A one-line bar on stderr, redrawn in place; silent when stderr is not a terminal."""

    def __init__(self, label: str, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.label = label
        self.started = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        width = 30
        filled = width * done // max(total, 1)
        rate = done / max(time.perf_counter() - self.started, 1e-9)
        self.stream.write(f"\r{self.label} [{'█' * filled}{'·' * (width - filled)}] {done}/{total} ({rate:.1f}/s)")
        if done == total:
            self.stream.write("\n")
        self.stream.flush()


def summary_json(summary: Summary, **context) -> dict:
    return {**context, **asdict(summary)}
