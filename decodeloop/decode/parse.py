"""The parser on its own: any engine's raw output to content, reasoning and tool calls.

`parse_output(output, tools, format=...)` reads a whole output, given as text or as token ids with
their tokenizer; `OutputParser` reads one as it streams, a piece at a time. Both are the decode loop's
own stop check (`Stops`, with `read_all`: nothing but the end of the output stops it), so what they
return is what a turn would have done with the same text, cut the same way:

    from decodeloop import parse_output
    from decodeloop.formats.calls.formats import get_format

    out = parse_output('<think>Paris, so...</think><tool_call>{"name": "get_weather", '
                       '"arguments": {"city": "Paris"}}</tool_call>',
                       {"get_weather": {"type": "object"}}, format=get_format("hermes"))
    out.reasoning        # 'Paris, so...'
    out.tool_calls       # [Call(name='get_weather', arguments={'city': 'Paris'})]

Text input: every marker of the format written in the text (an opener, a reasoning marker, a
section's token) is read as the special token it stands for, as the model's own tokenizer would
encode it. Token ids: a special id counts as its text only where the format says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from decodeloop.decode.stops import DEFAULT_MAX_CALL_CHARS, Stops, StopSettings, Verdict
from decodeloop.formats.calls.base import Call, ParsedCall
from decodeloop.formats.tokenizer import StreamDecoder

_TEXT = -1  # the token id a piece of plain text is checked under (no tokenizer's id is negative)


@dataclass
class ParsedOutput:
    """What an output says: its content (the answer), its reasoning, and its calls, each a call or its error."""

    content: str | None
    reasoning: str | None
    calls: list[ParsedCall]
    notices: list[str] = field(default_factory=list)  # near misses, calls cut off, calls inside reasoning

    @property
    def tool_calls(self) -> list[Call]:
        """The calls that parsed, in the order written."""
        return [p.call for p in self.calls if p.call is not None]

    @property
    def errors(self) -> list[ParsedCall]:
        """The calls that did not parse, each with the error a model would be told."""
        return [p for p in self.calls if p.call is None]


def tool_index(tools: Any) -> dict[str, Any]:
    """Tools as {name: inputSchema}: from such a mapping, from objects with .name and .input_schema (MCP tools),
    or from OpenAI-style function dicts ({"type": "function", "function": {"name", "parameters"}})."""
    if isinstance(tools, Mapping):
        return dict(tools)
    index: dict[str, Any] = {}
    for tool in tools or ():
        if isinstance(tool, Mapping):
            function = tool.get("function", tool)
            index[str(function.get("name"))] = function.get("parameters") or {}
        else:
            index[tool.name] = tool.input_schema
    return index


def markers_of(syntax: Any) -> tuple[str, ...]:
    """Every special text a format's output may hold, longest first."""
    texts = {shape.opener for shape in syntax.shapes}
    texts |= {shape.closer for shape in syntax.shapes if shape.closer}
    texts |= {m for shape in syntax.shapes for m in shape.markers}
    texts |= {m for pair in getattr(syntax, "reasoning", ()) for m in pair}
    return tuple(sorted(texts, key=len, reverse=True))


