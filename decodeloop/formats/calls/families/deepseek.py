"""DeepSeek's call formats: a section of special tokens (V3 / R1, V3.1), and DSML markup (V3.2, V4, V4.1).

V3 and R1 (`deepseek-v3`): each call is its type, the tool's name and a ```json block, in a calls section

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1 (`deepseek-v31`): the same section, each call the name and the JSON alone

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>
    <｜tool▁calls▁end｜>

(on one line).
Every marker of the section is one special token. The arguments are one strict JSON object; a marker written
inside one of its strings is the string's text (the call ends at the first `<｜tool▁call▁end｜>` outside them).

DSML (`deepseek-v32`; `deepseek-v4` names the block `tool_calls`, `deepseek-v41` `calls`, with a space after
the ｜DSML｜ token in every tag: `<｜DSML｜ invoke`, `</｜DSML｜ parameter>`):

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

Only ｜DSML｜ is a special token; the rest of each tag is text. A value is the raw text up to its closing tag
(quotes, `<`, backslashes and line breaks as written, leading and trailing whitespace kept); `string="false"`
makes it JSON (a number, true, false, null, an array or an object). An invoke without parameters may close
itself: `<｜DSML｜invoke name="submit"/>`.

Reasoning is `<think>` ... `</think>`: a thinking prompt opens it, a non-thinking one ends in `</think>`.

Each call is a span of its own, so a message cut off in its second call keeps the first: the section's (the
block's) opener begins the first call's span, `<｜tool▁call▁begin｜>` (`<｜DSML｜invoke`) each later one. The
section's closing token is not shown; the block's closing tag is a span that holds no call.

Sources: DeepSeek-V3-0324's and DeepSeek-V3.1's chat templates; DeepSeek-V3.2's encoding/encoding_dsv32.py
(V4's and V4.1's encoders write the same markup with their tags); vLLM's deepseekv3, deepseekv31 and
deepseekv32 tool parsers and SGLang's DeepSeek detectors. Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from decodeloop.formats.calls.base import Call, CallShape, ParsedCall, ParseError, render_result, tool_schema
from decodeloop.formats.calls.families.spans import (
    Alone,
    JsonEnd,
    attributes,
    dumped,
    ends,
    json_object,
    nothing,
    parsed,
    tool_name,
)
from decodeloop.formats.calls.form import Arguments, CallForm, Name, Space, Template, Text, Token
from decodeloop.formats.calls.shapes import NotACall, strict_json

THINK = (("<think>", "</think>"),)

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
DSML = "｜DSML｜"

_CALL_END_OUTSIDE_STRINGS = JsonEnd(CALL_END, CALLS_END)
_FENCE = re.compile(r"\s*```(?:json)?[ \t]*\r?\n(.*)```\s*", re.DOTALL)


# --- V3 and V3.1: the calls section --------------------------------------------------------------------------


def _call_end(text: str, pos: int) -> int | None:
    """Just past the end of the call whose body begins at `pos`: the first <｜tool▁call▁end｜> outside its JSON
    strings (or the section's end, for a call never closed); None while it is open."""
    return _CALL_END_OUTSIDE_STRINGS(text, pos)


def _section_end(text: str) -> int | None:
    """Where a section's first span ends (`text` follows <｜tool▁calls▁begin｜>): after its first call, or at the
    section's end when it holds none."""
    begin, stop = text.find(CALL_BEGIN), text.find(CALLS_END)
    if begin >= 0 and not 0 <= stop < begin:
        return _call_end(text, begin + len(CALL_BEGIN))
    return stop + len(CALLS_END) if stop >= 0 else None


class _Section:
    """How one variant writes a call's body (between <｜tool▁call▁begin｜> and <｜tool▁call▁end｜>)."""

    def __init__(self, fenced: bool) -> None:
        self.fenced = fenced  # V3: function, <｜tool▁sep｜>, NAME, a line break, a ```json block; V3.1: NAME, JSON
        # how --constrain writes a call's body (formats/calls/form.py): from the section's opener (its first
        # call's <｜tool▁call▁begin｜> first), or from a later call's <｜tool▁call▁begin｜>
        if fenced:
            call: tuple = (Text("function"), Token(SEP), Name(), Text("\n```json\n"), Space(), Arguments(), Space())
            call += (Text("```"), Token(CALL_END))
        else:
            call = (Name(), Token(SEP), Space(), Arguments(), Space(), Token(CALL_END))
        self.grammar = CallForm(
            {CALLS_BEGIN: Template((Space(), Token(CALL_BEGIN), *call)), CALL_BEGIN: Template(call)},
            required=(Token(CALLS_BEGIN),),
        )
        if fenced:
            self.form = (
                f"a call is {CALL_BEGIN}function{SEP}NAME, a line break, then its arguments in a ```json block "
                f'(```json, a line break, {{"key": "value"}}, a line break, ```), then {CALL_END}'
            )
        else:
            self.form = f'a call is {CALL_BEGIN}NAME{SEP}{{"key": "value"}}{CALL_END}'

    def body(self, text: str, at: int) -> Call:
        """The call of the body `text`, which begins at index `at` of the span."""
        head, sep, rest = text.partition(SEP)
        if not sep:
            raise ParseError(f"no {SEP} in the call; {self.form}", at + 1)
        after = at + len(head) + len(SEP)
        if not self.fenced:
            return Call(tool_name(head, at, self.form), json_object(rest, after, self.form))
        if head.strip() != "function":
            shown = json.dumps(head.strip()[:40], ensure_ascii=False)
            raise ParseError(f"a call's type is function, not {shown}; {self.form}", at + 1)
        line, newline, block = rest.partition("\n")
        name = tool_name(line, after, self.form)
        fence = _FENCE.fullmatch(block) if newline else None
        if fence is None:
            raise ParseError(
                f"the arguments of {name} are not in a ```json block on the lines after its name; {self.form}",
                after + len(line) + 1,
            )
        return Call(name, json_object(fence.group(1), after + len(line) + 1 + fence.start(1), self.form))

    def call(self, span: str, at: int) -> Call:
        """The call whose <｜tool▁call▁begin｜> stands at `at` in the span."""
        start = at + len(CALL_BEGIN)
        end = _call_end(span, start)
        if end is None:
            raise ParseError(f"the call was cut off before its {CALL_END}; {self.form}", len(span) + 1)
        if span.endswith(CALLS_END, 0, end):
            raise ParseError(f"the call is not closed: end it with {CALL_END} before {CALLS_END}", end + 1)
        return self.body(span[start : end - len(CALL_END)], start)

    def read_section(self, span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
        """The span that opens a section: its first call, or nothing for an empty section."""
        text = span[len(CALLS_BEGIN) :]
        begin, stop = text.find(CALL_BEGIN), text.find(CALLS_END)
        if begin >= 0 and not 0 <= stop < begin:
            at = len(CALLS_BEGIN) + begin
            return [parsed("deepseek_calls", span, lambda: self.call(span, at))]
        if not (text[:stop] if stop >= 0 else text).strip():
            return []
        error = ParseError(f"the calls section holds no call: {self.form}", len(CALLS_BEGIN) + 1)
        return [ParsedCall(span, "deepseek_calls", None, error)]

    def read_call(self, span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
        return [parsed("deepseek_call", span, lambda: self.call(span, 0))]


class SectionSyntax:
    """DeepSeek V3 / R1 (`fenced`) and V3.1: calls in a section of special tokens, arguments in JSON."""

    alternates = ()
    opener = CALLS_BEGIN
    closer = CALLS_END
    collect_calls = True  # parallel calls follow one another in the section
    template_tools = True  # the chat templates list the tools themselves
    reasoning = THINK
    shape = "deepseek_calls"

    def __init__(self, name: str, fenced: bool) -> None:
        self.name = name
        self._section = section = _Section(fenced)
        self.grammar = section.grammar
        self.shapes = (
            CallShape(
                "deepseek_calls",
                CALLS_BEGIN,
                ends("｜>", _section_end),
                section.read_section,
                CALLS_END,
                markers=(SEP,),
            ),
            CallShape("deepseek_call", CALL_BEGIN, ends("｜>", lambda t: _call_end(t, 0)), section.read_call, CALL_END),
        )

    render_result = staticmethod(render_result)

    def parse(self, text: str) -> Call:
        """The one call of a span as the stop check cuts them (a section's opener and first call, or a later
        call); raises ParseError."""
        shape = next((s for s in self.shapes if text.startswith(s.opener)), None)
        if shape is None:
            raise ParseError(f"a call starts with {CALLS_BEGIN} or {CALL_BEGIN}; {self._section.form}", 1)
        read = shape.read(text, True, {})
        if not read or not isinstance(read[0], ParsedCall):
            raise ParseError(f"the calls section holds no call: {self._section.form}", 1)
        if read[0].error is not None:
            raise read[0].error
        assert read[0].call is not None  # a call or its error
        return read[0].call

    def render(self, call: Call) -> str:
        arguments = dumped(call)
        if self._section.fenced:
            return f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}{call.name}\n```json\n{arguments}\n```{CALL_END}{CALLS_END}"
        return f"{CALLS_BEGIN}{CALL_BEGIN}{call.name}{SEP}{arguments}{CALL_END}{CALLS_END}"

    def scanner(self) -> Any:
        return self.shapes[0].scanner()

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        return [tool_schema(tool) for tool in tools]

    def describe(self, tools: Iterable[Any]) -> str:
        """The tools and how to call them, in the words of DeepSeek-V3.1's template."""
        blocks = [
            f"### {s['function']['name']}\nDescription: {s['function']['description']}\n\n"
            f"Parameters: {json.dumps(s['function']['parameters'], ensure_ascii=False)}"
            for s in self.tool_schemas(tools)
        ]
        if not blocks:
            return ""
        if self._section.fenced:
            example = f"{CALL_BEGIN}function{SEP}tool_call_name\n```json\ntool_call_arguments\n```{CALL_END}"
        else:
            example = f"{CALL_BEGIN}tool_call_name{SEP}tool_call_arguments{CALL_END}"
        return (
            "## Tools\nYou have access to the following tools:\n\n"
            + "\n\n".join(blocks)
            + "\n\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
            f"{CALLS_BEGIN}{example}{{{{additional_tool_calls}}}}{CALLS_END}\n\n"
            "Where:\n- `tool_call_name` must be an exact match to one of the available tools\n"
            "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
            "- For multiple tool calls, chain them directly without separators or spaces"
        )


# --- V3.2, V4, V4.1: DSML -------------------------------------------------------------------------------------


class _Dsml:
    """The tags of one DSML variant: `block` names the calls' block, `gap` follows the ｜DSML｜ token."""

    def __init__(self, block: str, gap: str) -> None:
        tag = DSML + gap
        self.block_open, self.block_close = f"<{tag}{block}>", f"</{tag}{block}>"
        self.invoke_open, self.invoke_close = f"<{tag}invoke", f"</{tag}invoke>"
        self.param_open, self.param_close = f"<{tag}parameter", f"</{tag}parameter>"
        self._next = re.compile("|".join(map(re.escape, (self.param_open, self.invoke_close, self.block_close))))
        self._first = re.compile(f"{re.escape(self.invoke_open)}|{re.escape(self.block_close)}")
        self.form = (
            f'a call is {self.invoke_open} name="NAME">, then each argument as {self.param_open} name="KEY" '
            f'string="true">VALUE{self.param_close} (string="false" for a JSON value: a number, true, false, '
            f"null, an array or an object), then {self.invoke_close}"
        )

    # where a span ends, while it is written

    def invoke_end(self, text: str, pos: int) -> int | None:
        """Just past the end of the invoke whose tag's attributes begin at `pos`: its `/>`, its closing tag
        outside every value (or the block's, for an invoke never closed); None while it is open."""
        tag_end = text.find(">", pos)
        if tag_end < 0:
            return None
        if tag_end > pos and text[tag_end - 1] == "/":
            return tag_end + 1
        pos = tag_end + 1
        while (found := self._next.search(text, pos)) is not None:
            if found.group() != self.param_open:
                return found.end()
            tag_end = text.find(">", found.end())
            value_end = text.find(self.param_close, tag_end + 1) if tag_end >= 0 else -1
            if value_end < 0:
                return None  # inside a parameter's tag or value: only its closing tag ends it
            pos = value_end + len(self.param_close)
        return None

    def block_end(self, text: str) -> int | None:
        """Where a block's first span ends (`text` follows its opener): after its first invoke, or at the block's
        closing tag when it holds none."""
        found = self._first.search(text)
        if found is None:
            return None
        if found.group() == self.block_close:
            return found.end()
        return self.invoke_end(text, found.end())

    # what a span holds, once written

    def invoke(self, span: str, at: int) -> Call:
        """The call of the invoke whose opener stands at `at` in the span."""
        pos = at + len(self.invoke_open)
        tag_end = span.find(">", pos)
        if tag_end < 0:
            raise ParseError(f"the call was cut off in its {self.invoke_open} tag; {self.form}", len(span) + 1)
        closes = tag_end > pos and span[tag_end - 1] == "/"
        found = attributes(span[pos : tag_end - closes], pos, self.form)
        if "name" not in found:
            raise ParseError(f'the {self.invoke_open} tag has no name="NAME"; {self.form}', pos + 1)
        name = tool_name(found["name"], pos, self.form)
        arguments: dict[str, Any] = {}
        pos = tag_end + 1
        while not closes:
            nxt = self._next.search(span, pos)
            gap = span[pos : nxt.start() if nxt is not None else len(span)]
            if gap.strip():
                shown = json.dumps(gap.strip()[:40], ensure_ascii=False)
                raise ParseError(f"unexpected text {shown} in the call to {name}; {self.form}", pos + 1)
            if nxt is None:
                raise ParseError(f"the call to {name} was cut off before its {self.invoke_close}", len(span) + 1)
            if nxt.group() == self.invoke_close:
                break
            if nxt.group() == self.block_close:
                raise ParseError(
                    f"the call to {name} is not closed: end it with {self.invoke_close} before {self.block_close}",
                    nxt.start() + 1,
                )
            pos = self._parameter(span, nxt.end(), name, arguments)
        return Call(name, arguments)

    def _parameter(self, span: str, pos: int, name: str, arguments: dict[str, Any]) -> int:
        """Read the parameter whose tag's attributes begin at `pos` into `arguments`; where it ends."""
        tag_end = span.find(">", pos)
        value_end = span.find(self.param_close, tag_end + 1) if tag_end >= 0 else -1
        if value_end < 0:
            raise ParseError(f"the call to {name} was cut off inside an argument", len(span) + 1)
        found = attributes(span[pos:tag_end], pos, self.form)
        key, kind = found.get("name"), found.get("string")
        if key is None:
            raise ParseError(f'an argument of {name} has no name="KEY"; {self.form}', pos + 1)
        shown = json.dumps(key, ensure_ascii=False)
        if kind not in ("true", "false"):
            raise ParseError(
                f'the argument {shown} of {name} needs string="true" (its value is text) or string="false" (JSON)',
                pos + 1,
            )
        if key in arguments:
            raise ParseError(f"the argument {shown} is given twice in the call to {name}; give each once", pos + 1)
        value = span[tag_end + 1 : value_end]
        if kind == "true":
            arguments[key] = value
        else:
            try:
                arguments[key] = strict_json(value)
            except NotACall as e:
                raise ParseError(
                    f'the value of {shown} is not JSON ({e}); with string="false" a value is a number, true, '
                    f'false, null, an array or an object: write string="true" for text',
                    tag_end + 2,
                ) from None
        return value_end + len(self.param_close)

    def read_block(self, span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
        """The span that opens a block: its first call, or nothing for an empty block."""
        found = self._first.search(span, len(self.block_open))
        if found is not None and found.group() == self.invoke_open:
            return [parsed("dsml_calls", span, lambda: self.invoke(span, found.start()))]
        if not span[len(self.block_open) : found.start() if found is not None else len(span)].strip():
            return []
        error = ParseError(f"the {self.block_open} block holds no call: {self.form}", len(self.block_open) + 1)
        return [ParsedCall(span, "dsml_calls", None, error)]

    def read_invoke(self, span: str, closed: bool, tools: Mapping[str, Any]) -> list[ParsedCall]:
        return [parsed("dsml_invoke", span, lambda: self.invoke(span, 0))]


class DsmlSyntax:
    """DeepSeek V3.2, V4 and V4.1: calls in a DSML block of invoke and parameter tags."""

    alternates = ()
    collect_calls = True  # the invokes of one block run together
    template_tools = True
    reasoning = THINK
    shape = "dsml_calls"

    def __init__(self, name: str, block: str, gap: str = "") -> None:
        self.name = name
        self._dsml = dsml = _Dsml(block, gap)
        self.opener, self.closer = dsml.block_open, dsml.block_close
        self.shapes = (
            CallShape("dsml_calls", dsml.block_open, ends(">", dsml.block_end), dsml.read_block, markers=(DSML,)),
            CallShape(
                "dsml_invoke",
                dsml.invoke_open,
                ends(">", lambda t: dsml.invoke_end(t, 0)),
                dsml.read_invoke,
            ),
            CallShape("dsml_end", dsml.block_close, Alone, nothing),  # the block's closing tag: no call
        )

    render_result = staticmethod(render_result)

    def parse(self, text: str) -> Call:
        """The one call of a span as the stop check cuts them (a block's opener and first invoke, or a later
        invoke); raises ParseError."""
        dsml = self._dsml
        at = text.find(dsml.invoke_open) if text.startswith(dsml.block_open) else 0
        if at < 0 or not text.startswith(dsml.invoke_open, at):
            raise ParseError(f"a call starts with {dsml.block_open} or {dsml.invoke_open}; {dsml.form}", 1)
        return dsml.invoke(text, at)

    def render(self, call: Call) -> str:
        dumped(call)  # the same checks as every format's
        d = self._dsml
        lines = [
            f'{d.param_open} name="{key}" string="{"true" if isinstance(value, str) else "false"}">'
            + (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
            + d.param_close
            for key, value in call.arguments.items()
        ]
        invoke = f'{d.invoke_open} name="{call.name}">\n' + "\n".join(lines) + f"\n{d.invoke_close}"
        return f"\n\n{d.block_open}\n{invoke}\n{d.block_close}"

    def scanner(self) -> Any:
        return self.shapes[0].scanner()

    def tool_schemas(self, tools: Iterable[Any]) -> list[dict]:
        return [tool_schema(tool) for tool in tools]

    def describe(self, tools: Iterable[Any]) -> str:
        """The tools and how to call them, in the words of DeepSeek-V3.2's encoder."""
        schemas = [json.dumps(s["function"], ensure_ascii=False) for s in self.tool_schemas(tools)]
        if not schemas:
            return ""
        d = self._dsml
        return (
            "## Tools\n\nYou have access to a set of tools you can use to answer the user's question.\n"
            f'You can invoke functions by writing a "{d.block_open}" block like the following as part of your '
            "reply to the user:\n"
            f'{d.block_open}\n{d.invoke_open} name="$FUNCTION_NAME">\n'
            f'{d.param_open} name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE{d.param_close}\n...\n'
            f'{d.invoke_close}\n{d.invoke_open} name="$FUNCTION_NAME2">\n...\n{d.invoke_close}\n{d.block_close}\n\n'
            "String and scalar parameters should be specified as is without any escaping or quotes, while lists "
            'and objects should use JSON format. The "string" attribute should be set to "true" for string type '
            'parameters and "false" for other types (numbers, booleans, arrays, objects).\n\n'
            "Here are the functions available in JSONSchema format:\n<functions>\n"
            + "\n".join(schemas)
            + "\n</functions>"
        )


def v3() -> SectionSyntax:
    return SectionSyntax("deepseek-v3", fenced=True)


def v31() -> SectionSyntax:
    return SectionSyntax("deepseek-v31", fenced=False)


def v32() -> DsmlSyntax:
    return DsmlSyntax("deepseek-v32", "function_calls")


def v4() -> DsmlSyntax:
    return DsmlSyntax("deepseek-v4", "tool_calls")


def v41() -> DsmlSyntax:
    return DsmlSyntax("deepseek-v41", "calls", gap=" ")
