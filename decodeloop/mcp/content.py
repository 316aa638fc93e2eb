"""What an MCP server's answers become: tools, tool results, resources, prompts, completions.

The client (client.py) asks; this module owns the shapes it hands back, and how each content item reads
as text for a model (`content_text`, `ResourceContents.text`): text verbatim, a blob or an image never as
base64, only described by its type and size, which is all a text model can use of it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tool:
    name: str
    description: str
    input_schema: dict
    output_schema: dict | None = None
    title: str | None = None
    header_params: dict | None = None  # x-mcp-header marks: argument path -> header name part
    annotations: dict | None = None  # readOnlyHint, destructiveHint, ...: hints, believed only from trusted servers
    ui: str | None = None  # MCP Apps: the ui:// resource holding the tool's own interface (its _meta.ui.resourceUri)
    visibility: tuple[str, ...] = ("model", "app")  # MCP Apps: who may call it (the model, its app's page)


@dataclass
class ToolResult:
    content: list[dict]
    is_error: bool
    structured: dict | None = None

    def text(self) -> str:
        """The result as text for a model: text items verbatim, anything else as a short placeholder."""
        return "\n".join(content_text(item) for item in self.content)


@dataclass
class Resource:
    uri: str
    name: str
    description: str = ""
    mime_type: str | None = None
    title: str | None = None
    size: int | None = None  # bytes, when the server says


@dataclass
class ResourceTemplate:
    uri_template: str  # RFC 6570, e.g. weather://forecast/{state}/{city}
    name: str
    description: str = ""
    mime_type: str | None = None
    title: str | None = None


@dataclass
class ResourceContents:
    uri: str  # the URI that was read
    contents: list[dict]  # the items of resources/read: {"uri", "mimeType", "text" or "blob"}

    def text(self) -> str:
        """The contents as text for a model: text verbatim, a blob of a text type decoded, any other blob
        described by its type and size; several items each under a line naming its URI."""
        if len(self.contents) == 1:
            return resource_item_text(self.contents[0])
        return "\n".join(f"[{item.get('uri', self.uri)}]\n" + resource_item_text(item) for item in self.contents)


@dataclass
class PromptArgument:
    name: str
    description: str = ""
    required: bool = False
    title: str | None = None


@dataclass
class Prompt:
    name: str
    description: str = ""
    arguments: list[PromptArgument] = field(default_factory=list)
    title: str | None = None

    def missing(self, arguments: dict) -> list[str]:
        """The required arguments `arguments` lacks, in the prompt's order."""
        return [a.name for a in self.arguments if a.required and a.name not in arguments]


@dataclass
class PromptMessage:
    role: str  # "user" or "assistant"
    content: dict  # one content item: text, image, audio, resource (embedded), resource_link


@dataclass
class PromptResult:
    name: str
    description: str
    messages: list[PromptMessage]


@dataclass
class Completion:
    values: list[str]  # at most 100, the specification says
    total: int | None = None
    has_more: bool = False


def prompt_ref(name: str) -> dict:
    """What `complete` takes to complete an argument of a prompt."""
    return {"type": "ref/prompt", "name": name}


def resource_ref(uri_template: str) -> dict:
    """What `complete` takes to complete a variable of a resource template."""
    return {"type": "ref/resource", "uri": uri_template}


TEXT_TYPES = ("application/json", "application/xml", "application/yaml", "application/javascript")


def is_textual(mime: Any) -> bool:
    return isinstance(mime, str) and (mime.startswith("text/") or mime.split(";")[0].strip() in TEXT_TYPES)


def resource_item_text(item: dict) -> str:
    if isinstance(item.get("text"), str):
        return item["text"]
    blob, mime = item.get("blob"), item.get("mimeType")
    if isinstance(blob, str) and is_textual(mime):
        try:
            return base64.b64decode(blob, validate=False).decode("utf-8", errors="replace")
        except ValueError:
            pass  # not base64 after all: described below, like any other blob
    return f"[binary {mime or 'of unknown type'}, {decoded_size(blob)} bytes]"


def content_text(item: dict) -> str:
    """One content item as text: never base64, which would only fill the context with noise."""
    kind = item.get("type")
    if kind == "text":
        return str(item.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind} {item.get('mimeType', 'unknown type')}, {decoded_size(item.get('data'))} bytes]"
    if kind == "resource_link":
        label = " ".join(str(part) for part in (item.get("name"), item.get("uri")) if part)
        if item.get("mimeType"):
            label += f" ({item['mimeType']})"
        description = item.get("description")
        return f"[resource link {label}]" + (f" {description}" if isinstance(description, str) and description else "")
    if kind == "resource":
        resource = item.get("resource")
        if not isinstance(resource, dict):
            resource = {}
        uri, mime = resource.get("uri", ""), resource.get("mimeType")
        if isinstance(resource.get("text"), str):
            # the URI first: the model may want to say where the text came from
            return f"[resource {uri}" + (f" ({mime})" if mime else "") + "]\n" + resource["text"]
        return f"[resource {uri} {mime or 'unknown type'}, {decoded_size(resource.get('blob'))} bytes]"
    return f"[{kind or 'untyped'} content]"


def decoded_size(data: Any) -> int:
    """Size in bytes of base64 data, without decoding it."""
    if not isinstance(data, str):
        return 0
    data = data.strip()
    return len(data) * 3 // 4 - data[-2:].count("=")
