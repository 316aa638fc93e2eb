"""An MCP server written with the official Python SDK whose tools take the argument shapes pydantic emits.

Run as `python3 sdk_arguments.py` (stdio). Optional parameters become
`{"anyOf": [{"type": T}, {"type": "null"}]}`, a pydantic model becomes a `$ref`
into `$defs` (a model inside a model too), and each tool answers with the
arguments it received and their Python types, after the SDK validated them.
"""

from __future__ import annotations

import json
from typing import Literal

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

server = MCPServer("sdk-arguments")


class Point(BaseModel):
    x: int
    y: float = 0.0
    label: str | None = None


class Box(BaseModel):
    corner: Point
    tags: list[str] = []


def described(**arguments) -> str:
    """The arguments as JSON, each with its Python type, so the test sees what validation made of them."""
    return json.dumps(
        {
            name: [value.model_dump() if isinstance(value, BaseModel) else value, type(value).__name__]
            for name, value in arguments.items()
        },
        sort_keys=True,
    )


@server.tool()
def search(
    query: str,
    limit: int | None = None,
    tags: list[str] | None = None,
    exact: bool | None = None,
    mode: Literal["fast", "full"] | None = None,
) -> str:
    """Search with optional parameters of every kind."""
    return described(query=query, limit=limit, tags=tags, exact=exact, mode=mode)


@server.tool()
def place(point: Point, others: list[Point] | None = None) -> str:
    """A pydantic model as an argument, and an optional list of them."""
    return described(point=point, others=[p.model_dump() for p in others] if others is not None else None)


@server.tool()
def pack(box: Box | None = None, scale: float | int = 1) -> str:
    """An optional model holding another model; a number that may be a float or an int."""
    return described(box=box, scale=scale)


if __name__ == "__main__":
    server.run("stdio")
