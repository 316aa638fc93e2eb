"""Step mode: the trace, paused after every frame.

At each pause: Enter (or `n`) shows the next frame, `m` runs to the model's
next token (past the servers' start-up and a call's JSON-RPC frames), `t` runs
to the next tool call (the parsed call, or the error a call that could not be
run gets), `s` runs to the next stop (eos, a closed call, a stop string, the
cap), `c` runs to the end, `q` quits cleanly. When stdin is not a terminal, commands are read
line by line and end of input means run to the end, so a pipe can drive it
and nothing ever waits forever; a closed stdin is end of input too. At a
terminal a pause holds it (ui/terminal.py), so a server's question waits for
the key and never reads it.
"""

from __future__ import annotations

import sys
import threading
from contextlib import nullcontext
from typing import TextIO

from decodeloop.events import Event
from decodeloop.ui.terminal import Terminal
from decodeloop.ui.trace import TraceView

PAUSE_ON = {"token", "stop", "tool_call", "tool_error", "rpc", "tool_result", "inject"}
HELP = (
    "[Enter] next frame · m: to the model's next token · t: to the next tool call · s: to the next stop · "
    "c: to the end · q: quit"
)
# what each "run to" command waits for: the events it pauses on next
RUN_TO = {"m": frozenset({"token"}), "t": frozenset({"tool_call", "tool_error"}), "s": frozenset({"stop"})}
COMMANDS = {
    "": "n",
    "n": "n",
    "next": "n",
    "m": "m",
    "model": "m",
    "token": "m",
    "t": "t",
    "tool": "t",
    "call": "t",
    "s": "s",
    "stop": "s",
    "c": "c",
    "continue": "c",
    "end": "c",
    "q": "q",
    "quit": "q",
}


class QuitRequested(Exception):
    """The user asked to stop; the caller shuts servers down and exits 0."""


class StepView:
    def __init__(self, trace: TraceView, stdin: TextIO | None = None, terminal: Terminal | None = None) -> None:
        self.trace = trace
        self.stdin = stdin if stdin is not None else sys.stdin  # None when the process has no stdin
        self.terminal = terminal  # the user's terminal: a pause holds it, so no server's question reads its keys
        self.running = False  # after `c` or end of input: no more pauses
        self.until: frozenset[str] | None = None  # after `t` or `s`: pause only on these events

    def __call__(self, event: Event) -> None:
        self.trace(event)
        # server notifications arrive on reader threads: show them, but only the turn's own thread waits
        if self.running or event.kind not in PAUSE_ON or threading.current_thread() is not threading.main_thread():
            return
        if self.until is not None:
            if event.kind not in self.until:
                return
            self.until = None
        self._pause()

    def _pause(self) -> None:
        with self.terminal.holding("step mode") if self.terminal is not None else nullcontext():
            self._ask()

    def _ask(self) -> None:
        out = self.trace.out
        while True:
            out.write(self.trace.style(f"  {HELP} > ", "dim"))
            out.flush()
            line = self._readline()
            if line is None:  # end of input, or no stdin at all: run to the end
                out.write(self.trace.style("(end of input: running to the end)", "dim") + "\n")
                self.running = True
                return
            typed = line.strip().lower()
            if not self._is_tty():
                out.write(typed + "\n")  # echo piped commands so the transcript reads naturally
            command = COMMANDS.get(typed)
            if command == "n":
                return
            if command in RUN_TO:
                self.until = RUN_TO[command]
                return
            if command == "c":
                self.running = True
                return
            if command == "q":
                raise QuitRequested()
            out.write(f"  unknown command {typed!r}\n")

    def _readline(self) -> str | None:
        """The next line typed, or None at end of input (a closed or missing stdin included)."""
        if self.terminal is not None:
            return self.terminal.read_line()
        if self.stdin is None:
            return None
        try:
            line = self.stdin.readline()
        except (OSError, ValueError):  # a closed file: ValueError; a closed descriptor: OSError
            return None
        return line or None

    def _is_tty(self) -> bool:
        isatty = getattr(self.stdin, "isatty", None)
        try:
            return bool(isatty and isatty())
        except (OSError, ValueError):
            return False
