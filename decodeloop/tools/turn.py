"""What dispatch knows of the turn it serves: `DispatchState`.

One dispatch state per user turn, made by the harness. For each round of calls (one message's calls) it decodes the
context's provenance at most once: the policy and the ToolCall event's origins read the same decoding. It
holds the repeat guard (the keys of calls answered this turn, and how many calls came again after their
result), the run of rounds in which every call failed, and the turn's budget for tool-result text, shared
out among each round's calls. Every text it hands to the context goes through trust.admit_result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from decodeloop.decode.context import Context
from decodeloop.events import Emit, Notice, PolicyDecision
from decodeloop.formats.tokenizer import Tokenizer
from decodeloop.trust.admit import Admitted, admit_result
from decodeloop.trust.markers import Markers
from decodeloop.trust.policy import Policy
from decodeloop.trust.provenance import Provenance, origins, provenance

DEFAULT_MAX_RESULT_CHARS = 16_000
DEFAULT_MAX_TURN_RESULT_CHARS = 64_000  # every tool result of one turn together
MIN_RESULT_CHARS = 200  # what a result keeps once the turn's budget is spent


@dataclass
class DispatchState:
    """What dispatch reads and keeps across one turn's rounds: the context and its provenance, the policy, the
    calls answered, the repeats and failures, and the budget for tool-result text."""

    context: Context
    tokenizer: Tokenizer
    emit: Emit
    markers: Markers
    policy: Policy | None = None
    masked: list[tuple[str, Any]] | None = None  # the `masked` mode's evidence for this round, once the harness ran it
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    max_turn_result_chars: int = DEFAULT_MAX_TURN_RESULT_CHARS
    answered: set[str] = field(default_factory=set)  # keys (dispatch.call_key) of calls answered this turn
    repeats: int = 0  # calls made again after their result, this turn
    failures: int = 0  # consecutive rounds in which every call failed
    limit: int = DEFAULT_MAX_RESULT_CHARS  # this round's cap on one result
    _budget: int = field(init=False)  # tool-result text the turn may still inject
    _seen: Provenance | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._budget = self.max_turn_result_chars

    def round(self, calls: int) -> None:
        """A new round of `calls` calls: each gets its share of what is left of the budget (at least a line)."""
        self._seen = None  # the context grew: decode it again when asked
        self.masked = None  # a new message: its masked re-run is yet to run
        budget = self._budget
        self.limit = min(self.max_result_chars, max(budget // max(calls, 1), MIN_RESULT_CHARS))
        if self.limit < self.max_result_chars and budget < self.max_turn_result_chars:  # spent in part
            self.emit(
                Notice(
                    source="harness",
                    message=f"the turn's budget for tool results ({self.max_turn_result_chars:,} "
                    f"characters) has {max(budget, 0):,} left: results are cut to {self.limit:,}",
                )
            )

    def provenance(self) -> Provenance:
        """Where the context's text came from, decoded once per round."""
        if self._seen is None:
            self._seen = provenance(self.context, self.tokenizer)
        return self._seen

    def check(self, name: str, server: str, remote: str, tool: Any, arguments: dict) -> PolicyDecision | None:
        """The policy's decision on a call (None without a policy); EVIDENCE while the masked re-run is needed."""
        if self.policy is None:
            return None
        return self.policy.check(name, server, remote, tool, arguments, self.provenance, self.masked)

    def origins(self, arguments: dict) -> dict[str, list[str]]:
        """Where each argument value of a call occurs in the context."""
        return origins(arguments, self.provenance())

    def repeated(self, key: str) -> bool:
        """The same call again after its result: the commonest small-model failure."""
        return key in self.answered

    def admit(self, text: str, what: str, *, server_text: bool, cut: str | None = None) -> Admitted:
        """Text for the context (trust.admit_result): capped to this round's limit when `cut` names what it is,
        with markers escaped when a server wrote it or is quoted in it."""
        limit = self.limit if cut is not None else None
        markers = self.markers if server_text else None
        return admit_result(text, what, self.emit, markers, limit=limit, cut=cut or "result")

    def snapshot(self) -> tuple:
        """What the rounds so far have done (the calls answered, the repeats, the failures, the budget spent):
        `restore` takes the state back to it when the turn is rewound."""
        return frozenset(self.answered), self.repeats, self.failures, self._budget, self.limit

    def restore(self, snapshot: tuple) -> None:
        answered, self.repeats, self.failures, self._budget, self.limit = snapshot
        self.answered = set(answered)
        self._seen, self.masked = None, None

    def record(self, outcomes: Sequence[Any]) -> None:
        """A round's outcomes (dispatch.Outcome): the budget they spent, the calls answered and repeated."""
        self._budget -= sum(len(o.text) for o in outcomes)
        self.answered.update(o.key for o in outcomes if o.key is not None and not o.is_error)
        self.repeats += sum(o.stage == "repeat" for o in outcomes)
        self.failures = self.failures + 1 if all(o.is_error for o in outcomes) else 0
