"""The lab tokenizer: one token per byte of UTF-8 text, plus a few special tokens.

ASCII text is one token per character, so traces read naturally; any other
character becomes its UTF-8 bytes, so nothing a tool returns is ever lost or
replaced. Special tokens (end of sequence, role markers) have ids of their own
and are never produced by `encode`: text from a user or a tool that contains
"<|assistant|>" stays eight-plus plain characters, which is what keeps data from
forging a turn boundary. Only the chat format places special ids.
"""

from __future__ import annotations

import codecs
from typing import Iterable

SPECIALS = ("<|eos|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")
BYTE_OFFSET = len(SPECIALS)  # byte b has id BYTE_OFFSET + b


class CharTokenizer:
    """Byte-level character tokenizer shared by the table, n-gram and transformer models."""

    vocab_size = BYTE_OFFSET + 256
    eos_id = 0

    def __init__(self) -> None:
        self._special_ids = {name: i for i, name in enumerate(SPECIALS)}
        # Every special ends the model's turn: a model that writes "<|tool|>" is
        # trying to speak for a tool, which only the harness may do.
        self.stop_ids = frozenset(range(BYTE_OFFSET))

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
            rest = rest[at + len(name):]
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



class StreamDecoder:
    """Turns tokens into text pieces as they stream, holding incomplete UTF-8.

    A character split across byte tokens comes out whole with its last byte;
    the earlier tokens yield "". Special tokens yield "" (they are not text).
    """

    def __init__(self, tokenizer) -> None:
        self._token_bytes = tokenizer.token_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def piece(self, token: int) -> str:
        return self._decoder.decode(self._token_bytes(token))

    def reset(self) -> None:
        self._decoder.reset()
