"""A small MCP server framework on the standard library.

`ToolServer` owns a registry of tools and answers MCP requests for them, in
both revisions: the stateless 2026-07-28 one (`server/discover`; each request
names its version in `_meta`, each result says `resultType`, and the tool list
says how long it stays fresh) and the initialize handshake of 2025-11-25 and
older. `handle(message)` maps one JSON-RPC message to its response (or None), and
`serve_stdio()` runs that over stdin/stdout, one JSON message per line. Tools are
plain functions taking keyword arguments; arguments are checked against the
tool's input schema first, and whatever goes wrong inside a tool comes back as a
result with isError set, so the model can read it.

Resources: `resource(uri, ...)` registers a function returning text (or bytes,
sent as a base64 blob) for one URI, `template(uri_template, ...)` one for every
URI matching an RFC 6570 level-1 template (`weather://forecast/{city}`): both
listed (`resources/list`, `resources/templates/list`, paged like tools) and read
(`resources/read`; an unknown URI is error -32002) on both revisions. On the
initialize revisions `resources/subscribe` is accepted and `notify` queues a
notification (such as `notifications/resources/updated`) that `serve_stdio`
writes after the response it was queued during.

Prompts: `prompt(name, description, arguments)` registers a function taking the
arguments (strings) as keywords and returning the messages (a str is one user
text message; else a list of `{"role", "content"}`), listed (`prompts/list`,
paged) and got (`prompts/get`; an unknown prompt, a required argument left out
or a ToolFailure is -32602) on both revisions. Completion (`completion/complete`):
a prompt's `complete` or a template's `complete` maps an argument (a template
variable) to a function `(value, context_arguments) -> values`; the
`completions` capability is declared when one exists.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import traceback
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

# Kept apart from decodeloop.mcp on purpose: a server should stand on its own.
LATEST_VERSION = "2025-11-25"  # the newest version initialize agrees to
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
STATELESS_VERSIONS = ("2026-07-28",)
META = "io.modelcontextprotocol/"
TOOLS_TTL_MS = 3_600_000  # the tools of a bundled server never change while it runs
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for resources/read of an unknown URI

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_VERSION = -32022


READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}  # the bundled tools only look things up


class ToolFailure(Exception):
    """Raised by a tool to report a failure the model should read (isError: true)."""


class _InvalidParams(Exception):
    pass


class _NotFound(Exception):
    """resources/read of a URI no resource answers: (message, uri)."""


@dataclass
class RegisteredTool:
    name: str
    description: str
    input_schema: dict
    output_schema: dict | None
    title: str | None
    function: Callable[..., Any]
    annotations: dict | None = None  # readOnlyHint, destructiveHint, ...
    meta: dict | None = None  # the tool's _meta (MCP Apps: {"ui": {"resourceUri": ...}})

    def listing(self) -> dict:
        entry: dict = {"name": self.name}
        if self.title:
            entry["title"] = self.title
        entry["description"] = self.description
        entry["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            entry["outputSchema"] = self.output_schema
        if self.annotations:
            entry["annotations"] = self.annotations
        if self.meta:
            entry["_meta"] = self.meta
        return entry


Completer = Callable[[str, dict], list[str]]  # (the value so far, the other arguments) -> suggested values
MAX_COMPLETIONS = 100  # the specification's cap on one completion/complete answer


@dataclass
class RegisteredPrompt:
    name: str
    description: str
    arguments: list[dict]  # {"name", "description", "required"}
    function: Callable[..., str | list[dict]]
    title: str | None = None
    complete: dict[str, Completer] | None = None  # an argument -> its completer

    def listing(self) -> dict:
        entry: dict = {"name": self.name}
        if self.title:
            entry["title"] = self.title
        entry["description"] = self.description
        entry["arguments"] = self.arguments
        return entry


@dataclass
class RegisteredResource:
    uri: str  # a URI, or a URI template with {name} variables
    name: str
    description: str
    mime_type: str
    function: Callable[..., str | bytes]
    template: bool = False
    complete: dict[str, Completer] | None = None  # a template variable -> its completer

    def listing(self) -> dict:
        entry: dict = {"uriTemplate" if self.template else "uri": self.uri, "name": self.name}
        if self.description:
            entry["description"] = self.description
        entry["mimeType"] = self.mime_type
        return entry

    def match(self, uri: str) -> dict | None:
        """The template's variables for `uri`, or None when it does not match (a variable never spans a /)."""
        if not self.template:
            return {} if uri == self.uri else None
        pattern = "".join(
            f"(?P<{part[1:-1]}>[^/]+)" if part.startswith("{") else re.escape(part)
            for part in re.split(r"(\{[A-Za-z_][A-Za-z0-9_]*\})", self.uri)
        )
        found = re.fullmatch(pattern, uri)
        return {k: urllib.parse.unquote(v) for k, v in found.groupdict().items()} if found else None


