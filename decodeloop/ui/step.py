"""Step mode: the trace, paused after every frame.

Enter shows the next frame, `c` runs to the end, `q` quits cleanly. When stdin
is not a terminal, commands are read line by line and end of input means run to
the end, so a pipe can drive it and nothing ever waits forever.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from decodeloop.events import Event
from decodeloop.ui.trace import TraceView

PAUSE_ON = {"token", "stop", "tool_call", "tool_error", "rpc", "tool_result", "inject"}
HELP = "[Enter] next frame · c: run to the end · q: quit"


class QuitRequested(Exception):
    """The user asked to stop; the caller shuts servers down and exits 0."""


class StepView:
    def __init__(self, trace: TraceView, stdin: TextIO | None = None) -> None:
        self.trace = trace
        self.stdin = stdin or sys.stdin
        self.running = False  # after `c` or end of input: no more pauses

    def __call__(self, event: Event) -> None:
        self.trace(event)
        # server notifications arrive on reader threads: show them, but only the turn's own thread waits
        if not self.running and event.kind in PAUSE_ON and threading.current_thread() is threading.main_thread():
            self._pause()

    def _pause(self) -> None:
        out = self.trace.out
        while True:
            out.write(self.trace.style(f"  {HELP} > ", "dim"))
            out.flush()
            line = self.stdin.readline()
            if not line:  # end of input: run to the end
                out.write("\n")
                self.running = True
                return
            command = line.strip().lower()
            if not self._is_tty():
                out.write(command + "\n")  # echo piped commands so the transcript reads naturally
            if command in ("", "n", "next"):
                return
            if command in ("c", "continue"):
                self.running = True
                return
            if command in ("q", "quit"):
                raise QuitRequested()
            out.write(f"  unknown command {command!r}\n")

    def _is_tty(self) -> bool:
        isatty = getattr(self.stdin, "isatty", None)
        return bool(isatty and isatty())
