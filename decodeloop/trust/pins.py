"""Tool definitions pinned for a session: what a definition is, its fingerprint, and what changed.

A tool's definition is what the model is told, what its calls are checked
against and what the policy may believe: title, description, inputSchema,
outputSchema and annotations. The router
pins each tool's definition when it first takes it; when a server later lists
a different definition under the same name, the router keeps the pinned one
until it is approved (`Router.approve`) and reports `changes(pinned, offered)`,
one line per difference, so a rewritten description or a new required
argument is never applied silently and never reported as no change.
`PinStore` keeps pins between runs, so a definition changed between two runs
is held the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from decodeloop.errors import ConfigError
from decodeloop.mcp.client import Tool
from decodeloop.text.credentials import clip

PREVIEW = 80  # characters of a changed description quoted in the report


def definition(tool: Tool) -> dict[str, Any]:
    """The parts of a tool that reach the model or check its calls."""
    return {
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations,
    }


def fingerprint(tool: Tool) -> str:
    """sha256 of the definition as canonical JSON: equal exactly when the definitions are."""
    text = json.dumps(definition(tool), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def changes(pinned: Tool, offered: Tool) -> list[str]:
    """What differs between two definitions of one tool, as short lines; empty when they are equal."""
    out: list[str] = []
    if pinned.title != offered.title:
        out.append(f"title changed: {_preview(pinned.title)} → {_preview(offered.title)}")
    if pinned.description != offered.description:
        out.append(f"description changed: {_preview(pinned.description)} → {_preview(offered.description)}")
    if pinned.input_schema != offered.input_schema:
        out.append("inputSchema changed" + _schema_changes(pinned.input_schema, offered.input_schema))
    if pinned.output_schema != offered.output_schema:
        out.append("outputSchema changed" + _schema_changes(pinned.output_schema or {}, offered.output_schema or {}))
    before, after = pinned.annotations or {}, offered.annotations or {}
    if before != after:  # a hint the policy may believe (readOnlyHint) is part of the definition
        out.append(
            "annotations changed: "
            + ", ".join(
                f"{key} {json.dumps(before.get(key))} → {json.dumps(after.get(key))}"
                for key in sorted(set(before) | set(after))
                if before.get(key) != after.get(key)
            )
        )
    return out


def _schema_changes(old: dict, new: dict) -> str:
    """The properties added, removed or changed, and the required ones that came or went."""
    old_props, new_props = _object(old.get("properties")), _object(new.get("properties"))
    old_req, new_req = set(_list(old.get("required"))), set(_list(new.get("required")))
    parts = [f"+{name}" + (" (required)" if name in new_req else "") for name in new_props if name not in old_props]
    parts += [f"-{name}" for name in old_props if name not in new_props]
    parts += [f"~{name}" for name in new_props if name in old_props and new_props[name] != old_props[name]]
    parts += [f"{name} now required" for name in sorted(new_req - old_req) if name in old_props]
    parts += [f"{name} no longer required" for name in sorted(old_req - new_req) if name in new_props]
    return ": " + ", ".join(parts) if parts else ""


def _preview(text: str | None) -> str:
    if text is None:
        return "none"
    text = text if len(text) <= PREVIEW else clip(text, PREVIEW) + f"… ({len(text):,} chars)"
    return json.dumps(text, ensure_ascii=False)


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


class PinStore:
    """Pins kept between runs: one JSON file per server in a directory (`--pin-store DIR`).

    `DIR/SERVER.json` (the server's name reduced to file-name characters) holds
    `{"server": NAME, "tools": {TOOL: {"fingerprint": "sha256:…", "definition": {title, description,
    inputSchema, outputSchema, annotations}}}}`. A tool listed with another definition than its stored
    pin is held at the stored one until approved; a tool without a pin is pinned as first listed.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def path(self, server: str) -> str:
        return os.path.join(self.directory, re.sub(r"[^A-Za-z0-9_.-]", "_", server) + ".json")

    def load(self, server: str, make: Callable[..., Any]) -> dict[str, Any]:
        """The stored tools of a server, rebuilt with `make(name, definition)`; {} when none are stored."""
        try:
            with open(self.path(server), encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise PinStoreError(f"cannot read the pins of server {server} from {self.path(server)}: {exc}") from None
        tools = data.get("tools") if isinstance(data, dict) else None
        if not isinstance(tools, dict):
            raise PinStoreError(f'{self.path(server)}: expected {{"tools": {{...}}}}')
        return {
            name: make(name, entry["definition"])
            for name, entry in tools.items()
            if isinstance(entry, dict) and isinstance(entry.get("definition"), dict)
        }

    def save(self, server: str, tools: Iterable[Any]) -> None:
        """Store these tools as the server's pins (written whole, then renamed into place)."""
        os.makedirs(self.directory, exist_ok=True)
        data = {
            "server": server,
            "tools": {tool.name: {"fingerprint": fingerprint(tool), "definition": definition(tool)} for tool in tools},
        }
        path = self.path(server)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)


class PinStoreError(ConfigError):
    """The pin store cannot be read."""
