"""The wire shared by the MCP client and the remote engine: Server-Sent Events (sse.py) and HTTP pieces (http.py);
and URLs as a browser reads them (url.py), for what the user is shown before opening one.

A low layer: standard library only, it knows neither MCP nor models, and each caller turns its errors into its own.
"""