class ToolServer:
    def __init__(
        self,
        name: str,
        version: str,
        instructions: str | None = None,
        page_size: int | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.instructions = instructions
        self.page_size = page_size  # None: tools/list returns every tool at once
        self.tools: dict[str, RegisteredTool] = {}
        self.resources: list[RegisteredResource] = []  # fixed URIs and templates, in registration order
        self.prompts: dict[str, RegisteredPrompt] = {}
        self.subscribed: set[str] = set()  # URIs a client subscribed to (the initialize revisions)
        self._outbox: list[dict] = []  # notifications to write after the current response
        # a server's own command-line flags, (names, argparse keywords): its build reads them, main accepts them
        self.options: list[tuple[tuple, dict]] = []

    def tool(
        self,
        name: str,
        description: str,
        input_schema: dict,
        output_schema: dict | None = None,
        title: str | None = None,
        annotations: dict | None = None,
        meta: dict | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a function as a tool. It returns str or (text, structured dict), or raises ToolFailure."""

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            if name in self.tools:
                raise ValueError(f"tool {name!r} is already registered")
            self.tools[name] = RegisteredTool(
                name, description, input_schema, output_schema, title, function, annotations, meta
            )
            return function

        return register

    def resource(
        self,
        uri: str,
        name: str,
        description: str = "",
        mime_type: str = "text/plain",
        template: bool = False,
        complete: dict[str, Completer] | None = None,
    ) -> Callable[[Callable[..., str | bytes]], Callable[..., str | bytes]]:
        """Register a function as a resource (`template`: `uri` is a URI template, its variables the keywords;
        `complete`: completers of its variables). It returns text, or bytes sent as a blob; ToolFailure or
        LookupError is a resource not found."""

        def register(function: Callable[..., str | bytes]) -> Callable[..., str | bytes]:
            self.resources.append(RegisteredResource(uri, name, description, mime_type, function, template, complete))
            return function

        return register

    def prompt(
        self,
        name: str,
        description: str,
        arguments: list[dict] | None = None,
        title: str | None = None,
        complete: dict[str, Completer] | None = None,
    ) -> Callable[[Callable[..., str | list[dict]]], Callable[..., str | list[dict]]]:
        """Register a function as a prompt: `arguments` are {"name", "description", "required"}, passed to it
        as keywords; it returns the messages (a str: one user text message), or raises ToolFailure."""

        def register(function: Callable[..., str | list[dict]]) -> Callable[..., str | list[dict]]:
            if name in self.prompts:
                raise ValueError(f"prompt {name!r} is already registered")
            self.prompts[name] = RegisteredPrompt(name, description, list(arguments or []), function, title, complete)
            return function

        return register

    def _completes(self) -> bool:
        return any(p.complete for p in self.prompts.values()) or any(r.complete for r in self.resources)

    def notify(self, method: str, params: dict | None = None) -> None:
        """Queue a notification: serve_stdio writes it after the response being made."""
        self._outbox.append({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    # -- JSON-RPC dispatch ---------------------------------------------------------

    def handle(self, message: Any) -> dict | None:
        """The response to one incoming message, or None when it needs none."""
        if not isinstance(message, dict):
            return _error(None, INVALID_REQUEST, "Invalid Request: expected a JSON object")
        method = message.get("method")
        if not isinstance(method, str):
            if "result" in message or "error" in message:
                return None  # a response; this server sends no requests, so nothing waits for it
            return _error(message.get("id"), INVALID_REQUEST, "Invalid Request: no method")
        if "id" not in message:
            return None  # notifications (initialized, cancelled) need no action from a synchronous server
        request_id = message["id"]
        handler = {
            "initialize": self._initialize,
            "server/discover": self._discover,
            "ping": lambda params: {},
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
            **(
                {
                    "resources/list": self._list_resources,
                    "resources/templates/list": self._list_templates,
                    "resources/read": self._read_resource,
                    "resources/subscribe": self._subscribe,
                    "resources/unsubscribe": self._unsubscribe,
                }
                if self.resources
                else {}
            ),
            **({"prompts/list": self._list_prompts, "prompts/get": self._get_prompt} if self.prompts else {}),
            **({"completion/complete": self._complete} if self._completes() else {}),
        }.get(method)
        if handler is None:
            return _error(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")
        params = message.get("params", {})
        if not isinstance(params, dict):
            return _error(request_id, INVALID_PARAMS, "Invalid params: expected an object")
        meta = params.get("_meta")
        # a request naming its version in _meta is a 2026-07-28 one, served without a handshake
        version = meta.get(META + "protocolVersion") if isinstance(meta, dict) else None
        if version is not None and version not in STATELESS_VERSIONS:
            all_versions = [*STATELESS_VERSIONS, *SUPPORTED_VERSIONS]
            return {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {
                    "code": UNSUPPORTED_VERSION,
                    "message": f"Unsupported protocol version: {version!r}",
                    "data": {"supported": all_versions, "requested": version},
                },
            }
        try:
            result = handler(params)
        except _InvalidParams as exc:
            return _error(request_id, INVALID_PARAMS, str(exc))
        except _NotFound as exc:
            return {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": RESOURCE_NOT_FOUND, "message": exc.args[0], "data": {"uri": exc.args[1]}},
            }
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            return _error(request_id, INTERNAL_ERROR, f"Internal error: {exc}")
        if version is not None or method == "server/discover":
            result = {"resultType": "complete", **result}
            if method == "tools/list":
                result.update(ttlMs=TOOLS_TTL_MS, cacheScope="public")
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def _discover(self, params: dict) -> dict:
        result: dict = {
            "supportedVersions": [*STATELESS_VERSIONS, *SUPPORTED_VERSIONS],
            # no subscriptions/listen here: a synchronous server has no stream to send updates on
            "capabilities": {
                "tools": {},
                **({"resources": {}} if self.resources else {}),
                **({"prompts": {}} if self.prompts else {}),
                **({"completions": {}} if self._completes() else {}),
            },
            "_meta": {META + "serverInfo": {"name": self.name, "version": self.version}},
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    def _initialize(self, params: dict) -> dict:
        requested = params.get("protocolVersion")
        # Echo the client's version when we speak it; otherwise offer our latest
        # and let the client decide whether it can live with that.
        version = requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION
        result: dict = {
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": False},
                **({"resources": {"subscribe": True, "listChanged": False}} if self.resources else {}),
                **({"prompts": {"listChanged": False}} if self.prompts else {}),
                **({"completions": {}} if self._completes() else {}),
            },
            "serverInfo": {"name": self.name, "version": self.version},
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    def _list_tools(self, params: dict) -> dict:
        return self._page("tools", [tool.listing() for tool in self.tools.values()], params)

    def _page(self, key: str, listing: list[dict], params: dict) -> dict:
        if not self.page_size:
            return {key: listing}
        start = _decode_cursor(params.get("cursor"))
        end = start + self.page_size
        result: dict = {key: listing[start:end]}
        if end < len(listing):
            result["nextCursor"] = _encode_cursor(end)
        return result

    def _list_resources(self, params: dict) -> dict:
        return self._page("resources", [r.listing() for r in self.resources if not r.template], params)

    def _list_templates(self, params: dict) -> dict:
        return self._page("resourceTemplates", [r.listing() for r in self.resources if r.template], params)

    def _read_resource(self, params: dict) -> dict:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise _InvalidParams("Invalid params: uri must be a string")
        for resource in self.resources:
            variables = resource.match(uri)
            if variables is None:
                continue
            try:
                data = resource.function(**variables)
            except (ToolFailure, LookupError) as exc:
                raise _NotFound(f"Resource not found: {uri} ({exc})", uri) from None
            item: dict = {"uri": uri, "mimeType": resource.mime_type}
            if isinstance(data, bytes):
                item["blob"] = base64.b64encode(data).decode("ascii")
            else:
                item["text"] = str(data)
            return {"contents": [item]}
        raise _NotFound(f"Resource not found: {uri}", uri)

    def _subscribe(self, params: dict) -> dict:
        uri = params.get("uri")
        if not isinstance(uri, str) or not any(r.match(uri) is not None for r in self.resources):
            raise _NotFound(f"Resource not found: {uri}", uri)
        self.subscribed.add(uri)
        return {}

    def _unsubscribe(self, params: dict) -> dict:
        self.subscribed.discard(str(params.get("uri")))
        return {}

    def _list_prompts(self, params: dict) -> dict:
        return self._page("prompts", [p.listing() for p in self.prompts.values()], params)

    def _get_prompt(self, params: dict) -> dict:
        name = params.get("name")
        prompt = self.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            known = ", ".join(self.prompts)
            raise _InvalidParams(f"Invalid params: unknown prompt {name!r} (this server has: {known})")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise _InvalidParams("Invalid params: a prompt's arguments are an object of strings")
        missing = [a["name"] for a in prompt.arguments if a.get("required") and a["name"] not in arguments]
        if missing:
            raise _InvalidParams(f"Invalid params: prompt {name} needs the argument(s) {', '.join(missing)}")
        names = {a["name"] for a in prompt.arguments}
        try:
            messages = prompt.function(**{k: v for k, v in arguments.items() if k in names})
        except ToolFailure as exc:
            raise _InvalidParams(f"Invalid params: {exc}") from None
        if isinstance(messages, str):
            messages = [{"role": "user", "content": _text(messages)}]
        result: dict = {"messages": messages}
        if prompt.description:
            result["description"] = prompt.description
        return result

    def _complete(self, params: dict) -> dict:
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
            raise _InvalidParams("Invalid params: completion/complete needs a ref and an argument name")
        completers: dict[str, Completer] | None = None
        if ref.get("type") == "ref/prompt":
            prompt = self.prompts.get(ref.get("name"))  # type: ignore[arg-type]
            if prompt is None:
                raise _InvalidParams(f"Invalid params: unknown prompt {ref.get('name')!r}")
            completers = prompt.complete
        elif ref.get("type") == "ref/resource":
            found = [r for r in self.resources if r.uri == ref.get("uri")]
            if not found:
                raise _InvalidParams(f"Invalid params: unknown resource template {ref.get('uri')!r}")
            completers = found[0].complete
        else:
            raise _InvalidParams(f"Invalid params: unknown ref type {ref.get('type')!r}")
        completer = (completers or {}).get(argument["name"])
        context = params.get("context")
        chosen = context.get("arguments") if isinstance(context, dict) else None
        chosen = chosen if isinstance(chosen, dict) else {}
        values = completer(str(argument.get("value", "")), chosen) if completer else []
        return {
            "completion": {
                "values": values[:MAX_COMPLETIONS],
                "total": len(values),
                "hasMore": len(values) > MAX_COMPLETIONS,
            }
        }

    def _call_tool(self, params: dict) -> dict:
        name = params.get("name")
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            known = ", ".join(self.tools) or "none"
            raise _InvalidParams(f"Unknown tool: {name!r} (this server has: {known})")
        arguments = params.get("arguments")
        return self.call_tool(tool.name, {} if arguments is None else arguments)

    def call_tool(self, name: str, arguments: Any) -> dict:
        """Run a registered tool and return the tools/call result, errors included as data."""
        tool = self.tools[name]
        try:
            arguments = check_arguments(tool.input_schema, arguments)
        except ToolFailure as exc:
            return _failure(f"invalid arguments for {name}: {exc}")
        try:
            output = tool.function(**arguments)
        except ToolFailure as exc:
            return _failure(str(exc))
        except Exception as exc:  # a bug in the tool is still only the tool's failure
            traceback.print_exc(file=sys.stderr)
            return _failure(f"{name} failed: {type(exc).__name__}: {exc}")
        if isinstance(output, str):
            return {"content": [_text(output)], "isError": False}
        if isinstance(output, tuple) and len(output) == 2 and isinstance(output[1], dict):
            return {"content": [_text(str(output[0]))], "structuredContent": output[1], "isError": False}
        return _failure(f"{name} returned {type(output).__name__}, not text")

    # -- running -----------------------------------------------------------------------

    def serve_stdio(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
        """Answer newline-delimited JSON-RPC on stdin/stdout until stdin closes."""
        stdin = stdin or sys.stdin.buffer
        out = stdout or sys.stdout.buffer
        # A stray print() in a tool would corrupt the protocol stream; send it to stderr instead.
        real_stdout, sys.stdout = sys.stdout, sys.stderr
        print(f"{self.name} server ready", file=sys.stderr, flush=True)
        try:
            for line in stdin:
                if not line.strip():
                    continue
                response: dict | None
                try:
                    message = json.loads(line)
                except ValueError:
                    response = _error(None, PARSE_ERROR, "Parse error: not a JSON line")
                else:
                    response = self.handle(message)
                queued, self._outbox = self._outbox, []
                for reply in [response, *queued]:
                    if reply is not None:
                        out.write(json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
                out.flush()
        except BrokenPipeError:
            pass  # the client went away; nothing left to say
        except KeyboardInterrupt:
            return 130
        finally:
            sys.stdout = real_stdout
        return 0

    def argument_parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(description=f"The {self.name} MCP server (stdio).")
        parser.add_argument(
            "--page-size",
            type=_positive_int,
            default=None,
            metavar="N",
            help="return tools/list in pages of N tools (exercises client pagination)",
        )
        for names, keywords in self.options:
            parser.add_argument(*names, **keywords)
        return parser

    def main(self, argv: list[str] | None = None) -> int:
        args = self.argument_parser().parse_args(argv)
        if args.page_size is not None:
            self.page_size = args.page_size
        return self.serve_stdio()


# -- argument checking ---------------------------------------------------------------

_JSON_TYPES = {
    "string": str,
    "boolean": bool,
    "object": dict,
    "array": list,
    "null": type(None),
}


def check_arguments(schema: dict, arguments: Any) -> dict:
    """Check tool arguments against the simple JSON Schema subset tools use; raise ToolFailure."""
    if not isinstance(arguments, dict):
        raise ToolFailure("arguments must be an object")
    properties = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in arguments:
            raise ToolFailure(f'missing required argument "{key}"')
    checked = {}
    for key, value in arguments.items():
        if key not in properties:
            if schema.get("additionalProperties", True) is False:
                expected = ", ".join(properties) or "none"
                raise ToolFailure(f'unexpected argument "{key}" (expected: {expected})')
            checked[key] = value
            continue
        checked[key] = _check_value(key, properties[key], value)
    return checked


def _check_value(key: str, spec: dict, value: Any) -> Any:
    kind = spec.get("type")
    if kind == "integer":
        # JSON has one number type: 3.0 is a fine integer, True is not.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ToolFailure(f'argument "{key}" must be an integer, not {_json_type(value)}')
    elif kind == "number":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ToolFailure(f'argument "{key}" must be a number, not {_json_type(value)}')
    elif kind in _JSON_TYPES and not isinstance(value, _JSON_TYPES[kind]):
        raise ToolFailure(f'argument "{key}" must be a {kind}, not {_json_type(value)}')
    if "enum" in spec and value not in spec["enum"]:
        raise ToolFailure(f'argument "{key}" must be one of {", ".join(map(str, spec["enum"]))}')
    if "minimum" in spec and value < spec["minimum"]:
        raise ToolFailure(f'argument "{key}" must be at least {spec["minimum"]}')
    if "maximum" in spec and value > spec["maximum"]:
        raise ToolFailure(f'argument "{key}" must be at most {spec["maximum"]}')
    if "minLength" in spec and len(value) < spec["minLength"]:
        raise ToolFailure(
            f'argument "{key}" must not be empty'
            if spec["minLength"] == 1
            else f'argument "{key}" must have at least {spec["minLength"]} characters'
        )
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    for name, python_type in _JSON_TYPES.items():
        if isinstance(value, python_type):
            return name
    return type(value).__name__


# -- small pieces ----------------------------------------------------------------------


def _text(text: str) -> dict:
    return {"type": "text", "text": text}


def _failure(message: str) -> dict:
    return {"content": [_text(message)], "isError": True}


def _error(request_id: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _encode_cursor(offset: int) -> str:
    # Opaque to clients, as the spec asks: they must pass it back untouched.
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def _decode_cursor(cursor: Any) -> int:
    if cursor is None:
        return 0
    try:
        label, offset = base64.urlsafe_b64decode(str(cursor).encode()).decode().split(":")
        if label == "offset" and int(offset) >= 0:
            return int(offset)
    except ValueError:
        pass
    raise _InvalidParams(f"Invalid params: unknown cursor {cursor!r}")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
