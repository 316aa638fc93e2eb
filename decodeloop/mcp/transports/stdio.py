"""The stdio transport: an MCP server as a child process speaking on its pipes.

This module owns the process, its process group and its three pipes. Messages
are UTF-8 JSON, one per line, never containing a raw newline. Three threads:
one reads stdout and hands each parsed message on; one drains stderr all the
time, so a server that logs a lot can never fill the pipe and stall, and keeps
the last lines for error messages; one waits for the process to exit.

Reading is bounded. A line is read into a buffer of its own and decoded before
it is parsed, so a large message costs its text and its parsed form (about
twice its size), and a line longer than `max_message_bytes` (64 MB by default)
is not kept at all: the rest of it is read and dropped, only its first and
last few kilobytes are kept to tell which response it was, and that request
fails at once with an error naming the cap. A message that cannot be read (not
UTF-8, not JSON, nested too deeply) is skipped with a notice; if it shows which
response it was, that request fails at once, with the reason. The session goes
on in every case.

The process, not only the pipe: a server that exits while a process it started
still holds its stdout would leave the pipe open. When the server has exited
and the pipe has carried nothing for a moment, the session ends with the exit
code, and the server's process group (each server runs in its own) is ended.
Shutdown follows the MCP stdio transport: close the server's stdin, wait,
SIGTERM, wait, SIGKILL, each signal to the whole group; then whatever is left
of the group is ended too.
"""

from __future__ import annotations

import collections
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any, cast

from decodeloop.errors import ConnectionClosed, McpError, ProtocolError
from decodeloop.mcp import framing
from decodeloop.mcp.framing import DEFAULT_MAX_MESSAGE_BYTES, Unreadable
from decodeloop.mcp.transports.base import Message, Transport, Wire

READ_SIZE = 1 << 20  # the most one read takes from the pipe
PIPE_SIZE = 1 << 20  # asked of the kernel for the stdout pipe (Linux), so a large message takes fewer reads
STDERR_RING = 20  # stderr lines remembered for error messages
STDERR_IN_ERRORS = 5  # of those, how many an error message shows
MAX_STDERR_LINE = 64 * 1024  # a longer stderr "line" is taken in pieces
SHOWN_CHARS = 200  # how much of one line a preview or error message shows
REAP_BUDGET = (
    1.0  # after EOF, how long at most to wait for the exit code and last stderr (a loaded machine needs the margin)
)
JOIN_TIMEOUT = 1.0  # bound on joining reader threads in close()
GROUPS = hasattr(os, "killpg")  # each server in its own process group (POSIX)


def encode_message(message: dict) -> bytes:
    """One message as one line; json.dumps escapes control characters, so no newline leaks in."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def preview(line: bytes | bytearray) -> str:
    """A short printable excerpt of a raw line, for warnings."""
    return framing.preview(line)


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


def too_large(size: int, cap: int, ended: bool) -> str:
    return f"{'' if ended else 'at least '}{size:,} bytes, over the {cap:,}-byte cap on one message (max_message_bytes)"


class _Skipped:
    """A line over the cap, being read and dropped: its size, its first and last EDGE bytes."""

    def __init__(self, start: bytes | bytearray | memoryview) -> None:
        self.head = bytes(start[: framing.EDGE])
        self.tail = bytes(start[-framing.EDGE :])
        self.size = len(start)
        self.reported: Any = None  # the request already failed, if the head named it

    def add(self, more: memoryview) -> None:
        self.size += len(more)
        if len(more) >= framing.EDGE:
            self.tail = bytes(more[-framing.EDGE :])
        elif more:
            self.tail = (self.tail + bytes(more))[-framing.EDGE :]


DEFAULT_ENVIRONMENT = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def default_environment() -> dict[str, str]:
    """The part of the harness's environment a server inherits: the default set, less shell functions."""
    return {
        key: value
        for key in DEFAULT_ENVIRONMENT
        if (value := os.environ.get(key)) is not None and not value.startswith("()")
    }


