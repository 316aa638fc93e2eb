"""Starting MCP servers: every server of a configuration at once, each with its session open and its tools
listed, then a Router over them (tools/router.py).

Environment: a stdio server gets the transport's small default set from the
harness (HOME, LOGNAME, PATH, SHELL, TERM, USER), PYTHONPATH for the bundled
servers, and what its config's `env` names; nothing else.

Authorization: with a `token_store` (mcp/auth/store.py), an HTTP server from a config file whose
headers carry no Authorization of their own gets an OAuth that starts from the token
`decodeloop auth login NAME` stored for its name and URL, refreshes it and saves what it gets; it
never opens a browser, and a 401 it cannot answer is an error that says to log in.

Order: `start_servers` starts every server at once (a thread each) and keeps
what can be seen in the config's order: servers, tools, names, events and which
error is raised. On any failure or interruption every server started is shut
down before the error propagates.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from decodeloop.errors import ConfigError, ConnectionClosed
from decodeloop.events import Emit, Notice, Progress, Rpc, ServerReady, TaskUpdate
from decodeloop.mcp.auth.store import TokenStore, stored_oauth
from decodeloop.mcp.client import McpClient, Tool
from decodeloop.mcp.client_features import ClientFeatures
from decodeloop.mcp.framing import DEFAULT_MAX_MESSAGE_BYTES
from decodeloop.mcp.roots import file_roots
from decodeloop.mcp.tasks import DEFAULT_TASK_TIMEOUT
from decodeloop.mcp.transports.stdio import StdioTransport
from decodeloop.mcp.ui import CAPABILITY as APPS_CAPABILITY
from decodeloop.text.untrusted import cap_text, visible_line
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.router import DEFAULT_MAX_TOOLS, Router
from decodeloop.trust.pins import PinStore

# the folder that holds the decodeloop package, for the bundled servers' imports
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_NOTICE_CHARS = 4_000  # a server's notification or log line, as a notice


@dataclasses.dataclass(frozen=True)
class ClientOptions:
    """How the client treats every server a run starts (`start_servers`).

    `timeout`: each request's, and the start-up's. `verbose`: every JSON-RPC message as an event.
    `stderr`: where a stdio server's stderr lines go (None: kept for errors only). `max_message_bytes`
    caps one message from a server; `reset_timeout_on_progress` and `max_total_timeout` let progress
    notifications extend a call's timeout (see McpClient). `protocol` is the MCP revision for servers whose
    spec pins none: "auto" (server/discover, then initialize) or a version (McpClient's `protocol`).
    `pin_store` is a directory that keeps each server's tool definitions between runs (pins.PinStore).
    `max_tools` caps the tools taken from one server. `roots` are the paths offered to every server as its
    roots (None: the working directory; empty: no roots capability at all); each must exist (ConfigError);
    a spec's own `roots` replace them for its server. `log_level` asks each server for its log messages
    from that level up. `features` are the client features offered to every server (sampling,
    elicitation), each server's requests answered as its own. `token_store` holds the tokens of
    `decodeloop auth login` for the config's HTTP servers (see the module's docstring). `task_timeout` bounds
    a call a server runs as a task (its polls each wait `timeout`): past it the task is cancelled.
    """

    timeout: float = 60.0
    verbose: bool = False
    stderr: Callable[[str], None] | None = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    reset_timeout_on_progress: bool = False
    max_total_timeout: float | None = None
    protocol: str = "auto"
    pin_store: str | None = None
    max_tools: int = DEFAULT_MAX_TOOLS
    roots: Sequence[str] | None = None
    log_level: str | None = None
    features: ClientFeatures | None = None
    token_store: TokenStore | None = None
    task_timeout: float | None = DEFAULT_TASK_TIMEOUT


def start_stdio_servers(commands: list[list[str]], emit: Emit, options: ClientOptions | None = None) -> Router:
    """Start each stdio server, initialize it, list its tools, and route to them."""
    return start_servers(stdio_specs(commands), emit, options)


def stdio_specs(commands: list[list[str]]) -> list[ServerSpec]:
    """Stdio server commands as specs, each named after its module or script."""
    specs: list[ServerSpec] = []
    for command in commands:
        specs.append(
            ServerSpec(name=_server_name(command, {s.name for s in specs}), command=command, transport="stdio")
        )
    return specs


def start_servers(specs: list[ServerSpec], emit: Emit | None = None, options: ClientOptions | None = None) -> Router:
    """Connect to each server (stdio or HTTP), open its session, list its tools, and route to them.

    The servers start concurrently, one thread each, but everything that can be
    seen comes out in the order of `specs`: the servers and so the tools and
    their exposed names, each server's events (its handshake traffic and notices,
    held back until the servers before it are ready, then its ServerReady), and
    on failure the error of the first server in that order that failed. On any
    failure or interruption every server started is shut down before the error
    propagates, so a bad configuration never leaves processes behind.

    `options` say how the client treats every server (ClientOptions); the
    ServerReady event says which revision each server speaks.
    """
    emit = emit if emit is not None else (lambda event: None)
    o = options if options is not None else ClientOptions()
    offered = file_roots(o.roots) if o.roots is None or len(o.roots) else None  # checked before anything starts
    router = Router(
        emit,
        unique_names(specs),
        pin_store=PinStore(o.pin_store) if o.pin_store else None,
        max_tools=o.max_tools,
        features=o.features,
    )
    session = dict(
        timeout=o.timeout,
        reset_timeout_on_progress=o.reset_timeout_on_progress,
        max_total_timeout=o.max_total_timeout,
        protocol=o.protocol,
        roots=offered,
        log_level=o.log_level,
        task_timeout=o.task_timeout,
    )
    starts = [_Start(spec, _Held(emit, held=n > 0)) for n, spec in enumerate(unique_names(specs))]
    own_roots = {start.spec.name: _own_roots(start.spec) for start in starts if start.spec.roots is not None}
    opened = _Opened()

    def run(start: _Start) -> None:
        name = start.spec.name
        given = dict(session, roots=own_roots[name]) if name in own_roots else session
        try:
            client = _connect(
                start.spec,
                start.emit,
                o.verbose,
                o.stderr,
                o.max_message_bytes,
                given,
                opened.add,
                o.features,
                o.token_store,
            )
            start.tools = client.list_tools(client.startup)  # within the start-up's one timeout
            start.client = client
        except BaseException as exc:  # stored, and raised on the caller's thread in order
            start.error = exc

    if len(starts) > 1:
        for start in starts:
            start.thread = threading.Thread(target=run, args=(start,), name=f"mcp-start-{start.spec.name}", daemon=True)
            start.thread.start()
    try:
        for start in starts:
            if start.thread is None:
                run(start)
            else:
                start.thread.join()
            start.emit.release()  # its events now, after those of every server before it
            if start.error is not None:
                raise start.error
            client, tools = start.client, start.tools
            assert client is not None and tools is not None  # a start without an error made both
            router.add_server(start.spec.name, client, tools)
            info = client.server_info or {}
            emit(
                ServerReady(
                    server=start.spec.name,
                    protocol_version=client.protocol_version or "",
                    server_name=str(info.get("name", start.spec.name)),
                    tools=[t.name for t in router.served[start.spec.name]],
                )
            )  # refused names left out
    except BaseException:
        opened.close_all()  # the servers still starting end too: their handshakes fail at once
        raise
    return router


def _own_roots(spec: ServerSpec) -> list[dict] | None:
    """The roots a spec names for its own server (None for `[]`: no roots capability), checked before anything
    starts: ConfigError naming the server."""
    if not spec.roots:
        return None
    try:
        return file_roots(spec.roots)
    except ConfigError as exc:
        raise ConfigError(f"server {spec.name!r}: {exc}") from None


@dataclasses.dataclass
class _Start:
    """One server being started on its own thread, and what came of it."""

    spec: ServerSpec
    emit: _Held
    thread: threading.Thread | None = None
    client: McpClient | None = None
    tools: list[Tool] | None = None
    error: BaseException | None = None


class _Held:
    """An event sink that holds events back until released, then passes them (and every later one) on."""

    def __init__(self, emit: Emit, held: bool) -> None:
        self._emit = emit
        self._held = held
        self._events: list = []
        self._lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        with self._lock:
            if self._held:
                self._events.append(event)
                return
        self._emit(event)

    def release(self) -> None:
        while True:
            with self._lock:
                if not self._events:
                    self._held = False
                    return
                events, self._events = self._events, []
            for event in events:
                self._emit(event)


class _Opened:
    """Every client opened while starting: on failure all of them close, and any opened later closes at once."""

    def __init__(self) -> None:
        self._clients: list[McpClient] = []
        self._lock = threading.Lock()
        self._closed = False

    def add(self, client: McpClient) -> None:
        with self._lock:
            if not self._closed:
                self._clients.append(client)
                return
        client.close()
        raise ConnectionClosed(f"{client.name}: not started: another server failed to start")

    def close_all(self) -> None:
        with self._lock:
            self._closed = True
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()


def _connect(
    spec: ServerSpec,
    emit: Emit,
    verbose: bool,
    stderr: Callable[[str], None] | None,
    max_message_bytes: int,
    options: dict[str, Any],
    opened: Callable[[McpClient], None],
    features: ClientFeatures | None,
    token_store: TokenStore | None,
) -> McpClient:
    server = spec.name
    made: list[McpClient] = []  # the client, once made: a request's handler asks it for its calls in flight
    if features is not None:
        options = dict(
            options,
            capabilities=features.capabilities(),
            request_handlers=features.handlers(server, lambda: made[0].calls_in_flight() if made else []),
        )
    # MCP Apps: a tool's own page is kept with its call, for the viewer and the studio to show (tools/apps.py)
    capabilities = options.get("capabilities") or {}
    extensions = {**(capabilities.get("extensions") or {}), **APPS_CAPABILITY}
    options = dict(options, capabilities={**capabilities, "extensions": extensions})
    options = dict(
        options,
        name=server,
        protocol=spec.protocol or options.get("protocol", "auto"),
        on_traffic=lambda direction, message: emit(Rpc(server=server, direction=direction, message=message)),
        # a notice is a server's text too: capped like the rest
        on_notification=lambda method, params: emit(
            Notice(source=server, message=cap_text(describe_notification(method, params), MAX_NOTICE_CHARS, "notice"))
        ),
        log=lambda text: emit(
            Notice(source=server, message=cap_text(text.removeprefix(f"{server}: "), MAX_NOTICE_CHARS, "notice"))
        ),
        on_progress=lambda tool, params: emit(progress_event(server, tool, params)),
        on_task=lambda tool, task: emit(task_event(server, tool, task)),
    )
    if spec.url is not None:
        auth = None
        if token_store is not None and spec.config_file is not None and not _has_authorization(spec.headers):
            auth = stored_oauth(
                token_store, server, spec.url, login_hint(spec), options["log"], timeout=options["timeout"]
            )
        client = McpClient.connect_url(
            spec.url,
            headers=spec.headers,
            transport=spec.transport,
            max_message_bytes=max_message_bytes,
            auth=auth,
            **options,
        )
        made.append(client)
        opened(client)
        return client
    # the bundled servers import decodeloop: make that work from any directory (the transport adds the
    # small default environment; the config's env wins)
    env = {"PYTHONPATH": PACKAGE_PARENT, **(spec.env or {})}
    show = _stderr_printer(server, stderr) if verbose else None
    client = McpClient(
        StdioTransport(spec.command or [], env=env, cwd=spec.cwd, on_stderr=show, max_message_bytes=max_message_bytes),
        **options,
    )
    made.append(client)
    opened(client)  # before the handshake: a failure elsewhere can end this one while it waits
    return client.start()


def _has_authorization(headers: dict[str, str]) -> bool:
    return any(name.lower() == "authorization" for name in headers)


def login_hint(spec: ServerSpec) -> str:
    """What a server that wants a login tells the user to run."""
    where = f" --mcp-config {shlex.quote(spec.config_file)}" if spec.config_file else ""
    return f"log in with `decodeloop auth login {shlex.quote(spec.name)}{where}`"


def progress_event(server: str, tool: str | None, params: dict) -> Progress | Notice:
    """A progress notification as its event, its message capped; one whose numbers are not numbers, a notice."""
    progress, total, message = params.get("progress"), params.get("total"), params.get("message")
    if not isinstance(progress, (int, float)) or not (total is None or _number(total)) or not _number(progress):
        notice = describe_notification("notifications/progress", params)
        return Notice(source=server, message=cap_text(notice, MAX_NOTICE_CHARS, "notice"))
    text = cap_text(message, MAX_NOTICE_CHARS, "progress message") if isinstance(message, str) else None
    return Progress(server=server, tool=tool, progress=progress, total=total, message=text)


def task_event(server: str, tool: str, task: dict) -> TaskUpdate:
    """A task's status as its event: the server's id and message capped (its status is one of five: checked)."""
    message = task.get("statusMessage")
    return TaskUpdate(
        server=server,
        tool=tool,
        task_id=cap_text(str(task.get("taskId")), 200, "task id"),
        status=str(task.get("status")),
        message=cap_text(message, MAX_NOTICE_CHARS, "status message") if isinstance(message, str) else None,
    )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def describe_notification(method: str, params: dict) -> str:
    """A server notification as one trace line: progress and log messages in words, others as JSON."""
    if method == "notifications/progress":
        total = params.get("total")
        text = f"progress {params.get('progress')}" + (f"/{total}" if total is not None else "")
        return text + (f": {params['message']}" if params.get("message") else "")
    if method == "notifications/message":
        logger = params.get("logger")
        return (
            f"log {params.get('level', 'info')}"
            + (f" {logger}" if isinstance(logger, str) else "")
            + (f": {params.get('data')}")
        )
    if method == "notifications/resources/updated":
        return f"resource {params.get('uri')} changed; read it again to see how (in chat: /reread)"
    if method == "notifications/resources/list_changed":
        return "its list of resources changed"
    if method == "notifications/prompts/list_changed":
        return "its list of prompts changed (in chat: /prompts lists them again)"
    if method == "notifications/elicitation/complete":
        ident = params.get("elicitationId")
        return f"says the interaction at the URL it asked you to open is complete (elicitation {ident})"
    return f"{method} {params}" if params else method


def unique_names(specs: list[ServerSpec]) -> list[ServerSpec]:
    """The same specs, renamed weather, weather2, ... where two would share a name."""
    taken: set[str] = set()
    out = []
    for spec in specs:
        name, n = spec.name, 2
        while name in taken:
            name, n = f"{spec.name}{n}", n + 1
        taken.add(name)
        out.append(spec if name == spec.name else dataclasses.replace(spec, name=name))
    return out


def parse_command(text: str) -> list[str]:
    """'python3 -m pkg --flag' -> argv list, with a clear error for bad quoting."""
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"cannot parse server command {text!r}: {e}") from None
    if not argv:
        raise ConfigError("empty server command")
    return argv


def _server_name(command: list[str], taken: set[str]) -> str:
    """A short name for traces: the module after -m, else the script, else the program."""
    if "-m" in command[:-1]:
        base = command[command.index("-m") + 1].split(".")[-1]
    else:
        scripts = [a for a in command[1:] if a.endswith((".py", ".js", ".mjs"))]
        base = os.path.splitext(os.path.basename(scripts[0] if scripts else command[0]))[0]
    base = base or "server"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}{n}", n + 1
    return name


def _stderr_printer(server: str, sink: Callable[[str], None] | None) -> Callable[[str], None]:
    write = sink or (lambda line: print(line, file=sys.stderr, flush=True))
    return lambda line: write(f"[{server} stderr] {visible_line(line)}")  # a server's text, shown safely
