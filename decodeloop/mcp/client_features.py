"""What this client offers servers besides calling their tools: the MCP spec's client features.

A server may ask the client for something: `sampling/createMessage` (a completion from the client's
model, `sampling.py`) and `elicitation/create` (input from the user, `elicitation.py`). Roots, the third
client feature, are the client's own answer and live with it (mcp/roots.py).

`ClientFeatures` says which of these a run offers and who answers them. It is made before the servers
start, because a server learns the client's capabilities in its handshake (or in every request's
`_meta` on 2026-07-28), and hands each server's session the handlers that answer that server's
requests: `sampling` and `elicitation` may be set or changed later, since they are read when a request
comes. A feature left None is not declared, so a server does not ask for it; one declared but unset
when asked is refused with a JSON-RPC error the server can read.

The same handlers answer a request sent on the session (the handshake revisions) and one of a
2026-07-28 result's `inputRequests`: the server's wire does not change the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from decodeloop.errors import RpcError

METHOD_NOT_FOUND = -32601

# what a handler answering one server's request gets: the server's name, the request's params, and
# the tools of the calls to that server in flight when it asked (the calls that asked, on a session
# that runs one call at a time)
Answer = Callable[[str, dict, list[str]], dict]


class Sampling(Protocol):
    """Answers sampling/createMessage (client_features/local_sampling.py)."""

    with_tools: bool  # declares sampling.tools: tool definitions in a request are used, not refused

    def __call__(self, server: str, params: dict, calls: list[str]) -> dict: ...


class ClientFeatures:
    """Which client features a run offers, and who answers them (None: not offered)."""

    def __init__(
        self,
        sampling: Sampling | None = None,
        elicitation: Answer | None = None,
        *,
        offer_sampling: bool | None = None,
        offer_elicitation: bool | None = None,
    ) -> None:
        self.sampling = sampling
        self.elicitation = elicitation
        # offered even while unset: the CLI declares what it will set once the model is loaded
        self.offer_sampling = sampling is not None if offer_sampling is None else offer_sampling
        self.offer_elicitation = elicitation is not None if offer_elicitation is None else offer_elicitation

    def capabilities(self) -> dict:
        """The client capabilities to declare for these features."""
        out: dict = {}
        if self.offer_sampling:
            out["sampling"] = {"tools": {}} if self.sampling is not None and self.sampling.with_tools else {}
        if self.offer_elicitation:
            out["elicitation"] = {"form": {}, "url": {}}
        return out

    def handlers(self, server: str, calls: Callable[[], list[str]]) -> dict[str, Callable[[dict], Any]]:
        """The request handlers of one server's session; `calls` gives the tools of its calls in flight."""
        out: dict[str, Callable[[dict], Any]] = {}
        if self.offer_sampling:
            out["sampling/createMessage"] = lambda params: self._answer("sampling", server, params, calls())
        if self.offer_elicitation:
            out["elicitation/create"] = lambda params: self._answer("elicitation", server, params, calls())
        return out

    def _answer(self, feature: str, server: str, params: dict, calls: list[str]) -> dict:
        answer = self.sampling if feature == "sampling" else self.elicitation
        if answer is None:
            raise RpcError(METHOD_NOT_FOUND, f"this client offers no {feature} now")
        return answer(server, params, calls)
