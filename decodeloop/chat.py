"""The chat format: how messages and tool schemas become token ids.

Role boundaries are special tokens placed here and nowhere else: user text and
tool results are encoded as plain text, so a tool result that contains
"<|assistant|>" cannot end the tool message or start a turn. This is the
format of the lab models (table, n-gram, transformer):

    <|system|>{preamble + tool paragraphs}<|user|>{question}<|assistant|>
    ... model writes, possibly a call ...
    <|tool|>{result}<|assistant|>        <- injected by the harness after a call
    ... model writes its answer ...<|eos|>
"""

from __future__ import annotations

from typing import Sequence

PREAMBLE = "You are a helpful assistant."


class ChatFormat:
    def __init__(self, tokenizer, syntax, preamble: str = PREAMBLE) -> None:
        self.tokenizer = tokenizer
        self.syntax = syntax
        self.preamble = preamble
        self._system = tokenizer.special("<|system|>")
        self._user = tokenizer.special("<|user|>")
        self._assistant = tokenizer.special("<|assistant|>")
        self._tool = tokenizer.special("<|tool|>")

    def system_text(self, tools: Sequence) -> str:
        """The system prompt: a preamble, then the call syntax and one paragraph per tool."""
        if not tools:
            return self.preamble
        return self.preamble + " You can use the tools below.\n\n" + self.syntax.describe(tools)

    def prompt(self, system: str, user: str) -> list[int]:
        """The context a turn starts from, ending where the assistant speaks."""
        encode = self.tokenizer.encode
        return [self._system, *encode(system), self._user, *encode(user), self._assistant]

    def tool_message(self, body: str) -> list[int]:
        """The span injected after a call: the tool's message, then the assistant resumes."""
        return [self._tool, *self.tokenizer.encode(body), self._assistant]
