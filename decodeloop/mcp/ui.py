"""MCP Apps on the client's side: what a tool listing says of its app, and what the client declares.

A tool names its interface in `_meta.ui.resourceUri` (a `ui://` resource; the older flat key
`_meta["ui/resourceUri"]` is read too) and who may call it in `_meta.ui.visibility` ("model", "app").
The host declares the extension under `capabilities.extensions` with the mime type it shows. Reading and
showing the app is the harness's (tools/apps.py) and the pages' (the viewer, the studio).
"""

from __future__ import annotations

EXTENSION = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
CAPABILITY = {EXTENSION: {"mimeTypes": [MIME]}}  # what the client declares under capabilities.extensions


def ui_of(raw: dict) -> tuple[str | None, tuple[str, ...]]:
    """A tool listing's app: its ui:// resource (`_meta.ui.resourceUri`, or the older flat `ui/resourceUri`),
    and who may call it (`_meta.ui.visibility`: "model", "app"; both when it says nothing)."""
    meta = raw.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    ui = meta.get("ui")
    ui = ui if isinstance(ui, dict) else {}
    uri = ui.get("resourceUri", meta.get("ui/resourceUri"))
    visibility = ui.get("visibility")
    seen = (
        tuple(v for v in ("model", "app") if v in visibility)
        if isinstance(visibility, list) and all(isinstance(v, str) for v in visibility)
        else ("model", "app")
    )
    return (uri if isinstance(uri, str) and uri.startswith("ui://") else None), seen
