"""How a format's calls are written, as data: what --constrain compiles into its call grammar, so that a
constrained call is written in the model's own format (constrain/grammar/template.py builds the machine).

A syntax says what the call grammar can write in its `grammar` attribute: "json" or "compact" for the two
syntaxes of this package (formats/calls/json.py, compact.py), a `CallForm` for a family's format, and no
attribute at all where the grammar cannot express the format's calls (constrain/matchers.py says why). A
`CallForm` gives, for each shape it constrains (by the shape's opener), the `Template` of what the model
writes after that opener, and what `--constrain required` writes as the turn's first tokens. A template is
a sequence of parts:

    Text("function")               this text
    Token("<｜tool▁sep｜>")           this special token (its text, where the vocabulary has no such token)
    Name()                         the tool's name (Name(quoted=True): as a JSON string)
    Arguments()                    the tool's arguments: one JSON object that satisfies its inputSchema
    Space()                        whitespace or none (at most 8 characters, as between JSON tokens)
    Run("0123456789", 1, 6)        1 to 6 characters of these (Kimi's call index)
    Maybe(part, ...)               these parts, or nothing
    OneOf((part, ...), (...), ())  any one of these sequences
    CallObject(("parameters",))    a JSON call object, {"name": NAME, "parameters": {...}}, whitespace free
    CallList(CallObject())         a JSON array of one or more call objects

The call ends where the template does: at a closing token (DeepSeek's <｜tool▁call▁end｜>), a text, or the
arguments' own `}` (Mistral's). A template holds one Name and one Arguments, or one CallObject or CallList,
and nothing but text and tokens inside Maybe and OneOf. Two more things a template may say: `after`, text
within the span the grammar begins after (Harmony's message header: `to=functions.`, before its
`<|message|>`), the span free until then; and `again`, text after a call that begins another in the same
span (Llama 3.2's `;`). Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Token:
    """A special token, by its text."""

    text: str


@dataclass(frozen=True)
class Name:
    quoted: bool = False


@dataclass(frozen=True)
class Arguments:
    pass


@dataclass(frozen=True)
class Space:
    pass


@dataclass(frozen=True)
class Run:
    chars: str
    min: int
    max: int


@dataclass(frozen=True)
class Maybe:
    parts: tuple

    def __init__(self, *parts) -> None:
        object.__setattr__(self, "parts", parts)


@dataclass(frozen=True)
class OneOf:
    options: tuple  # of tuples of parts

    def __init__(self, *options: tuple) -> None:
        object.__setattr__(self, "options", options)


@dataclass(frozen=True)
class CallObject:
    """{"name": NAME, KEY: {...}}: KEY any of `keys`; `type_member`: `"type": "function"` may come first."""

    keys: tuple[str, ...] = ("arguments",)
    type_member: bool = False


@dataclass(frozen=True)
class CallList:
    item: CallObject = field(default_factory=CallObject)


_SIMPLE = (Text, Token, Space, Run, Maybe, OneOf)


def _simple(parts: tuple) -> bool:
    """Only text, tokens, whitespace and runs, at any depth."""
    for part in parts:
        if not isinstance(part, _SIMPLE):
            return False
        if isinstance(part, Maybe) and not _simple(part.parts):
            return False
        if isinstance(part, OneOf) and not all(_simple(option) for option in part.options):
            return False
    return True


@dataclass(frozen=True)
class Template:
    """What a call span holds after its opener (see the module docstring)."""

    parts: tuple
    after: str = ""  # the grammar begins once the span's text holds this ("" : right after the opener)
    before: str = ""  # ... written before this (Harmony's <|message|>: the header's end); otherwise it stays free
    again: str = ""  # text after a call that begins another call in the same span

    def __post_init__(self) -> None:
        kinds = [type(part) for part in self.parts]
        rest = tuple(part for part in self.parts if not isinstance(part, (Name, Arguments, CallObject, CallList)))
        whole = kinds.count(CallObject) + kinds.count(CallList)
        named = kinds.count(Name) == 1 and kinds.count(Arguments) == 1 and kinds.index(Name) < kinds.index(Arguments)
        if not _simple(rest) or not ((named and whole == 0) or (whole == 1 and Name not in kinds)):
            raise ValueError("a template holds one Name before one Arguments, or one CallObject or CallList")

    def tokens(self) -> list[str]:
        """The texts of the special tokens it writes, in order, each once."""
        found: list[str] = []

        def walk(parts: tuple) -> None:
            for part in parts:
                if isinstance(part, Token) and part.text not in found:
                    found.append(part.text)
                elif isinstance(part, Maybe):
                    walk(part.parts)
                elif isinstance(part, OneOf):
                    for option in part.options:
                        walk(option)

        walk(self.parts)
        return found


@dataclass(frozen=True)
class CallForm:
    """A format's calls for the call grammar: a template per constrained shape, by the shape's opener, and the
    text and tokens `--constrain required` writes first (the canonical opener, and for Harmony the header up to
    its recipient)."""

    templates: Mapping[str, Template]
    required: tuple[Text | Token, ...]
