"""The router: which MCP server serves which tool (tools/startup.py starts the servers).

Every tool the model is told about must be routable; an unknown name is an
error handed back to the model with the list of tools that do exist.

Names: a tool keeps its own name unless another server's tool already has it
(the first configured server keeps the plain name; later ones get `server__tool`,
the server part reduced to the MCP tool-name characters A-Z a-z 0-9 _ - . and
the whole kept within 128 characters) or it starts with another configured
server's prefix. A name once given stays with its tool while its server lists
it: a tool added later never takes it away. A name outside the MCP character set
is refused. When a server announces notifications/tools/list_changed, `refresh()`
lists its tools again (the harness calls it between steps, on its own thread).

Pinning: each tool's definition (title, description, schemas, annotations) is
pinned when the router first takes it (pins.py); a changed definition is held,
not used, until `approve(name)`, and the ToolsChanged event says exactly what
changed and whether the server had declared listChanged. A pin outlives the
listing: a tool that a server stops listing keeps its pin (in the pin store
too), and when it is listed again it is compared with it, so removing a tool
and listing it again with a new description, a new required argument or a
`readOnlyHint` is held exactly like a change in place.

Apps: a tool whose visibility (MCP Apps, `_meta.ui.visibility`) leaves out the model is never offered to
it; it is kept in `app_only` for its own app's page to call (tools/apps.py).

Caps: a server's tools are taken in the order it lists them, at most
`max_tools` of them (DEFAULT_MAX_TOOLS); a notice says how many more it listed.
Each tool's text is capped when it is taken (untrusted.cap_tool); the tokens
all of them take in the prompt are the harness's to check (tool_budget.py).

"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from decodeloop.errors import ConfigError, McpError
from decodeloop.events import Emit, Notice, ToolsChanged
from decodeloop.mcp.client import McpClient, Tool, ToolResult
from decodeloop.mcp.client_features import ClientFeatures
from decodeloop.mcp.roots import file_roots
from decodeloop.mcp.tasks import RunningTask
from decodeloop.schema import did_you_mean, pattern_notes, type_notes
from decodeloop.text.untrusted import DEFAULT_MAX_DESCRIPTION_CHARS, DEFAULT_MAX_SCHEMA_CHARS, cap_tool, visible_line
from decodeloop.tools.config import ServerSpec
from decodeloop.trust.pins import PinStore, changes, fingerprint

NAMESPACE_SEPARATOR = "__"
MAX_TOOL_NAME = 128
DEFAULT_MAX_TOOLS = 128  # per server: OpenAI's limit for one request, and more than any model uses well
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]+\Z")


class UnknownTool(LookupError):
    pass


@dataclass(frozen=True)
class Route:
    """Where an exposed tool name leads: the tool as the model is shown it (its .name is the exposed name),
    the server that serves it, and its name on that server."""

    tool: Tool
    server: str
    remote: str


class Router:
    def __init__(
        self,
        emit: Emit | None = None,
        specs: Sequence[ServerSpec] = (),
        *,
        pin_store: PinStore | None = None,
        max_tools: int = DEFAULT_MAX_TOOLS,
        features: ClientFeatures | None = None,
    ) -> None:
        """`specs`: the servers the router will route to (the policy reads their rules; no server takes
        another's name as its prefix); `pin_store` keeps tool definitions between runs (None: for this
        session only); `max_tools` caps the tools taken from one server; `features` are what the servers
        may ask of the client."""
        self.routes: dict[str, Route] = {}  # exposed name -> its route, in the order the model is shown them
        self.tools: dict[str, Tool] = {}  # exposed name -> tool: the routes' tools, for a quick lookup
        self.clients: dict[str, McpClient] = {}
        self.served: dict[str, list[Tool]] = {}  # server -> its tools as taken: capped, at their pinned definitions
        # (server, name) -> the definition pinned for it, kept while the server does not list it: a tool that
        # goes and comes back is compared with its pin, as a tool changed in place is
        self.pinned: dict[tuple[str, str], Tool] = {}
        self.pending: dict[tuple[str, str], Tool] = {}  # (server, name) -> a changed definition, held until approved
        self.specs: list[ServerSpec] = list(specs)
        self.reserved: set[str] = {spec.name for spec in self.specs}  # no other server may use their prefixes
        self.features = features
        self.pin_store = pin_store
        self._names: dict[tuple[str, str], str] = {}  # (server, name) -> its exposed name, kept while it is listed
        self.version = 0  # bumped whenever the exposed tools change
        self.emit = emit if emit is not None else (lambda event: None)
        # a server's text enters every prompt: each tool's description and schema text is capped
        self.max_description_chars = DEFAULT_MAX_DESCRIPTION_CHARS
        self.max_schema_chars = DEFAULT_MAX_SCHEMA_CHARS
        self.max_tools = max_tools  # per server
        self._types_noted: set[tuple[str, str]] = set()  # (server, fingerprint): definitions whose types were noted
        # MCP Apps (tools/apps.py): tools only an app may call (their visibility leaves out the model), by server,
        # and each app's page once read, by (server, ui:// URI)
        self.app_only: dict[str, dict[str, Tool]] = {}
        self.app_pages: dict[tuple[str, str], str] = {}

    def add_server(self, server: str, client: McpClient, tools: list[Tool]) -> None:
        if server in self.clients:
            raise ConfigError(f"two servers are named {server!r}")
        self.clients[server] = client
        self.reserved.add(server)
        taken = self._take(server, tools)
        if self.pin_store is not None:  # pins from an earlier run: a definition changed since is held
            stored = self.pin_store.load(server, _stored_tool)
            for name, tool in stored.items():  # pins of tools not listed now are kept for their return
                self.pinned[(server, name)] = tool
            for n, tool in enumerate(taken):
                old = stored.get(tool.name)
                if old is not None and fingerprint(old) != fingerprint(tool):
                    self.pending[(server, tool.name)] = tool
                    taken[n] = dataclasses.replace(old, header_params=tool.header_params)
                    self.emit(
                        Notice(
                            source=server,
                            message=f"tool {tool.name} changed since it was pinned ({self.pin_store.path(server)})"
                            f"; held at the pinned definition until approved: " + "; ".join(changes(old, tool)),
                        )
                    )
        self.served[server] = taken
        for tool in taken:
            self.pinned[(server, tool.name)] = tool
        self._save_pins(server)
        self._expose()

    def _save_pins(self, server: str) -> None:
        """Store the server's pins, those of tools it does not list now included."""
        if self.pin_store is not None:
            self.pin_store.save(server, [tool for (owner, _), tool in self.pinned.items() if owner == server])

    def _take(self, server: str, tools: list[Tool]) -> list[Tool]:
        """The tools a server listed that may be offered: valid names, once each, text within the caps, at most
        `max_tools` of them."""
        kept: list[Tool] = []
        seen: set[str] = set()
        for n, tool in enumerate(tools):
            if len(kept) >= self.max_tools:
                self.emit(
                    Notice(
                        source=server,
                        message=f"lists {len(tools):,} tools; the first {self.max_tools:,} it could offer "
                        f"are taken, the other {len(tools) - n:,} are not (--max-tools "
                        f"{self.max_tools})",
                    )
                )
                break
            if not _NAME_CHARS.match(tool.name) or len(tool.name) > MAX_TOOL_NAME:
                self.emit(
                    Notice(
                        source=server,
                        message=f"tool name {visible_line(repr(tool.name))} refused: not 1-{MAX_TOOL_NAME} "
                        "of the MCP tool-name characters A-Z a-z 0-9 _ - .",
                    )
                )
                continue
            if tool.name in seen:
                self.emit(Notice(source=server, message=f"tool {tool.name} is listed twice; the first is kept"))
                continue
            seen.add(tool.name)
            capped, note = cap_tool(tool, self.max_description_chars, self.max_schema_chars)
            if note is not None:
                self.emit(Notice(source=server, message=note))
            if capped is not None and "model" not in capped.visibility:  # its app's alone: never in a prompt
                self.app_only.setdefault(server, {})[capped.name] = capped
            elif capped is not None:
                kept.append(capped)
                self._note_types(server, capped)
        return kept

    def _note_types(self, server: str, tool: Tool) -> None:
        """Say once per definition which parameter types were read as aliases or are unknown, and which
        patterns the harness does not check (schema/describe.py)."""
        key = (server, fingerprint(tool))
        if key not in self._types_noted:
            self._types_noted.add(key)
            lines = [*type_notes(tool.input_schema), *pattern_notes(tool.input_schema)]
            lines += [f"in its outputSchema, {line}" for line in pattern_notes(tool.output_schema)]
            for line in lines:
                self.emit(Notice(source=server, message=f"tool {tool.name}: {line}"))

    def _expose(self) -> None:
        """Exposed names: a name once given stays with its tool while the server lists it; a new tool gets
        its own name when that is free and not another server's prefix, else `server__tool`."""
        exposed: dict[str, Route] = {}
        listed = {(server, tool.name) for server, tools in self.served.items() for tool in tools}
        self._names = {key: name for key, name in self._names.items() if key in listed}
        held = set(self._names.values())
        for server, tools in self.served.items():
            for tool in tools:
                name = self._names.get((server, tool.name))
                if name is None:  # new: after every name already given, so it can take none of them
                    name = self._new_name(server, tool.name, held)
                    self._names[(server, tool.name)] = name
                    held.add(name)
                shown = tool if name == tool.name else dataclasses.replace(tool, name=name)
                exposed[name] = Route(shown, server, tool.name)
        # keep the servers' order, and each server's listing order, in what the model is shown
        order = {
            key: n
            for n, key in enumerate((server, tool.name) for server, tools in self.served.items() for tool in tools)
        }
        names = sorted(exposed, key=lambda name: order[(exposed[name].server, exposed[name].remote)])
        self.routes = {name: exposed[name] for name in names}
        self.tools = {name: route.tool for name, route in self.routes.items()}
        self.version += 1

    def _new_name(self, server: str, name: str, taken: set[str]) -> str:
        others = [
            other
            for other in self.reserved
            if other != server and name.startswith(server_prefix(other) + NAMESPACE_SEPARATOR)
        ]
        if name not in taken and not others:
            return name
        exposed = base = namespaced(server, name)
        n = 2
        while exposed in taken:
            exposed, n = f"{base}_{n}", n + 1
        if others:
            why = f"it starts with server {others[0]}'s prefix"
        else:
            held_by = self.routes[name].server if name in self.routes else self._holder(name)
            why = f"server {held_by} already offers it"
        self.emit(Notice(source=server, message=f"tool {name} is exposed as {exposed}: {why}"))
        return exposed

    def _holder(self, exposed: str) -> str:
        return next((server for (server, _), name in self._names.items() if name == exposed), "another")

    def refresh(self) -> bool:
        """List tools again for every server that announced a change; True if the exposed tools changed.

        A tool whose definition differs from its pinned one keeps the pinned one (`pending` holds the
        new one until `approve`); the ToolsChanged event says what changed.
        """
        changed = False
        for server, client in self.clients.items():
            if not client.tools_stale.is_set():
                continue
            client.tools_stale.clear()
            try:
                tools = client.list_tools()
            except McpError as exc:
                self.emit(Notice(source=server, message=f"could not list the changed tools: {exc}"))
                continue
            before = set(self.tools)
            kept: list[Tool] = []
            held: list[tuple[str, str]] = []
            details: list[str] = []
            for tool in self._take(server, tools):
                key = (server, tool.name)
                old = self.pinned.get(key)  # listed now or not: a tool that went and came back is no new tool
                if old is None or fingerprint(tool) == fingerprint(old):
                    kept.append(tool)
                    self.pinned[key] = tool
                    self.pending.pop(key, None)
                    continue
                kept.append(old)  # the definition the model was shown stays in force
                self.pending[key] = tool
                held.append(key)
                details.extend(f"{tool.name}: {line}" for line in changes(old, tool))
            gone = {key for key in self.pending if key[0] == server and key[1] not in {t.name for t in kept}}
            for key in gone:
                del self.pending[key]
            self.served[server] = kept
            self._save_pins(server)
            self._expose()
            after = set(self.tools)
            declared = _object(client.capabilities.get("tools")).get("listChanged") is True
            self.emit(
                ToolsChanged(
                    server=server,
                    added=sorted(after - before),
                    removed=sorted(before - after),
                    tools=list(self.tools),
                    held=[self._names[key] for key in held],
                    changes=details,
                    declared=declared,
                )
            )
            changed = True
        return changed

    def approve(self, name: str) -> bool:
        """Put the held changed definition of exposed tool `name` in force; False when none is held."""
        route = self.routes.get(name)
        if route is None:
            return False
        server, remote = route.server, route.remote
        tool = self.pending.pop((server, remote), None)
        if tool is None:
            return False
        self.served[server] = [tool if t.name == remote else t for t in self.served[server]]
        self.pinned[(server, remote)] = tool
        self._save_pins(server)
        self._expose()
        self.emit(Notice(source=server, message=f"approved the changed definition of {name} ({fingerprint(tool)})"))
        return True

    def resolve(self, name: str) -> Tool:
        tool = self.tools.get(name)
        if tool is None:
            close = did_you_mean(name, list(self.tools))
            hint = f' Did you mean "{close[0]}"?' if close else ""
            available = ", ".join(self.tools) or "none"
            raise UnknownTool(f'unknown tool "{name}".{hint} Available tools: {available}.')
        return tool

    def call(self, name: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolResult:
        route = self.routes[name]
        return self.clients[route.server].call_tool(route.remote, arguments, timeout=timeout)

    def start(self, name: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolResult | RunningTask:
        """`call`, except that a call its server runs as a task comes back as that task (McpClient.start_tool)."""
        route = self.routes[name]
        return self.clients[route.server].start_tool(route.remote, arguments, timeout=timeout)

    def set_roots(self, paths: list[str]) -> None:
        """Offer these paths as every server's roots from now on (each must exist: ConfigError).

        Each server that was offered roots is told they changed where its revision
        can say so (McpClient.set_roots); a server started without roots is left so,
        and so is one whose spec names roots of its own (a config entry's "roots").
        """
        roots = file_roots(paths)
        own = {spec.name for spec in self.specs if spec.roots is not None}
        for server, client in self.clients.items():
            if client.roots is not None and server not in own:
                client.set_roots(roots)

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stored_tool(name: str, stored: dict) -> Tool:
    """A tool rebuilt from the pin store's definition."""

    def part(key: str, kind: type):
        return stored.get(key) if isinstance(stored.get(key), kind) else None

    return Tool(
        name=name,
        description=part("description", str) or "",
        input_schema=part("inputSchema", dict) or {},
        output_schema=part("outputSchema", dict),
        title=part("title", str),
        annotations=part("annotations", dict),
    )


def server_prefix(server: str) -> str:
    """A server's name reduced to tool-name characters: the part before `__` in its namespaced tools."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", server) or "server"


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def namespaced(server: str, tool: str) -> str:
    """server__tool, with the server part reduced to tool-name characters and the whole to 128."""
    prefix = server_prefix(server)
    prefix = prefix[: max(1, MAX_TOOL_NAME - len(NAMESPACE_SEPARATOR) - len(tool))]
    return prefix + NAMESPACE_SEPARATOR + tool