class OutputParser:
    """Reads one output as it streams: `feed` text pieces (or `feed_ids` token ids), then `finish`."""

    def __init__(
        self,
        syntax: Any,
        tools: Any = (),
        *,
        tokenizer: Any = None,
        reasoning_open: bool = False,
        lenient: bool = False,
        max_call_chars: int = DEFAULT_MAX_CALL_CHARS,
        calls_in_reasoning: str | None = None,
        specials: Iterable[str] = (),
    ) -> None:
        """`syntax`: a call format, or its name (`"hermes"`, `"llama3-json"`, ...). `specials`: other texts that
        are special tokens of the model (role markers, ...), read as such in text input: never shown as content,
        and a call's text inside one."""
        if isinstance(syntax, str):
            from decodeloop.formats.calls.formats import get_format

            syntax = get_format(syntax)  # ValueError naming the formats for an unknown name
        self.tools = tool_index(tools)
        self.tokenizer = tokenizer
        markers = tuple(sorted({*markers_of(syntax), *specials}, key=len, reverse=True))
        specials_by_id: dict[int, str]
        if tokenizer is not None:
            specials_by_id = {i: text for text, i in tokenizer.special_tokens.items()}
            self._decoder: StreamDecoder | None = StreamDecoder(tokenizer)
        else:  # markers written in text stand for their special tokens: ids of their own, below zero
            specials_by_id = {-2 - n: text for n, text in enumerate(markers)}
            self._decoder = None
        self._ids: dict[str, int] = {text: i for i, text in specials_by_id.items()}
        self._split = re.compile("(" + "|".join(map(re.escape, markers)) + ")") if markers else None
        settings = StopSettings(
            max_tokens=10**12,  # only the end of the output stops the parser
            max_call_chars=max_call_chars,
            lenient=lenient,
            calls_in_reasoning=calls_in_reasoning,
            read_all=True,
        )
        self.stops = Stops(
            syntax,
            eos_ids=(),
            settings=settings,
            specials=specials_by_id,
            reasoning_open=reasoning_open,
            tools=self.tools,
        )
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[ParsedCall] = []
        self._notices: list[str] = []

    def feed(self, piece: str) -> None:
        """A piece of the output's text, the markers in it read as their special tokens."""
        if self._split is None:
            self._take(self.stops.check(_TEXT, piece))
            return
        for n, part in enumerate(self._split.split(piece)):
            token = self._ids.get(part) if n % 2 else None
            if token is not None:
                self._take(self.stops.check(token, ""))
            elif part:  # text, or a marker this tokenizer writes as text
                self._take(self.stops.check(_TEXT, part))

    def feed_ids(self, ids: Iterable[int]) -> None:
        """Token ids of the output (needs the tokenizer they are ids of)."""
        if self._decoder is None:
            raise ValueError("token ids need the tokenizer they are ids of (OutputParser(..., tokenizer=...))")
        for token in ids:
            self._take(self.stops.check(token, self._decoder.piece(token)))

    def feed_units(self, units: Sequence[str | int]) -> None:
        """One delta of a stream made of units: text, or a special token's id; the text between specials is
        checked as one piece, as an engine's delta of several tokens would be."""
        text: list[str] = []
        for unit in units:
            if isinstance(unit, str):
                text.append(unit)
                continue
            if text:
                self.feed_text_only("".join(text))
                text = []
            self._take(self.stops.check(unit, ""))
        if text:
            self.feed_text_only("".join(text))

    def feed_text_only(self, piece: str) -> None:
        """A piece of text whose markers, if any, are plain text (not special tokens)."""
        self._take(self.stops.check(_TEXT, piece))

    def special_id(self, text: str) -> int:
        """The id a marker's text is read under (for `feed_units`)."""
        return self._ids[text]

    def finish(self, truncated: bool = False) -> ParsedOutput:
        """The end of the output; `truncated`: it ended at a token cap, so a call still open was cut off."""
        self._take(self.stops.finish(truncated))
        content = "".join(self._content).strip() or None
        reasoning = "".join(self._reasoning).strip() or None
        return ParsedOutput(content, reasoning, self._calls, self._notices)

    def _take(self, verdict: Verdict) -> None:
        if verdict.delta:
            self._content.append(verdict.delta)
        if verdict.reasoning:
            self._reasoning.append(verdict.reasoning)
        if verdict.notice is not None:
            self._notices.append(verdict.notice)
        self._notices.extend(verdict.warnings)
        self._calls.extend(verdict.parsed)


def parse_output(
    output: str | Sequence[int],
    tools: Any = (),
    *,
    format: Any,
    tokenizer: Any = None,
    reasoning_open: bool = False,
    truncated: bool = False,
    lenient: bool = False,
) -> ParsedOutput:
    """A whole output (text, or token ids with `tokenizer`) read as the loop reads it; `format` is a call
    format or its name (formats/calls/formats.py `get_format(NAME)`); `reasoning_open`: the prompt opened a reasoning
    block (a generation prompt ending in `<think>`); `truncated`: the output ended at a token cap."""
    parser = OutputParser(format, tools, tokenizer=tokenizer, reasoning_open=reasoning_open, lenient=lenient)
    if isinstance(output, str):
        parser.feed(output)
    else:
        parser.feed_ids(output)
    return parser.finish(truncated)
