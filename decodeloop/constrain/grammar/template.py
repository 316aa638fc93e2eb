"""A family format's call template (formats/calls/form.py) to the machine of a whole call.

The template's parts become machines.Sequence parts: its text a Literal of code points, each special token
it writes one pseudo code point (bytes.SPECIAL, SPECIAL + 1, ... in the order the template first writes
them) where the vocabulary has that token, else its text; the tool's name a Trie of the tools (in a
JsonString when quoted); the arguments each tool's JSON object (compile.py, as in the JSON syntax);
whitespace at most MAX_WS characters; Maybe and OneOf a Union of sequences; a call object the JSON
syntax's JsonCall with no closer, a call list a JsonArray of those. The matcher maps each pseudo code point
back to its token's id (`CallGrammar.tokens`).
"""

from __future__ import annotations

from collections.abc import Mapping

from decodeloop.constrain.grammar.bytes import SPECIAL
from decodeloop.constrain.grammar.compile import CallGrammar, tool_arguments
from decodeloop.constrain.grammar.machines import (
    ARGS,
    MAX_WS,
    NAME,
    WS,
    JsonArray,
    JsonCall,
    JsonString,
    Literal,
    Machine,
    Sequence,
    Text,
    Trie,
    union,
)
from decodeloop.formats.calls import form
from decodeloop.patterns import charset as cs


def template_grammar(tools, template: form.Template, specials: Mapping[str, int]) -> CallGrammar:
    """The grammar of a call written as `template` to any of `tools`; `specials` maps the text of each special
    token of the vocabulary to its id (the template's tokens the vocabulary lacks are written as text)."""
    args, problems = tool_arguments(tools, "json")
    codes = {text: SPECIAL + n for n, text in enumerate(t for t in template.tokens() if t in specials)}
    names: Machine = Trie(args)
    if any(isinstance(part, form.Name) and part.quoted for part in template.parts):
        names = JsonString(names)
    parts: list = []
    for part in template.parts:
        if isinstance(part, form.Name):
            parts.append(NAME)
        elif isinstance(part, form.Arguments):
            parts.append(ARGS)
        else:
            parts.append(_plain(part, codes, args))
    machine = Sequence(parts, names, args)
    return CallGrammar(machine, list(args), problems, {code: specials[text] for text, code in codes.items()})


def _plain(part, codes: Mapping[str, int], args: dict[str, Machine]) -> Machine:
    """A part that does not depend on the tool named."""
    if isinstance(part, form.Text):
        return Literal(map(ord, part.text))
    if isinstance(part, form.Token):
        code = codes.get(part.text)
        return Literal((code,) if code is not None else map(ord, part.text))
    if isinstance(part, form.Space):
        return Text(WS, 0, MAX_WS)
    if isinstance(part, form.Run):
        return Text(cs.of(part.chars), part.min, part.max)
    if isinstance(part, form.Maybe):
        return union([_sequence(part.parts, codes, args), Sequence([])])
    if isinstance(part, form.OneOf):
        return union(_sequence(option, codes, args) for option in part.options)
    if isinstance(part, form.CallObject):
        return _call_object(part, args)
    if isinstance(part, form.CallList):
        item = _call_object(part.item, args)
        return JsonArray(lambda i: item, min_items=1)
    raise ValueError(f"not a part of a call template: {part!r}")


def _sequence(parts: tuple, codes: Mapping[str, int], args: dict[str, Machine]) -> Machine:
    return Sequence([_plain(part, codes, args) for part in parts])


def _call_object(part: form.CallObject, args: dict[str, Machine]) -> JsonCall:
    return JsonCall(args, "", arguments_keys=part.keys, type_member=part.type_member)
