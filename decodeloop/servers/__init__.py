"""Bundled MCP servers, standard library only, each runnable as `python3 -m decodeloop.servers.NAME`.

base.py is the small framework they share (tool registry, MCP dispatch, stdio loop).
"""
