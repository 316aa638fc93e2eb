"""Where the BFCL wheel is, and reading files out of it.

The Berkeley Function Calling Leaderboard publishes its questions, possible
answers and checker in the PyPI package `bfcl-eval`. Its dependency tree is
heavy (a numpy pin, every provider's SDK, vLLM extras), and the suite needs
none of it, so the wheel is only ever downloaded, never installed:

    pip download --no-deps bfcl-eval==2026.3.23 -d $DECODELOOP_CACHE/bfcl

(run by `locate_wheel` when the file is missing; `$DECODELOOP_CACHE` defaults to
`~/.cache/decodeloop`). `DECODELOOP_BFCL_WHEEL=PATH` (or `eval --bfcl-wheel
PATH`) names a wheel file to use instead. The file is checked against the
SHA-256 of the release this code was written for, and files are read straight
from the zip: nothing is extracted or imported from it here.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile

PACKAGE = "bfcl-eval"
VERSION = "2026.3.23"
WHEEL_NAME = f"bfcl_eval-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"
WHEEL_ENV = "DECODELOOP_BFCL_WHEEL"


class BfclError(Exception):
    """Something about the BFCL data or checker that stops the suite: one line for the user."""


def cache_dir() -> str:
    """$DECODELOOP_CACHE/bfcl, by default ~/.cache/decodeloop/bfcl."""
    root = os.environ.get("DECODELOOP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "decodeloop")
    return os.path.join(root, "bfcl")


def locate_wheel(path: str | None = None, *, download: bool = True, cache: str | None = None) -> str:
    """The path of a checked bfcl-eval wheel: `path`, else $DECODELOOP_BFCL_WHEEL, else the cache's copy,
    downloaded there with `pip download --no-deps` when missing (and `download` allows it)."""
    path = path or os.environ.get(WHEEL_ENV)
    if path:
        if not os.path.isfile(path):
            raise BfclError(f"no BFCL wheel at {path!r}")
        return _checked(path)
    folder = cache or cache_dir()
    wheel = os.path.join(folder, WHEEL_NAME)
    if not os.path.isfile(wheel):
        if not download:
            raise BfclError(f"no BFCL wheel in {folder} (pip download --no-deps {PACKAGE}=={VERSION} -d {folder})")
        fetch_wheel(folder)
    return _checked(wheel)


def fetch_wheel(folder: str) -> str:
    """Download the wheel alone into `folder` with pip (its dependencies are never fetched)."""
    os.makedirs(folder, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        f"{PACKAGE}=={VERSION}",
        "-d",
        folder,
    ]
    print(f"decodeloop: downloading {PACKAGE}=={VERSION} (the wheel only) into {folder}", file=sys.stderr)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BfclError(f"cannot run pip to download {PACKAGE}=={VERSION}: {e}") from None
    wheel = os.path.join(folder, WHEEL_NAME)
    if done.returncode != 0 or not os.path.isfile(wheel):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BfclError(
            f"pip download {PACKAGE}=={VERSION} failed: {last} (or give a wheel you have with {WHEEL_ENV}=PATH)"
        )
    return wheel


def _checked(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != WHEEL_SHA256:
        raise BfclError(
            f"{path} is not the {PACKAGE} {VERSION} wheel (SHA-256 {digest.hexdigest()}, expected {WHEEL_SHA256})"
        )
    return path


class Wheel:
    """An open wheel: its files by their path inside the zip."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._zip = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as e:
            raise BfclError(f"cannot open the BFCL wheel {path}: {e}") from None
        self._names = set(self._zip.namelist())

    def has(self, member: str) -> bool:
        return member in self._names

    def read_text(self, member: str) -> str:
        if member not in self._names:
            raise BfclError(f"the BFCL wheel {os.path.basename(self.path)} has no {member}")
        return self._zip.read(member).decode("utf-8")

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> Wheel:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
