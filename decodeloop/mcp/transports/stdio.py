"""The stdio transport: an MCP server as a child process speaking on its pipes.

This module owns the process and its three pipes. Messages are UTF-8 JSON, one
per line, never containing a raw newline. One thread reads stdout and hands each
parsed message on; a second drains stderr all the time, so a server that logs a
lot can never fill the pipe and stall, and keeps the last lines for error
messages. Shutdown follows the MCP stdio transport: close the server's stdin,
wait, SIGTERM, wait, SIGKILL.
"""

from __future__ import annotations

import collections
import io
import json
import os
import signal
import subprocess
import threading
import time
from typing import Callable

from decodeloop.mcp.errors import ConnectionClosed
from decodeloop.mcp.transports.base import Message

READ_BUFFER = 1 << 20  # large reads keep a 20 MB response line cheap
STDERR_RING = 20  # stderr lines remembered for error messages
STDERR_IN_ERRORS = 5  # of those, how many an error message shows
MAX_STDERR_LINE = 64 * 1024  # a longer stderr "line" is taken in pieces
SHOWN_CHARS = 200  # how much of one line a preview or error message shows
REAP_BUDGET = 1.0  # after EOF, how long at most to wait for the exit code and last stderr (a loaded machine needs the margin)
JOIN_TIMEOUT = 1.0  # bound on joining reader threads in close()


