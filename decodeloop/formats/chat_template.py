"""`TemplateChat`: the `ChatFormat` of a real model, from its own Jinja chat template.

The idea. The conversation is kept as messages whose contents are unique
placeholders. Rendering the template over them gives the prompt with the
placeholders where the contents go; the text between placeholders is the
template's markup, encoded with `encode_markup` (source "chat": its role
markers become special ids), and each content is encoded on its own with
`encode` (sources "system", "user", "tool:SERVER/TOOL"), so data never becomes a
special token and nothing is tokenized twice. The model's own messages are never
rendered as text: the harness keeps what the model sampled, as ids, and an
assistant message is {"role": "assistant", "content": PLACEHOLDER}. After a
call or an answer, the new rendering is cut right after that placeholder and
what follows is the suffix to append (the generation prompt included).

Decisions, each checked at load time by rendering probes:

- Tools. If rendering with `tools=` differs from rendering without, the
  template presents the tools itself: it gets `syntax.tool_schemas(tools)` and
  the system message holds the preamble alone. Otherwise (SmolLM2's ChatML) the
  system message holds the preamble, a blank line and `syntax.describe(tools)`.
  The compact syntax has no schemas, so its tools are always described.
- Tool results. A template that names the "tool" role (and renders a probe
  tool message without raising) gets one
  {"role": "tool", "content": ..., "name": ...} message per result. One that
  does not gets one user message holding every result, in call order, as
  `<tool_response>\\n...\\n</tool_response>` blocks (the Hermes / Qwen convention),
  separated by a line break.
- A template that refuses a system message (or drops it) gets the system
  content at the start of the first user message, then a blank line.
- A template that trims message contents gets them trimmed.
- `ended`: when the model wrote its own end-of-turn token, the text of that
  token at the start of the suffix is dropped (the context has it already); when
  it did not (a call or the cap stopped it), the suffix keeps the template's
  end-of-turn markup, which closes the message.

Untrusted text that passes through markup (tool names, descriptions and
schemas in a template's tool block, the system preamble, tool descriptions in
the system message) has every control token's text wrapped in private-use
markers before rendering, and the marked spans are encoded as data: a tool
description that spells "<|im_end|>" stays plain text, while the harness's own
wording (a `<tool_call>` example) gets the real token. Private-use characters
U+E000..U+E003 are removed from such text, so it cannot forge a placeholder or
a marker.

Append-only: each new rendering must begin with the previous one (up to the
model's message). A template that renders the past differently once the
conversation grows (a date that changed, history it rewrites) breaks that;
the context is never rewritten, and a line is added to `warnings`.

Tokens at a boundary between markup and content are cut there, as in any chat
that tokenizes messages one by one; for ordinary text (and everything the tests
use) that is exactly how the whole rendering tokenizes too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from decodeloop.formats.chat import Attachment, Pieces, ToolReply, WrittenCalls, user_parts
from decodeloop.formats.hf_tokenizer import require
from decodeloop.formats.lab import PREAMBLE

# Private-use characters: a content's placeholder, and the markers around control-token text in data.
PH_OPEN, PH_CLOSE, MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001", "\ue002", "\ue003"
ARGUMENT_FORMS = ("string", "object")  # how an assistant's tool call's arguments are written back
# The harness's own instruction, after the preamble when tools are offered and --system names no prompt: when to
# call, and to answer from a result once there is one. Its one copy (--help quotes it).
TOOL_INSTRUCTION = (
    "Call a tool when you need its answer. Once a tool's result is in the conversation, answer the user from "
    "that result in plain words, without calling the same tool again."
)
_PRIVATE = re.compile("[\ue000-\ue003]")
_PLACEHOLDER = re.compile("\ue000(\\d+)\ue001")
_MARKED = re.compile("\ue002([^\ue002\ue003]*)\ue003")
_LONE_MARK = re.compile("[\ue002\ue003]")

# End-of-turn tokens of common templates; each is a stop id when the vocabulary has it as an added token.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")

_PROBE_TOOL = {
    "type": "function",
    "function": {"name": "probe", "description": "Probe.", "parameters": {"type": "object", "properties": {}}},
}

Part = tuple[str, str, bool]  # (text, source, markup?) of one message content


def compile_template(source: str):
    """The template in the environment transformers renders chat templates in."""
    require("jinja2")
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        # transformers' {% generation %} marks assistant text for training masks; here it just renders
        tags: ClassVar[set[str]] = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body, lineno=lineno)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def _content(user: str, attachments: Sequence[Attachment]) -> list[Part]:
    """A user message's parts, each data: an attachment's text is its own part, so its own span."""
    return [(text, source, False) for text, source in user_parts(user, attachments)]


class _Marked:
    """A tool whose string attributes come back marked (for `syntax.describe`)."""

    def __init__(self, tool: Any, mark) -> None:
        self._tool, self._mark = tool, mark

    def __getattr__(self, name: str) -> Any:
        return self._mark(getattr(self._tool, name))


class TemplateChat:
    """The `ChatFormat` protocol over a model's Jinja chat template (see the module docstring)."""

    call_shapes = "lenient"  # models with a template of their own write calls in other shapes too

    def __init__(
        self,
        tokenizer,
        syntax,
        template: str,
        *,
        variables: dict | None = None,
        stop_ids: Iterable[int] = (),
        preamble: str = PREAMBLE,
        arguments: str = "string",
        instruct: bool = True,
    ) -> None:
        if arguments not in ARGUMENT_FORMS:
            raise ValueError(f"arguments must be one of {', '.join(ARGUMENT_FORMS)}, got {arguments!r}")
        self.arguments = arguments  # how rendered_calls writes a call's arguments: a JSON "string" or an "object"
        self.instruct = instruct  # with tools and no --system, the harness's TOOL_INSTRUCTION after the preamble
        self.tokenizer = tokenizer
        self.syntax = syntax
        self.preamble = preamble
        self.template = template
        self._template = compile_template(template)
        self._variables = dict(variables or {})  # bos_token, eos_token, ...: what transformers passes
        self.warnings: list[str] = []
        specials = tokenizer.special_tokens
        controls = sorted(specials, key=len, reverse=True)
        self._control_re = re.compile("|".join(map(re.escape, controls))) if controls else None
        self._controls = re.compile("(" + "|".join(map(re.escape, controls)) + ")") if controls else None
        names = {i: text for text, i in specials.items()}
        ends = {tokenizer.eos_id, *stop_ids, *(specials[t] for t in END_OF_TURN if t in specials)}
        self.stop_ids = frozenset(ends)
        # texts that close the assistant's message in a rendering, longest first
        self._end_texts = sorted({names[i] for i in ends if i in names}, key=len, reverse=True)
        self.template_tools = self._probe_tools()
        self.tool_role = self._probe_tool_role()
        self.system_role = self._probe_system()
        self.trims = self._probe_trim()
        self.renders_calls = self._probe_calls()
        self.rendered_message = ""  # rendered_calls' last message alone, as the template wrote it
        self.rendered_message_tokens = 0
        self.reasoning_open = False  # the last rendering's generation prompt opened a reasoning block
        self._reset()

    # -- probes ------------------------------------------------------------------------------------------

    def _try(self, messages: list[dict], tools: list | None = None, generation: bool = True) -> str | None:
        import jinja2

        try:
            return self._render(messages, tools, generation)
        except jinja2.exceptions.TemplateError:
            return None

    def _probe_tools(self) -> bool:
        messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        plain, with_tools = self._try(messages), self._try(messages, [_PROBE_TOOL])
        return plain is not None and with_tools is not None and plain != with_tools

    def _probe_tool_role(self) -> bool:
        # a template that names the role and renders a tool message as given (not one that raises,
        # e.g. for a missing tool_call_id, nor one that prints any role name, as ChatML does)
        if "'tool'" not in self.template and '"tool"' not in self.template:
            return False
        rendered = self._try(
            [
                {"role": "system", "content": "S"},
                {"role": "user", "content": "U"},
                {"role": "assistant", "content": "A"},
                {"role": "tool", "name": "probe", "content": "\ue000T\ue001"},
            ]
        )
        return rendered is not None and "\ue000T\ue001" in rendered

    def _probe_calls(self) -> bool:
        # a template that writes an assistant's tool_calls (the call's name in the rendering), with its results
        call = {"type": "function", "function": {"name": "\ue000probe\ue001", "arguments": "{}"}}
        messages: list[dict] = [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "probe", "content": "T"},
        ]
        rendered = self._try(messages, [_PROBE_TOOL])
        return rendered is not None and "\ue000probe\ue001" in rendered

    def _probe_system(self) -> bool:
        rendered = self._try([{"role": "system", "content": "\ue000S\ue001"}, {"role": "user", "content": "U"}])
        return rendered is not None and "\ue000S\ue001" in rendered

    def _probe_trim(self) -> bool:
        rendered = self._try([{"role": "user", "content": " \n\ue000U\ue001\n "}]) or ""
        return " \n\ue000U\ue001\n " not in rendered and "\ue000U\ue001" in rendered

    @property
    def uses_template_tools(self) -> bool:
        """Whether the template itself presents the tools (it can, and the syntax has schemas)."""
        return self.template_tools and self.syntax.template_tools

    # -- the conversation ----------------------------------------------------------------------------

    def _reset(self) -> None:
        self._messages: list[dict] = []
        self._held: dict[int, list[Part]] = {}  # placeholder number -> its content's parts
        self._count = 0
        self._tools: list | None = None
        self._rendered: str | None = None  # the last rendering: what the context holds, as text

    def _placeholder(self) -> str:
        self._count += 1
        return f"{PH_OPEN}{self._count}{PH_CLOSE}"

    def _hold(self, parts: list[Part]) -> str:
        """A placeholder standing for a message content made of parts."""
        if self.trims and parts:
            first, last = parts[0], parts[-1]
            parts = [(first[0].lstrip(), *first[1:]), *parts[1:]]
            parts[-1] = (parts[-1][0].rstrip(), *last[1:])
        placeholder = self._placeholder()
        self._held[self._count] = parts
        return placeholder

    def _render(self, messages: list[dict], tools: list | None, generation: bool = True) -> str:
        return self._template.render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=generation, **self._variables
        )

    def _render_conversation(self) -> str:
        import jinja2

        try:
            return self._render(self._messages, self._tools)
        except jinja2.exceptions.TemplateError as e:
            roles = "/".join(m["role"] for m in self._messages)
            raise ValueError(f"the model's chat template refuses this conversation ({roles}): {e}") from e

    def _mark(self, obj: Any) -> Any:
        """Untrusted strings for markup: private-use characters removed, control-token texts marked as data."""
        if isinstance(obj, str):
            obj = _PRIVATE.sub("", obj)
            if self._control_re is None:
                return obj
            return self._control_re.sub(lambda m: MARK_OPEN + m.group(0) + MARK_CLOSE, obj)
        if isinstance(obj, dict):
            return {self._mark(k): self._mark(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self._mark(v) for v in obj]
        return obj

    def _system_content(self, tools: Sequence, system: str | None, mark) -> str:
        if system is None:  # the harness's own: with tools, how to use them too (--system replaces it)
            preamble = mark(self.preamble + ("\n\n" + TOOL_INSTRUCTION if tools and self.instruct else ""))
        else:
            preamble = mark(system)
        if not tools or self.uses_template_tools:
            return preamble
        described = self.syntax.describe([_Marked(t, mark) for t in tools])
        if not described or not preamble:
            return described or preamble
        return preamble + "\n\n" + described

    def system_text(self, tools: Sequence, system: str | None = None) -> str:
        """The system message's content (with a template that presents tools, the preamble alone)."""
        return self._system_content(list(tools), system, lambda x: x)

    def start(
        self, tools: Sequence, user: str, system: str | None = None, attachments: Sequence[Attachment] = ()
    ) -> Pieces:
        """The first prompt of a conversation, through the generation prompt."""
        self._reset()
        tools = list(tools)
        if tools and self.uses_template_tools:
            self._tools = self._mark(self.syntax.tool_schemas(tools))
        system_part: Part = (self._system_content(tools, system, self._mark), "system", True)
        content = _content(user, attachments)
        if self.system_role:
            self._messages = [
                {"role": "system", "content": self._hold([system_part])},
                {"role": "user", "content": self._hold(content)},
            ]
        else:
            self._messages = [{"role": "user", "content": self._hold([system_part, ("\n\n", "chat", True), *content])}]
        self._rendered = self._render_conversation()
        self._note_reasoning(self._rendered)
        return self._pieces(self._rendered)

    def tool_results(self, replies: Sequence[ToolReply], ended: bool) -> Pieces:
        """After the model's call(s): the results (see the module docstring), then the generation prompt."""
        return self._after_model(self._results(replies), ended)

    def _results(self, replies: Sequence[ToolReply]) -> list[dict]:
        """The calls' results as messages: the tool role's, or `<tool_response>` user messages."""
        if self.tool_role:
            return [
                {"role": "tool", "name": self._mark(r.name), "content": self._hold([(r.text, r.source, False)])}
                for r in replies
            ]
        parts: list[Part] = []
        for i, r in enumerate(replies):
            parts += [
                (("\n" if i else "") + "<tool_response>\n", "chat", True),
                (r.text, r.source, False),
                ("\n</tool_response>", "chat", True),
            ]
        return [{"role": "user", "content": self._hold(parts)}]

    def rendered_calls(self, replies: Sequence[ToolReply], written: WrittenCalls) -> Pieces | None:
        """The model's message written back as the template renders an assistant's `tool_calls`, then the results
        and the generation prompt: the pieces that replace the message in the context (the caller cuts the
        context back to where the message began). None when the template writes no tool calls (SmolLM2's).

        The message's text before its calls is the model's (`model` spans); the calls' names and arguments are
        data inside the template's markup (control-token texts in them marked, so never special tokens); the
        arguments are a JSON string or an object (`arguments`), as OpenAI-style clients send them."""
        if not self.renders_calls or self._rendered is None:
            return None
        tool_calls = [
            {
                "type": "function",
                "function": {"name": self._mark(call.name), "arguments": self._mark(self._arguments(call.arguments))},
            }
            for call in written.calls
        ]
        content = self._hold([(written.content, "model", False)]) if written.content else ""
        message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": tool_calls}
        if written.reasoning and "reasoning_content" in self.template:
            message["reasoning_content"] = self._mark(written.reasoning)
        alone = self._try([*self._messages, message], self._tools, generation=False)
        # the message alone, as the template writes it (for the trace): what follows the conversation so far
        shown = self._text_of(alone or "")[len(self._text_of(self._rendered)) :]
        self.rendered_message = _PRIVATE.sub("", shown)
        self.rendered_message_tokens = len(self._encode_marked(shown))
        return self._after([message, *self._results(replies)])

    def _text(self, n: int) -> str:
        return "".join(text for text, _, _ in self._held.get(n, []))

    def _text_of(self, rendered: str) -> str:
        """A rendering with its placeholders' contents in place."""
        return _PLACEHOLDER.sub(lambda m: self._text(int(m.group(1))), rendered)

    def _arguments(self, arguments: dict) -> Any:
        if self.arguments == "string":
            return json.dumps(arguments, ensure_ascii=False)
        return arguments

    def user_turn(self, user: str, ended: bool, attachments: Sequence[Attachment] = ()) -> Pieces:
        """The next user message after the model's answer, then the generation prompt."""
        return self._after_model([{"role": "user", "content": self._hold(_content(user, attachments))}], ended)

    def _after_model(self, messages: list[dict], ended: bool) -> Pieces:
        if self._rendered is None:
            raise RuntimeError("TemplateChat: start() a conversation first")
        model = self._placeholder()  # the model's message: ids the context already holds
        self._messages += [{"role": "assistant", "content": model}, *messages]
        rendered = self._render_conversation()
        at = rendered.find(model)
        if at < 0:
            self._warn(
                "the chat template does not show the model's message; the suffix is taken after the previous rendering"
            )
            before, suffix = rendered[: len(self._rendered)], rendered[len(self._rendered) :]
        else:
            before, suffix = rendered[:at], rendered[at + len(model) :]
        if before != self._rendered:
            self._warn(
                "the chat template is not append-only: it renders the earlier conversation differently "
                "now; the context keeps what it already holds"
            )
        self._rendered = rendered
        self._note_reasoning(rendered)
        if ended:
            for text in self._end_texts:
                if suffix.startswith(text):
                    suffix = suffix[len(text) :]
                    break
        return self._pieces(suffix)

    def _note_reasoning(self, rendered: str) -> None:
        """Whether the generation prompt (the markup after the last message) leaves a reasoning block open, as
        Qwen3's thinking templates do with their closing `<think>\n`."""
        tail = rendered[rendered.rfind(PH_CLOSE) + 1 :]
        self.reasoning_open = False
        for opener, closer in getattr(self.syntax, "reasoning", ()):
            at = tail.rfind(opener)
            if at >= 0 and tail.find(closer, at) < 0:
                self.reasoning_open = True

    def _after(self, messages: list[dict]) -> Pieces:
        """The rendering's new part once `messages` follow what the context holds (a message of the model's
        included, written by the template): what was rendered after the previous rendering."""
        assert self._rendered is not None  # a conversation was started
        self._messages += messages
        rendered = self._render_conversation()
        if not rendered.startswith(self._rendered):
            self._warn(
                "the chat template is not append-only: it renders the earlier conversation differently "
                "now; the context keeps what it already holds"
            )
        suffix = rendered[len(self._rendered) :]
        self._rendered = rendered
        self._note_reasoning(rendered)
        return self._pieces(suffix)

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    # -- rendering to ids -------------------------------------------------------------------------------

    def _pieces(self, text: str) -> Pieces:
        """Rendered text with placeholders -> (ids, source) pieces."""
        parts: list[Part] = []
        pos = 0
        for m in _PLACEHOLDER.finditer(text):
            parts.append((text[pos : m.start()], "chat", True))
            held = self._held.get(int(m.group(1)))
            if held is None:
                self._warn("the chat template repeats an earlier message of the model; that copy is left out")
            else:
                parts += held
            pos = m.end()
        parts.append((text[pos:], "chat", True))
        # adjacent markup from the template and from a content's wrapper is encoded as one text
        merged: list[Part] = []
        for part in parts:
            if merged and part[2] and merged[-1][2] and merged[-1][1] == part[1]:
                merged[-1] = (merged[-1][0] + part[0], part[1], True)
            elif part[0]:
                merged.append(part)
        return self._encode_runs(merged)

    def _encode_runs(self, parts: list[Part]) -> Pieces:
        """Parts to pieces as the template's one-go encoding would cut them: markup's control tokens as their
        ids, and each run of text between them (markup and data alike) encoded as one text, so a token that
        joins a content's last character to the markup after it is the tokenizer's own. A token that straddles
        two parts goes to the one that is not markup (the data's source wins). Data that spells a control token,
        and marked spans in markup, are encoded apart, never joined; a tokenizer whose tokens' bytes do not add
        up to the text (a normalizer that changes it) encodes each part alone instead."""
        pieces: Pieces = []
        run: list[tuple[str, str]] = []

        def flush() -> None:
            if run:
                pieces.extend(self._encode_run(run))
                run.clear()

        for text_, source, markup in parts:
            if not markup:
                if self._control_re is not None and self._control_re.search(text_):
                    flush()
                    pieces.append((self.tokenizer.encode(text_), source))
                else:
                    run.append((text_, source))
                continue
            for i, chunk in enumerate(_MARKED.split(text_)):
                if i % 2:  # marked data inside markup: encoded apart
                    flush()
                    pieces.append((self.tokenizer.encode(chunk), source))
                    continue
                for j, piece in enumerate(_LONE_MARK.split(chunk)):
                    if j:  # a lone marker (the template split a string) still breaks the text
                        flush()
                    for n, bit in enumerate(self._control_split(piece)):
                        if n % 2:
                            flush()
                            pieces.append((self.tokenizer.encode_markup(bit), source))
                        elif bit:
                            run.append((bit, source))
        flush()
        merged: Pieces = []
        for ids, source in pieces:
            if not ids:
                continue
            if merged and merged[-1][1] == source:
                merged[-1] = (merged[-1][0] + ids, source)
            else:
                merged.append((ids, source))
        return merged

    def _control_split(self, text: str) -> list[str]:
        """Markup text and the control tokens' texts in it, alternately (text, control, text, ...)."""
        if self._controls is None:
            return [text]
        return self._controls.split(text)

    def _encode_run(self, run: list[tuple[str, str]]) -> Pieces:
        """One run of text, encoded whole, its tokens given to the parts' sources by their bytes."""
        text = "".join(t for t, _ in run)
        ids = self.tokenizer.encode(text)
        lengths = [len(self.tokenizer.token_bytes(i)) for i in ids]
        if sum(lengths) != len(text.encode("utf-8")) or len(run) == 1:
            if len(run) == 1:
                return [(ids, run[0][1])]
            return [(self.tokenizer.encode(t), source) for t, source in run if t]
        ends, at = [], 0
        for t, source in run:
            at += len(t.encode("utf-8"))
            ends.append((at, source))
        out: Pieces = []
        start, k = 0, 0
        for token, length in zip(ids, lengths):
            end = start + length
            while ends[k][0] <= start:  # the part this token starts in
                k += 1
            touched, j = [ends[k][1]], k
            while ends[j][0] < end and j + 1 < len(ends):  # and the parts it reaches into
                j += 1
                touched.append(ends[j][1])
            source = next((s for s in touched if s != "chat"), "chat")
            if out and out[-1][1] == source:
                out[-1][0].append(token)
            else:
                out.append(([token], source))
            start = end
        return out

    def _encode_marked(self, text: str) -> list[int]:
        """Markup in which marked spans are data (encoded with `encode`)."""
        ids: list[int] = []
        for i, part in enumerate(_MARKED.split(text)):
            if i % 2:
                ids += self.tokenizer.encode(part)
                continue
            for piece in _LONE_MARK.split(part):  # a lone marker (the template split a string) still breaks the text
                if piece:
                    ids += self.tokenizer.encode_markup(piece)
        return ids