class StdioTransport(Transport):
    """Runs `command` and exchanges newline-delimited JSON with it over stdin/stdout.

    The server gets a small default environment (`default_environment`: HOME,
    LOGNAME, PATH, SHELL, TERM, USER, as the official SDKs pass) plus `env`,
    which overrides it; nothing else of the harness's environment (its secrets
    included) reaches the server. `on_stderr` receives each stderr
    line from the drain thread. `max_message_bytes` caps one message from the
    server (64 MB by default).
    """

    wire: Wire = "stdio"

    def __init__(
        self,
        command: list[str],
        env: dict | None = None,
        cwd: str | None = None,
        on_stderr: Callable[[str], None] | None = None,
        close_timeout: float = 2.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        if max_message_bytes < 1:
            raise ValueError("max_message_bytes must be positive")
        self.command = list(command)
        self.env = env
        self.cwd = cwd
        self.on_stderr = on_stderr
        self.close_timeout = close_timeout
        self.max_message_bytes = max_message_bytes
        self._proc: subprocess.Popen | None = None
        self._group: int | None = None  # the server's process group, when it has its own
        self._stdin: IO[bytes] | None = None
        self._stdout: io.RawIOBase | None = None
        self._stderr: io.BufferedReader | None = None
        self._stdout_thread: threading.Thread | None = None
        self._stderr_thread: threading.Thread | None = None
        self._watch_thread: threading.Thread | None = None
        self._send_lock = threading.Lock()  # one writer at a time keeps lines whole
        self._state_lock = threading.Lock()
        self._closing = False
        self._closed_reason: str | None = None  # why the connection ended, once it has
        self._ended = threading.Event()  # the connection ended (the reason is set)
        self._exited = threading.Event()  # the server process exited (and was reaped)
        self._stdout_done = threading.Event()  # the reader thread is done: every holder of stdout closed it
        self._bytes_read = 0  # read from stdout so far: the watcher sees whether the pipe still moves
        self._waiting = False  # the reader is waiting on the pipe (not parsing or delivering)
        self._partial = bytearray()  # the line being read, until its newline
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_RING)
        self._on_message: Callable[[Message], None] = lambda message: None
        self._on_close: Callable[[str], None] = lambda reason: None
        self._on_garbage: Callable[[str], None] = lambda text: None
        self._on_error: Callable[[Any, McpError], None] | None = None

    # -- lifecycle -------------------------------------------------------------

    def start(
        self,
        on_message: Callable[[Message], None],
        on_close: Callable[[str], None],
        on_garbage: Callable[[str], None],
        on_error: Callable[[Any, McpError], None] | None = None,
    ) -> None:
        if self._proc is not None:
            raise RuntimeError("StdioTransport.start() called twice")
        self._on_message, self._on_close, self._on_garbage, self._on_error = (
            on_message,
            on_close,
            on_garbage,
            on_error,
        )
        proc = self._proc = self._spawn()
        self._stdin = proc.stdin
        # bufsize=0 makes stdout and stderr raw files; Popen's stubs type every pipe as an optional IO
        stdout = self._stdout = cast(io.RawIOBase, proc.stdout)
        stderr = self._stderr = io.BufferedReader(cast(io.RawIOBase, proc.stderr), buffer_size=MAX_STDERR_LINE)
        _enlarge_pipe(stdout)
        name = os.path.basename(self.command[0])
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, args=(stderr,), name=f"mcp-stderr-{name}", daemon=True
        )
        self._stdout_thread = threading.Thread(
            target=self._read_stdout, args=(stdout,), name=f"mcp-stdout-{name}", daemon=True
        )
        self._watch_thread = threading.Thread(target=self._watch, args=(proc,), name=f"mcp-wait-{name}", daemon=True)
        self._stderr_thread.start()
        self._stdout_thread.start()
        self._watch_thread.start()

    def _spawn(self) -> subprocess.Popen:
        if not self.command:
            raise ConnectionClosed("cannot start MCP server: the command is empty")
        program = self.command[0]
        if self.cwd is not None and not os.path.isdir(self.cwd):
            raise ConnectionClosed(
                f"cannot start MCP server {program!r}: working directory {self.cwd!r} does not exist"
            )
        env = {**default_environment(), **(self.env or {})}
        group: dict[str, Any] = {}
        if GROUPS:
            # its own process group: a signal reaches everything it started, and a Ctrl-C at
            # the terminal reaches the harness only (which cancels and shuts down in order)
            group = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
        try:
            # Unbuffered pipes: stdin is written whole by send(), stdout is read in
            # large pieces by the reader, stderr through its own buffered reader.
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env=env,
                cwd=self.cwd,
                **group,
            )
        except FileNotFoundError:
            problem = "command not found"
        except PermissionError:
            problem = "permission denied (is it executable?)"
        except OSError as exc:
            problem = exc.strerror or str(exc)
        else:
            if GROUPS:
                self._group = proc.pid
            return proc
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
        if not self._exited.wait(self.close_timeout):
            self._signal(signal.SIGTERM)
            if not self._exited.wait(self.close_timeout):
                self._signal(signal.SIGKILL)
                self._exited.wait(self.close_timeout)
        if not stdin_closed:
            self._close_stdin(wait=JOIN_TIMEOUT)
        # The server is gone; what it started is ended with it.
        self._end_group()
        for thread, stream in ((self._stdout_thread, self._stdout), (self._stderr_thread, self._stderr)):
            if thread is None or stream is None or thread is threading.current_thread():
                continue
            thread.join(JOIN_TIMEOUT)
            # A process outside the group may still hold the pipe open; never
            # close a stream under a thread that is still reading it.
            if not thread.is_alive():
                stream.close()
        if self._watch_thread is not None and self._watch_thread is not threading.current_thread():
            self._watch_thread.join(JOIN_TIMEOUT)

    def _close_stdin(self, wait: float) -> bool:
        if not self._send_lock.acquire(timeout=wait):
            return False
        try:
            if self._stdin is not None:
                self._stdin.close()
        except OSError:
            pass  # the server already closed its end
        finally:
            self._send_lock.release()
        return True

    def _signal(self, sig: int) -> None:
        """Send `sig` to the server's process group (or the server alone, where there are no groups)."""
        try:
            if self._group is not None:
                os.killpg(self._group, sig)
            elif self._proc is not None and self._proc.returncode is None:
                self._proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass  # nothing left to signal

    def _end_group(self) -> None:
        """After the server exited: end what is left of its group, until its stdout is closed by all."""
        if self._group is None:
            return
        try:
            os.killpg(self._group, 0)
        except (ProcessLookupError, PermissionError):
            return  # the group is empty
        self._signal(signal.SIGTERM)
        if not self._stdout_done.wait(self.close_timeout):
            self._signal(signal.SIGKILL)
            self._stdout_done.wait(self.close_timeout)

    # -- sending -----------------------------------------------------------------

    def send(self, message: dict, headers: dict[str, str] | None = None) -> None:
        data = encode_message(message)  # a pipe has no headers: the message alone
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

    # -- the reader thread ---------------------------------------------------------

    def _read_stdout(self, pipe: io.RawIOBase) -> None:
        failure = None
        try:
            self._read_lines(pipe)
        except Exception as exc:  # a failing callback must still end the session cleanly
            failure = f"reading from server failed: {exc!r}"
        finally:
            self._stdout_done.set()
            self._finish(failure)

    def _read_lines(self, pipe: io.RawIOBase) -> None:
        """Split stdout into lines, in bounded memory: no line over the cap is ever held."""
        cap = self.max_message_bytes
        buffer = bytearray(READ_SIZE)
        view = memoryview(buffer)
        skipped: _Skipped | None = None
        while True:
            self._waiting = True
            count = pipe.readinto(view)
            self._waiting = False
            if not count:
                if skipped is not None:
                    self._skipped(skipped, ended=False)
                elif self._partial.strip():
                    self._unreadable(
                        Unreadable(
                            "the output ended in the middle of a message",
                            framing.answered(self._partial),
                            preview(self._partial),
                        )
                    )
                return
            self._bytes_read += count
            start = 0
            while True:
                end = buffer.find(b"\n", start, count)
                if end < 0:
                    break
                if skipped is not None:
                    skipped.add(view[start:end])
                    self._skipped(skipped, ended=True)
                    skipped = None
                elif len(self._partial) + end - start > cap:
                    self._partial += view[start:end]
                    skipped = _Skipped(self._partial)
                    self._partial = bytearray()
                    self._skipped(skipped, ended=True)
                    skipped = None
                elif self._partial:
                    self._partial += view[start:end]
                    self._line()
                elif end > start:
                    self._message(buffer[start:end])
                start = end + 1
            if start < count:
                if skipped is not None:
                    skipped.add(view[start:count])
                else:
                    self._partial += view[start:count]
                    if len(self._partial) > cap:
                        skipped = _Skipped(self._partial)
                        self._partial = bytearray()
                        self._skipping(skipped)

    def _line(self) -> None:
        """The line in _partial, read: its bytes are let go before parsing, so they and the result never meet."""
        data, self._partial = self._partial, bytearray()
        if not data.strip():
            return
        try:
            text = framing.to_text(data)
            del data
            message = framing.parse(text)
            del text
        except Unreadable as bad:
            self._unreadable(bad)
            return
        self._deliver(message)

    def _message(self, data: bytearray) -> None:
        """A line that came in one read (so at most READ_SIZE bytes)."""
        try:
            message = framing.parse(framing.to_text(data))
        except Unreadable as bad:
            if data.strip():
                self._unreadable(bad)
            return
        self._deliver(message)

    def _deliver(self, message: Message) -> None:
        if self._closed_reason is None:  # once the session ended (the server exited), nothing more is delivered
            self._on_message(message)

    def _unreadable(self, bad: Unreadable) -> None:
        self._on_garbage(bad.describe())
        if bad.request_id is not None:
            self._fail(bad.request_id, bad.error())

    def _skipping(self, skipped: _Skipped) -> None:
        """A line just passed the cap: if its start names the response, that request fails now."""
        request_id = framing.answered(skipped.head, tail=b"")
        if request_id is not None:
            skipped.reported = request_id
            self._fail(
                request_id,
                ProtocolError(
                    f"the response to request {request_id!r} is "
                    f"{too_large(skipped.size, self.max_message_bytes, False)}; "
                    "it was skipped"
                ),
            )

    def _skipped(self, skipped: _Skipped, ended: bool) -> None:
        """A line over the cap has ended (or the output has): say so, and fail its request if not done yet."""
        self._on_garbage(
            f"{too_large(skipped.size, self.max_message_bytes, ended)}: {framing.preview(skipped.head, skipped.size)}"
        )
        if skipped.reported is None:
            request_id = framing.answered(skipped.head, tail=skipped.tail if ended else b"")
            if request_id is not None:
                self._fail(
                    request_id,
                    ProtocolError(
                        f"the response to request {request_id!r} is "
                        f"{too_large(skipped.size, self.max_message_bytes, ended)}; it was skipped"
                    ),
                )

    def _fail(self, request_id: Any, error: McpError) -> None:
        if self._on_error is not None and self._closed_reason is None:
            self._on_error(request_id, error)

    # -- the end of the connection ------------------------------------------------

    def _watch(self, proc: subprocess.Popen) -> None:
        """Wait for the server to exit; if its stdout stays open (a process it started holds it), end the session."""
        try:
            proc.wait()
        finally:
            self._exited.set()
        seen = self._bytes_read
        while not self._stdout_done.wait(REAP_BUDGET):
            if self._bytes_read == seen and self._waiting:
                # nothing moved on the pipe since the server exited: what holds it open is not the server
                self._finish(None, held=True)
                self._end_group()
                return
            seen = self._bytes_read

    def _finish(self, failure: str | None, held: bool = False) -> None:
        """The connection ended (EOF, a read failure, or the server gone): say why, once."""
        if self._closed_reason is not None:
            return
        self._exited.wait(REAP_BUDGET)
        # The last stderr lines are usually the useful ones; let the drain catch up.
        if not held and self._stderr_thread is not None:
            self._stderr_thread.join(REAP_BUDGET)
        code = None if self._proc is None else self._proc.returncode
        reason = failure or describe_exit(code)
        if held:
            reason += " (a process it started still held its output open; its process group was ended)"
        if self._closing:
            reason = f"connection closed by the client ({reason})"
        tail = list(self._stderr_tail)[-STDERR_IN_ERRORS:]
        if tail:
            reason += "; last stderr lines:\n" + "\n".join(f"  {line}" for line in tail)
        with self._state_lock:
            if self._closed_reason is not None:
                return
            self._closed_reason = reason
        self._ended.set()
        try:
            self._on_close(reason)
        except Exception:
            pass

    def _drain_stderr(self, stderr: io.BufferedReader) -> None:
        try:
            while True:
                line = stderr.readline(MAX_STDERR_LINE)
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
    def bytes_read(self) -> int:
        """Bytes read from the server's stdout so far (skipped lines included)."""
        return self._bytes_read

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    @property
    def stderr_tail(self) -> list[str]:
        """The last lines the server wrote to stderr (each cut to a preview)."""
        return list(self._stderr_tail)


def _enlarge_pipe(pipe: Any) -> None:
    """Ask Linux for a larger stdout pipe: a large message then takes fewer reads and wake-ups."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except (ImportError, AttributeError, OSError, ValueError):
        pass  # not Linux, above the system's limit, or not a pipe: the default size works
