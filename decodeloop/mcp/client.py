"""The MCP client: one session with one server (handshake, tools, calls); knows no pipes.

This module owns the MCP side of a connection: the initialize handshake and its
version negotiation, listing tools across pages, calling a tool, and the shapes
that come back (`Tool`, `ToolResult`). A tool that fails reports it as data
(`ToolResult.is_error`); a server that fails raises an McpError, which the caller
turns into something the model can read.

It also owns what the protocol asks of a client around those calls: telling
the transport the negotiated version (HTTP sends it as a header), initializing
again when an HTTP server says our session expired (then retrying the request
once), a progress token on every tools/call (with `reset_timeout_on_progress`,
each progress notification for the call restarts its timeout, up to
`max_total_timeout`: the TypeScript SDK's resetTimeoutOnProgress and
maxTotalTimeout), and remembering that the server
announced `notifications/tools/list_changed` (`tools_stale`), so the owner can
list the tools again from its own thread: a reader thread must never wait for
a response it is the one to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import itertools
import threading

import decodeloop
from decodeloop.mcp.errors import HttpStatusError, McpError, ProtocolError, RpcError, SessionExpired
from decodeloop.mcp.framing import DEFAULT_MAX_MESSAGE_BYTES
from decodeloop.mcp.jsonrpc import Deadline, JsonRpcSession
from decodeloop.mcp.transports.base import Transport

PROTOCOL_VERSION = "2025-11-25"
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MAX_PAGES = 1000  # tools/list pages followed before assuming the server is looping
FALLBACK_STATUSES = (400, 404, 405)  # a POST initialize refused so: the server may speak the legacy SSE transport


@dataclass
class Tool:
    name: str
    description: str
    input_schema: dict
    output_schema: dict | None = None
    title: str | None = None


@dataclass
class ToolResult:
    content: list[dict]
    is_error: bool
    structured: dict | None = None

    def text(self) -> str:
        """The result as text for a model: text items verbatim, anything else as a short placeholder."""
        return "\n".join(_content_text(item) for item in self.content)


def _content_text(item: dict) -> str:
    """One content item as text: never base64, which would only fill the context with noise."""
    kind = item.get("type")
    if kind == "text":
        return str(item.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind} {item.get('mimeType', 'unknown type')}, {_decoded_size(item.get('data'))} bytes]"
    if kind == "resource_link":
        label = " ".join(str(part) for part in (item.get("name"), item.get("uri")) if part)
        if item.get("mimeType"):
            label += f" ({item['mimeType']})"
        description = item.get("description")
        return f"[resource link {label}]" + (f" {description}" if isinstance(description, str) and description else "")
    if kind == "resource":
        resource = item.get("resource") if isinstance(item.get("resource"), dict) else {}
        uri, mime = resource.get("uri", ""), resource.get("mimeType")
        if isinstance(resource.get("text"), str):
            # the URI first: the model may want to say where the text came from
            return f"[resource {uri}" + (f" ({mime})" if mime else "") + "]\n" + resource["text"]
        return f"[resource {uri} {mime or 'unknown type'}, {_decoded_size(resource.get('blob'))} bytes]"
    return f"[{kind or 'untyped'} content]"


def _decoded_size(data: Any) -> int:
    """Size in bytes of base64 data, without decoding it."""
    if not isinstance(data, str):
        return 0
    data = data.strip()
    return len(data) * 3 // 4 - data[-2:].count("=")


class McpClient:
    """An MCP session with one server. Use `initialize()` (or `with`) before anything else."""

    def __init__(
        self,
        transport: Transport,
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
    ) -> None:
        self.name = name
        self.timeout = timeout
        self.reset_timeout_on_progress = reset_timeout_on_progress
        self.max_total_timeout = max_total_timeout
        self.transport = transport
        self._log = log or (lambda line: None)
        self._on_notification = on_notification
        self.client_capabilities = dict(capabilities or {})
        self.client_info = client_info or {"name": "decodeloop", "version": decodeloop.__version__}
        self.session = JsonRpcSession(
            transport, on_notification=self._notified, on_traffic=on_traffic, log=self.log,
            request_handlers=request_handlers,
        )
        self.server_info: dict = {}
        self.protocol_version: str | None = None
        self.capabilities: dict = {}
        self.instructions: str | None = None
        self.tools_stale = threading.Event()  # set by notifications/tools/list_changed
        self._progress_tokens = itertools.count(1)
        self._deadlines: dict[int, Deadline] = {}  # progress token -> the timeout its progress extends
        self._reinit_lock = threading.Lock()
        self._generation = 0  # how many times the session was initialized
        self._closed = False

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
    ) -> "McpClient":
        """Spawn a stdio server and return an initialized client for it."""
        from decodeloop.mcp.transports.stdio import StdioTransport

        transport = StdioTransport(command, env=env, cwd=cwd, on_stderr=on_stderr, close_timeout=close_timeout,
                                   max_message_bytes=max_message_bytes)
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
    ) -> "McpClient":
        """Connect to an HTTP server and return an initialized client.

        `transport` is "http" (Streamable HTTP), "sse" (legacy HTTP+SSE) or
        "auto": Streamable HTTP, falling back to legacy SSE on the same URL when
        the POST initialize is refused with 400, 404 or 405.
        """
        from decodeloop.mcp.transports.http import StreamableHttpTransport
        from decodeloop.mcp.transports.sse_legacy import SseLegacyTransport

        if transport not in ("auto", "http", "sse"):
            raise ValueError(f"unknown transport {transport!r}: expected auto, http or sse")
        timeout = kw.get("timeout", 60.0)
        log = kw.get("log") or (lambda line: None)
        name = kw.get("name", "server")
        if transport != "sse":
            client = cls(StreamableHttpTransport(url, headers, timeout=timeout, connect_timeout=connect_timeout,
                                                 auth=auth, log=lambda line: log(f"{name}: {line}"),
                                                 max_message_bytes=max_message_bytes), **kw)
            try:
                client.initialize()
                return client
            except HttpStatusError as exc:
                client.close()
                if transport == "http" or isinstance(exc, SessionExpired) or exc.status not in FALLBACK_STATUSES:
                    raise
                log(f"{name}: POST initialize answered HTTP {exc.status}; trying the legacy HTTP+SSE transport")
            except BaseException:
                client.close()
                raise
        client = cls(SseLegacyTransport(url, headers, timeout=timeout, connect_timeout=connect_timeout,
                                        log=lambda line: log(f"{name}: {line}"),
                                        max_message_bytes=max_message_bytes), **kw)
        return client.start()

    def start(self) -> "McpClient":
        """initialize(), closing the connection if the handshake fails; returns the client."""
        try:
            self.initialize()
        except BaseException:
            self.close()
            raise
        return self

    def log(self, line: str) -> None:
        self._log(f"{self.name}: {line}")

    def _notified(self, method: str, params: dict) -> None:
        if method == "notifications/tools/list_changed":
            self.tools_stale.set()
        elif method == "notifications/progress" and self._deadlines:
            token = params.get("progressToken")
            deadline = self._deadlines.get(token) if isinstance(token, int) and not isinstance(token, bool) else None
            if deadline is not None:
                deadline.extend()
        if self._on_notification is not None:
            self._on_notification(method, params)

    # -- lifecycle --------------------------------------------------------------

    def initialize(self) -> dict:
        """Handshake: agree on a protocol version, then announce we are ready. Returns the server's reply."""
        self._wrap(self.session.start)
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": self.client_capabilities,
            "clientInfo": self.client_info,
        }
        result = self._wrap(self.session.request, "initialize", params, self.timeout)
        if not isinstance(result, dict):
            raise self._fail(f"initialize returned {type(result).__name__}, not an object")
        version = result.get("protocolVersion")
        if version not in SUPPORTED_VERSIONS:
            # The spec says to disconnect when the versions cannot agree.
            raise self._fail(
                f"server speaks MCP version {version!r}; decodeloop asked for {PROTOCOL_VERSION!r} "
                f"and supports {', '.join(SUPPORTED_VERSIONS)}"
            )
        self.protocol_version = version
        self.server_info = _object(result.get("serverInfo"))
        self.capabilities = _object(result.get("capabilities"))
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        tell = getattr(self.transport, "set_protocol_version", None)
        if tell is not None:
            tell(version)  # HTTP sends it as a header on every later request
        self._wrap(self.session.notify, "notifications/initialized")
        self._generation += 1
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
            self.session.close()

    def __enter__(self) -> "McpClient":
        if self.protocol_version is None:
            try:
                self.initialize()
            except BaseException:
                self.close()
                raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- requests -------------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        """Every tool the server offers, following nextCursor across pages."""
        tools: list[Tool] = []
        names: set[str] = set()
        cursor: str | None = None
        seen_cursors: set[str] = set()
        for _ in range(MAX_PAGES):
            result = self._request("tools/list", {"cursor": cursor} if cursor is not None else None)
            if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
                raise ProtocolError(f"{self.name}: tools/list did not return a list of tools")
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
                return tools
            if not isinstance(cursor, str) or cursor in seen_cursors:
                raise ProtocolError(f"{self.name}: tools/list returned a bad or repeated cursor {cursor!r}")
            seen_cursors.add(cursor)
        raise ProtocolError(f"{self.name}: tools/list still had more pages after {MAX_PAGES}")

    def _parse_tool(self, raw: Any) -> Tool | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
            self.log(f"skipped a tool without a name: {raw!r:.200}")
            return None
        schema = raw.get("inputSchema")
        if not isinstance(schema, dict):
            self.log(f"skipped tool {raw['name']!r}: its inputSchema is not an object")
            return None
        output_schema = raw.get("outputSchema")
        title = raw.get("title") or _object(raw.get("annotations")).get("title")
        description = raw.get("description")
        return Tool(
            name=raw["name"],
            description=description if isinstance(description, str) else "",
            input_schema=schema,
            output_schema=output_schema if isinstance(output_schema, dict) else None,
            title=title if isinstance(title, str) else None,
        )

    def call_tool(self, name: str, arguments: dict, timeout: float | None = None) -> ToolResult:
        """Call a tool. A failing tool gives `is_error=True`; a failing server raises an McpError.

        With `reset_timeout_on_progress`, each progress notification for this
        call restarts its timeout, until `max_total_timeout` (if set) has passed.
        """
        token = next(self._progress_tokens)
        params = {"name": name, "arguments": arguments, "_meta": {"progressToken": token}}
        if not self.reset_timeout_on_progress:
            result = self._request("tools/call", params, timeout)
        else:
            deadline = Deadline(self.timeout if timeout is None else timeout, self.max_total_timeout)
            self._deadlines[token] = deadline
            try:
                result = self._request("tools/call", params, deadline)
            finally:
                del self._deadlines[token]
        if not isinstance(result, dict):
            raise ProtocolError(f"{self.name}: tools/call returned {type(result).__name__}, not an object")
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
        self._request("ping")

    def _request(self, method: str, params: dict | None = None, timeout: float | Deadline | None = None) -> Any:
        timeout = self.timeout if timeout is None else timeout
        generation = self._generation
        try:
            return self._wrap(self.session.request, method, params, timeout)
        except SessionExpired:
            pass
        self._reinitialize(generation)
        return self._wrap(self.session.request, method, params, timeout)  # once: a second expiry raises

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

    def _fail(self, message: str) -> ProtocolError:
        self.close()
        return ProtocolError(f"{self.name}: {message}")


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}
