"""An MCP server written with the official Python SDK (`mcp` on PyPI), for the interop tests and the benchmark.

Run as `python3 sdk_server.py stdio` or `python3 sdk_server.py streamable-http PORT`
(or `sse PORT`). Its tools return every kind of content a tool result can hold:
text, an image, audio, a resource link, embedded text and binary resources,
structured content with an output schema, and an error result. `grow` adds a
tool while the server runs and tells the clients listening for that.
"""

from __future__ import annotations

import base64
import struct
import sys
import zlib

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Audio, Image
from pydantic import BaseModel

server = MCPServer("sdk-interop")


def png_1x1() -> bytes:
    """A valid one-pixel PNG, built here so no file is needed."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0\xff\0\0"))
        + chunk(b"IEND", b"")
    )


def wav_silence(samples: int = 800) -> bytes:
    data = b"\0\0" * samples
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 16000, 2, 16)
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )


class Weather(BaseModel):
    city: str
    temperature_c: int
    conditions: str


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def tiny_image() -> Image:
    """A one-pixel PNG."""
    return Image(data=png_1x1(), format="png")


@server.tool()
def beep() -> Audio:
    """A tenth of a second of silence as WAV."""
    return Audio(data=wav_silence(), format="wav")


@server.tool()
def report_link() -> types.ResourceLink:
    """A link to a report resource."""
    return types.ResourceLink(
        type="resource_link",
        name="report",
        uri="file:///reports/q3.pdf",
        mime_type="application/pdf",
        description="the third-quarter report",
    )


@server.tool()
def embedded() -> list[types.EmbeddedResource]:
    """An embedded text resource and an embedded binary one."""
    return [
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="file:///notes.txt", mime_type="text/plain", text="remember the milk"
            ),
        ),
        types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(
                uri="file:///data.bin",
                mime_type="application/octet-stream",
                blob=base64.b64encode(bytes(range(256)) * 4).decode(),
            ),
        ),
    ]


@server.tool()
def weather(city: str) -> Weather:
    """Structured weather for a city (with an output schema)."""
    return Weather(city=city, temperature_c=len(city) * 3 % 35, conditions="clear")


@server.tool()
def fail(reason: str) -> str:
    """Always fails, saying why."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
def big(megabytes: int) -> str:
    """A text result of that many megabytes."""
    return "y" * (megabytes * 1024 * 1024)


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Count to `steps`, reporting progress at each."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted to {steps}"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named `grown` and say so to every client listening for changed tools."""

    def grown() -> str:
        """A tool added while the server runs."""
        return "grown"

    server.add_tool(grown)
    await ctx.notify_tools_changed()
    return "added grown"


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    else:
        server.run(mode, host="127.0.0.1", port=int(sys.argv[2]))
