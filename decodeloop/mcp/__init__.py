"""MCP: the client side of the Model Context Protocol (revision 2025-11-25).

Three layers, each ignorant of the one above: transports move JSON lines
(transports/), jsonrpc.py matches requests to responses, client.py speaks MCP.
"""

from decodeloop.mcp.client import PROTOCOL_VERSION, SUPPORTED_VERSIONS, McpClient, Tool, ToolResult
from decodeloop.mcp.errors import ConnectionClosed, McpError, ProtocolError, RequestTimeout, RpcError
from decodeloop.mcp.jsonrpc import JsonRpcSession
from decodeloop.mcp.transports import MemoryTransport, StdioTransport, Transport

__all__ = [
    "McpClient",
    "Tool",
    "ToolResult",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "JsonRpcSession",
    "Transport",
    "StdioTransport",
    "MemoryTransport",
    "McpError",
    "RpcError",
    "RequestTimeout",
    "ConnectionClosed",
    "ProtocolError",
]
