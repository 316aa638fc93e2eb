"""The lab format, its one copy: the lab tokenizer, its special tokens, and the lab models' chat format.

The lab tokenizer: one token per byte of UTF-8 text, plus a few special tokens.

ASCII text is one token per character, so traces read naturally; any other
character becomes its UTF-8 bytes, so nothing a tool returns is ever lost or
replaced. Special tokens (end of sequence, role markers) have ids of their own
and are never produced by `encode`: text from a user or a tool that contains
"<|assistant|>" stays eight-plus plain characters, which is what keeps data from
forging a turn boundary. Only the chat format places special ids.

`LabChat` is the lab models' chat format (table, n-gram, transformer); the
corpus and training use it too:

    <|system|>{preamble + tool paragraphs}<|user|>{question}<|assistant|>
    ... model writes, possibly a call ...
    <|tool|>{result}<|assistant|>        <- injected by the harness after a call
    ... model writes its answer ...<|eos|>
    <|user|>{next question}<|assistant|> <- the next turn of a conversation
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from decodeloop.formats.chat import Attachment, Pieces, ToolReply, user_parts

# the special tokens, ids 0 to 4 in this order (LabChat places them)
EOS, SYSTEM, USER, ASSISTANT, TOOL = SPECIALS = ("<|eos|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")
BYTE_OFFSET = len(SPECIALS)  # byte b has id BYTE_OFFSET + b

PREAMBLE = "You are a helpful assistant."


class CharTokenizer:
    """Byte-level character tokenizer shared by the table, n-gram and transformer models."""

    vocab_size = BYTE_OFFSET + 256
    eos_id = 0

    def __init__(self) -> None:
        self._special_ids = {name: i for i, name in enumerate(SPECIALS)}

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._special_ids)

    def special(self, name: str) -> int:
        """Id of a special token by name, e.g. special("<|user|>")."""
        return self._special_ids[name]

    def is_special(self, token: int) -> bool:
        return token < BYTE_OFFSET

    def encode(self, text: str) -> list[int]:
        """Plain text to ids; never yields a special id."""
        return [b + BYTE_OFFSET for b in text.encode("utf-8")]

    def encode_markup(self, text: str) -> list[int]:
        """Text in which special-token names ("<|eos|>") stand for their ids.

        Only for text the harness itself writes (chat markup, hand-written
        tables); data from users and tools always goes through `encode`.
        """
        ids: list[int] = []
        rest = text
        while rest:
            at, name = min(((rest.find(s), s) for s in SPECIALS if s in rest), default=(-1, ""))
            if at < 0:
                ids += self.encode(rest)
                break
            ids += self.encode(rest[:at])
            ids.append(self._special_ids[name])
            rest = rest[at + len(name) :]
        return ids

    def token_bytes(self, token: int) -> bytes:
        """The bytes a non-special token stands for (b"" for specials)."""
        if token < BYTE_OFFSET:
            return b""
        return bytes((token - BYTE_OFFSET,))

    def token_text(self, token: int) -> str:
        """A printable label for one token, for traces: 'a', '\\n', '\\xc2', '<|eos|>'."""
        if token < BYTE_OFFSET:
            return SPECIALS[token]
        b = token - BYTE_OFFSET
        if 32 <= b < 127:
            return chr(b)
        return repr(bytes((b,)))[2:-1]

    def decode(self, ids: Iterable[int]) -> str:
        """Ids to text; specials appear by name, invalid UTF-8 as U+FFFD."""
        out: list[str] = []
        run = bytearray()
        for t in ids:
            if t < BYTE_OFFSET:
                if run:
                    out.append(run.decode("utf-8", errors="replace"))
                    run.clear()
                out.append(SPECIALS[t])
            else:
                run.append(t - BYTE_OFFSET)
        if run:
            out.append(run.decode("utf-8", errors="replace"))
        return "".join(out)


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

    def start(
        self, tools: Sequence, user: str, system: str | None = None, attachments: Sequence[Attachment] = ()
    ) -> Pieces:
        """The context a conversation starts from, ending where the assistant speaks."""
        encode = self.tokenizer.encode
        return [
            ([self._system], "chat"),
            (encode(self.system_text(tools, system)), "system"),
            ([self._user], "chat"),
            *self._user_content(user, attachments),
            ([self._assistant], "chat"),
        ]

    def _user_content(self, user: str, attachments: Sequence[Attachment]) -> Pieces:
        return [(self.tokenizer.encode(text), source) for text, source in user_parts(user, attachments)]

    def tool_results(self, replies: Sequence[ToolReply], ended: bool) -> Pieces:
        """After a call: one tool message per reply, then the assistant resumes."""
        pieces: Pieces = []
        for reply in replies:
            pieces += [([self._tool], "chat"), (self.tokenizer.encode(reply.text), reply.source)]
        pieces.append(([self._assistant], "chat"))
        return pieces

    def user_turn(self, user: str, ended: bool, attachments: Sequence[Attachment] = ()) -> Pieces:
        """The next user message of a conversation, then the assistant speaks."""
        pieces: Pieces = [] if ended else [([self._eos], "chat")]
        return pieces + [([self._user], "chat"), *self._user_content(user, attachments), ([self._assistant], "chat")]


def lab_transcript(system: str, user: str, call: str, result: str, answer: str) -> str:
    """One whole lab turn as markup (special tokens by name): what the corpus trains on."""
    return f"{SYSTEM}{system}{USER}{user}{ASSISTANT}{call}{TOOL}{result}{ASSISTANT}{answer}{EOS}"
