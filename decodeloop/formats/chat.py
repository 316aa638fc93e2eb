"""Chat formats: where special tokens go, and how each message becomes token ids.

A chat format owns the markup of one model family: how the first prompt (system
prompt with the tools, the user's question) is rendered, and the suffix each
later message adds (tool results after a call, the next user turn after the
assistant's answer). Everything is appended as token ids and never
re-tokenized, so the model's cache always covers what came before.

Role boundaries are special tokens placed here and nowhere else: user text and
tool results go through `tokenizer.encode`, which never yields a special id, so
a tool result that spells a role marker cannot end its message or open a turn.

Every method returns `Pieces`: a list of (ids, source) in order, so the context
knows where each span came from (`context.py`): "chat" for markup, "system",
"user", "tool:SERVER/TOOL" for content.

`LabChat` is the lab models' format (table, n-gram, transformer), the only copy
of it; the corpus and training use it too:

    <|system|>{preamble + tool paragraphs}<|user|>{question}<|assistant|>
    ... model writes, possibly a call ...
    <|tool|>{result}<|assistant|>        <- injected by the harness after a call
    ... model writes its answer ...<|eos|>
    <|user|>{next question}<|assistant|> <- the next turn of a conversation

Real models use their own chat template (`chat_template.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# the lab format's special tokens, by name (others import them from here too)
from decodeloop.formats.tokenizer import ASSISTANT, EOS, SYSTEM, TOOL, USER

PREAMBLE = "You are a helpful assistant."

Pieces = list[tuple[list[int], str]]  # (ids, source) in order


@dataclass(slots=True)
class ToolReply:
    """One call's outcome as a chat format renders it."""

    name: str  # the tool the model called (its exposed name)
    server: str | None  # the server whose text `text` carries; None for the harness's own words alone
    text: str  # what the model is told (already rendered by the call syntax)
    is_error: bool = False

    @property
    def source(self) -> str:
        return f"tool:{self.server or '-'}/{self.name or '-'}"


class ChatFormat(Protocol):
    """How messages become ids for one model family.

    `ended` says whether the model closed its own message with one of
    `stop_ids`; when it did not (a call closed it, a cap or a stop string cut
    it), the format closes the message itself before what follows.
    """

    stop_ids: frozenset[int]  # the ids that end the assistant's turn
    call_shapes: str  # "lenient" when the family writes calls in other shapes too (--call-shapes' default)
    warnings: Sequence[str]  # what the format noticed (a template that is not append-only), shown once each

    def system_text(self, tools: Sequence, system: str | None = None) -> str: ...

    def start(self, tools: Sequence, user: str, system: str | None = None) -> Pieces: ...

    def tool_results(self, replies: Sequence[ToolReply], ended: bool) -> Pieces: ...

    def user_turn(self, user: str, ended: bool) -> Pieces: ...


def pieces_ids(pieces: Pieces) -> list[int]:
    """All the ids of some pieces, in order."""
    return [token for ids, _ in pieces for token in ids]


class LabChat:
    """The lab models' chat format (see the module docstring)."""

    call_shapes = "strict"  # the lab models write one shape
    warnings: tuple[str, ...] = ()  # a format the harness wrote itself has nothing to warn of

    def __init__(self, tokenizer, syntax, preamble: str = PREAMBLE) -> None:
        self.tokenizer = tokenizer
        self.syntax = syntax
        self.preamble = preamble
        self._system = tokenizer.special(SYSTEM)
        self._user = tokenizer.special(USER)
        self._assistant = tokenizer.special(ASSISTANT)
        self._tool = tokenizer.special(TOOL)
        self._eos = tokenizer.special(EOS)
        # Every special ends the model's turn: a model that writes "<|tool|>" is
        # trying to speak for a tool, which only the harness may do.
        self.stop_ids = frozenset(tokenizer.special_tokens.values())

    def system_text(self, tools: Sequence, system: str | None = None) -> str:
        """The system prompt: a preamble, then the call syntax and one paragraph per tool."""
        preamble = self.preamble if system is None else system
        if not tools:
            return preamble
        return preamble + " You can use the tools below.\n\n" + self.syntax.describe(tools)

    def start(self, tools: Sequence, user: str, system: str | None = None) -> Pieces:
        """The context a conversation starts from, ending where the assistant speaks."""
        encode = self.tokenizer.encode
        return [
            ([self._system], "chat"),
            (encode(self.system_text(tools, system)), "system"),
            ([self._user], "chat"),
            (encode(user), "user"),
            ([self._assistant], "chat"),
        ]

    def tool_results(self, replies: Sequence[ToolReply], ended: bool) -> Pieces:
        """After a call: one tool message per reply, then the assistant resumes."""
        pieces: Pieces = []
        for reply in replies:
            pieces += [([self._tool], "chat"), (self.tokenizer.encode(reply.text), reply.source)]
        pieces.append(([self._assistant], "chat"))
        return pieces

    def user_turn(self, user: str, ended: bool) -> Pieces:
        """The next user message of a conversation, then the assistant speaks."""
        pieces: Pieces = [] if ended else [([self._eos], "chat")]
        return pieces + [([self._user], "chat"), (self.tokenizer.encode(user), "user"), ([self._assistant], "chat")]


def lab_transcript(system: str, user: str, call: str, result: str, answer: str) -> str:
    """One whole lab turn as markup (special tokens by name): what the corpus trains on."""
    return f"{SYSTEM}{system}{USER}{user}{ASSISTANT}{call}{TOOL}{result}{ASSISTANT}{answer}{EOS}"
