"""Shared test helpers: real servers, real models, events collected from real turns."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
# the tests mirror the package's folders and borrow helpers from each other by module name (test_cli.run,
# test_viewer.embedded, ...): every folder of tests is on the path, as the one they sit in is
sys.path[1:1] = [
    os.path.join(TESTS, name)
    for name in sorted(os.listdir(TESTS))
    if name not in ("servers", "__pycache__") and os.path.isdir(os.path.join(TESTS, name))
]
FAULTY = [sys.executable, os.path.join(ROOT, "tests", "servers", "faulty.py")]
WEATHER = [sys.executable, "-m", "decodeloop.servers.weather"]
UNITS = [sys.executable, "-m", "decodeloop.servers.units"]
WIRES = ("2025-11-25", "2026-07-28")  # the two MCP revisions: initialize, and the stateless one


def stdio_client(command, protocol, name="server", sent=None):
    """A started McpClient over stdio at `protocol`; the methods it sends are appended to `sent` when given."""
    from decodeloop.mcp import McpClient

    def traffic(direction, message):
        if sent is not None and direction == "send":
            sent.append(message.get("method"))

    return McpClient.start_stdio(command, protocol=protocol, name=name, timeout=30, on_traffic=traffic)


class Recorder(list):
    """An event sink that keeps every event; `of(kind)` filters."""

    def __call__(self, event) -> None:
        self.append(event)

    def of(self, kind: str) -> list:
        return [e for e in self if e.kind == kind]


@pytest.fixture
def events() -> Recorder:
    return Recorder()


HTTP_FAULTY = [sys.executable, os.path.join(ROOT, "tests", "servers", "http_faulty.py")]
HTTP_ECHO = [sys.executable, os.path.join(ROOT, "tests", "servers", "http_echo.py")]


class HttpServer:
    """A server process that prints its port on its first line of stdout (http_faulty.py unless `command`)."""

    def __init__(self, *args: str, command: list[str] = HTTP_FAULTY) -> None:
        import subprocess

        self.proc = subprocess.Popen([*command, *args], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"test HTTP server did not start: {line!r}")
        self.port = int(line)
        self.url = f"http://127.0.0.1:{self.port}"

    def seen(self) -> list[dict]:
        """Every request the server received, in order."""
        import json
        import urllib.request

        with urllib.request.urlopen(self.url + "/seen", timeout=5) as response:
            return [r for r in json.load(response) if r["path"] != "/seen"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except Exception:
            self.proc.kill()


@pytest.fixture
def http_server():
    started: list[HttpServer] = []

    def start(*args: str) -> HttpServer:
        started.append(HttpServer(*args))
        return started[-1]

    yield start
    for server in started:
        server.stop()


APP_PROBES = ("parent.document", "top.location", "cookie", "localStorage", "fetch", "host api")  # apps.py widget


def app_probes_blocked(said: list[str]) -> None:
    """Each escape the hostile app (tests/servers/apps.py) tries is reported by it as blocked, once."""
    for probe in APP_PROBES:
        [line] = [s for s in said if s.startswith(f"the app says: probe {probe}: ")]
        assert ": blocked (" in line, line


NPM_PREFIX = os.path.join(ROOT, ".cache", "npm")  # the npm servers no one here wrote, installed once


def npm_package(name: str, version: str) -> str:
    """The directory of npm package `name` at `version` under .cache/npm, installed with npm if it is not there.
    A failed install fails the test, unless DECODELOOP_OFFLINE=1 says to skip it."""
    import json
    import subprocess

    where = os.path.join(NPM_PREFIX, "node_modules", *name.split("/"))
    try:
        with open(os.path.join(where, "package.json")) as f:
            installed = json.load(f).get("version")
    except (OSError, ValueError):
        installed = None
    if installed == version:
        return where
    command = ["npm", "install", "--prefix", NPM_PREFIX, "--no-audit", "--no-fund", f"{name}@{version}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        problem = None if done.returncode == 0 else (done.stderr or done.stdout)[-2000:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    if problem is not None:
        if os.environ.get("DECODELOOP_OFFLINE") == "1":
            pytest.skip(f"DECODELOOP_OFFLINE=1 and npm install of {name} failed: {problem}")
        pytest.fail(f"npm install of {name}@{version} failed (set DECODELOOP_OFFLINE=1 to skip):\n{problem}")
    return where


# MCP Apps' own example server (github.com/modelcontextprotocol/ext-apps): `get-time`, whose page (about 218,000
# characters, its framework bundled in) shows the time its result holds and can call the tool again
BASIC_APP_VERSION = "2.0.3"


@pytest.fixture(scope="session")
def basic_app() -> list[str]:
    """The stdio command of @modelcontextprotocol/server-basic-vanillajs, installed if it is not yet."""
    where = npm_package("@modelcontextprotocol/server-basic-vanillajs", BASIC_APP_VERSION)
    return ["node", os.path.join(where, "dist", "index.js"), "--stdio"]
