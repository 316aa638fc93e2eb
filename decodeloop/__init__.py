"""decodeloop: the harness around a language model that calls MCP tools.

The model maps tokens to next-token logits; everything else (sampling, stopping,
recognising and parsing tool calls, the MCP round trip, injecting the result and
resuming over the KV cache) lives in this package. Start reading at loop.py.
"""

__version__ = "0.1.0"
