"""The user's terminal and its one reader: chat's next line and every question put to the user go through here.

Who reads the terminal: chat's prompt (`prompt`, with readline's line editing, history and Tab completion)
and the questions: a server's sampling approvals and elicitation form, the policy's confirmation, step
mode's keys (`holding(who)`, then `read_line` or `confirm`). They come from different threads: chat, the
policy and step mode on the main thread, a server's request on its session's reader thread, which a
2025-11-25 server may send at any time (over stdio, or on the Streamable HTTP GET stream), also while chat
waits for a line. Two readers of one terminal take each other's lines, so:

- One question at a time: `holding` lets one thread hold the terminal for all the lines of its question
  (a whole form), the others wait in turn; the holder may ask again inside (it is reentrant). `asking`
  marks a whole request answered on a thread (a sampling request's two approvals and the model's reply
  between them) without holding the terminal while the model runs (it may wait for the model's lock,
  which a step pause may hold).
- Chat's prompt is never shown while a question holds the terminal, waits for it, or a request is asked.
- A question that comes while chat waits for a line interrupts the prompt, and the user is told which
  server asks. With readline, the asking thread sends the main thread INTERRUPT (SIGUSR2, installed by
  `chatting` and given back after) until chat lets go. Its handler raises only while readline is reading
  a line inside input(): readline reads with the terminal out of canonical mode and puts it back before it
  returns a line (or after cleaning up from a signal), so a line already entered is never lost: it is
  chat's, its turn runs, and the question is asked during it. Nor does the handler raise inside a readline
  callback (the completer), where readline would swallow it; the asking thread sends again. Python's
  readline cleans up and input() raises; the half-typed line, read from readline's buffer in the handler,
  comes back at the next prompt (the startup hook), after the question.
- Without readline (Python built without it, stdout not a terminal, chat off the main thread, JSON Lines
  on stdout) chat's line is read between short waits, as a question's is. The terminal then holds an
  unfinished line itself, where no program can take it back, and would hand it to the next read as the
  start of the question's answer; so it is discarded (`tcflush`) before the question, and the user is
  told to type it again. A line already entered is read as chat's first.
- A question asked while chat is not prompting (mid-turn: the main thread waits for a tool call) is asked
  at once. Ctrl-C reaches only the main thread, which sets `interrupted` (`ctrl_c_noted`); a read here
  gives up when it is set (KeyboardInterrupt), so each feature cancels or declines as it does. While a
  question has interrupted chat's prompt, chat waits for it, and a Ctrl-C ends the question, not chat.
- `showing` keeps a server's notice that comes while chat's readline prompt is up from being written
  across the line being edited: the prompt lets go, the notice is shown, the prompt comes back below.
"""

from __future__ import annotations

import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from decodeloop.client_features.elicitation import POLL_SECONDS, terminal_reader
from decodeloop.text.untrusted import visible, visible_line

try:
    import termios
except ImportError:  # not a POSIX terminal: no canonical mode to read, nothing to flush
    termios = None  # type: ignore[assignment]

# the question's word to chat's prompt; nothing else in decodeloop uses it (None: no such signal here)
INTERRUPT = getattr(signal, "SIGUSR2", None)
RETRY_SECONDS = 0.05  # how often a question sends INTERRUPT again until chat's prompt has let go
YES = ("y", "yes")


class _PromptInterrupted(BaseException):
    """Raised inside chat's input() by INTERRUPT's handler: a question wants the terminal. A BaseException,
    so no `except Exception` on the way (a completer's) takes it for an error."""


