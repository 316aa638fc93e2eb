"""The Tokenizer protocol, its check, the lab tokenizer, and byte-exact streaming decode.

Every tokenizer the harness drives (the lab's, a Hugging Face one, ...) keeps
one contract, written down in `Tokenizer` and checked by `check_tokenizer`
when a model is loaded: `encode` never yields a special id, so user text and
tool results are always data, and only the chat format places special tokens.

The lab tokenizer: one token per byte of UTF-8 text, plus a few special tokens.

ASCII text is one token per character, so traces read naturally; any other
character becomes its UTF-8 bytes, so nothing a tool returns is ever lost or
replaced. Special tokens (end of sequence, role markers) have ids of their own
and are never produced by `encode`: text from a user or a tool that contains
"<|assistant|>" stays eight-plus plain characters, which is what keeps data from
forging a turn boundary. Only the chat format places special ids.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Mapping
from typing import Protocol

# the lab format's special tokens, the one copy of them (chat.LabChat places them), ids 0 to 4 in this order
EOS, SYSTEM, USER, ASSISTANT, TOOL = SPECIALS = ("<|eos|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")
BYTE_OFFSET = len(SPECIALS)  # byte b has id BYTE_OFFSET + b


class Tokenizer(Protocol):
    """Text <-> token ids, as the harness needs them.

    - `encode(text)` turns data (user text, tool results) into ids and never
      yields a special id, whatever the text spells;
    - `decode(ids)` is for display (special tokens by name);
    - `token_bytes(id)` is the exact bytes a token stands for (b"" for special
      tokens), so `StreamDecoder` can release text byte-exactly, a character
      split across tokens once it is complete;
    - `token_text(id)` a printable label for traces;
    - `special_tokens` maps the text of every special token to its id (every
      added token that is not plain whitespace: a Hugging Face tokenizer's
      `<tool_call>` counts, Gemma's "\n" token does not);
    - `eos_id` is the model's end-of-sequence id. Which ids end the
      assistant's turn is the chat format's to say (`ChatFormat.stop_ids`).
    """

    vocab_size: int
    eos_id: int

    @property
    def special_tokens(self) -> Mapping[str, int]: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...

    def token_bytes(self, token: int) -> bytes: ...

    def token_text(self, token: int) -> str: ...


class TokenizerError(ValueError):
    """A tokenizer that breaks the contract; the model is not started with it."""


def check_tokenizer(tokenizer: Tokenizer) -> None:
    """Refuse a tokenizer whose `encode` turns any special token's text into a special id.

    Encoding the text of every special token is the direct test of the promise
    that data can never forge a role marker, an end of turn or a call opener.
    """
    special_ids = set(tokenizer.special_tokens.values())
    for text, _token in tokenizer.special_tokens.items():
        if not text:
            continue
        ids = tokenizer.encode(text)
        forged = [i for i in ids if i in special_ids]
        if forged:
            raise TokenizerError(
                f"the tokenizer's encode turns the text {text!r} into special id(s) {forged}: tool results "
                f"and user text could forge special tokens, so this model is not started"
            )


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


class StreamDecoder:
    """Turns tokens into text pieces as they stream, holding incomplete UTF-8.

    A character split across byte tokens (the lab's bytes, byte-level BPE,
    SentencePiece byte fallback) comes out whole with its last byte; the
    earlier tokens yield "". Special tokens yield "" (they are not text).
    """

    def __init__(self, tokenizer) -> None:
        self._token_bytes = tokenizer.token_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def piece(self, token: int) -> str:
        return self._decoder.decode(self._token_bytes(token))

    def reset(self) -> None:
        self._decoder.reset()
