"""Whether the tools fit: what their descriptions cost in the first prompt, in the model's own tokens.

A server decides how many tools it lists and how long each one is. Each tool's
text is capped when it is taken (untrusted.cap_tool), and so is the number of
tools per server (tools/router.py); what is left can still fill a context window, so
the harness measures it before the model sees it:

- the tool block, the first prompt's tokens with the tools less its tokens
  without them (so each chat format's own rendering is what is counted, the
  model's template included), must be at most `max_tool_tokens`;
- the first prompt, with room for the turn's `max_tokens`, must fit the model's
  context length when it is known (hf: and gguf: models).

Either failure is a `ToolSurfaceError` that names the servers filling the prompt,
largest first, with their tokens and tools, and how to narrow them.
"""

from __future__ import annotations

from collections.abc import Sequence

from decodeloop.errors import ToolSurfaceError
from decodeloop.formats.chat import pieces_ids

DEFAULT_MAX_TOOL_TOKENS = 16_384  # half a 32k window: room left for the conversation


def prompt_tokens(chat, tools: Sequence, system: str | None) -> int:
    """Tokens of the first prompt with these tools and an empty user message."""
    return len(pieces_ids(chat.start(list(tools), "", system)))


def check_tools(
    chat,
    tools: Sequence,
    owner: dict[str, str],
    system: str | None,
    *,
    max_tool_tokens: int,
    context_length: int | None,
    max_tokens: int,
) -> int:
    """The tool block's tokens; raises ToolSurfaceError when it is over the cap or the prompt cannot fit.

    `owner` maps each tool's name to its server. Calls `chat.start`, so it is for
    before a conversation starts (a new one starts with its own `start`).
    """
    base = prompt_tokens(chat, [], system)
    whole = prompt_tokens(chat, tools, system) if tools else base
    block = whole - base
    if block > max_tool_tokens:
        raise ToolSurfaceError(
            f"the tools' descriptions take {block:,} tokens of the prompt, over the cap of "
            f"{max_tool_tokens:,} (--max-tool-tokens): {_by_server(chat, tools, owner, system, base)}"
        )
    if context_length is not None and whole + max_tokens > context_length:
        raise ToolSurfaceError(
            f"the first prompt is {whole:,} tokens and the turn may write {max_tokens:,} more "
            f"(--max-tokens): over the model's context of {context_length:,} tokens. The tools "
            f"take {block:,}: {_by_server(chat, tools, owner, system, base)}"
        )
    return block


def _by_server(chat, tools: Sequence, owner: dict[str, str], system: str | None, base: int) -> str:
    """Each server's share of the tool block, largest first, and what to do about it."""
    servers: dict[str, list] = {}
    for tool in tools:
        servers.setdefault(owner.get(tool.name, "?"), []).append(tool)
    shares = sorted(
        ((prompt_tokens(chat, own, system) - base, server, len(own)) for server, own in servers.items()), reverse=True
    )
    named = ", ".join(
        f"{server} {tokens:,} tokens in {count:,} tool{'s' * (count != 1)}" for tokens, server, count in shares
    )
    return named + "; offer fewer with --max-tools, or leave a server out"
