"""The server features besides tools, on the client's side: resources, prompts and argument completion.

`ServerFeatures` is a part of McpClient (client.py), kept apart because each of these is asked only as
the server's capabilities offer it (else `Unsupported`, before anything is sent) and reads the same on
both wires: `list_resources` and `list_resource_templates` across pages, `read_resource`
(`ResourceContents`), `subscribe_resource` (`resources/subscribe`, or on 2026-07-28 a
`subscriptions/listen` stream naming the URI); `list_prompts` across pages, `get_prompt` (`PromptResult`:
each message's role and one content item, as the server wrote it), and `complete` (`completion/complete`
for a prompt's argument, `ref/prompt`, or a resource template's variable, `ref/resource`). The
session's state these read and keep (capabilities, the stale flags, subscriptions) is the client's.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from decodeloop.errors import ProtocolError, Unsupported
from decodeloop.mcp.content import (
    Completion,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptResult,
    Resource,
    ResourceContents,
    ResourceTemplate,
)
from decodeloop.text.credentials import clip

if TYPE_CHECKING:
    from decodeloop.mcp.jsonrpc import Deadline

MAX_PAGES = 1000  # list pages followed before assuming the server is looping
MAX_COMPLETIONS = 100  # values one completion may hold, as the specification says


class ServerFeatures:
    """Resources, prompts and completion: the McpClient methods for them (the client supplies the session)."""

    # what the client holds (client.py)
    name: str
    capabilities: dict
    resources_stale: threading.Event
    prompts_stale: threading.Event
    subscriptions: set[str]
    updated: set[str]

    if TYPE_CHECKING:

        @property
        def stateless(self) -> bool: ...

        def log(self, line: str) -> None: ...

        def _request(self, method: str, params: dict | None = None, timeout: Any = None) -> Any: ...

        def _complete(self, method: str, params: dict, timeout: Any) -> Any: ...

        def _listen(self, notifications: dict, what: str) -> None: ...

    # -- resources ------------------------------------------------------------------

    def offers_resources(self) -> bool:
        return isinstance(self.capabilities.get("resources"), dict)

    def _require_resources(self, subscribe: bool = False) -> dict:
        offered = self.capabilities.get("resources")
        if not isinstance(offered, dict):
            raise Unsupported(f"{self.name}: the server offers no resources (its capabilities do not list them)")
        if subscribe and offered.get("subscribe") is not True:
            raise Unsupported(f"{self.name}: the server does not offer subscriptions to its resources")
        return offered

    def _pages(self, method: str, key: str, timeout: float | Deadline | None) -> list[dict]:
        """Every item of a paged list request, following nextCursor (each page waits `timeout`)."""
        items: list[dict] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            result = self._request(method, {"cursor": cursor} if cursor is not None else None, timeout)
            if not isinstance(result, dict) or not isinstance(result.get(key), list):
                raise ProtocolError(f"{self.name}: {method} did not return a list of {key}")
            items += [item for item in result[key] if isinstance(item, dict)]
            cursor = result.get("nextCursor")
            if cursor is None:
                return items
            if not isinstance(cursor, str) or cursor in seen:
                raise ProtocolError(f"{self.name}: {method} returned a bad or repeated cursor {cursor!r}")
            seen.add(cursor)
        raise ProtocolError(f"{self.name}: {method} still had more pages after {MAX_PAGES}")

    def list_resources(self, timeout: float | None = None) -> list[Resource]:
        """Every resource the server lists, across pages; `Unsupported` when it offers none."""
        self._require_resources()
        self.resources_stale.clear()  # before the request: a change announced while it is answered stays news
        out = []
        for raw in self._pages("resources/list", "resources", timeout):
            if not isinstance(raw.get("uri"), str):
                self.log(f"skipped a resource without a uri: {clip(repr(raw), 200)}")
                continue
            size = raw.get("size")
            out.append(
                Resource(
                    uri=raw["uri"],
                    name=_string(raw.get("name")) or raw["uri"],
                    description=_string(raw.get("description")),
                    mime_type=_string(raw.get("mimeType")) or None,
                    title=_string(raw.get("title")) or None,
                    size=size if isinstance(size, int) and not isinstance(size, bool) else None,
                )
            )
        return out

    def list_resource_templates(self, timeout: float | None = None) -> list[ResourceTemplate]:
        """Every resource template the server lists, across pages; `Unsupported` when it offers no resources."""
        self._require_resources()
        out = []
        for raw in self._pages("resources/templates/list", "resourceTemplates", timeout):
            if not isinstance(raw.get("uriTemplate"), str):
                self.log(f"skipped a resource template without a uriTemplate: {clip(repr(raw), 200)}")
                continue
            out.append(
                ResourceTemplate(
                    uri_template=raw["uriTemplate"],
                    name=_string(raw.get("name")) or raw["uriTemplate"],
                    description=_string(raw.get("description")),
                    mime_type=_string(raw.get("mimeType")) or None,
                    title=_string(raw.get("title")) or None,
                )
            )
        return out

    def read_resource(self, uri: str, timeout: float | None = None) -> ResourceContents:
        """resources/read: a URI the server lists, or one of its templates fills. A URI it does not know is
        its RpcError (-32002 in the specification)."""
        self._require_resources()
        result = self._complete("resources/read", {"uri": uri}, timeout)
        contents = result.get("contents") if isinstance(result, dict) else None
        if not isinstance(contents, list):
            raise ProtocolError(f"{self.name}: resources/read did not return a list of contents")
        return ResourceContents(uri, [item for item in contents if isinstance(item, dict)])

    def subscribe_resource(self, uri: str) -> None:
        """Be told when a resource changes (`updated`, and `on_notification`): resources/subscribe, or on
        2026-07-28 a subscriptions/listen stream for the URI, open until close()."""
        self._require_resources(subscribe=True)
        if uri in self.subscriptions:
            return
        if self.stateless:
            self.subscriptions.add(uri)
            threading.Thread(
                target=self._listen,
                args=({"resourceSubscriptions": [uri]}, f"changes to {uri}"),
                name=f"mcp-listen-{self.name}-resource",
                daemon=True,
            ).start()
            return
        self._request("resources/subscribe", {"uri": uri})
        self.subscriptions.add(uri)

    def unsubscribe_resource(self, uri: str) -> None:
        """No more news of a resource (on 2026-07-28 its stream stays open until close(); its news is dropped)."""
        if uri not in self.subscriptions:
            return
        self.subscriptions.discard(uri)
        self.updated.discard(uri)
        if not self.stateless:
            self._request("resources/unsubscribe", {"uri": uri})

    # -- prompts and completion --------------------------------------------------------

    def offers_prompts(self) -> bool:
        return isinstance(self.capabilities.get("prompts"), dict)

    def offers_completions(self) -> bool:
        return isinstance(self.capabilities.get("completions"), dict)

    def list_prompts(self, timeout: float | None = None) -> list[Prompt]:
        """Every prompt the server lists, across pages; `Unsupported` when it offers none."""
        if not self.offers_prompts():
            raise Unsupported(f"{self.name}: the server offers no prompts (its capabilities do not list them)")
        self.prompts_stale.clear()  # before the request: a change announced while it is answered stays news
        out = []
        for raw in self._pages("prompts/list", "prompts", timeout):
            if not isinstance(raw.get("name"), str) or not raw["name"]:
                self.log(f"skipped a prompt without a name: {clip(repr(raw), 200)}")
                continue
            arguments = raw.get("arguments")
            out.append(
                Prompt(
                    name=raw["name"],
                    description=_string(raw.get("description")),
                    arguments=[
                        PromptArgument(
                            name=arg["name"],
                            description=_string(arg.get("description")),
                            required=arg.get("required") is True,
                            title=_string(arg.get("title")) or None,
                        )
                        for arg in (arguments if isinstance(arguments, list) else [])
                        if isinstance(arg, dict) and isinstance(arg.get("name"), str)
                    ],
                    title=_string(raw.get("title")) or None,
                )
            )
        return out

    def get_prompt(self, name: str, arguments: dict | None = None, timeout: float | None = None) -> PromptResult:
        """prompts/get: the prompt's messages with `arguments` (strings) filled in. A prompt the server does not
        know, or a required argument left out, is its RpcError (-32602 in the specification)."""
        if not self.offers_prompts():
            raise Unsupported(f"{self.name}: the server offers no prompts (its capabilities do not list them)")
        params: dict = {"name": name}
        if arguments:
            params["arguments"] = {str(key): str(value) for key, value in arguments.items()}
        result = self._complete("prompts/get", params, timeout)
        raw = result.get("messages") if isinstance(result, dict) else None
        if not isinstance(raw, list):
            raise ProtocolError(f"{self.name}: prompts/get did not return a list of messages")
        messages = []
        for item in raw:
            content = item.get("content") if isinstance(item, dict) else None
            if not isinstance(content, dict) or item.get("role") not in ("user", "assistant"):
                self.log(f"skipped a prompt message without a role or content: {clip(repr(item), 200)}")
                continue
            messages.append(PromptMessage(item["role"], content))
        return PromptResult(name, _string(result.get("description")), messages)

    def complete(
        self,
        ref: dict,
        argument_name: str,
        value: str,
        context_arguments: dict | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """completion/complete: what the server suggests for an argument of `ref` (`prompt_ref(NAME)` or
        `resource_ref(URI_TEMPLATE)`) that begins `value`, the arguments already chosen as its context."""
        if not self.offers_completions():
            raise Unsupported(f"{self.name}: the server offers no completions (its capabilities do not list them)")
        if not isinstance(ref, dict) or ref.get("type") not in ("ref/prompt", "ref/resource"):
            raise ValueError(f"a completion's ref must be ref/prompt or ref/resource, got {ref!r}")
        params: dict = {"ref": ref, "argument": {"name": argument_name, "value": value}}
        if context_arguments:
            params["context"] = {"arguments": {str(k): str(v) for k, v in context_arguments.items()}}
        result = self._complete("completion/complete", params, timeout)
        completion = _object(result.get("completion")) if isinstance(result, dict) else {}
        values = completion.get("values")
        if not isinstance(values, list):
            raise ProtocolError(f"{self.name}: completion/complete did not return a list of values")
        total = completion.get("total")
        return Completion(
            [v for v in values if isinstance(v, str)][:MAX_COMPLETIONS],
            total if isinstance(total, int) and not isinstance(total, bool) else None,
            completion.get("hasMore") is True,
        )


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}
