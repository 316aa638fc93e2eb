"""A message held to text: no token that would open a tool call, as OpenAI's `tool_choice: "none"`.

After a result, a model that writes the same call again is not left to loop (harness.py, `--on-repeat answer`):
its repeated message is dropped and the next one is generated with `HoldToText` active, so it answers from what
the conversation holds. At each step the processor masks, where a call could open:

- every opener that is one special token (`<tool_call>`, `[TOOL_CALLS]`, `<|python_tag|>`, ...), and every
  token that holds a whole opener;
- for an opener that counts anywhere, the tokens that begin with its first character (`<` of `<tool_call>`);
- at the start of a line, for an opener that counts there (a ```` ```json ```` fence, `<function=`), the
  tokens that begin with its first character, and anywhere the tokens that start a line with it;
- at the start of the message (nothing but whitespace written yet), the tokens that begin an opener that
  counts only there (`{` and `[` of bare JSON and call lists).

So no call can open, whatever the vocabulary (one byte a token, or BPE), and a model bent on its call is turned
to its next choice at the first token. A model that takes another tool after a result is never held: only a
repeat starts it, and it lasts one message. A remote engine takes no logits processor, so there the message is
not held (the harness says so). Standard library only, but for the logits' own kinds (processors.py's contract).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from decodeloop.sampling.processors import LogitBias, ProcessorState


class HoldToText:
    """While `active` (from `hold(start)` to `release()`): the logits processor that keeps the message text.
    `anywhere`, `line_start` and `message_start` are the format's openers by where each counts."""

    def __init__(
        self,
        tokenizer: Any,
        anywhere: Iterable[str],
        line_start: Iterable[str] = (),
        message_start: Iterable[str] = (),
    ) -> None:
        self.tokenizer = tokenizer
        specials = tokenizer.special_tokens
        every = [o for o in dict.fromkeys([*anywhere, *line_start, *message_start]) if o]
        self._special = {specials[o] for o in every if o in specials}
        # a token that holds a whole opener that counts mid-message (a one-character message-start opener, `{`,
        # is ordinary text there)
        self._whole = [o for o in dict.fromkeys([*anywhere, *line_start]) if o and o not in specials]
        self._anywhere = sorted({o[0] for o in anywhere if o and o not in specials})
        self._line = sorted({o[0] for o in line_start if o and o not in specials})
        self._message = sorted({o[0] for o in message_start if o and o not in specials})
        self._texts: list[str] | None = None  # every token's text, made on the first hold
        self._fixed: frozenset[int] = frozenset()  # masked wherever the message stands
        self._starting: dict[tuple[str, str], frozenset[int]] = {}
        self._masks: dict[frozenset[int], LogitBias] = {}
        self.active = False
        self.start = 0  # where the held message begins in the context

    def hold(self, start: int) -> None:
        """Hold the message that begins at `start` to text."""
        if self._texts is None:
            special_ids = set(self.tokenizer.special_tokens.values())
            self._texts = [
                "" if t in special_ids else self.tokenizer.token_bytes(t).decode("utf-8", errors="ignore")
                for t in range(self.tokenizer.vocab_size)
            ]
            fixed = set(self._special)
            for t, text in enumerate(self._texts):
                if any(o in text for o in self._whole) or any(text.startswith(c) for c in self._anywhere):
                    fixed.add(t)
                elif any(f"\n{c}" in text.replace(" ", "").replace("\t", "") for c in self._line):
                    fixed.add(t)  # a token that starts a line with a line-start opener's first character
            self._fixed = frozenset(fixed)
        self.active, self.start = True, start

    def release(self) -> None:
        self.active = False

    def banned(self, written: str) -> frozenset[int]:
        """The tokens masked after the held message's text so far, `written`."""
        out = set(self._fixed)
        if not written.rstrip(" \t") or written.rstrip(" \t").endswith("\n"):  # the start of a line
            for c in self._line:
                out |= self._starting_with(c, " \t")
        if not written.strip():  # the start of the message
            for c in (*self._line, *self._message):
                out |= self._starting_with(c, " \t\r\n")
        return frozenset(out)

    def _starting_with(self, char: str, skip: str) -> frozenset[int]:
        found = self._starting.get((char, skip))
        if found is None:
            texts = self._texts or []
            found = frozenset(t for t, text in enumerate(texts) if text.lstrip(skip).startswith(char))
            self._starting[(char, skip)] = found
        return found

    def __call__(self, logits: Any, state: ProcessorState) -> Any:
        if not self.active:
            return logits
        written = self.tokenizer.decode(state.context[self.start :])
        banned = self.banned(written)
        mask = self._masks.get(banned)
        if mask is None:
            mask = self._masks[banned] = LogitBias({token: float("-inf") for token in banned})
        return mask(logits, state)