class Terminal:
    """The user's terminal: `stdin` read, chat's prompt on `out`, the questions on `err`; `interrupted` is
    the Ctrl-C the main thread noted (ctrl_c_noted), for a question read on another thread."""

    def __init__(
        self,
        stdin: TextIO | None = None,
        out: TextIO | None = None,
        err: TextIO | None = None,
        interrupted: threading.Event | None = None,
    ) -> None:
        self.stdin = stdin if stdin is not None else sys.stdin
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.interrupted = interrupted if interrupted is not None else threading.Event()
        self._read = terminal_reader(self.stdin, self.interrupted)
        self._cond = threading.Condition()
        self._holder: threading.Thread | None = None  # the thread whose question has the terminal
        self._depth = 0  # how many times the holder holds it (nested questions)
        self._queued = 0  # threads waiting for the terminal
        self._answering = 0  # requests being answered (`asking`): chat's prompt waits for them too
        self._asking: dict[threading.Thread, str] = {}  # who each of those threads answers for
        self._prompting = False  # chat's prompt is up: a question must interrupt it
        self._in_input = False  # the main thread is inside input() for chat
        self._let_go = ""  # how chat's prompt let go for the holder: "kept", "discarded" or ""
        self._owed = False  # the line chat's prompt let go of has no newline yet
        self._captured = ""  # readline's line as INTERRUPT's handler found it
        self._kept = ""  # a half-typed chat line, given back at the next prompt
        self._readline: Any = None  # the readline module while `chatting` owns it
        self._completer: Callable[[str, int], str | None] | None = None
        self._in_callback = False  # readline is running our completer (which may wait for a server)

    # -- questions ---------------------------------------------------------------------

    @contextmanager
    def asking(self, who: str) -> Iterator[None]:
        """A request of `who` answered on this thread, questions and all (a sampling request: its approval,
        the model's reply, the reply's approval): chat's prompt lets go at once if it is up, and stays down
        until the request is done. Other questions may still take the terminal in between (each question
        holds it: `holding`), so nothing waits here on what the request itself may wait for."""
        me = threading.current_thread()
        with self._cond:
            self._answering += 1
            outer = self._asking.get(me)
            self._asking[me] = who
        try:
            with self._cond:
                let_go = self._interrupt_prompt(me)
            if outer is None:
                self.interrupted.clear()  # a Ctrl-C before this request is not for it
            self._announce(who, let_go)
            yield
        finally:
            with self._cond:
                self._answering -= 1
                if outer is None:
                    del self._asking[me]
                else:
                    self._asking[me] = outer
                self._cond.notify_all()

    @contextmanager
    def holding(self, who: str) -> Iterator[None]:
        """The terminal, held for one question of `who` (all its lines): others wait; chat's prompt, if up,
        lets go first, and the user is told who asks."""
        me = threading.current_thread()
        with self._cond:
            nested = self._holder is me
            if nested:
                self._depth += 1
        if nested:
            try:
                yield
            finally:
                with self._cond:
                    self._depth -= 1
            return
        try:
            let_go = self._take(me)
            if me not in self._asking:  # inside a request, a Ctrl-C since it began is for it
                self.interrupted.clear()  # a Ctrl-C before this question is not for it
            self._announce(who, let_go)
            yield
        finally:
            with self._cond:
                if self._holder is me:
                    self._holder, self._depth = None, 0
                    self._cond.notify_all()

    def _take(self, me: threading.Thread) -> str:
        """Wait for the terminal and take it; interrupt chat's prompt if it is up. How the prompt let go."""
        with self._cond:
            self._queued += 1
            try:
                while self._holder is not None:
                    self._cond.wait(POLL_SECONDS)
            finally:
                self._queued -= 1
            self._holder, self._depth = me, 1
            return self._interrupt_prompt(me)

    def _interrupt_prompt(self, me: threading.Thread, patient: bool = True, consume: bool = True) -> str:
        """With the lock held: if chat's prompt is up, make it let go and wait until it has. How it let go
        ("kept", "discarded"), or "" when it was not up (or a question already said so: `consume`). Not
        `patient`: gives up while a readline callback runs (a completion waiting for a server)."""
        main = threading.main_thread()
        while self._prompting and me is not main:  # (the main thread asking is not prompting)
            if not patient and self._in_callback:
                return ""
            if self._in_input and self._readline is not None and main.ident is not None and INTERRUPT is not None:
                signal.pthread_kill(main.ident, INTERRUPT)
            self._cond.wait(RETRY_SECONDS)
        let_go = self._let_go
        if consume:
            self._let_go = ""
        return let_go

    def _announce(self, who: str, let_go: str) -> None:
        with self._cond:
            owed, self._owed = self._owed, False
        if let_go:
            kept = (
                "your line comes back after it"
                if let_go == "kept"
                else "what you had typed on that line is discarded (no line editing here): type it again after"
            )
            start = "\n" if owed else ""  # the line being edited ends first
            self.write(f"{start}── {visible_line(who)} asks something while you type: answer it first; {kept} ──\n")

    def showing(self, view: Callable[[Any], None], shows: Callable[[Any], bool]) -> Callable[[Any], None]:
        """`view` (an event sink), made to show an event that comes off the main thread while chat's readline
        prompt is up (a server's notice) under it: the prompt lets go, its line kept, the event is shown,
        and the prompt comes back below, rather than the event written across the line being edited. An
        event the view does not show (`shows` says) leaves the prompt alone."""

        def show(event: Any) -> None:
            me = threading.current_thread()
            if me is threading.main_thread() or self._readline is None or not shows(event):
                view(event)
                return
            with self._cond:
                self._answering += 1
                self._interrupt_prompt(me, patient=False, consume=False)
                owed, self._owed = self._owed, False
            try:
                if owed:
                    self.out.write("\n")  # below the line that was being edited
                view(event)
            finally:
                with self._cond:
                    self._answering -= 1
                    self._cond.notify_all()

        return show

    def read_line(self) -> str | None:
        """The next line typed, for the question being asked (None at end of input; KeyboardInterrupt for
        Ctrl-C, on another thread too once the main thread noted it)."""
        return self._read()

    def write(self, text: str) -> None:
        self.err.write(text)
        self.err.flush()

    def confirm(self, question: str, who: str = "decodeloop") -> bool:
        """A yes-or-no question; no unless the user types y. Ctrl-C ends the line: on the main thread it goes
        on (the turn stops); on another it is a no, and the main thread stops what it waited for."""
        with self.holding(who):
            try:  # the question's own write inside: a Ctrl-C as soon as it shows ends its line too
                self.write(f"decodeloop: {visible(question)}? [y/N] ")
                line = self.read_line()
            except KeyboardInterrupt:  # end the question's line: what comes next starts a line
                self.write("\n")
                if threading.current_thread() is threading.main_thread():
                    raise
                return False
            if line is None:
                self.write("\n")
                return False
            return line.strip().lower() in YES

    # -- chat's prompt -----------------------------------------------------------------

    @contextmanager
    def chatting(self) -> Iterator[None]:
        """While inside: chat's prompt uses readline when the process reads its terminal through it, and a
        question can interrupt it (INTERRUPT's handler; the one before is given back on the way out)."""
        readline = _interruptible_readline(self.stdin, self.out)
        if readline is None or INTERRUPT is None or signal.getsignal(INTERRUPT) not in (signal.SIG_DFL, None):
            yield  # someone else's signal, or no readline: chat reads between waits, as a question does
            return
        previous = signal.signal(INTERRUPT, self._on_interrupt)
        self._completer = readline.get_completer()
        if self._completer is not None:
            readline.set_completer(self._completing)
        readline.set_startup_hook(self._startup)
        self._readline = readline
        try:
            yield
        finally:
            self._readline = None
            readline.set_startup_hook()
            if self._completer is not None:
                readline.set_completer(self._completer)
            signal.signal(INTERRUPT, previous)

    def prompt(self, text: str, edit: bool = True) -> str:
        """Chat's next line, once no question holds or waits for the terminal. EOFError at end of input,
        KeyboardInterrupt for Ctrl-C. `edit`: readline's line editing, when `chatting` has it."""
        while True:
            try:
                if edit and self._readline is not None:
                    return self._edited_line(text)
                return self._plain_line(text)
            except _PromptInterrupted:
                continue  # the question was asked; the prompt again, with the line as it was

    def _claim(self) -> None:
        """Wait until no question holds or waits for the terminal, then put chat's prompt up. A Ctrl-C while
        waiting is the question's (it ends), not chat's."""
        with self._cond:
            while self._holder is not None or self._queued or self._answering:
                try:
                    self._cond.wait(POLL_SECONDS)
                except KeyboardInterrupt:
                    self.interrupted.set()
            self._prompting, self._let_go, self._owed = True, "", False

    def _release(self, let_go: str = "") -> None:
        with self._cond:
            self._prompting = self._in_input = False
            if let_go:
                self._let_go, self._owed = let_go, True
            self._cond.notify_all()

    def _edited_line(self, text: str) -> str:
        let_go = ""
        try:
            self._claim()
            try:
                self._in_input = True
                line = input(text)
            except _PromptInterrupted:
                self._in_input = False
                self._kept, let_go = self._captured, "kept"
                raise
        finally:
            self._release(let_go)
        return line

    def _plain_line(self, text: str) -> str:
        let_go = ""
        try:
            self._claim()
            if text:
                self.out.write(text)
                self.out.flush()
            try:
                fd: int | None = self.stdin.fileno()
            except (AttributeError, OSError, ValueError):
                fd = None
            while fd is not None:
                try:
                    ready, _, _ = select.select([fd], [], [], POLL_SECONDS)
                except (OSError, ValueError):
                    break
                if ready:
                    break
                with self._cond:
                    waiting = self._holder is not None or self._queued > 0 or self._answering > 0
                if waiting and not select.select([fd], [], [], 0)[0]:  # a line entered just now is chat's
                    if termios is not None:
                        try:
                            termios.tcflush(fd, termios.TCIFLUSH)  # else it would start the question's answer
                        except termios.error:
                            pass
                    let_go = "discarded"
                    raise _PromptInterrupted()
            line = self.stdin.readline()
        finally:
            self._release(let_go)
        if not line:
            raise EOFError
        return line.rstrip("\n")

    # -- readline's side ---------------------------------------------------------------

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        """INTERRUPT: leave input() for the question, only while readline is reading a line there."""
        wanted = self._holder is not None or self._queued or self._answering
        if not (self._in_input and wanted) or not _reading_a_line(self.stdin):
            return  # not reading yet, or the line is entered (chat's): the question asks again, or after
        callbacks = (Terminal._startup.__code__, Terminal._completing.__code__)
        while frame is not None:  # inside a readline callback, readline would swallow the exception
            if frame.f_code in callbacks:
                return
            frame = frame.f_back
        self._captured = self._readline.get_line_buffer() if self._readline is not None else ""
        raise _PromptInterrupted()

    def _startup(self) -> None:
        """readline's startup hook: the line a question interrupted, put back to be finished."""
        if self._kept and self._readline is not None:
            self._readline.insert_text(self._kept)
            self._kept = ""

    def _completing(self, text: str, state: int) -> str | None:
        completer = self._completer
        self._in_callback = True
        try:
            return completer(text, state) if completer is not None else None
        finally:
            self._in_callback = False


def _interruptible_readline(stdin: TextIO, out: TextIO) -> Any:
    """The readline module when input() reads this terminal through it and a signal can interrupt that
    (stdin and stdout the process's own terminals, on the main thread); else None."""
    if threading.current_thread() is not threading.main_thread() or termios is None:
        return None
    try:
        import readline
    except ImportError:
        return None
    try:
        own = stdin is sys.__stdin__ and out is sys.__stdout__ and stdin.isatty() and out.isatty()
    except (AttributeError, OSError, ValueError):
        return None
    return readline if own else None


def _reading_a_line(stdin: TextIO) -> bool:
    """Whether readline is reading a line now: it reads with the terminal out of canonical mode, and puts
    it back before it returns the line entered (or cleans up after a signal)."""
    if termios is None:
        return False
    try:
        return not termios.tcgetattr(stdin.fileno())[3] & termios.ICANON
    except (termios.error, OSError, ValueError):
        return False
