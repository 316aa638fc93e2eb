"""`decodeloop chat`: the conversation loop and its compact view.

`ChatSession` reads user turns (a terminal with readline history, or a pipe, one
turn per line), runs each through the same `Harness`, so the context and the
model's cache carry over, and handles the commands /reset, /tools, /approve,
/resources, /reread, /prompts, /prompt, /help and /quit. An `@SERVER:URI` word in a line attaches
that resource to the message (read from SERVER as the line is sent, the
server's data in its own span); /reread attaches the last ones again, read
afresh, to the next line. A resource attached from a server that offers
subscriptions is subscribed to, and its server's word that it changed is a
notice. `/prompt NAME key=value ...` gets a server's prompt and sends it as
the user's turn (`Harness.prompt`), its messages shown first; with readline,
Tab after `/prompt NAME arg=` asks the server's `completion/complete`.
Ctrl-C during an answer stops that answer (the harness cuts the context
back to its last whole state); at the prompt it just gives a fresh prompt;
end of input ends the session. A line with bytes that are not UTF-8 is not
sent: one line says where the first one is. At a terminal the lines are read
through its one owner (ui/terminal.py), as the servers' questions are: a
question that comes while you type is asked first, and your half-typed line
comes back after.

`ChatView` shows a turn the way a chat does: the answer streamed as it is
released, each tool call and its result on a line of its own. Server text is
shown quoted, with control characters made visible.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from contextlib import nullcontext
from typing import TextIO

from decodeloop import utf8
from decodeloop.errors import ConfigError, McpError, ToolSurfaceError
from decodeloop.events import Event
from decodeloop.mcp.content import prompt_ref
from decodeloop.text.credentials import clip
from decodeloop.text.untrusted import visible, visible_line
from decodeloop.ui.style import Style, use_color
from decodeloop.ui.terminal import Terminal
from decodeloop.ui.trace import elicitation_text, progress_text, sampling_head, task_text

HELP = (
    "commands: /reset starts a new conversation, /tools lists the tools, /approve NAME puts a tool's "
    "changed definition in force, /resources lists the servers' resources, @SERVER:URI in a message "
    "attaches one, /reread attaches the last ones again to your next message, /prompts lists the servers' "
    "prompts, /prompt NAME key=value ... sends one as your message (Tab completes values), /quit ends (or Ctrl-D)"
)
COMMANDS = ("/reset", "/tools", "/approve", "/resources", "/reread", "/prompts", "/prompt", "/help", "/quit")
RESULT_PREVIEW = 200
ATTACH = re.compile(r"(?<!\S)@([A-Za-z0-9_.-]+):(\S+)")  # @SERVER:URI, a word of its own


def _quoted(text: str, limit: int = RESULT_PREVIEW) -> str:
    """Server-controlled text as a JSON string literal: control, escape and format characters made visible."""
    if len(text) > limit:
        text = clip(text, limit) + f"… ({len(text):,} chars)"
    return visible(json.dumps(text, ensure_ascii=False))


class ChatView:
    def __init__(self, out: TextIO | None = None, color: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.style = Style(use_color(self.out) if color is None else color)
        self._speaking = False  # "assistant>" has been written for the current stretch of answer
        self._thinking = False  # "thinking>" has been written for the current stretch of reasoning

    def __call__(self, event: Event) -> None:
        render = getattr(self, "on_" + event.kind, None)
        if render is not None:
            render(event)
            self.out.flush()

    def _line(self, text: str) -> None:
        if self._speaking or self._thinking:
            self.out.write("\n")
            self._speaking = self._thinking = False
        self.out.write(text + "\n")

    def on_server(self, e) -> None:
        self._line(
            self.style("● ", "blue") + f"{visible_line(e.server)}: tools "
            f"{', '.join(visible_line(name) for name in e.tools) or 'none'}"
        )

    def on_token(self, e) -> None:
        if getattr(e, "reasoning", ""):  # the model's reasoning, dim, apart from the answer
            if not self._thinking:
                if self._speaking:
                    self.out.write("\n")
                    self._speaking = False
                self.out.write(self.style("thinking> ", "dim"))
                self._thinking = True
                text = e.reasoning.lstrip()
            else:
                text = e.reasoning
            self.out.write(self.style(visible(text), "dim"))
        if e.delta:
            if self._thinking:
                self.out.write("\n")
                self._thinking = False
            if not self._speaking:
                self.out.write(self.style("assistant> ", "green", "bold"))
                self._speaking = True
                text = e.delta.lstrip()
            else:
                text = e.delta
            self.out.write(visible(text))  # the model may copy escapes from a result

    def on_tool_call(self, e) -> None:
        self._line(
            self.style("  ⚙ ", "yellow") + f"{visible_line(e.name)}("
            f"{visible(json.dumps(e.arguments, ensure_ascii=False))}) on {visible_line(e.server)}"
        )

    def on_policy(self, e) -> None:
        if e.verdict != "allow":  # a compact view: only what did not run
            self._line(self.style("  ⛔ policy: ", "red") + _quoted(f"{e.name} not run: {e.reason}", 400))

    def on_tool_result(self, e) -> None:
        mark = self.style("  ✗ ", "red") if e.is_error else self.style("  ✓ ", "green")
        self._line(mark + _quoted(e.text))

    def on_tool_error(self, e) -> None:
        self._line(self.style(f"  ✗ {e.stage} error: ", "red") + _quoted(e.message))

    def on_notice(self, e) -> None:
        self._line(self.style(f"  · {visible_line(e.source)}: ", "dim") + _quoted(e.message))

    def on_sampling(self, e) -> None:
        mark = self.style("  ⇄ ", "red" if e.phase in ("denied", "failed") else "magenta")
        if e.phase != "sent":  # the reply was just shown
            self._line(mark + sampling_head(e) + ": " + _quoted(e.text))

    def on_elicitation(self, e) -> None:
        self._line(self.style("  ? ", "yellow") + elicitation_text(e))

    def on_progress(self, e) -> None:
        call = f"/{visible_line(e.tool)}" if e.tool is not None else ""
        self._line(self.style(f"  · {visible_line(e.server)}{call}: {progress_text(e)}", "dim"))

    def on_task(self, e) -> None:
        self._line(self.style(f"  ◷ {visible_line(e.server)}/{visible_line(e.tool)}: {task_text(e)}", "dim"))

    def on_tools_changed(self, e) -> None:
        change = " ".join(
            [
                *(f"+{visible_line(n)}" for n in e.added),
                *(f"-{visible_line(n)}" for n in e.removed),
                *(f"~{visible_line(n)} held (/approve {visible_line(n)})" for n in e.held),
            ]
        )
        self._line(
            self.style(f"  ⟳ {visible_line(e.server)}: tools changed ", "blue")
            + f"({change or 'nothing'})"
            + ("" if e.declared else self.style("; the server had not declared listChanged", "red"))
        )
        for what in e.changes:
            self._line("    " + _quoted(what, 240))

    def on_done(self, e) -> None:
        if self._speaking or self._thinking:
            self.out.write("\n")
            self._speaking = self._thinking = False
        if e.reason == "interrupted":
            self.out.write(self.style("  (stopped)", "dim") + "\n")
        elif e.error:
            self.out.write(self.style("  (gave up: ", "red") + _quoted(e.error) + self.style(")", "red") + "\n")
        elif not e.answer:
            self.out.write(self.style(f"  (no answer: {e.reason})", "dim") + "\n")


class ChatSession:
    def __init__(
        self,
        harness,
        stdin: TextIO | None = None,
        out: TextIO | None = None,
        quiet: bool = False,
        terminal: Terminal | None = None,
    ) -> None:
        self.harness = harness
        self.terminal = terminal  # the user's terminal: lines read through its owner, as the servers' questions are
        self.stdin = stdin or sys.stdin
        self.out = out or sys.stdout
        self.quiet = quiet  # JSON Lines on stdout: no prompts or command output there
        self.interactive = bool(getattr(self.stdin, "isatty", lambda: False)()) and not quiet
        self.attached: list[tuple[str, str]] = []  # the (server, URI) pairs the last message attached
        self.reread = False  # /reread: the next message attaches them again

    def loop(self) -> int:
        history = self._readline() if self.interactive else None
        if self.interactive:
            self.out.write(HELP + "\n")
        chatting = self.terminal.chatting() if self.terminal is not None and self.interactive else nullcontext()
        try:
            with chatting:
                self._lines()
        finally:
            if history is not None:
                history()
        return 0

    def _undecodable(self, line: str) -> bool:
        """A line with bytes that are not UTF-8 (lone surrogates: stdin decoded with surrogateescape) is refused
        whole, one line saying where, and nothing of it is sent or run: a guess at the bytes would put other
        text before the model or a server than was typed."""
        bad = utf8.in_text(line)
        if bad is not None:
            print(f"decodeloop: not sent: the line is not UTF-8: {bad}", file=sys.stderr if self.quiet else self.out)
        return bad is not None

    def _next_line(self) -> str:
        """The user's next line: through the terminal's owner when there is one (a server's question that comes
        meanwhile is asked first, and the line kept); EOFError at end of input, KeyboardInterrupt for Ctrl-C."""
        if self.terminal is not None:
            return self.terminal.prompt("you> " if self.interactive else "", edit=self.interactive)
        if self.interactive:
            return input("you> ")
        line = self.stdin.readline()
        if not line:
            raise EOFError
        return line

    def _lines(self) -> None:
        """Read and handle lines until end of input or /quit."""
        while True:
            try:
                line = self._next_line()
            except EOFError:
                break
            except KeyboardInterrupt:  # at the prompt: a fresh prompt, as in a shell
                self.out.write("\n")
                continue
            if self._undecodable(line):
                continue
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not self.command(line):
                    break
                continue
            attachments = [(m.group(1), m.group(2)) for m in ATTACH.finditer(line)]
            if self.reread:
                attachments = [*self.attached, *(a for a in attachments if a not in self.attached)]
                self.reread = False
            if self._send(line, attachments) and attachments:
                self.attached = attachments
                self._subscribe(attachments)

    def _send(self, line: str, attachments: list) -> bool:
        """Run one user turn; a turn that cannot be sent is one line. True when it ran."""
        try:
            self.harness.run(line, attachments)
        except ToolSurfaceError as e:  # a server's tools grew past what the prompt can hold
            print(f"decodeloop: not sent: {visible(str(e))}", file=sys.stderr if self.quiet else self.out)
        except (ConfigError, McpError) as e:  # a resource that cannot be read: nothing was sent
            print(f"decodeloop: not sent: {visible(str(e))}", file=sys.stderr if self.quiet else self.out)
        else:
            return True
        return False

    def command(self, line: str) -> bool:
        """Run a /command; False to end the session."""
        name = line.split()[0].lower()
        if name in ("/quit", "/exit", "/q"):
            return False
        if name == "/reset":
            self.harness.reset()
            self._say("(new conversation)")
        elif name == "/tools":
            router = self.harness.router
            for tool in self.harness.tools:
                route = router.routes.get(tool.name)
                server = route.server if route is not None else "?"
                held = route is not None and (route.server, route.remote) in router.pending
                self._say(
                    f"{visible_line(tool.name)} ({visible_line(server)}): "
                    f"{_quoted(tool.description or '', 120)}"
                    + (f" [changed definition held: /approve {visible_line(tool.name)}]" if held else "")
                )
        elif name == "/approve":
            words = line.split()
            if len(words) != 2:
                self._say("usage: /approve NAME")
            elif self.harness.router.approve(words[1]):
                self._say(
                    f"(approved: calls to {visible_line(words[1])} follow its new definition now; "
                    "the prompt describes it from the next conversation, /reset)"
                )
            else:
                self._say(f"no changed definition of {visible_line(words[1])} is held")
        elif name == "/resources":
            self._resources()
        elif name == "/reread":
            if not self.attached:
                self._say("no resource attached yet: write @SERVER:URI in a message")
            else:
                self.reread = True
                names = ", ".join(f"{visible_line(s)}:{visible_line(u)}" for s, u in self.attached)
                self._say(f"(your next message attaches {names} again, read afresh)")
        elif name == "/prompts":
            self._prompts()
        elif name == "/prompt":
            self._prompt(line)
        elif name == "/help":
            self._say(HELP)
        else:
            self._say(f"unknown command {name!r}; {HELP}")
        return True

    def _resources(self) -> None:
        """Each server's resources and templates (every page), or why it has none."""
        for server, client in self.harness.router.clients.items():
            if not client.offers_resources():
                self._say(f"{visible_line(server)}: no resources")
                continue
            try:
                resources, templates = client.list_resources(), client.list_resource_templates()
            except McpError as e:
                self._say(f"{visible_line(server)}: resources not listed: {_quoted(str(e))}")
                continue
            self._say(f"{visible_line(server)}: {len(resources)} resource(s), {len(templates)} template(s)")
            for r in resources:
                kind = f" ({visible_line(r.mime_type)})" if r.mime_type else ""
                self._say(f"  @{visible_line(server)}:{visible_line(r.uri)}{kind} {_quoted(r.description, 120)}")
            for t in templates:
                self._say(f"  @{visible_line(server)}:{visible_line(t.uri_template)} {_quoted(t.description, 120)}")

    def _prompts(self) -> None:
        """Each server's prompts (every page) with their arguments, the required ones marked, or why it has none."""
        self._changed_prompts()
        for server, client in self.harness.router.clients.items():
            if not client.offers_prompts():
                self._say(f"{visible_line(server)}: no prompts")
                continue
            try:
                prompts = client.list_prompts()
            except McpError as e:
                self._say(f"{visible_line(server)}: prompts not listed: {_quoted(str(e))}")
                continue
            self._say(f"{visible_line(server)}: {len(prompts)} prompt(s)")
            for p in prompts:
                arguments = " ".join(
                    f"{visible_line(a.name)}=" + ("(required)" if a.required else "(optional)") for a in p.arguments
                )
                self._say(
                    f"  /prompt {visible_line(server)}:{visible_line(p.name)}"
                    + (f" {arguments}" if arguments else "")
                    + f" {_quoted(p.description, 120)}"
                )

    def _changed_prompts(self) -> None:
        """Say which servers announced that their prompts changed since they were last listed (the listing
        that follows, /prompts or the lookup of /prompt, is of the new ones)."""
        for server, client in self.harness.router.clients.items():
            if client.offers_prompts() and client.prompts_stale.is_set():
                name = visible_line(server)
                self._say(f"({name} says its prompts changed since they were last listed: listed again)")

    def _prompt(self, line: str) -> None:
        """/prompt NAME key=value ...: the prompt's messages shown (escaped), then sent as the user's turn."""
        try:
            words = shlex.split(line)[1:]
        except ValueError as e:
            self._say(f"usage: /prompt NAME key=value ... ({e})")
            return
        if not words or any("=" not in word or word.startswith("=") for word in words[1:]):
            self._say("usage: /prompt NAME key=value ... (a value with spaces in quotes: city='Salt Lake City')")
            return
        arguments = dict(word.split("=", 1) for word in words[1:])
        self._changed_prompts()
        try:
            turn = self.harness.prompt(words[0], arguments)
        except (ConfigError, McpError) as e:
            print(f"decodeloop: not sent: {visible(str(e))}", file=sys.stderr if self.quiet else self.out)
            return
        self._say(f"(prompt {visible_line(turn.name)} of {visible_line(turn.server)}, sent as your message:)")
        for what, text in turn.shown:
            self._say(f"  {visible_line(what)}: {_quoted(text, 2000)}")
        for what in turn.left_out:
            self._say(f"  left out: {visible_line(what)} (this model takes text only)")
        self._send(turn.user, list(turn.attachments))

    def completions(self, line: str, text: str) -> list[str]:
        """What Tab offers for `text`, the word being written at the end of `line`: command names, then after
        `/prompt` the prompts' names, their arguments, and an argument's values from the server's
        `completion/complete` (nothing where it offers none). Never raises: a completer must not break input."""
        try:
            return self._completions(line, text)
        except Exception:
            return []

    def _completions(self, line: str, text: str) -> list[str]:
        words = line.split()
        if len(words) <= 1 and not line.endswith(" "):
            return [c + " " for c in COMMANDS if c.startswith(text)] if text.startswith("/") else []
        if words[0] != "/prompt":
            return []
        clients = self.harness.router.clients
        if len(words) == 1 or (len(words) == 2 and not line.endswith(" ")):
            names = []
            for server, client in clients.items():
                if client.offers_prompts():
                    for p in client.list_prompts():
                        names += [p.name, f"{server}:{p.name}"]
            return sorted({n + " " for n in names if n.startswith(text)})
        server, prompt = self.harness.find_prompt(words[1])
        given = dict(w.split("=", 1) for w in words[2:] if "=" in w and w != text)
        if "=" not in text:
            return [f"{a.name}=" for a in prompt.arguments if a.name.startswith(text) and a.name not in given]
        argument, value = text.split("=", 1)
        client = clients[server]
        if not client.offers_completions():
            return []
        found = client.complete(prompt_ref(prompt.name), argument, value, given)
        return [f"{argument}={v}" for v in found.values]

    def _subscribe(self, attachments: list[tuple[str, str]]) -> None:
        """Subscribe to attached resources whose server offers it: its word that one changed is a notice."""
        for server, uri in attachments:
            client = self.harness.router.clients.get(server)
            resources = client.capabilities.get("resources") if client is not None else None
            if not isinstance(resources, dict) or resources.get("subscribe") is not True:
                continue
            try:
                client.subscribe_resource(uri)
            except McpError as e:
                self._say(f"(not subscribed to {visible_line(uri)}: {_quoted(str(e))})")

    def _say(self, text: str) -> None:
        if not self.quiet:
            self.out.write(text + "\n")
            self.out.flush()

    def _readline(self):
        """Line editing and a history file when readline is there; returns the function that saves it."""
        try:
            import readline
        except ImportError:
            return None
        path = os.path.join(
            os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "decodeloop", "chat_history"
        )
        try:
            readline.read_history_file(path)
        except OSError:
            pass
        matches: list[str] = []

        def complete(text: str, state: int) -> str | None:
            if state == 0:
                matches[:] = self.completions(readline.get_line_buffer()[: readline.get_endidx()], text)
            return matches[state] if state < len(matches) else None

        readline.set_completer(complete)
        readline.set_completer_delims(" \t\n")  # `arg=value` and `server:name` are one word to complete
        # libedit (macOS) reads its own binding syntax
        readline.parse_and_bind("bind ^I rl_complete" if "libedit" in (readline.__doc__ or "") else "tab: complete")

        def save() -> None:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                readline.set_history_length(1000)
                readline.write_history_file(path)
            except OSError:
                pass

        return save
