"""BFCL's entries and possible answers for one category, read from the wheel.

`bfcl_eval/data/BFCL_v4_<category>.json` holds one entry per line (JSON
Lines despite the name): `id`, `question` (a list of turns, each a list of
`{"role", "content"}` messages) and `function` (the tools, in BFCL's own
schema dialect: see decodeloop/schema/). `bfcl_eval/data/possible_answer/` holds, per
id, `ground_truth`: a list of `{function name: {argument: [accepted values]}}`
(`""` among the values: the argument may be left out). The irrelevance
category has no answers: its right answer is no call at all.

Every entry is checked when it is read, so a malformed one is a `BfclError`
naming its line, never a traceback later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from decodeloop.bfcl.wheel import BfclError, Wheel

# the single-turn Python categories the suite runs, in BFCL's order
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
DATA = "bfcl_eval/data/BFCL_v4_{}.json"
ANSWERS = "bfcl_eval/data/possible_answer/BFCL_v4_{}.json"


@dataclass
class Entry:
    id: str
    category: str
    messages: list[dict]  # the first turn: [{"role": "system"|"user", "content": str}, ...]
    functions: list[dict]  # BFCL's function documents, as the checker reads them
    answer: list[dict] = field(default_factory=list)  # possible answers (empty for irrelevance)

    @property
    def system(self) -> str | None:
        """The turn's system messages, joined (None: the chat format's own preamble)."""
        parts = [m["content"] for m in self.messages if m["role"] == "system"]
        return "\n\n".join(parts) if parts else None

    @property
    def user(self) -> str:
        """The turn's user messages, joined: the one message the harness sends."""
        return "\n\n".join(m["content"] for m in self.messages if m["role"] == "user")


def parse_categories(text: str) -> list[str]:
    """'simple_python,multiple' -> the categories, each checked; 'all' is every category."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(CATEGORIES)
    unknown = [n for n in names if n not in CATEGORIES]
    if not names or unknown:
        raise BfclError(
            f"unknown BFCL categor{'ies' if len(unknown) > 1 else 'y'} "
            f"{', '.join(map(repr, unknown)) or repr(text)}; "
            f"choose from {', '.join(CATEGORIES)} (comma-separated) or all"
        )
    return list(dict.fromkeys(names))


def load_entries(wheel: Wheel, category: str, limit: int | None = None) -> list[Entry]:
    """The category's entries in file order (the first `limit`), each with its possible answer."""
    if category not in CATEGORIES:
        raise BfclError(f"unknown BFCL category {category!r}; choose from {', '.join(CATEGORIES)}")
    entries: list[Entry] = []
    for number, record in _records(wheel, DATA.format(category)):
        if limit is not None and len(entries) >= limit:
            break
        entries.append(_entry(record, category, f"{DATA.format(category)} line {number}"))
    if category != "irrelevance":
        answers = {}
        wanted = {e.id for e in entries}
        for number, record in _records(wheel, ANSWERS.format(category)):
            where = f"{ANSWERS.format(category)} line {number}"
            if not isinstance(record, dict) or record.get("id") not in wanted:
                continue
            answers[record["id"]] = _answer(record.get("ground_truth"), where)
        for entry in entries:
            if entry.id not in answers:
                raise BfclError(f"{ANSWERS.format(category)} has no possible answer for {entry.id}")
            entry.answer = answers[entry.id]
    return entries


def _records(wheel: Wheel, member: str):
    for number, line in enumerate(wheel.read_text(member).splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except ValueError as e:
            raise BfclError(f"{member} line {number} is not JSON: {e}") from None


def _entry(record, category: str, where: str) -> Entry:
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        raise BfclError(f"{where}: an entry is an object with a string id")
    question, functions = record.get("question"), record.get("function")
    if not isinstance(question, list) or not question or not isinstance(question[0], list):
        raise BfclError(f"{where} ({record['id']}): question is not a list of turns")
    if len(question) != 1:
        raise BfclError(f"{where} ({record['id']}): {len(question)} turns; the suite runs single-turn entries")
    messages = question[0]
    for message in messages:
        if not (
            isinstance(message, dict)
            and message.get("role") in ("system", "user")
            and isinstance(message.get("content"), str)
        ):
            raise BfclError(f"{where} ({record['id']}): a message is not {{role: system|user, content: text}}")
    if not any(m["role"] == "user" for m in messages):
        raise BfclError(f"{where} ({record['id']}): the turn has no user message")
    if not isinstance(functions, list) or not functions:
        raise BfclError(f"{where} ({record['id']}): function is not a non-empty list")
    for function in functions:
        if not (
            isinstance(function, dict)
            and isinstance(function.get("name"), str)
            and isinstance(function.get("parameters"), dict)
        ):
            raise BfclError(f"{where} ({record['id']}): a function lacks a name or parameters")
    return Entry(record["id"], category, messages, functions)


def _answer(truth, where: str) -> list[dict]:
    if not isinstance(truth, list) or not all(
        isinstance(call, dict) and len(call) == 1 and isinstance(next(iter(call.values())), dict) for call in truth
    ):
        raise BfclError(f"{where}: ground_truth is not a list of {{function: {{argument: [values]}}}}")
    return truth
