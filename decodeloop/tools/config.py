"""Which MCP servers to start: the `mcpServers` config file and the command-line forms.

This module owns turning what the user wrote into `ServerSpec`s: a JSON file in
the format Claude Desktop, Cursor and VS Code use, `--mcp-url` URLs (with
`sse+http://` picking the legacy SSE transport) and `--mcp-header` lines. It
starts nothing; tools/startup.py does. Every mistake in a file is a Misconfigured (a
ConfigError) that names the file and the server; a file that is not UTF-8 is named with
the offset of its first bad byte (a UTF-8 byte-order mark is read past). A bad
`--mcp-url` or `--mcp-header` is a plain ConfigError, the command line's to report.

    {"mcpServers": {
        "weather": {"command": "python3", "args": ["-m", "decodeloop.servers.weather"],
                    "env": {"UNITS": "F"}},
        "search":  {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ..."}},
        "legacy":  {"type": "sse", "url": "http://localhost:3001/sse"}}}

VS Code's top-level key `"servers"` works too. `"type"` (or `"transport"`) is
`"stdio"`, `"http"` (Streamable HTTP only), `"sse"` (legacy HTTP+SSE only); a
URL without one tries Streamable HTTP and falls back to legacy SSE.
`"disabled": true` skips a server. `"cwd"` is resolved against the file's folder.
`"roots": ["PATH", ...]` are the paths offered to that server as its roots, in
place of the command line's `--root` / `--no-roots` (`[]`: no roots capability
for it); a relative path is resolved against the file's folder, like `"cwd"`,
and each must exist.
`"protocolVersion"` pins the MCP revision a server is spoken to in: `"2026-07-28"`
(the stateless wire, no fallback), `"2025-11-25"` or an older one (the initialize
handshake, no probe), or `"auto"` (`server/discover`, then initialize); without
one, the command line's `--mcp-protocol` decides, and its default is auto.
A top-level `"engine"` names an OpenAI-compatible server that samples, as
`--model openai:URL` does (`load_engine`); `--model` on the command line wins.
The policy's rules for a server's tools (policy.py) are keys of its own:
`"trusted": true` (believe its tool annotations), and lists of tool names
`"readOnly"`, `"sideEffects"`, `"allow"` and `"deny"` ("*" for every tool).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import urllib.parse
from dataclasses import dataclass, field

from decodeloop import utf8
from decodeloop.errors import ConfigError, Misconfigured
from decodeloop.mcp.versions import LEGACY_SSE_REFUSAL, PROTOCOLS, STATELESS_VERSION

POLICY_KEYS = {"trusted", "readOnly", "sideEffects", "allow", "deny"}  # read by policy.py
SERVER_KEYS = {
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "type",
    "transport",
    "disabled",
    "protocolVersion",
    "roots",
    *POLICY_KEYS,
}
ENGINE_KEYS = {"url", "model", "tokenizer"}  # the top-level "engine": what --model openai:URL takes (load_engine)
TOP_IGNORED = {"$schema", "inputs", "engine"}  # VS Code's prompt-for-a-secret inputs are not supported, only tolerated
TRANSPORTS = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamablehttp": "http", "sse": "sse"}
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
MAX_CONFIG_BYTES = 16 * 2**20  # a config of servers is kilobytes


@dataclass
class ServerSpec:
    name: str
    command: list[str] | None = None  # a stdio server
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None  # an HTTP server
    headers: dict[str, str] = field(default_factory=dict)
    transport: str = "auto"  # stdio, auto (Streamable HTTP, then legacy SSE), http or sse
    protocol: str | None = None  # a pinned MCP revision (PROTOCOLS); None: the command line's, else auto
    # the paths offered to this server as its roots, in place of --root / --no-roots; empty: no roots capability;
    # None: the command line's
    roots: tuple[str, ...] | None = None
    # the policy's rules for this server's tools (see policy.py); "*" in a list means every tool
    trusted: bool = False  # believe its readOnlyHint / destructiveHint annotations
    read_only: tuple[str, ...] = ()  # tools that only read, whatever the server says
    side_effects: tuple[str, ...] = ()  # tools that act, whatever the server says
    allow: tuple[str, ...] = ()  # side-effecting tools that run without confirmation
    deny: tuple[str, ...] = ()  # tools that never run
    config_file: str | None = None  # the --mcp-config file it came from (`decodeloop auth login` names it)


def parse_header(text: str) -> tuple[str, str]:
    """'Authorization: Bearer x' -> ('Authorization', 'Bearer x')."""
    name, colon, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not colon or not _HEADER_NAME.match(name):
        raise ConfigError(f'bad header {text!r}: expected "Name: value"')
    if any(c in value for c in "\r\n\0"):
        raise ConfigError(f"bad header {name!r}: the value may not contain line breaks")
    return name, value


def url_spec(
    url: str, headers: dict[str, str] | None = None, transport: str = "auto", name: str | None = None
) -> ServerSpec:
    """A URL server; `sse+http://` and `sse+https://` ask for the legacy SSE transport."""
    if url.startswith(("sse+http://", "sse+https://")):
        url, transport = url[len("sse+") :], "sse"
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"bad MCP server URL {url!r}: expected http://host/... or https://host/...")
    return ServerSpec(name=name or parts.hostname, url=url, headers=dict(headers or {}), transport=transport)


def _read(path: str) -> object:
    """The file's JSON: UTF-8 (a byte-order mark first is taken), at most MAX_CONFIG_BYTES."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise Misconfigured(f"cannot read MCP config {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:  # /dev/zero, a log named by mistake: refused, not read to the end
        raise Misconfigured(f"{path}: larger than {MAX_CONFIG_BYTES // 2**20} MB; not an MCP config")
    bad = utf8.in_bytes(data)
    if bad is not None:
        utf16 = data.startswith((b"\xff\xfe", b"\xfe\xff"))  # what Windows editors write as "Unicode"
        raise Misconfigured(
            f"{path}: not UTF-8: {bad}"
            + ("; it starts with a UTF-16 byte-order mark" if utf16 else "")
            + " (expected UTF-8 JSON: save the file as UTF-8)"
        )
    try:
        return json.loads(data.decode("utf-8-sig"), object_pairs_hook=_no_duplicates)
    except ValueError as exc:
        raise Misconfigured(f"{path}: not valid JSON: {exc}") from None


