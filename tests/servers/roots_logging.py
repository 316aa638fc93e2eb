"""An MCP server that asks for the client's roots, logs at every level and reports progress, on both wires.

`python3 tests/servers/roots_logging.py` speaks 2026-07-28 and 2025-11-25 on stdio
and declares the `logging` capability. Tools: `roots` asks the client for its
roots (a `roots/list` request mid-call on 2025-11-25, an input request on
2026-07-28) and answers with them as JSON; `log` sends one log message at each
of the eight levels, those at or above the level the client asked for
(`logging/setLevel`, or `logLevel` in the request's `_meta`; none on 2026-07-28
without it); `slow` sends three progress notifications for the call's
progressToken, the message of the second holding an escape character;
`state` answers with the levels set, the roots/list_changed notifications
seen and the client capabilities it was told, as JSON.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from decodeloop.servers.base import META, ToolServer

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}


def _send(message: dict) -> None:
    out = sys.__stdout__.buffer  # serve_stdio points sys.stdout at stderr while it serves
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


class RootsLoggingServer(ToolServer):
    def __init__(self) -> None:
        super().__init__("roots_logging", "0.0.1")
        self.levels: list[str] = []  # logging/setLevel requests, in order
        self.list_changed = 0  # notifications/roots/list_changed seen
        self.capabilities: dict = {}  # the client's, from initialize or the latest _meta
        self.params: dict = {}  # the tools/call being served
        self.asked = 0

    def handle(self, message):
        method = message.get("method") if isinstance(message, dict) else None
        if method == "notifications/roots/list_changed":
            self.list_changed += 1
            return None
        if method == "logging/setLevel":
            self.levels.append(message["params"]["level"])
            return {"jsonrpc": "2.0", "id": message["id"], "result": {}}
        params = message.get("params") if isinstance(message, dict) else None
        if isinstance(params, dict):
            if method == "initialize":
                self.capabilities = params.get("capabilities", {})
            meta = params.get("_meta")
            if isinstance(meta, dict) and META + "clientCapabilities" in meta:
                self.capabilities = meta[META + "clientCapabilities"]
            if method == "tools/call":
                self.params = params
        return super().handle(message)

    def _discover(self, params):
        result = super()._discover(params)
        result["capabilities"] = {"tools": {}, "logging": {}}
        return result

    def _initialize(self, params):
        result = super()._initialize(params)
        result["capabilities"] = {"tools": {}, "logging": {}}
        return result

    def call_tool(self, name, arguments):
        meta = self.params.get("_meta") or {}
        stateless = META + "protocolVersion" in meta
        if name == "roots" and stateless:
            answers = self.params.get("inputResponses")
            if not isinstance(answers, dict):
                return {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list", "params": {}}}}
            return {"content": [{"type": "text", "text": json.dumps(answers["r"])}], "isError": False}
        if name == "log":
            level = meta.get(META + "logLevel") if stateless else (self.levels[-1] if self.levels else "debug")
            if level in LEVELS:
                for at in LEVELS[LEVELS.index(level) :]:
                    data = {"message": f"at {at}"} if at == "error" else f"at {at}"
                    _send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": at, "data": data}})
            return {"content": [{"type": "text", "text": f"logged from {level}"}], "isError": False}
        if name == "slow":
            token = meta.get("progressToken")
            for step, text in ((1, "starting"), (2, "half\x1b[31m way"), (3, None)):
                note = {"progressToken": token, "progress": step, "total": 3}
                if text is not None:
                    note["message"] = text
                _send({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
            return {"content": [{"type": "text", "text": "done"}], "isError": False}
        return super().call_tool(name, arguments)


server = RootsLoggingServer()


@server.tool("roots", "Ask the client for its roots and answer with them.", NO_ARGUMENTS)
def roots() -> str:
    _send({"jsonrpc": "2.0", "id": "roots-1", "method": "roots/list"})
    for line in sys.stdin.buffer:  # the client's answer; a notification may come first
        reply = json.loads(line)
        if reply.get("id") == "roots-1":
            return json.dumps(reply.get("result", reply.get("error")))
        server.handle(reply)
    return "no answer"


@server.tool("log", "Log at every level from the one asked for.", NO_ARGUMENTS)
def log() -> str:
    return "unreachable"


@server.tool("slow", "Report progress three times, then answer.", NO_ARGUMENTS)
def slow() -> str:
    return "unreachable"


@server.tool("state", "What the server was told: levels set, roots changes, client capabilities.", NO_ARGUMENTS)
def state() -> str:
    return json.dumps(
        {"levels": server.levels, "list_changed": server.list_changed, "capabilities": server.capabilities}
    )


if __name__ == "__main__":
    sys.exit(server.main())