def encode_message(message: dict) -> bytes:
    """One message as one line; json.dumps escapes control characters, so no newline leaks in."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def preview(line: bytes) -> str:
    """A short printable excerpt of a raw line, for warnings."""
    text = line[: SHOWN_CHARS * 4].decode("utf-8", errors="replace").rstrip("\r\n")
    if len(text) > SHOWN_CHARS or len(line) > SHOWN_CHARS * 4:
        text = f"{text[:SHOWN_CHARS]}... ({len(line)} bytes)"
    return text


def describe_exit(code: int | None) -> str:
    if code is None:
        return "server closed its output"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"server was killed by {name} (exit code {code})"
    return f"server exited with code {code}"


class StdioTransport:
    """Runs `command` and exchanges newline-delimited JSON with it over stdin/stdout.

    `env` adds to (and overrides) the parent's environment rather than replacing
    it, so a server still finds PATH and HOME. `on_stderr` receives each stderr
    line from the drain thread.
    """

    def __init__(
        self,
        command: list[str],
        env: dict | None = None,
        cwd: str | None = None,
        on_stderr: Callable[[str], None] | None = None,
        close_timeout: float = 2.0,
    ) -> None:
        self.command = list(command)
        self.env = env
        self.cwd = cwd
        self.on_stderr = on_stderr
        self.close_timeout = close_timeout
        self._proc: subprocess.Popen | None = None
        self._stdin = None
        self._stdout: io.BufferedReader | None = None
        self._stderr: io.BufferedReader | None = None
        self._stdout_thread: threading.Thread | None = None
        self._stderr_thread: threading.Thread | None = None
        self._send_lock = threading.Lock()  # one writer at a time keeps lines whole
        self._state_lock = threading.Lock()
        self._closing = False
        self._closed_reason: str | None = None  # why the connection ended, once it has
        self._ended = threading.Event()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_RING)

    # -- lifecycle -------------------------------------------------------------

    def start(
        self,
        on_message: Callable[[Message], None],
        on_close: Callable[[str], None],
        on_garbage: Callable[[str], None],
    ) -> None:
        if self._proc is not None:
            raise RuntimeError("StdioTransport.start() called twice")
        self._proc = self._spawn()
        self._stdin = self._proc.stdin
        self._stdout = io.BufferedReader(self._proc.stdout, buffer_size=READ_BUFFER)
        self._stderr = io.BufferedReader(self._proc.stderr, buffer_size=MAX_STDERR_LINE)
        name = os.path.basename(self.command[0])
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, name=f"mcp-stderr-{name}", daemon=True
        )
        self._stdout_thread = threading.Thread(
            target=self._read_stdout,
            args=(on_message, on_close, on_garbage),
            name=f"mcp-stdout-{name}",
            daemon=True,
        )
        self._stderr_thread.start()
        self._stdout_thread.start()

    def _spawn(self) -> subprocess.Popen:
        if not self.command:
            raise ConnectionClosed("cannot start MCP server: the command is empty")
        program = self.command[0]
        if self.cwd is not None and not os.path.isdir(self.cwd):
            raise ConnectionClosed(
                f"cannot start MCP server {program!r}: working directory {self.cwd!r} does not exist"
            )
        env = None if self.env is None else {**os.environ, **self.env}
        try:
            # Unbuffered pipes: stdin is written whole by send(), stdout and
            # stderr get their own buffered readers above.
            return subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env=env,
                cwd=self.cwd,
            )
        except FileNotFoundError:
            problem = "command not found"
        except PermissionError:
            problem = "permission denied (is it executable?)"
        except OSError as exc:
            problem = exc.strerror or str(exc)
        # Raised outside the except blocks so no OS traceback is chained on.
        raise ConnectionClosed(f"cannot start MCP server {program!r}: {problem}")

    def close(self) -> None:
        with self._state_lock:
            if self._closing:
                return
            self._closing = True
        proc = self._proc
        if proc is None:
            return
        # Closing stdin is the polite request to exit. A sender stuck on a full
        # pipe holds the lock; then skip ahead, termination will free it.
        stdin_closed = self._close_stdin(wait=0.1)
        if not _wait(proc, self.close_timeout):
            proc.terminate()
            if not _wait(proc, self.close_timeout):
                proc.kill()
                _wait(proc, self.close_timeout)
        if not stdin_closed:
            self._close_stdin(wait=JOIN_TIMEOUT)
        for thread, stream in ((self._stdout_thread, self._stdout), (self._stderr_thread, self._stderr)):
            if thread is None or thread is threading.current_thread():
                continue
            thread.join(JOIN_TIMEOUT)
            # A grandchild may still hold the pipe open; never close a stream
            # under a thread that is still reading it.
            if not thread.is_alive():
                stream.close()

    def _close_stdin(self, wait: float) -> bool:
        if not self._send_lock.acquire(timeout=wait):
            return False
        try:
            self._stdin.close()
        except OSError:
            pass  # the server already closed its end
        finally:
            self._send_lock.release()
        return True

    # -- sending -----------------------------------------------------------------

    def send(self, message: dict) -> None:
        data = encode_message(message)
        with self._send_lock:
            if self._closed_reason is not None:
                raise ConnectionClosed(self._closed_reason)
            if self._stdin is None or self._stdin.closed:
                raise ConnectionClosed("the connection to the server is closed")
            try:
                view = memoryview(data)
                while view:
                    written = self._stdin.write(view)
                    view = view[written:]
            except (OSError, ValueError) as exc:
                failure = f"cannot write to server: {exc}"
            else:
                return
        # The pipe broke because the server is dying: give the reader a moment
        # to learn the exit code, which says far more than EPIPE does.
        self._ended.wait(2 * REAP_BUDGET)
        raise ConnectionClosed(self._closed_reason or failure)

    # -- reader threads ------------------------------------------------------------

    def _read_stdout(
        self,
        on_message: Callable[[Message], None],
        on_close: Callable[[str], None],
        on_garbage: Callable[[str], None],
    ) -> None:
        failure = None
        try:
            for line in self._stdout:
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)  # bytes in: no str copy of a huge line
                except ValueError:  # bad JSON or bad UTF-8
                    on_garbage(preview(line))
                    continue
                if isinstance(message, (dict, list)):
                    on_message(message)
                else:
                    on_garbage(preview(line))
        except Exception as exc:  # a failing callback must still end the session cleanly
            failure = f"reading from server failed: {exc!r}"
        finally:
            reason = self._finish(failure)
            try:
                on_close(reason)
            except Exception:
                pass

    def _finish(self, failure: str | None) -> str:
        """Called at EOF: reap the process briefly and compose the reason the connection ended."""
        deadline = time.monotonic() + REAP_BUDGET
        try:
            code = self._proc.wait(timeout=REAP_BUDGET)
        except subprocess.TimeoutExpired:
            code = None
        # The last stderr lines are usually the useful ones; let the drain catch up.
        self._stderr_thread.join(max(0.0, deadline - time.monotonic()))
        reason = failure or describe_exit(code)
        if self._closing:
            reason = f"connection closed by the client ({reason})"
        tail = list(self._stderr_tail)[-STDERR_IN_ERRORS:]
        if tail:
            reason += "; last stderr lines:\n" + "\n".join(f"  {line}" for line in tail)
        self._closed_reason = reason
        self._ended.set()
        return reason

    def _drain_stderr(self) -> None:
        try:
            while True:
                line = self._stderr.readline(MAX_STDERR_LINE)
                if not line:
                    return
                text = line.rstrip(b"\r\n").decode("utf-8", errors="replace")
                self._stderr_tail.append(text[:SHOWN_CHARS])
                if self.on_stderr is not None:
                    try:
                        self.on_stderr(text)
                    except Exception:
                        pass  # a broken log sink must not stop the drain
        except (OSError, ValueError):
            return  # stream closed under us during shutdown

    # -- introspection ---------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    @property
    def stderr_tail(self) -> list[str]:
        """The last lines the server wrote to stderr (each cut to a preview)."""
        return list(self._stderr_tail)


def _wait(proc: subprocess.Popen, timeout: float) -> bool:
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False
