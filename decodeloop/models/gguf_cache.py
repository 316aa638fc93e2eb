"""The conversion cache of `.gguf` files for `hf:`: a GGUF is de-quantized once, then loaded as safetensors.

transformers reads a `.gguf` by de-quantizing every tensor, every time (the times
are in docs/real-models.md). `models/hf.py` converts a file once and keeps what it
loaded (weights in float32 as safetensors, tokenizer files, chat template, config,
generation config) in a folder named after the file's SHA-256:

    $DECODELOOP_CACHE/hf-gguf/<sha256>/      (default DECODELOOP_CACHE: ~/.cache/decodeloop)

This module owns that folder, standard library only:

- `file_sha256(path)`: the file's SHA-256, remembered in `hf-gguf/hashes.json`
  under (absolute path, size, mtime), so a warm start does not read the whole
  file again.
- `lookup(sha)`: the folder of a finished conversion, or None.
- `store(sha, write, about)`: `write(folder)` fills a temporary folder in the
  cache, then a marker file is written and the folder is renamed into place,
  so an interrupted conversion never leaves a folder that `lookup` returns.
- `discard(folder)`: a cached conversion that failed to load, removed.

Nothing here imports torch or transformers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable

MARKER = "decodeloop-conversion.json"  # written last: a folder without it is not a conversion
STALE_SECONDS = 6 * 3600  # a temporary folder this old is an interrupted conversion


def cache_root() -> str:
    """The folder of the conversions (created when first written)."""
    base = os.environ.get("DECODELOOP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "decodeloop")
    return os.path.join(base, "hf-gguf")


def file_sha256(path: str) -> str:
    """The SHA-256 of a file, remembered by (absolute path, size, mtime) so it is read once."""
    path = os.path.abspath(path)
    stat = os.stat(path)
    key = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    hashes = _read_hashes()
    known = hashes.get(path)
    if isinstance(known, dict) and {k: known.get(k) for k in key} == key and isinstance(known.get("sha256"), str):
        return known["sha256"]
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    sha = digest.hexdigest()
    hashes[path] = {**key, "sha256": sha}
    _write_json(os.path.join(cache_root(), "hashes.json"), hashes)
    return sha


def _read_hashes() -> dict:
    try:
        with open(os.path.join(cache_root(), "hashes.json"), encoding="utf-8") as f:
            hashes = json.load(f)
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: the files are hashed again
    return hashes if isinstance(hashes, dict) else {}


def _write_json(path: str, value) -> None:
    """Write a JSON file atomically; a cache that cannot be written is only slower, so errors are ignored."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".hashes-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=1, sort_keys=True)
        os.replace(temporary, path)
    except OSError:
        pass


def lookup(sha: str) -> str | None:
    """The folder of a finished conversion of the file with this SHA-256, or None."""
    folder = os.path.join(cache_root(), sha)
    return folder if os.path.isfile(os.path.join(folder, MARKER)) else None


def store(sha: str, write: Callable[[str], None], about: dict) -> str:
    """Fill a temporary folder with `write(folder)`, mark it with `about` and rename it into place; the
    folder's path. Raises OSError when the cache cannot be written; whatever `write` raises is raised,
    and nothing is left behind either way."""
    root = cache_root()
    os.makedirs(root, exist_ok=True)
    _remove_stale(root)
    temporary = tempfile.mkdtemp(dir=root, prefix=f".{sha}.tmp-")
    try:
        write(temporary)
        with open(os.path.join(temporary, MARKER), "w", encoding="utf-8") as f:
            json.dump({**about, "sha256": sha, "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f, indent=1)
        final = os.path.join(root, sha)
        try:
            os.rename(temporary, final)
        except OSError:
            if lookup(sha) is None:  # not another process's finished conversion: a real failure
                raise
        return final
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def discard(folder: str) -> None:
    """Remove a cached conversion (one that failed to load): renamed away first, so it is never half there."""
    trash = tempfile.mkdtemp(dir=os.path.dirname(folder), prefix=f".{os.path.basename(folder)}.tmp-")
    os.replace(folder, os.path.join(trash, "old"))
    shutil.rmtree(trash, ignore_errors=True)


def _remove_stale(root: str) -> None:
    """Temporary folders left by conversions that were interrupted long ago."""
    now = time.time()
    for name in os.listdir(root):
        path = os.path.join(root, name)
        try:
            if (
                name.startswith(".")
                and ".tmp-" in name
                and os.path.isdir(path)
                and now - os.path.getmtime(path) > STALE_SECONDS
            ):
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


__all__ = ["MARKER", "cache_root", "discard", "file_sha256", "lookup", "store"]
