"""The Tokenizer protocol, its check, and byte-exact streaming decode (the lab's tokenizer is in lab.py).

Every tokenizer the harness drives (the lab's, a Hugging Face one, ...) keeps
one contract, written down in `Tokenizer` and checked by `check_tokenizer`
when a model is loaded: `encode` never yields a special id, so user text and
tool results are always data, and only the chat format places special tokens.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Mapping
from typing import Protocol


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
