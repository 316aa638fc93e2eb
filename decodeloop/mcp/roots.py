"""The roots a client offers its servers: directories as `file://` URIs, each named after its folder.

A server asks for them with `roots/list` (a request on the session for
2025-11-25 and older, an input request of a result on 2026-07-28) and reads
them as the boundaries of the files it should work within; the client only
says where they are. Paths are made absolute and must exist, so a typo is a
ConfigError before any server starts, not a root that names nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from decodeloop.errors import ConfigError


def file_root(path: str) -> dict:
    """One root: {"uri": "file:///...", "name": its folder's name}; ConfigError when it does not exist."""
    absolute = Path(os.path.abspath(os.path.expanduser(path)))
    if not absolute.exists():
        raise ConfigError(f"root {path!r}: no such file or directory ({absolute})")
    return {"uri": absolute.as_uri(), "name": absolute.name or str(absolute)}


def file_roots(paths: Iterable[str] | None) -> list[dict]:
    """The roots for `paths`, in order, each once; None: the working directory alone."""
    roots: list[dict] = []
    for path in [os.getcwd()] if paths is None else paths:
        root = file_root(path)
        if root not in roots:
            roots.append(root)
    return roots
