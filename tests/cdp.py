"""A headless Chromium driven over the DevTools protocol, standard library only.

`Browser(binary)` starts the system Chromium with a debugging port, attaches to its page over a
WebSocket (a minimal client: text frames out, masked; frames in, fragmented or not) and offers what
the viewer's tests and bench need: open a file and wait for the page to say it is ready, evaluate
JavaScript (in the page, or in a frame Chromium runs apart from it, as it does a sandboxed one), press
keys, type, take a screenshot, and every console error and uncaught exception.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

GUARD = 60.0  # seconds a socket may stay silent before the browser is declared stuck (not a measurement)
POLL = 0.02  # seconds between two looks while waiting for the browser
TRIES = 3_000  # looks before a wait gives up (about GUARD seconds on an idle machine): a bound, never a measurement

KEYS = {
    "ArrowRight": 39,
    "ArrowLeft": 37,
    "ArrowUp": 38,
    "ArrowDown": 40,
    "End": 35,
    "Home": 36,
    "Enter": 13,
    "Escape": 27,
    "/": 191,
}


def find_chromium() -> str | None:
    """The browser a test may use: $DECODELOOP_CHROMIUM, else chromium on the PATH."""
    named = os.environ.get("DECODELOOP_CHROMIUM")
    if named:
        return named
    return shutil.which("chromium") or shutil.which("chromium-browser")


class WebSocket:
    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=GUARD)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the browser closed the WebSocket handshake")
            head += chunk
        status, _, self.buffer = head.partition(b"\r\n\r\n")
        if b" 101 " not in status.split(b"\r\n")[0] + b" ":
            raise ConnectionError(f"WebSocket handshake refused: {status[:200]!r}")

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the browser closed the WebSocket")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def send(self, text: str) -> None:
        payload, mask = text.encode(), os.urandom(4)
        n = len(payload)
        head = bytes([0x81]) + (
            bytes([0x80 | n])
            if n < 126
            else bytes([0x80 | 126]) + struct.pack(">H", n)
            if n < 65536
            else bytes([0x80 | 127]) + struct.pack(">Q", n)
        )
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("the browser closed the WebSocket")
            if opcode in (0x9, 0xA):  # ping, pong: not part of a message
                continue
            message += data
            if b0 & 0x80:
                return message.decode()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _poll(look, why):
    """`look()` until it gives something truthy, POLL seconds apart, at most TRIES times (then RuntimeError with
    `why()`): the waits count their looks and never read the clock."""
    for _ in range(TRIES):
        value = look()
        if value:
            return value
        time.sleep(POLL)
    raise RuntimeError(why())


class Browser:
    def __init__(self, binary: str, width: int = 1400, height: int = 900) -> None:
        self.profile = tempfile.mkdtemp(prefix="decodeloop-chromium-")
        self.proc = subprocess.Popen(
            [
                binary,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-port=0",
                "--remote-allow-origins=*",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.ws = None
        self.next_id = 0
        self._frames: dict[str, str] = {}  # a frame's target -> the session attached to it
        self.events: list[dict] = []
        try:
            port = self._port()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=GUARD) as r:
                targets = json.load(r)
            page = next(t for t in targets if t.get("type") == "page")
            self.ws = WebSocket(page["webSocketDebuggerUrl"])
            for domain in ("Page", "Runtime", "Log"):
                self.call(domain + ".enable")
        except BaseException:
            self.close()
            raise

    def _port(self) -> int:
        path = os.path.join(self.profile, "DevToolsActivePort")

        def port() -> int | None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with status {self.proc.returncode}")
            try:
                with open(path) as f:
                    first = f.readline().strip()
            except OSError:
                return None
            return int(first) if first.isdigit() else None

        return _poll(port, lambda: "chromium did not open its debugging port")

    def call(self, method: str, _session: str | None = None, **params) -> dict:
        """One DevTools command, to the page or to the target attached as `_session` (a frame of its own)."""
        self.next_id += 1
        mine = self.next_id
        message = {"id": mine, "method": method, "params": params}
        if _session is not None:
            message["sessionId"] = _session
        self.ws.send(json.dumps(message))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == mine:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def frame_evaluate(self, expression: str, index: int = -1):
        """Evaluate `expression` inside an iframe that Chromium runs apart from the page (a sandboxed frame with
        no origin of its own is one): the `index`th of those the page holds, by default the newest."""
        frames = [t for t in self.call("Target.getTargets")["targetInfos"] if t.get("type") == "iframe"]
        if not frames:
            raise RuntimeError("the page holds no frame of its own")
        target = frames[index]["targetId"]
        session = self._frames.get(target)
        if session is None:
            session = self._frames[target] = self.call("Target.attachToTarget", targetId=target, flatten=True)[
                "sessionId"
            ]
        result = self.call(
            "Runtime.evaluate", _session=session, expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def frame_wait_for(self, expression: str, index: int = -1):
        """`frame_evaluate` until it is truthy; its value. Until then an error counts as not yet: the frame may
        still be loading its page (or not be there yet)."""
        last: list[RuntimeError] = []

        def look():
            try:
                return self.frame_evaluate(expression, index)
            except RuntimeError as e:
                last[:] = [e]
                return None

        return _poll(
            look, lambda: f"waited in vain in a frame for {expression[:80]}: {last[0] if last else self.errors()}"
        )

    def open(self, path: str) -> None:
        """Load a file and wait until the page has rendered (it sets data-ready on its body)."""
        self.visit("file://" + os.path.abspath(path))

    def visit(self, url: str) -> None:
        """Load a URL and wait until the page has rendered (it sets data-ready on its body)."""
        self.call("Page.navigate", url=url)
        self.wait_for("!!(document.body && document.body.dataset.ready)")

    def wait_for(self, expression: str):
        """Evaluate `expression` until it is truthy; its value."""
        return _poll(
            lambda: self.evaluate(expression), lambda: f"waited in vain for {expression[:80]}: {self.errors()}"
        )

    def key(self, key: str) -> None:
        code = KEYS.get(key, ord(key.upper()) if len(key) == 1 else 0)
        text = key if len(key) == 1 else ""
        self.call("Input.dispatchKeyEvent", type="keyDown", key=key, windowsVirtualKeyCode=code, text=text)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key, windowsVirtualKeyCode=code)

    def type(self, text: str) -> None:
        self.call("Input.insertText", text=text)

    def screenshot(self, path: str) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions seen so far."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