def load_config(path: str) -> list[ServerSpec]:
    specs = parse_config(_read(path), path, base=os.path.dirname(os.path.abspath(path)))
    return [dataclasses.replace(spec, config_file=path) for spec in specs]


def load_engine(path: str) -> dict[str, str] | None:
    """The file's "engine": an OpenAI-compatible server that samples (`--model openai:URL`), or None.

        "engine": {"url": "http://127.0.0.1:8000/v1", "model": "NAME", "tokenizer": "models/MODEL_DIR"}

    A relative tokenizer path is resolved against the file's folder.
    """
    data = _read(path)
    engine = data.get("engine") if isinstance(data, dict) else None
    if engine is None:
        return None
    if (
        not isinstance(engine, dict)
        or set(engine) - ENGINE_KEYS
        or not isinstance(engine.get("url"), str)
        or not all(isinstance(v, str) for v in engine.values())
    ):
        raise Misconfigured(
            f'{path}: "engine" must be an object of strings with "url" and optionally '
            f"{', '.join(sorted(ENGINE_KEYS - {'url'}))}"
        )
    if not engine["url"].startswith(("http://", "https://")):
        raise Misconfigured(f"{path}: the engine's url must be http:// or https://, not {engine['url']!r}")
    out = dict(engine)
    if "tokenizer" in out:
        out["tokenizer"] = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(out["tokenizer"]))
    return out


def parse_config(data: object, source: str = "config", base: str | None = None) -> list[ServerSpec]:
    if not isinstance(data, dict):
        raise Misconfigured(f'{source}: expected a JSON object with "mcpServers"')
    keys = [k for k in ("mcpServers", "servers") if k in data]
    if len(keys) != 1:
        raise Misconfigured(f'{source}: expected exactly one of "mcpServers" or "servers" at the top level')
    unknown = set(data) - {keys[0]} - TOP_IGNORED
    if unknown:
        raise Misconfigured(f"{source}: unknown top-level key(s) {', '.join(sorted(unknown))}")
    servers = data[keys[0]]
    if not isinstance(servers, dict):
        raise Misconfigured(f'{source}: "{keys[0]}" must be an object mapping server names to servers')
    specs = []
    for name, entry in servers.items():
        spec = _server(name, entry, f'{source}: server "{name}"', base)
        if spec is not None:
            specs.append(spec)
    return specs


