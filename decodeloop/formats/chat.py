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

A user message may carry attachments, resources read from a server: each is
rendered inside the user's message after the user's text, as a line naming it
(the user's words, "user") and its text in a span of its own,
"resource:SERVER/URI", so provenance reads it as the server's. `start` and
`user_turn` take them as `attachments`; the harness passes that keyword only
when there are some, so a format that never sees one need not accept it.
A server's prompt sent as the user's turn is attachments too: its text in
"prompt:SERVER/NAME" spans (the server's words, not the user's), each under a
`heading` the harness writes.

`LabChat`, the lab models' format, is in lab.py. Real models use their own chat template (`chat_template.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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


@dataclass(slots=True)
class Attachment:
    """A resource attached to a user message, or a prompt's text, already admitted (capped, escaped)."""

    server: str
    uri: str  # a resource's URI; a prompt's name
    text: str
    kind: str = "resource"  # or "prompt": a server's prompt's text, which the span's source names as the server's
    heading: str | None = None  # the user-span text before it; None: a line naming the resource

    @property
    def source(self) -> str:
        return f"{self.kind}:{self.server}/{self.uri}"


@dataclass
class WrittenCalls:
    """The model's message as it ended in calls: its text before them, its reasoning, the calls (each parsed).
    A chat format that renders an assistant's `tool_calls` (`TemplateChat.rendered_calls`) writes the message
    back in its own form from these."""

    calls: list[Any]  # formats/calls/base.py Call, in the order written
    content: str = ""
    reasoning: str = ""


def user_parts(user: str, attachments: Sequence[Attachment] = ()) -> list[tuple[str, str]]:
    """A user message's content as (text, source) parts: the user's text, then each attachment under a line
    naming it."""
    parts = [(user, "user")]
    for attachment in attachments:
        heading = attachment.heading
        if heading is None:
            heading = f"\n\nResource {attachment.server} {attachment.uri}:\n"
        parts += [(heading, "user"), (attachment.text, attachment.source)]
    return parts


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

    def start(
        self, tools: Sequence, user: str, system: str | None = None, attachments: Sequence[Attachment] = ()
    ) -> Pieces: ...

    def tool_results(self, replies: Sequence[ToolReply], ended: bool) -> Pieces: ...

    def user_turn(self, user: str, ended: bool, attachments: Sequence[Attachment] = ()) -> Pieces: ...


def pieces_ids(pieces: Pieces) -> list[int]:
    """All the ids of some pieces, in order."""
    return [token for ids, _ in pieces for token in ids]
