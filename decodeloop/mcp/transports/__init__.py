"""Transports: how JSON-RPC messages reach an MCP server (a child process or an in-process twin)."""

from decodeloop.mcp.transports.base import Transport
from decodeloop.mcp.transports.memory import MemoryTransport
from decodeloop.mcp.transports.stdio import StdioTransport

__all__ = ["MemoryTransport", "StdioTransport", "Transport"]
