"""The MCP client: one session with one server (handshake, tools, calls); knows no pipes.

This module owns the MCP side of a connection: choosing the wire per server,
listing tools across pages, calling a tool, and the shapes that come back
(`Tool`, `ToolResult`). A tool that fails reports it as data
(`ToolResult.is_error`); a server that fails raises an McpError, which the caller
turns into something the model can read.

Two wires. The stateless 2026-07-28 revision: `server/discover`, then every
request carries the version, the client's capabilities and identity in
`_meta`; a result may say `resultType: "input_required"`, and the client
answers its `inputRequests` (`roots/list` with the roots offered, elicitation
through `request_handlers`, or declined with a notice when there are none) and retries with the answers and
the `requestState` echoed untouched; `tools/list` is cached for its `ttlMs`;
when the server says its tools, prompts or resources may change (`listChanged`),
one `subscriptions/listen` request names those lists and stays open on a thread
of its own, and its `notifications/*/list_changed` set `tools_stale`,
`prompts_stale` or `resources_stale` as on the older wire.
The legacy revisions (2025-11-25 and older): the initialize handshake and its
version negotiation. `protocol="auto"` (the default) probes with
`server/discover` and falls back to initialize when the server does not
answer it as a 2026-07-28 server would; a version pins one wire. Tasks
(tasks.py): a tool the server runs as a task is called as one where the server
offers tasks (2025-11-25: its `tasks` capability and the tool's
`execution.taskSupport`; 2026-07-28: the `io.modelcontextprotocol/tasks`
extension, declared in every request's capabilities, the server deciding) and
followed to its end; a tool that runs only as a task, on a server that offers
no tasks, is not offered.

Resources, prompts and argument completion are `ServerFeatures` (server_features.py), a part of the
client kept in a module of its own; the shapes every answer becomes (`Tool`, `ToolResult`, `Resource`,
`Prompt`, ...) are in content.py (`Tool` and `ToolResult` are imported from here too).

It also owns what the protocol asks of a client around those calls: telling
the transport the negotiated version (HTTP sends it as a header), initializing
again when an HTTP server says our session expired (then retrying the request
once), a progress token on every tools/call (with `reset_timeout_on_progress`,
each progress notification for the call restarts its timeout, up to
`max_total_timeout`: the TypeScript SDK's resetTimeoutOnProgress and
maxTotalTimeout), and remembering that the server
announced `notifications/tools/list_changed` (`tools_stale`), so the owner can
list the tools again from its own thread: a reader thread must never wait for
a response it is the one to read. With `roots` it declares the roots capability
and answers `roots/list` (`set_roots` changes them); with `log_level` it asks
for log messages from that level up (`logging/setLevel` after initialize to a
server that declares logging; on 2026-07-28 `logLevel` in every request's
`_meta`, without which such a server sends none); `on_progress` receives each
progress notification with the tool of the call it belongs to.

One timeout covers a server's whole start-up (`StartupDeadline`): the
`server/discover` probe, initialize and the caller's first tools/list share it,
so a silent server fails in one timeout, and the error names every start-up
request left unanswered. On a pipe, where a legacy server may ignore the probe,
the probe waits at most DISCOVER_PROBE_TIMEOUT (5 s) and half of what is left; a
server slow to start that answers it late and then refuses initialize as a
2026-07-28 server does is asked server/discover again, with what is left.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import decodeloop
from decodeloop.errors import HttpStatusError, McpError, ProtocolError, RequestTimeout, RpcError, SessionExpired
from decodeloop.mcp.content import Tool, ToolResult  # (re-exported)
from decodeloop.mcp.framing import DEFAULT_MAX_MESSAGE_BYTES
from decodeloop.mcp.headers import header_params, header_problem, param_headers
from decodeloop.mcp.jsonrpc import Deadline, JsonRpcSession
from decodeloop.mcp.server_features import MAX_PAGES, ServerFeatures
from decodeloop.mcp.tasks import DEFAULT_TASK_TIMEOUT, EXTENSION, RunningTask, wait_all
from decodeloop.mcp.transports.base import Transport
from decodeloop.mcp.ui import ui_of
from decodeloop.mcp.versions import (
    LEGACY_SSE_REFUSAL,
    LEGACY_VERSIONS,
    PROTOCOL_VERSION,
    PROTOCOLS,
    STATELESS_VERSION,
    SUPPORTED_VERSIONS,
    is_stateless,
)  # (re-exported)
from decodeloop.text.credentials import clip, hold_headers
from decodeloop.text.untrusted import DEFAULT_MAX_DESCRIPTION_CHARS, cap_text

META = "io.modelcontextprotocol/"  # the prefix of the 2026-07-28 _meta keys
MODERN_ERRORS = (-32020, -32021, -32022)  # header mismatch, missing capability, unsupported version
UNSUPPORTED_VERSION = -32022
HEADER_MISMATCH = -32020
DISCOVER_PROBE_TIMEOUT = 5.0  # a legacy server on a pipe may never answer server/discover: it waits this at most
MAX_INPUT_ROUNDS = 10  # input_required answers for one request before giving up on the server
LISTEN_RETRY = 1.0  # seconds before opening subscriptions/listen again after it dropped
LISTEN_STEADY = 5.0  # a listen that lasted this long was working: its drop is not a failure in a row
MAX_LISTEN_FAILURES = 5
FALLBACK_STATUSES = (400, 404, 405)  # a POST initialize refused so: the server may speak the legacy SSE transport
# the lists whose changes a 2026-07-28 server announces on a subscriptions/listen stream, when it says they may change
LISTS = (("tools", "toolsListChanged"), ("prompts", "promptsListChanged"), ("resources", "resourcesListChanged"))
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")  # RFC 5424, least first


class StartupDeadline(Deadline):
    """One timeout for everything a server's start-up waits for: the probe, initialize, the first tools/list.

    Each start-up request waits what is left of it (the probe on a pipe less:
    see `McpClient.discover`). `given` records what each request was given, in
    seconds, in order; a request that runs out of it says which start-up requests
    got no answer, and the total.
    """

    __slots__ = ("given", "unanswered")

    def __init__(self, seconds: float | None) -> None:
        super().__init__(None, seconds)
        self.given: list[tuple[str, float | None]] = []  # (method, seconds it was given to answer; None: no limit)
        self.unanswered: list[str] = []  # start-up requests that got no answer in their time

    def left(self) -> float | None:
        """Seconds left (0 once spent); None for a client without a timeout: its start-up waits as long as it takes."""
        remaining = self.remaining()
        return None if remaining is None else max(0.0, remaining)

    def expired(self, method: str) -> str:
        names = [*dict.fromkeys([*self.unanswered, method])]
        return f"no answer to {' or '.join(names)} in {self.max_total:g}s, the timeout for a server's whole start-up"


class McpClient(ServerFeatures):
    """An MCP session with one server. Use `initialize()` (or `with`) before anything else."""

    def __init__(
        self,
        transport: Transport,
        *,
        name: str = "server",
        timeout: float = 60.0,
        on_traffic: Callable[[str, dict], None] | None = None,
        on_notification: Callable[[str, dict], None] | None = None,
        log: Callable[[str], None] | None = None,
        capabilities: dict | None = None,
        request_handlers: dict[str, Callable[[dict], Any]] | None = None,
        client_info: dict | None = None,
        reset_timeout_on_progress: bool = False,
        max_total_timeout: float | None = None,
        protocol: str = "auto",
        roots: list[dict] | None = None,
        log_level: str | None = None,
        on_progress: Callable[[str | None, dict], None] | None = None,
        task_timeout: float | None = DEFAULT_TASK_TIMEOUT,
        on_task: Callable[[str, dict], None] | None = None,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown MCP protocol {protocol!r}: expected {', '.join(PROTOCOLS)}")
        if log_level is not None and log_level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {log_level!r}: expected {', '.join(LOG_LEVELS)}")
        self.protocol = protocol
        self.name = name
        self.timeout = timeout
        self.reset_timeout_on_progress = reset_timeout_on_progress
        self.max_total_timeout = max_total_timeout
        self.transport = transport
        self._log = log or (lambda line: None)
        self._on_notification = on_notification
        self.client_capabilities = dict(capabilities or {})
        self.client_info = client_info or {"name": "decodeloop", "version": decodeloop.__version__}
        self.log_level = log_level
        self._on_progress = on_progress
        self.task_timeout = task_timeout  # seconds a task may run before it is cancelled (None: no bound)
        self._on_task = on_task  # (tool, the task as the server last said it) on each status change
        self._roots = None if roots is None else [dict(root) for root in roots]
        handlers = dict(request_handlers or {})
        if self._roots is not None:
            self.client_capabilities.setdefault("roots", {"listChanged": True})
            handlers.setdefault("roots/list", self._list_roots)
        self.session = JsonRpcSession(
            transport,
            on_notification=self._notified,
            on_traffic=on_traffic,
            log=self.log,
            request_handlers=handlers,
        )
        self.server_info: dict = {}
        self.protocol_version: str | None = None
        self.capabilities: dict = {}
        self.instructions: str | None = None
        self.tools_stale = threading.Event()  # set by notifications/tools/list_changed
        # set once the server acknowledged a subscriptions/listen stream (2026-07-28): what changes from
        # then on is heard; nothing from before it is replayed
        self.listening = threading.Event()
        self.resources_stale = threading.Event()  # set by notifications/resources/list_changed
        self.prompts_stale = threading.Event()  # set by notifications/prompts/list_changed, cleared by list_prompts
        self.subscriptions: set[str] = set()  # resource URIs subscribed to
        self.updated: set[str] = set()  # subscribed URIs the server said changed (the owner takes them)
        self._progress_tokens = itertools.count(1)
        self._deadlines: dict[int, Deadline] = {}  # progress token -> the timeout its progress extends
        self._calls: dict[int, str] = {}  # progress token -> the tool of the call in flight that carries it
        self._reinit_lock = threading.Lock()
        self._generation = 0  # how many times the session was initialized
        self._tools_cache: tuple[float, list[Tool]] | None = None  # (expires at, tools) from a ttlMs
        self._header_marks: dict[str, dict] = {}  # tool name -> its x-mcp-header marks
        self._task_support: dict[str, str] = {}  # tool name -> its execution.taskSupport (2025-11-25)
        self._running: dict[str, RunningTask] = {}  # task id -> the task, for its pushed status
        self._said_deprecated: set[str] = set()  # deprecated features this server was seen to use (said once)
        self._stopped = threading.Event()  # set by close(): the listen thread ends
        self._closed = False
        self.startup: StartupDeadline | None = None  # the start-up's one timeout, from open() on

    @classmethod
    def start_stdio(
        cls,
        command: list[str],
        *,
        env: dict | None = None,
        cwd: str | None = None,
        on_stderr: Callable[[str], None] | None = None,
        close_timeout: float = 2.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        **kw: Any,
    ) -> McpClient:
        """Spawn a stdio server and return a connected client for it."""
        from decodeloop.mcp.transports.stdio import StdioTransport

        transport = StdioTransport(
            command,
            env=env,
            cwd=cwd,
            on_stderr=on_stderr,
            close_timeout=close_timeout,
            max_message_bytes=max_message_bytes,
        )
        client = cls(transport, **kw)
        return client.start()

    @classmethod
    def connect_url(
        cls,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        transport: str = "auto",
        auth: Any = None,
        connect_timeout: float = 10.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        **kw: Any,
    ) -> McpClient:
        """Connect to an HTTP server and return a connected client.

        `transport` is "http" (Streamable HTTP), "sse" (legacy HTTP+SSE) or
        "auto": Streamable HTTP, falling back to legacy SSE on the same URL when
        the POST initialize is refused with 400, 404 or 405. Legacy SSE speaks
        only the initialize revisions.
        """
        from decodeloop.mcp.transports.http import StreamableHttpTransport
        from decodeloop.mcp.transports.sse_legacy import SseLegacyTransport

        if transport not in ("auto", "http", "sse"):
            raise ValueError(f"unknown transport {transport!r}: expected auto, http or sse")
        timeout = kw.get("timeout", 60.0)
        log = kw.get("log") or (lambda line: None)
        name = kw.get("name", "server")
        hold_headers(headers, name)  # a server that echoes them shows a marker naming it (text/credentials.py)
        startup: StartupDeadline | None = None
        if transport != "sse":
            client = cls(
                StreamableHttpTransport(
                    url,
                    headers,
                    timeout=timeout,
                    connect_timeout=connect_timeout,
                    auth=auth,
                    log=lambda line: log(f"{name}: {line}"),
                    max_message_bytes=max_message_bytes,
                ),
                **kw,
            )
            try:
                client.open()
                return client
            except HttpStatusError as exc:
                client.close()
                startup = client.startup  # the legacy attempt gets what this one left
                if (
                    transport == "http"
                    or isinstance(exc, SessionExpired)
                    or exc.status not in FALLBACK_STATUSES
                    or kw.get("protocol") == STATELESS_VERSION
                ):
                    raise
                log(f"{name}: POST initialize answered HTTP {exc.status}; trying the legacy HTTP+SSE transport")
            except BaseException:
                client.close()
                raise
        if kw.get("protocol", "auto") in ("auto", STATELESS_VERSION):
            if kw.get("protocol") == STATELESS_VERSION:
                raise ValueError(LEGACY_SSE_REFUSAL)
            kw = dict(kw, protocol=PROTOCOL_VERSION)
        if startup is None:
            startup = StartupDeadline(timeout)
        client = cls(
            SseLegacyTransport(
                url,
                headers,
                timeout=timeout,
                connect_timeout=connect_timeout,
                log=lambda line: log(f"{name}: {line}"),
                max_message_bytes=max_message_bytes,
                start_timeout=startup.left(),
            ),
            **kw,
        )
        return client.start(startup)

    def start(self, startup: StartupDeadline | None = None) -> McpClient:
        """open(), closing the connection if that fails; returns the client."""
        try:
            self.open(startup)
        except BaseException:
            self.close()
            raise
        return self

    @property
    def stateless(self) -> bool:
        """Whether this server speaks the stateless 2026-07-28 wire (known once open)."""
        return is_stateless(self.protocol_version)

    def open(self, startup: StartupDeadline | None = None) -> None:
        """Choose the wire: server/discover first (unless a legacy version is pinned), else initialize.

        One timeout covers the whole start-up: `startup` (by default a new
        StartupDeadline of `timeout` seconds) is shared by the probe and
        initialize, and kept as `self.startup` for what the caller waits for
        next (its first tools/list).
        """
        self.startup = startup if startup is not None else StartupDeadline(self.timeout)
        if self.protocol in ("auto", STATELESS_VERSION):
            if self.discover():
                return
            if self.protocol == STATELESS_VERSION:
                raise self._fail(
                    f"the server does not speak MCP {STATELESS_VERSION} (server/discover failed), "
                    "and the configuration pins that version"
                )
            self.log(f"server/discover not answered as MCP {STATELESS_VERSION} would; using initialize")
        try:
            self.initialize(self.startup)
        except RpcError as exc:
            # a server slow to start answers the probe after it gave up, then refuses the handshake as a
            # 2026-07-28 server does: it speaks that wire, so ask it again with what is left of the start-up
            if not (
                self.protocol == "auto" and exc.code in MODERN_ERRORS and "server/discover" in self.startup.unanswered
            ):
                raise
            self.log(f"initialize refused ({exc.message}) after a late server/discover: asking server/discover again")
            if not self.discover(patient=True):
                raise

    @property
    def tasks_offered(self) -> bool:
        """Whether the server runs tool calls as tasks: its `tasks.requests.tools.call` capability (2025-11-25),
        or the tasks extension among its capabilities (2026-07-28)."""
        if self.stateless:
            return EXTENSION in _object(self.capabilities.get("extensions"))
        requests = _object(_object(self.capabilities.get("tasks")).get("requests"))
        return isinstance(_object(requests.get("tools")).get("call"), dict)

    def log(self, line: str) -> None:
        self._log(f"{self.name}: {line}")

    def _deprecated(self, feature: str) -> None:
        """Say once per server that it uses a feature 2026-07-28 deprecates (it keeps working)."""
        if self.stateless and feature not in self._said_deprecated:
            self._said_deprecated.add(feature)
            self.log(
                f"uses {feature}, which MCP {STATELESS_VERSION} deprecates in favour of input requests (it still works)"
            )

    def _notified(self, method: str, params: dict) -> None:
        if method == "notifications/message":
            self._deprecated("logging (notifications/message)")
        if method == "notifications/resources/updated":
            uri = params.get("uri")
            if uri not in self.subscriptions:
                return  # a stream still open for a URI unsubscribed since: not news to anyone
            self.updated.add(uri)
        elif method == "notifications/resources/list_changed":
            self.resources_stale.set()
        elif method == "notifications/prompts/list_changed":
            self.prompts_stale.set()
        if method == "notifications/tools/list_changed":
            self._tools_cache = None
            self.tools_stale.set()
        elif method == "notifications/subscriptions/acknowledged":
            self.listening.set()
        elif method == "notifications/tasks/status":  # a task's status, pushed: said as a poll's would be
            task = self._running.get(str(params.get("taskId")))
            if task is not None and not task.done:
                task.pushed(params)
            return
        elif method == "notifications/progress":
            token = params.get("progressToken")
            token = token if isinstance(token, int) and not isinstance(token, bool) else None
            deadline = self._deadlines.get(token) if token is not None else None
            if deadline is not None:
                deadline.extend()
            if self._on_progress is not None:
                self._on_progress(self._calls.get(token) if token is not None else None, params)
                return
        if self._on_notification is not None:
            self._on_notification(method, params)

    # -- lifecycle --------------------------------------------------------------

    def discover(self, patient: bool = False) -> bool:
        """server/discover on the 2026-07-28 wire: True if the server speaks it (and the client now does).

        False (after putting the wire back) when the answer is what a legacy
        server gives: an error that is not one of 2026-07-28's own, an HTTP
        refusal without one, or silence on a pipe. A 2026-07-28 server that
        speaks none of our versions is an error.

        The probe waits within the start-up's deadline: over HTTP, which answers
        or refuses every request, all that is left of it; on a pipe, where a
        legacy server may say nothing at all, at most DISCOVER_PROBE_TIMEOUT and
        at most half of what is left, so initialize always has time of its own.
        `patient`: the server is known to be there (it refused the handshake as a
        2026-07-28 server does), so the probe waits all that is left on a pipe too.
        """
        if self.startup is None:
            self.startup = StartupDeadline(self.timeout)
        startup = self.startup
        self._wrap(self.session.start)
        self._tell_transport(STATELESS_VERSION)
        for attempt in range(2):
            left = startup.left()
            cap = (
                None
                if patient or self.transport.wire == "http"
                else (DISCOVER_PROBE_TIMEOUT if left is None else min(DISCOVER_PROBE_TIMEOUT, left / 2))
            )
            try:
                result = self._start_request("server/discover", {"_meta": self._meta()}, startup, cap)
                break
            except RpcError as exc:
                if exc.code not in MODERN_ERRORS:
                    return self._legacy()
                supported = _object(exc.data).get("supported")
                supported = supported if isinstance(supported, list) else None
                if exc.code == UNSUPPORTED_VERSION and supported and STATELESS_VERSION in supported and not attempt:
                    continue  # refused a version it lists as supported: ask once more, as the spec says to
                if supported and any(v in LEGACY_VERSIONS for v in supported):
                    return self._legacy()
                raise self._fail(
                    f"server/discover refused: {exc.message}"
                    + (
                        f" (the server supports {', '.join(map(str, supported))}; this client "
                        f"{', '.join(SUPPORTED_VERSIONS)})"
                        if supported
                        else ""
                    )
                ) from None
            except RequestTimeout:
                startup.unanswered.append("server/discover")
                return self._legacy()
            except HttpStatusError:
                return self._legacy()
        versions = result.get("supportedVersions") if isinstance(result, dict) else None
        if not isinstance(versions, list) or not versions:
            return self._legacy()  # not a discover result: a legacy server answering whatever it is sent
        if STATELESS_VERSION not in versions:
            if any(v in LEGACY_VERSIONS for v in versions):
                return self._legacy()
            raise self._fail(
                f"server/discover offers MCP versions {versions!r}; this client speaks {', '.join(SUPPORTED_VERSIONS)}"
            )
        self.protocol_version = STATELESS_VERSION
        self.server_info = _object(_object(result.get("_meta")).get(META + "serverInfo"))
        self.capabilities = _object(result.get("capabilities"))
        self.instructions = _instructions(result)
        kinds = [(kind, key) for kind, key in LISTS if _object(self.capabilities.get(kind)).get("listChanged") is True]
        if kinds:
            threading.Thread(
                target=self._listen,
                args=({key: True for _, key in kinds}, f"changes to its {', '.join(kind for kind, _ in kinds)}"),
                name=f"mcp-listen-{self.name}",
                daemon=True,
            ).start()
        return True

    def _listen(self, notifications: dict, what: str) -> None:
        """subscriptions/listen: the request that stays open so the server can say what `notifications` names
        changed (its tools, prompts or resources lists, or a subscribed resource)."""
        params = {"notifications": notifications, "_meta": self._meta()}
        failures = 0
        while not self._stopped.is_set():
            began = time.monotonic()
            try:
                self._wrap(self.session.request, "subscriptions/listen", params, None)
                return  # the server ended the subscription
            except RpcError as exc:
                self.log(f"{what} will not be noticed: subscriptions/listen refused: {exc.message}")
                return
            except McpError as exc:
                if self._stopped.is_set() or self.session.closed:
                    return
                failures = 0 if time.monotonic() - began > LISTEN_STEADY else failures + 1
                if failures >= MAX_LISTEN_FAILURES:
                    self.log(f"gave up listening for {what}: {exc}")
                    return
            if self._stopped.wait(LISTEN_RETRY):
                return
            # nothing is replayed on a new stream: what changed meanwhile is only found by listing again
            if notifications.get("toolsListChanged"):
                self._tools_cache = None
                self.tools_stale.set()
            if notifications.get("promptsListChanged"):
                self.prompts_stale.set()
            if notifications.get("resourcesListChanged"):
                self.resources_stale.set()

    def _legacy(self) -> bool:
        self._tell_transport(None)  # initialize goes out without a version header
        return False

    def _tell_transport(self, version: str | None) -> None:
        # HTTP sends it as a header on every later request
        self.transport.set_protocol_version(version)

    def _meta(self) -> dict:
        """The _meta every 2026-07-28 request carries: version, capabilities, who we are, the log level asked for."""
        capabilities = self.client_capabilities
        if isinstance(capabilities.get("roots"), dict) and "listChanged" in capabilities["roots"]:
            # 2026-07-28 has no notifications/roots/list_changed: the server asks roots/list with each
            # request that needs them, so promising the notification would be untrue
            roots = {key: value for key, value in capabilities["roots"].items() if key != "listChanged"}
            capabilities = {**capabilities, "roots": roots}
        if self.tasks_offered:  # the server offers tasks: say each request can take one back
            capabilities = {**capabilities, "extensions": {**_object(capabilities.get("extensions")), EXTENSION: {}}}
        meta = {
            META + "protocolVersion": STATELESS_VERSION,
            META + "clientCapabilities": capabilities,
            META + "clientInfo": self.client_info,
        }
        if self.log_level is not None:
            # the revision's only way to ask for log messages: without it a server sends none for the request
            meta[META + "logLevel"] = self.log_level
        return meta

    # -- roots and logging ------------------------------------------------------

    @property
    def roots(self) -> list[dict] | None:
        """The roots offered to the server (None: the roots capability is not declared)."""
        return None if self._roots is None else [dict(root) for root in self._roots]

    def _list_roots(self, params: dict) -> dict:
        roots = self._roots
        return {"roots": [dict(root) for root in roots or []]}

    def set_roots(self, roots: list[dict]) -> None:
        """Offer other roots from now on, and tell the server they changed where the revision can.

        On 2025-11-25 and older that is `notifications/roots/list_changed`; 2026-07-28
        removed it, and its server asks `roots/list` again in the requests that need
        the roots, which then get the new ones. A client made without roots declared
        no roots capability, and capabilities are not declared twice: ValueError.
        """
        if self._roots is None:
            raise ValueError(f"{self.name}: no roots were offered to this server, so none can change")
        self._roots = [dict(root) for root in roots]
        if self.protocol_version is not None and not self.stateless and not self._closed:
            self._wrap(self.session.notify, "notifications/roots/list_changed")

    def set_log_level(self, level: str | None, timeout: float | StartupDeadline | None = None) -> None:
        """The least severe log messages the server should send (None: on 2026-07-28, ask for none).

        2025-11-25 and older: `logging/setLevel`, sent only to a server that
        declares the `logging` capability (a refusal is a notice, not a failure).
        2026-07-28: the level rides in every later request's `_meta`.
        """
        if level is not None and level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}: expected {', '.join(LOG_LEVELS)}")
        self.log_level = level
        if level is None or self.protocol_version is None or self.stateless or "logging" not in self.capabilities:
            return
        params = {"level": level}
        try:
            if isinstance(timeout, StartupDeadline):
                self._start_request("logging/setLevel", params, timeout)
            else:  # not _request: initialize calls this while it holds the re-initialize lock
                self._wrap(
                    self.session.request, "logging/setLevel", params, self.timeout if timeout is None else timeout
                )
        except RpcError as exc:
            self.log(f"logging/setLevel {level} refused: {exc.message}")

    def initialize(self, timeout: float | StartupDeadline | None = None) -> dict:
        """Handshake: agree on a protocol version, then announce we are ready. Returns the server's reply.

        It waits `timeout` seconds (by default the client's), or what is left of
        a StartupDeadline: open() gives it what the probe left.
        """
        self._wrap(self.session.start)
        asked = self.protocol if self.protocol in LEGACY_VERSIONS else PROTOCOL_VERSION
        params = {
            "protocolVersion": asked,
            "capabilities": self.client_capabilities,
            "clientInfo": self.client_info,
        }
        if isinstance(timeout, StartupDeadline):
            result = self._start_request("initialize", params, timeout)
        else:
            result = self._wrap(
                self.session.request, "initialize", params, self.timeout if timeout is None else timeout
            )
        if not isinstance(result, dict):
            raise self._fail(f"initialize returned {type(result).__name__}, not an object")
        version = result.get("protocolVersion")
        if version not in LEGACY_VERSIONS:
            # The spec says to disconnect when the versions cannot agree.
            raise self._fail(
                f"server speaks MCP version {version!r}; decodeloop asked for {asked!r} "
                f"and supports {', '.join(SUPPORTED_VERSIONS)}"
            )
        self.protocol_version = version
        self.server_info = _object(result.get("serverInfo"))
        self.capabilities = _object(result.get("capabilities"))
        self.instructions = _instructions(result)
        self._tell_transport(version)
        self._wrap(self.session.notify, "notifications/initialized")
        self._generation += 1
        if self.log_level is not None:
            # within the start-up's timeout when it has one; again after a re-initialize, a new session
            self.set_log_level(self.log_level, timeout)
        return result

    def _reinitialize(self, generation: int) -> None:
        """The server forgot our session: initialize again, once for all requests that noticed."""
        with self._reinit_lock:
            if self._generation != generation:
                return  # another request already did it
            self.log("the server ended our session; initializing again")
            self.initialize()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._stopped.set()
            self.session.close()

    def __enter__(self) -> McpClient:
        if self.protocol_version is None:
            try:
                self.open()
            except BaseException:
                self.close()
                raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- requests -------------------------------------------------------------------

    def list_tools(self, timeout: float | Deadline | None = None) -> list[Tool]:
        """Every tool the server offers, following nextCursor across pages; cached for the server's ttlMs.

        Each page waits `timeout` (by default the client's); a Deadline, such as
        `self.startup` for the listing that ends a server's start-up, is shared by all pages.
        """
        cached = self._tools_cache
        if cached is not None and time.monotonic() < cached[0]:
            return list(cached[1])
        ttl: float | None = None
        tools: list[Tool] = []
        names: set[str] = set()
        cursor: str | None = None
        seen_cursors: set[str] = set()
        for _ in range(MAX_PAGES):
            result = self._request("tools/list", {"cursor": cursor} if cursor is not None else None, timeout)
            if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
                raise ProtocolError(f"{self.name}: tools/list did not return a list of tools")
            page_ttl = result.get("ttlMs")
            if isinstance(page_ttl, (int, float)) and not isinstance(page_ttl, bool):
                ttl = page_ttl if ttl is None else min(ttl, page_ttl)  # the list is as fresh as its stalest page
            for raw in result["tools"]:
                tool = self._parse_tool(raw)
                if tool is None:
                    continue
                if tool.name in names:
                    self.log(f"skipped a second tool named {tool.name!r}")
                    continue
                names.add(tool.name)
                tools.append(tool)
            cursor = result.get("nextCursor")
            if cursor is None:
                if ttl is not None and ttl > 0:
                    self._tools_cache = (time.monotonic() + ttl / 1000, list(tools))
                self._header_marks = {tool.name: tool.header_params for tool in tools if tool.header_params}
                return tools
            if not isinstance(cursor, str) or cursor in seen_cursors:
                raise ProtocolError(f"{self.name}: tools/list returned a bad or repeated cursor {cursor!r}")
            seen_cursors.add(cursor)
        raise ProtocolError(f"{self.name}: tools/list still had more pages after {MAX_PAGES}")

    def _parse_tool(self, raw: Any) -> Tool | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
            self.log(f"skipped a tool without a name: {clip(repr(raw), 200)}")
            return None
        schema = raw.get("inputSchema")
        if not isinstance(schema, dict):
            self.log(f"skipped tool {raw['name']!r}: its inputSchema is not an object")
            return None
        support = _object(raw.get("execution")).get("taskSupport")
        if support == "required" and not self.tasks_offered:
            self.log(f"skipped tool {raw['name']!r}: it runs only as a task, and the server offers no tasks")
            return None
        if support in ("required", "optional"):
            self._task_support[raw["name"]] = support
        marks = None
        if self._http_stateless():
            problem = header_problem(schema)  # the HTTP wire must refuse a tool with bad header marks
            if problem is not None:
                self.log(f"skipped tool {raw['name']!r}: {problem}")
                return None
            marks = header_params(schema) or None
        output_schema = raw.get("outputSchema")
        title = raw.get("title") or _object(raw.get("annotations")).get("title")
        ui, visibility = ui_of(raw)
        description = raw.get("description")
        return Tool(
            name=raw["name"],
            description=description if isinstance(description, str) else "",
            input_schema=schema,
            output_schema=output_schema if isinstance(output_schema, dict) else None,
            title=title if isinstance(title, str) else None,
            header_params=marks,
            annotations=_object(raw.get("annotations")) or None,
            ui=ui,
            visibility=visibility,
        )

    def _http_stateless(self) -> bool:
        # Streamable HTTP's own rules on the 2026-07-28 wire: Mcp-Param-* headers, HeaderMismatch
        return self.stateless and self.transport.wire == "http"

    def call_tool(self, name: str, arguments: dict, timeout: float | None = None) -> ToolResult:
        """Call a tool. A failing tool gives `is_error=True`; a failing server raises an McpError.

        With `reset_timeout_on_progress`, each progress notification for this
        call restarts its timeout, until `max_total_timeout` (if set) has passed.
        A call the server runs as a task is followed to its end.
        """
        started = self.start_tool(name, arguments, timeout)
        if isinstance(started, RunningTask):
            wait_all([started])
            return self.task_result(started)
        return started

    def start_tool(self, name: str, arguments: dict, timeout: float | None = None) -> ToolResult | RunningTask:
        """`call_tool`, except that a call the server runs as a task comes back as its RunningTask, for
        `tasks.wait_all` to follow with others (then `task_result`)."""
        token = next(self._progress_tokens)
        params: dict[str, Any] = {"name": name, "arguments": arguments, "_meta": {"progressToken": token}}
        if not self.stateless and self.tasks_offered and name in self._task_support:
            ttl = None if self.task_timeout is None else int(self.task_timeout * 1000)
            params["task"] = {} if ttl is None else {"ttl": ttl}
        self._calls[token] = name  # so its progress says which call it is for
        try:
            if not self.reset_timeout_on_progress:
                result = self._call(params, timeout)
            else:
                deadline = Deadline(self.timeout if timeout is None else timeout, self.max_total_timeout)
                self._deadlines[token] = deadline
                try:
                    result = self._call(params, deadline)
                finally:
                    del self._deadlines[token]
        finally:
            del self._calls[token]
        if not isinstance(result, dict):
            raise ProtocolError(f"{self.name}: tools/call returned {type(result).__name__}, not an object")
        if result.get("resultType") == "task" if self.stateless else ("task" in params and "task" in result):
            task = RunningTask(
                self,
                name,
                result,
                stateless=self.stateless,
                timeout=timeout,
                task_timeout=self.task_timeout,
                on_status=self._on_task,
            )
            self._running = {key: running for key, running in self._running.items() if not running.done}
            self._running[task.task_id] = task
            return task
        return self._tool_result(result)

    def task_result(self, task: RunningTask) -> ToolResult:
        """A task's outcome once `wait_all` is done with it: the tool's result, or the McpError it ended in."""
        if task.failure is not None:
            raise task.failure
        assert task.outcome is not None  # wait_all leaves every task with one or the other
        return self._tool_result(task.outcome)

    def _tool_result(self, result: dict) -> ToolResult:
        """A tools/call result (a task's too) as a ToolResult."""
        content = result.get("content", [])
        if not isinstance(content, list):
            raise ProtocolError(f"{self.name}: tools/call returned content that is not a list")
        items = [item for item in content if isinstance(item, dict)]
        if len(items) != len(content):
            self.log(f"dropped {len(content) - len(items)} content item(s) that are not objects")
        structured = result.get("structuredContent")
        return ToolResult(
            content=items,
            is_error=result.get("isError") is True,
            structured=structured if isinstance(structured, dict) else None,
        )

    def ping(self) -> None:
        # 2026-07-28 has no ping; server/discover is the cheapest request it answers
        self._request("server/discover" if self.stateless else "ping")

    def _call(self, params: dict, timeout: float | Deadline | None) -> Any:
        """tools/call, with the tool's Mcp-Param-* headers over HTTP on the 2026-07-28 wire.

        A server that says the headers do not match the body (HeaderMismatch)
        may have changed the tool's schema: the tools are listed again (and
        `tools_stale` set, so the owner lists them too) and the call is made
        once more with the headers the new schema asks for.
        """
        name, arguments = params["name"], params["arguments"]
        for attempt in range(2):
            marks = self._header_marks.get(name) if self._http_stateless() else None
            try:
                headers = param_headers(marks, arguments) if marks else None
                return self._complete("tools/call", params, timeout, headers)
            except RpcError as exc:
                if exc.code != HEADER_MISMATCH or not self._http_stateless() or attempt:
                    raise
                self.log(
                    f"{name}: the server says the call's headers do not match its body ({exc.message}); "
                    "listing the tools again and calling once more"
                )
                self._tools_cache = None
                self.list_tools()
                self.tools_stale.set()
        raise AssertionError("unreachable")

    def _complete(
        self, method: str, params: dict, timeout: float | Deadline | None, headers: dict[str, str] | None = None
    ) -> Any:
        """A request whose result may ask for input first: answer, retry with the answers, until it completes."""
        for _ in range(MAX_INPUT_ROUNDS):
            result = self._request(method, params, timeout, headers)
            # a result without resultType is complete: older servers never send one
            if not isinstance(result, dict) or result.get("resultType") != "input_required":
                return result
            retry = {key: value for key, value in params.items() if key not in ("inputResponses", "requestState")}
            requests = result.get("inputRequests")
            if requests is not None:
                if not isinstance(requests, dict):
                    raise ProtocolError(
                        f"{self.name}: {method} asked for input with inputRequests that is not an object"
                    )
                retry["inputResponses"] = {key: self._answer_input(key, request) for key, request in requests.items()}
            state = result.get("requestState")
            if state is not None:
                retry["requestState"] = state  # echoed exactly: it is the server's, not ours to read
            if requests is None and state is None:
                raise ProtocolError(f"{self.name}: {method} asked for input without saying what input")
            params = retry
        raise ProtocolError(
            f"{self.name}: {method} still asked for input after {MAX_INPUT_ROUNDS} answers; gave up on it"
        )

    def _answer_input(self, key: str, request: Any) -> Any:
        """The answer to one of a result's inputRequests, from request_handlers; elicitation is declined without one."""
        method = request.get("method") if isinstance(request, dict) else None
        params = _object(request.get("params")) if isinstance(request, dict) else {}
        if method in ("sampling/createMessage", "roots/list"):
            self._deprecated(f"{'sampling' if method.startswith('sampling') else 'roots'} ({method})")
        handler = self.session.request_handlers.get(method) if isinstance(method, str) else None
        if handler is not None:
            try:
                return handler(params)
            except RpcError as exc:  # an input request has no error answer: the request fails here, as the SDK's
                raise RpcError(
                    exc.code, f"{self.name}: refused the server's {method} (input {key!r}): {exc.message}", exc.data
                ) from None
        if method == "elicitation/create":
            asked = params.get("message")
            self.log(
                f"the server asked the user for input ({clip(repr(asked), 200)}); declined: nobody here can answer it"
            )
            return {"action": "decline"}
        raise ProtocolError(
            f"{self.name}: the server asked for {method!r} (input {key!r}), which this client does not offer"
        )

    def _request(
        self,
        method: str,
        params: dict | None = None,
        timeout: float | Deadline | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        timeout = self.timeout if timeout is None else timeout
        if self.stateless:
            params = dict(params or {})
            params["_meta"] = {**_object(params.get("_meta")), **self._meta()}
            return self._wrap(self.session.request, method, params, timeout, headers)
        generation = self._generation
        try:
            return self._wrap(self.session.request, method, params, timeout, headers)
        except SessionExpired:
            pass
        self._reinitialize(generation)
        return self._wrap(self.session.request, method, params, timeout, headers)  # once: a second expiry raises

    def _start_request(self, method: str, params: dict, startup: StartupDeadline, cap: float | None = None) -> Any:
        """A start-up request: it waits what is left of `startup` (or `cap` seconds); not sent when nothing is left."""
        seconds = startup.left() if cap is None else cap
        startup.given.append((method, seconds))
        if seconds is not None and seconds <= 0:
            raise RequestTimeout(f"{self.name}: {startup.expired(method)}")
        return self._wrap(self.session.request, method, params, startup if cap is None else cap)

    def _wrap(self, send: Callable[..., Any], *args: Any) -> Any:
        # Name the server in connection errors: with several servers, "server
        # exited with code 1" alone does not say which.
        try:
            return send(*args)
        except RpcError:
            raise
        except McpError as exc:
            text = str(exc)
            if not text.startswith(f"{self.name}: "):
                exc.args = (f"{self.name}: {text}",)
            raise exc.with_traceback(None) from None

    def calls_in_flight(self) -> list[str]:
        """The tools of this client's tools/call requests waiting for their answer, oldest first."""
        return list(self._calls.values())

    def _fail(self, message: str) -> ProtocolError:
        self.close()
        return ProtocolError(f"{self.name}: {message}")


def _instructions(result: dict) -> str | None:
    """A server's `instructions`, capped like a tool's description; never rendered into the context."""
    instructions = result.get("instructions")
    if not isinstance(instructions, str):
        return None
    return cap_text(instructions, DEFAULT_MAX_DESCRIPTION_CHARS, "instructions")


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}
