"""Where text in the context came from, by source: for the policy and for tracing a call's arguments.

The context (context.py) knows the source of every span of ids. This module
decodes them once per question into text per source (`Provenance`) and answers
two questions about a call: where each of its argument values occurs in the
context (`origins`: `user`, `system`, `tool:SERVER/TOOL`, `resource:SERVER/URI`,
`prompt:SERVER/NAME`), and which value, if any, occurs in a server's text (a tool
result, a resource attached to a user message, or a server's prompt sent as one)
and nowhere the user wrote (`from_data`, the policy's strict mode). It also keeps what the model wrote before the first
server result entered the context (`planned`, the policy's plan mode): that
text depends on trusted content only, so no result can have steered it.
Values are matched as text, case-folded: a number is its decimal text,
booleans and nulls are not matched.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from decodeloop.decode.context import AUTHORED

TRACED = ("system", "user")  # besides tool results, the sources an argument value is looked for in
SERVER_SOURCES = ("tool:", "resource:", "prompt:")  # the prefixes of spans that may hold a server's text


@dataclass(slots=True)
class Provenance:
    """The context's text by source: (source, text) in order, one entry per source."""

    texts: list[tuple[str, str]]
    planned: str = ""  # the model's text written before the first server result entered the context

    @property
    def untrusted(self) -> list[tuple[str, str]]:
        """Every tool result and attached resource that came from a server."""
        return [(source, text) for source, text in self.texts if untrusted_source(source)]

    @property
    def trusted(self) -> str:
        """Everything the user wrote."""
        return "\n".join(text for source, text in self.texts if source == "user")


def provenance(context, tokenizer) -> Provenance:
    by_source: dict[str, list[str]] = {}
    planned: list[str] = []
    before_data = True
    for span in context.spans():
        if untrusted_source(span.source):
            before_data = False
        if span.source in TRACED or span.source.startswith(SERVER_SOURCES):
            by_source.setdefault(span.source, []).append(tokenizer.decode(context.ids[span.start : span.end]))
        elif span.source in AUTHORED and before_data:
            planned.append(tokenizer.decode(context.ids[span.start : span.end]))
    return Provenance([(source, "\n".join(parts)) for source, parts in by_source.items()], "\n".join(planned))


def untrusted_source(source: str) -> bool:
    """A span with a server's text in it: a tool's result, its error, a harness error quoting its schema
    (`tool:-/NAME` is the harness's own words alone about a call), a resource the user attached (whose
    text is the server's however the user chose it), or a server's prompt sent as the user's turn (the user
    chose the prompt, the server wrote its words: trusting them would let a server speak as the user)."""
    return source.startswith(("resource:", "prompt:")) or (
        source.startswith("tool:") and not source.startswith("tool:-/")
    )


def values(arguments: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, text) of every string and number in the arguments, depth first."""
    if isinstance(arguments, dict):
        for key, value in arguments.items():
            yield from values(value, f"{path}.{key}" if path else str(key))
    elif isinstance(arguments, list):
        for n, value in enumerate(arguments):
            yield from values(value, f"{path}[{n}]")
    elif not isinstance(arguments, bool) and arguments is not None:
        text = str(arguments).strip()
        if text:
            yield path, text


def origins(arguments: Any, seen: Provenance) -> dict[str, list[str]]:
    """Each argument value's path -> the sources whose text contains it (empty: the model wrote it itself)."""
    texts = [(source, text.casefold()) for source, text in seen.texts]
    return {path: [source for source, text in texts if value.casefold() in text] for path, value in values(arguments)}


def from_data(arguments: Any, seen: Provenance, pieces: bool = False) -> tuple[str, str, str] | None:
    """The first value that occurs in a server's tool result and not in the user's text: (path, value, source).

    With `pieces`, a value's identifier-like tokens (`tokens`) are looked for too: a message the model
    composed around a URL or an account number from a result carries that token from the data."""
    trusted = seen.trusted.casefold()
    untrusted = [(source, text.casefold()) for source, text in seen.untrusted]
    for path, value in values(arguments):
        for piece in [value, *(tokens(value) if pieces else ())]:
            folded = piece.casefold()
            if folded in trusted:
                continue
            for source, text in untrusted:
                if folded in text:
                    return path, piece, source
    return None


_TOKEN = re.compile(r"[^\s,;:()<>\[\]{}\"'`]+")


def tokens(text: str) -> list[str]:
    """The identifier-like tokens of a text with spaces in it: six characters or more, holding a digit, an @,
    or a dot between letters or digits (URLs, addresses, account and document numbers), trailing dots cut."""
    if not any(c.isspace() for c in text):
        return []
    found = []
    for token in _TOKEN.findall(text):
        token = token.rstrip(".!?")
        if len(token) >= 6 and (any(c.isdigit() for c in token) or "@" in token or _DOTTED.search(token)):
            found.append(token)
    return found


_DOTTED = re.compile(r"\w\.\w")
