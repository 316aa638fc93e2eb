"""One owner of the terminal: chat's prompt and the servers' questions never read the same line.

`decodeloop chat` runs at a pseudo-terminal with the lab's table model and tests/servers/asking.py, a real
server process that asks while chat waits for a line (`--ask-from`: whatever the test writes to a named pipe
it sends the client as a request of its own, over stdio, or on the Streamable HTTP GET stream with
`--http`, both on 2025-11-25) or mid-call (`--weather`: on the pipe, or over HTTP on the call's answer
stream). The test drives the terminal step by step, waiting for text, never for time: the prompt, a
half-typed chat line, the server's question, its answer, the prompt again with the half line kept, the rest
of the line, /quit. Where each line went is read from the server (it logs the answer it got, and chat shows
the log), from chat's readline history (every line chat took, saved at its end) and from chat's answers.
"""

from __future__ import annotations

import io
import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading

import pytest
from conftest import ROOT

from decodeloop.events import Stop
from decodeloop.ui.step import StepView
from decodeloop.ui.terminal import Terminal
from decodeloop.ui.trace import TraceView

ASKING = os.path.join(ROOT, "tests", "servers", "asking.py")
GUARD = 90  # seconds: a guard against a hang, never a measure
POLSON = "What's the weather in Polson, MT?"
SORRY = "assistant> Sorry, I only know how to look up the weather in Polson, MT."
UNITS = {
    "message": "Units for the forecast?",
    "requestedSchema": {
        "type": "object",
        "properties": {"units": {"type": "string", "enum": ["fahrenheit", "celsius"]}},
        "required": ["units"],
    },
}
SAY_HI = {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi."}}], "maxTokens": 20}
ASKS = {"sample": ("sampling/createMessage", SAY_HI), "elicit": ("elicitation/create", UNITS)}
INTERRUPTS = "── server asking asks something while you type: answer it first; your line comes back after it ──"
NAMES = {"stdio": "asking", "http": "127.0.0.1"}  # a --mcp-url server is named after its host


class Chat:
    """`decodeloop chat` at a pseudo-terminal (its stdin, stdout and stderr), its history under `state`."""

    def __init__(self, mcp: list[str], state: str, python: list[str] | None = None) -> None:
        self.state = state
        self.out = b""
        argv = [*(python or [sys.executable, "-m", "decodeloop"]), "chat", "--model", "table", *mcp]
        argv += ["--mcp-protocol", "2025-11-25"]
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: SIGINT at its default (a shell's background job starts with it ignored)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.chdir(ROOT)
            os.environ.update(NO_COLOR="1", TERM="dumb", XDG_STATE_HOME=state)
            os.execv(argv[0], argv)

    def wait_for(self, text: str, after: int = 0) -> int:
        """Read until `text` is on the screen after position `after`; the position just past it."""
        wanted = text.encode()
        while self.out.find(wanted, after) < 0:
            ready, _, _ = select.select([self.fd], [], [], GUARD)
            assert ready, f"no {text!r} on the screen; it shows:\n{self.screen(after)}"
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            assert data, f"chat ended before {text!r}; it showed:\n{self.screen(after)}"
            self.out += data
        return self.out.find(wanted, after) + len(wanted)

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def screen(self, after: int = 0) -> str:
        return self.out[after:].decode(errors="replace")

    def finish(self) -> int:
        """Read to the end; chat's exit status."""
        while True:
            ready, _, _ = select.select([self.fd], [], [], GUARD)
            assert ready, self.screen()[-2000:]
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            self.out += data
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return os.waitstatus_to_exitcode(status)

    def close(self) -> None:
        """End the child if a failed test left it running, and close the terminal."""
        if self.pid:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)

    def history(self) -> list[str]:
        """Every line chat took, in order (readline's history, saved as chat ends)."""
        with open(os.path.join(self.state, "decodeloop", "chat_history"), encoding="utf-8") as f:
            return f.read().splitlines()


@pytest.fixture
def chat(tmp_path):
    """Start `decodeloop chat` at a pseudo-terminal (Chat); ended and closed after the test."""
    started: list[Chat] = []

    def start(mcp: list[str], python: list[str] | None = None) -> Chat:
        started.append(Chat(mcp, str(tmp_path), python))
        return started[-1]

    yield start
    for one in started:
        one.close()


@pytest.fixture
def asking_server(tmp_path):
    """(the chat options that reach an asking server, a function that makes it ask) on stdio or over HTTP."""
    started: list[subprocess.Popen] = []
    pipe = str(tmp_path / "ask")
    os.mkfifo(pipe)

    def start(wire: str, *options: str) -> tuple[list[str], object]:
        command = [sys.executable, ASKING, "--ask-from", pipe, *options]
        if wire == "stdio":
            mcp = ["--mcp", " ".join(command)]
        else:
            server = subprocess.Popen([*command, "--http"], stdout=subprocess.PIPE, text=True)
            started.append(server)
            port = server.stdout.readline().strip()
            assert port.isdigit(), port
            mcp = ["--mcp-url", f"http://127.0.0.1:{port}/mcp"]

        def ask(method: str, params: dict) -> None:
            with open(pipe, "w", encoding="utf-8") as f:  # the server holds the pipe open to read it
                f.write(json.dumps({"method": method, "params": params}) + "\n")

        return mcp, ask

    yield start
    for server in started:
        server.terminate()
        server.wait(GUARD)


def answered(chat: Chat, method: str, after: int) -> dict:
    """What the server says it got for its request: its log message, as chat shows it (a JSON string)."""
    head = f'"log info: answered {method}: '
    start = chat.wait_for(head, after) - len(head.encode())
    chat.wait_for("\n", start)
    shown, _ = json.JSONDecoder().raw_decode(chat.screen(start))
    return json.loads(shown.removeprefix(head[1:]))


@pytest.mark.parametrize("wire", ["stdio", "http"])
@pytest.mark.parametrize("feature", ["sample", "elicit"])
def test_a_server_asking_while_chat_waits_gets_the_next_line_and_chat_keeps_its_half_typed_one(
    asking_server, chat, wire, feature
):
    mcp, ask = asking_server(wire)
    chat = chat(mcp)
    at = chat.wait_for("you> ")
    chat.type("hello the")  # half a chat line, not entered
    at = chat.wait_for("hello the", at)
    ask(*ASKS[feature])
    at = chat.wait_for(INTERRUPTS.replace("asking", NAMES[wire]), at)
    if feature == "sample":
        at = chat.wait_for("let the model answer (sampling request #1)? [y/N] ", at)
        chat.type("y\n")
        at = chat.wait_for("send it to", at)
        at = chat.wait_for("? [y/N] ", at)
        chat.type("y\n")
    else:
        at = chat.wait_for("Units for the forecast?", at)
        at = chat.wait_for("  > ", at)
        chat.type("2\n")  # celsius
        at = chat.wait_for("send it? y sends, n declines, e edits the answers: ", at)
        chat.type("y\n")
        at = chat.wait_for("→ accept sent to", at)
    got = answered(chat, ASKS[feature][0], at)
    at = max(at, chat.wait_for("you> hello the", at))  # the prompt again, the half line kept
    chat.type("re\n")
    at = chat.wait_for(SORRY, at)  # chat got its line, and answered it
    chat.wait_for("you> ", at)
    chat.type("/quit\n")
    assert chat.finish() == 0
    if feature == "sample":  # the user let the model answer, and let its reply go
        assert got["result"]["role"] == "assistant" and got["result"]["content"]["text"]
    else:
        assert got == {"result": {"action": "accept", "content": {"units": "celsius"}}}
    assert chat.history() == ["hello there", "/quit"]  # no answer of the question's went to chat
    assert "Traceback" not in chat.screen()


@pytest.mark.parametrize("feature", ["sample", "elicit"])
def test_ctrl_c_at_a_question_that_interrupted_chat_ends_the_question_and_chat_goes_on(asking_server, chat, feature):
    mcp, ask = asking_server("stdio")
    chat = chat(mcp)
    at = chat.wait_for("you> ")
    chat.type("hello the")
    at = chat.wait_for("hello the", at)
    ask(*ASKS[feature])
    at = chat.wait_for(INTERRUPTS, at)
    at = chat.wait_for("? [y/N] " if feature == "sample" else "  > ", at)
    chat.type("\x03")
    got = answered(chat, ASKS[feature][0], at)
    at = max(at, chat.wait_for("you> hello the", at))
    chat.type("re\n")
    at = chat.wait_for(SORRY, at)
    chat.wait_for("you> ", at)
    chat.type("/quit\n")
    assert chat.finish() == 0
    if feature == "sample":  # a no: the spec's user-rejected error
        assert got["error"]["code"] == -1 and "the user said no" in got["error"]["message"]
    else:
        assert got == {"result": {"action": "cancel"}}
        assert "cancel" in chat.screen() and "the user pressed Ctrl-C" in chat.screen()
    assert chat.history() == ["hello there", "/quit"]


def test_end_of_input_at_such_a_question_cancels_it_and_chat_goes_on(asking_server, chat):
    mcp, ask = asking_server("stdio")
    chat = chat(mcp)
    at = chat.wait_for("you> ")
    chat.type("hello the")
    at = chat.wait_for("hello the", at)
    ask(*ASKS["elicit"])
    at = chat.wait_for("  > ", chat.wait_for(INTERRUPTS, at))
    chat.type("\x04")  # Ctrl-D on an empty line: end of input, for the question
    got = answered(chat, "elicitation/create", at)
    at = max(at, chat.wait_for("you> hello the", at))
    chat.type("re\n")
    at = chat.wait_for(SORRY, at)
    chat.wait_for("you> ", at)
    chat.type("\x04")  # and at chat's prompt: the end of the session
    assert chat.finish() == 0
    assert got == {"result": {"action": "cancel"}} and "end of input" in chat.screen()
    assert chat.history() == ["hello there"]


@pytest.mark.parametrize("wire", ["stdio", "http"])
@pytest.mark.parametrize("feature", ["sample", "elicit"])
def test_a_question_mid_call_gets_the_next_line_and_chat_the_one_after(asking_server, chat, wire, feature):
    # get_weather, the table model's call, asks: on the pipe, or over HTTP on the call's answer stream
    mcp, _ = asking_server(wire, "--weather", feature)
    chat = chat(mcp)
    at = chat.wait_for("you> ")
    chat.type(POLSON + "\n")
    if feature == "sample":
        at = chat.wait_for("let the model answer (sampling request #1)? [y/N] ", at)
        chat.type("y\n")
        at = chat.wait_for(f"send it to {NAMES[wire]} (#1)? [y/N] ", at)
        chat.type("y\n")
        at = chat.wait_for("  ✓ ", at)  # the sampled reply, the server's result
    else:
        at = chat.wait_for("  > ", chat.wait_for("Units for Polson, MT?", at))
        chat.type("2\n")
        at = chat.wait_for("send it? y sends, n declines, e edits the answers: ", at)
        chat.type("y\n")
        at = chat.wait_for("  ✓ ", chat.wait_for(f"→ accept sent to {NAMES[wire]}", at))
        assert "celsius" in chat.screen(at).splitlines()[0]
    assert INTERRUPTS not in chat.screen()  # chat was not prompting: nothing to interrupt
    at = chat.wait_for("you> ", chat.wait_for("assistant> ", at))
    chat.type("/quit\n")
    assert chat.finish() == 0
    assert chat.history() == [POLSON, "/quit"]


def test_without_readline_the_unfinished_line_is_discarded_not_sent_as_the_answer(asking_server, chat):
    mcp, ask = asking_server("stdio")
    no_readline = "import runpy, sys; sys.modules['readline'] = None; sys.argv[0] = 'decodeloop'; "
    no_readline += "runpy.run_module('decodeloop', run_name='__main__')"
    chat = chat(mcp, python=[sys.executable, "-c", no_readline])
    at = chat.wait_for("you> ")
    chat.type("hello the")
    at = chat.wait_for("hello the", at)
    ask(*ASKS["elicit"])
    at = chat.wait_for(
        "── server asking asks something while you type: answer it first; what you had typed on that line is "
        "discarded (no line editing here): type it again after ──",
        at,
    )
    at = chat.wait_for("  > ", at)
    chat.type("2\n")  # the terminal would have sent "hello the2"
    at = chat.wait_for("send it? y sends, n declines, e edits the answers: ", at)
    chat.type("y\n")
    got = answered(chat, "elicitation/create", at)
    at = max(at, chat.wait_for("you> ", at))
    chat.type("hello there\n")
    at = chat.wait_for(SORRY, at)
    chat.wait_for("you> ", at)
    chat.type("/quit\n")
    assert chat.finish() == 0
    assert got == {"result": {"action": "accept", "content": {"units": "celsius"}}}
    assert "; again" not in chat.screen()  # the answer fitted the first time


def test_questions_take_the_terminal_one_at_a_time():
    # two threads ask at once at a terminal: all of the first one's lines are its own, then the other's
    leader, follower = pty.openpty()
    stdin = os.fdopen(follower, "r", encoding="utf-8")
    err = open(os.devnull, "w", encoding="utf-8")
    terminal = Terminal(stdin, err, err)
    holding = threading.Event()
    first: list[str | None] = []
    second: list[bool] = []

    def form() -> None:
        with terminal.holding("server one"):
            holding.set()
            first.extend([terminal.read_line(), terminal.read_line()])

    def question() -> None:
        holding.wait(GUARD)
        second.append(terminal.confirm("go on", "server two"))

    threads = [threading.Thread(target=form), threading.Thread(target=question)]
    try:
        for thread in threads:
            thread.start()
        holding.wait(GUARD)
        os.write(leader, b"one\ntwo\ny\n")
        for thread in threads:
            thread.join(GUARD)
    finally:
        stdin.close()
        err.close()
        os.close(leader)
    assert first == ["one\n", "two\n"] and second == [True]


def test_a_step_pause_waits_for_a_question_that_holds_the_terminal_and_reads_the_next_line():
    # a server's question has the terminal when step mode pauses: the question's line is its own, the key
    # typed after it is step mode's
    leader, follower = pty.openpty()
    stdin = os.fdopen(follower, "r", encoding="utf-8")
    err = open(os.devnull, "w", encoding="utf-8")
    terminal = Terminal(stdin, err, err)
    holding, asked = threading.Event(), threading.Event()
    got: list[str | None] = []

    def question() -> None:
        with terminal.holding("server asking"):
            holding.set()
            asked.wait(GUARD)
            got.append(terminal.read_line())

    thread = threading.Thread(target=question)
    trace = io.StringIO()
    view = StepView(TraceView(trace, color=False, frames=True), terminal=terminal)
    try:
        thread.start()
        holding.wait(GUARD)
        os.write(leader, b"units=celsius\nc\n")
        asked.set()
        view(Stop("eos"))  # a pause: it waits for the question, then reads "c" (run to the end)
        thread.join(GUARD)
    finally:
        stdin.close()
        err.close()
        os.close(leader)
    assert got == ["units=celsius\n"] and view.running
    assert "unknown command" not in trace.getvalue()