def _server(name: str, entry: object, where: str, base: str | None) -> ServerSpec | None:
    spec = _transport(name, entry, where, base)
    if spec is None:
        return None
    assert isinstance(entry, dict)
    trusted = entry.get("trusted", False)
    if not isinstance(trusted, bool):
        raise Misconfigured(f'{where}: "trusted" must be true or false')
    return dataclasses.replace(
        spec,
        roots=_roots(entry["roots"], where, base) if "roots" in entry else None,
        trusted=trusted,
        read_only=tuple(_names(entry.get("readOnly", []), where, "readOnly")),
        side_effects=tuple(_names(entry.get("sideEffects", []), where, "sideEffects")),
        allow=tuple(_names(entry.get("allow", []), where, "allow")),
        deny=tuple(_names(entry.get("deny", []), where, "deny")),
    )


def _roots(value: object, where: str, base: str | None) -> tuple[str, ...]:
    """A server's own roots: absolute paths (a relative one from the file's folder) that exist."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise Misconfigured(f'{where}: "roots" must be a list of paths ([] for no roots)')
    paths = []
    for path in value:
        absolute = os.path.abspath(os.path.join(base or os.getcwd(), os.path.expanduser(path)))
        if not os.path.exists(absolute):
            raise Misconfigured(f"{where}: root {path!r}: no such file or directory ({absolute})")
        paths.append(absolute)
    return tuple(paths)


def _names(value: object, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise Misconfigured(f'{where}: "{key}" must be a list of tool names ("*" for every tool)')
    return value


def _transport(name: str, entry: object, where: str, base: str | None) -> ServerSpec | None:
    if not name.strip():
        raise Misconfigured(f"{where}: a server needs a non-empty name")
    if not isinstance(entry, dict):
        raise Misconfigured(f'{where}: expected an object with "command" or "url"')
    unknown = set(entry) - SERVER_KEYS
    if unknown:
        raise Misconfigured(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(SERVER_KEYS))})"
        )
    if entry.get("disabled") is True:
        return None
    protocol = entry.get("protocolVersion")
    if protocol is not None and protocol not in PROTOCOLS:
        raise Misconfigured(f'{where}: "protocolVersion" must be one of {", ".join(PROTOCOLS)}, not {protocol!r}')
    kind = entry.get("type", entry.get("transport"))
    if kind is not None:
        if not isinstance(kind, str) or kind.lower() not in TRANSPORTS:
            raise Misconfigured(f'{where}: "type" must be stdio, http or sse, not {kind!r}')
        kind = TRANSPORTS[kind.lower()]
    has_command, has_url = "command" in entry, "url" in entry
    if has_command == has_url:
        raise Misconfigured(f'{where}: needs exactly one of "command" (a stdio server) or "url" (an HTTP server)')
    if has_command:
        if kind not in (None, "stdio"):
            raise Misconfigured(f'{where}: "type": "{kind}" needs a "url", not a "command"')
        for key in ("url", "headers"):
            if key in entry:
                raise Misconfigured(f'{where}: "{key}" is for HTTP servers; this one has a "command"')
        command, args = entry["command"], entry.get("args", [])
        if not isinstance(command, str) or not command.strip():
            raise Misconfigured(f'{where}: "command" must be a non-empty string')
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise Misconfigured(f'{where}: "args" must be a list of strings')
        env = _strings(entry.get("env", {}), where, "env")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise Misconfigured(f'{where}: "cwd" must be a string')
        if cwd is not None and base is not None:
            cwd = os.path.join(base, os.path.expanduser(cwd))
        return ServerSpec(
            name=name, command=[command, *args], env=env or None, cwd=cwd, transport="stdio", protocol=protocol
        )
    if kind == "stdio":
        raise Misconfigured(f'{where}: "type": "stdio" needs a "command", not a "url"')
    for key in ("args", "env", "cwd"):
        if key in entry:
            raise Misconfigured(f'{where}: "{key}" is for stdio servers; this one has a "url"')
    url = entry["url"]
    if not isinstance(url, str):
        raise Misconfigured(f'{where}: "url" must be a string')
    headers = _strings(entry.get("headers", {}), where, "headers")
    try:
        for header, value in headers.items():
            parse_header(f"{header}: {value}")
        spec = url_spec(url, headers, kind or "auto", name)
        if protocol == STATELESS_VERSION and spec.transport == "sse":
            raise Misconfigured(LEGACY_SSE_REFUSAL)
        spec.protocol = protocol
        return spec
    except ConfigError as exc:  # parse_header's and url_spec's, about the file's entry
        raise Misconfigured(f"{where}: {exc}") from None


def _strings(value: object, where: str, key: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise Misconfigured(f'{where}: "{key}" must be an object of strings')
    return dict(value)


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"key {key!r} appears twice")
        seen[key] = value
    return seen
