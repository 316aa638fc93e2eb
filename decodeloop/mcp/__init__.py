"""MCP: the client side of the Model Context Protocol (revisions 2026-07-28 and 2025-11-25).

Three layers, each ignorant of the one above: transports move JSON messages
(transports/: stdio, Streamable HTTP, legacy SSE, memory), jsonrpc.py matches
requests to responses, client.py speaks MCP. The HTTP transports are imported
where they are used (`McpClient.connect_url`), so a stdio-only run never loads
http.client or ssl.
"""

from decodeloop.mcp.client import PROTOCOL_VERSION, STATELESS_VERSION, SUPPORTED_VERSIONS, McpClient, Tool, ToolResult
from decodeloop.mcp.jsonrpc import JsonRpcSession
from decodeloop.mcp.transports import MemoryTransport, StdioTransport, Transport

__all__ = [
    "PROTOCOL_VERSION",
    "STATELESS_VERSION",
    "SUPPORTED_VERSIONS",
    "JsonRpcSession",
    "McpClient",
    "MemoryTransport",
    "StdioTransport",
    "Tool",
    "ToolResult",
    "Transport",
]
