"""Elicitation answered at a terminal: a server's `elicitation/create` (MCP 2025-11-25, form and URL modes).

This module owns what the client does when a server asks the user for input:

- checking the request: form mode's `requestedSchema` must be what the spec allows (form.py reads it,
  and says why when it is not: then the request is declined); a mode other than form or url is refused
  as invalid params, as the spec says.
- asking (`TerminalElicitation`): the server's name and message, then each field with its title,
  description, type, constraints, default and whether it is required; a line is read and checked, and
  asked again with the reason when it does not fit. Enter takes the default (or leaves out an optional
  field), `:skip` leaves out an optional field, booleans are y/n, choices are a number or a value. At
  the end the answers are shown, to send (accept), edit, or not send (decline). `:decline` and
  `:cancel` work at every prompt; Ctrl-C and end of input cancel. What is sent is checked against the
  schema once more.
- URL mode: the full URL and, on a line of its own, its host as a browser reads it (the WHATWG URL
  Standard, net/url.py: a backslash ends the host, the last @ ends the user info, `0x7f.1` is 127.0.0.1),
  with warnings (not https, user info before the host, control characters, a punycode or non-ASCII host
  and what it reads, a bare IP address in any notation and which one, loopback or private, and a URL
  whose host Python's urllib reads otherwise); only http and https URLs are shown. Nothing is ever opened
  or fetched here: the user is asked whether they will open it themselves (accept), or not (decline).
- nobody to ask (`Unattended`): every request is declined, saying so.
- the record: every request answered is an `Elicitation` event (server, mode, message, action, why,
  and the content sent), for the trace and the JSON Lines. The content is what went to the server,
  which the JSON-RPC traffic holds anyway; a form cannot ask for a password (its only formats are
  email, uri, date and date-time), and a field whose name or title looks like one for a secret is
  shown with a warning that the spec forbids asking for secrets in a form.

Server text (name, message, titles, descriptions, choices, the URL) reaches the terminal through
untrusted.py: control and format characters as escapes, every line after the first behind a margin.
The terminal is reached only through the callables given, `read_line` (a line, or None at end of
input; KeyboardInterrupt for Ctrl-C), `write`, and `hold` (the terminal held for a whole form, so no other
reader takes a line meant for it: ui/terminal.py's `Terminal.holding`); `terminal_reader` makes a
`read_line` for a real terminal that
gives up when `interrupted` is set (by `ctrl_c_noted`), since a 2025-11-25 server's request is answered on the session's
reader thread, which Ctrl-C never reaches.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import select
import signal
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TextIO

from decodeloop.client_features.form import (
    MAX_LABEL_CHARS,
    MISSING,
    NO,
    SECRET,
    YES,
    Field,
    SchemaError,
    content_problem,
    parse_schema,
)
from decodeloop.errors import RpcError
from decodeloop.events import Elicitation, Emit
from decodeloop.net.url import UrlError, WebUrl, scheme_of
from decodeloop.net.url import parse as parse_url
from decodeloop.text.untrusted import cap_text, quoted, visible, visible_line

INVALID_PARAMS = -32602
MAX_MESSAGE_CHARS = 2_000  # the server's message, as shown and recorded
MAX_DESCRIPTION_CHARS = 1_000
MAX_URL_CHARS = 2_000
DECLINE, CANCEL, SKIP = ":decline", ":cancel", ":skip"

POLL_SECONDS = 0.2  # how often a read on the reader thread looks whether Ctrl-C was pressed

Read = Callable[[], "str | None"]
Write = Callable[[str], None]
Hold = Callable[[str], AbstractContextManager[None]]  # the terminal, held for WHO's question while inside


class _Declined(Exception):
    pass


class _Cancelled(Exception):
    pass


@dataclasses.dataclass
class UrlFacts:
    """What the user should know about a URL before opening it: its host, and what is odd about it."""

    url: str
    host: str  # host[:port] as a browser reads it (the WHATWG URL Standard, net/url.py), never as urllib does
    warnings: list[str]


def inspect_url(url: str, max_chars: int = MAX_URL_CHARS) -> UrlFacts:
    """The host of an http(s) URL as a browser reads it and the warnings it deserves; ValueError for one not to show.

    The host, and every warning, come from net/url.py's reading of the URL Standard: what the user's browser
    will connect to. A URL whose host Python's urllib reads otherwise is shown with a warning saying so.
    """
    if len(url) > max_chars:
        raise ValueError(f"the URL is {len(url):,} characters long, more than {max_chars:,}")
    scheme = scheme_of(url)
    if scheme not in ("http", "https"):
        raise ValueError(f"only http and https URLs are shown, and this one is {visible_line(scheme or 'relative')!r}")
    try:
        parsed = parse_url(url)
    except UrlError as exc:
        raise ValueError(f"the URL does not parse as a browser reads it: {visible_line(str(exc))}") from None
    host = visible_line(parsed.host_port)
    warnings: list[str] = []
    if parsed.scheme != "https":
        warnings.append("not https: what you send there travels unencrypted")
    if parsed.userinfo is not None:
        warnings.append(
            f"it has {visible_line(parsed.userinfo)!r} before an @: that is not the host; the browser goes to {host}"
        )
    if visible_line(url) != url:
        warnings.append("it holds control, format or invisible characters (shown as escapes)")
    warnings += _host_warnings(parsed)
    other = _urllib_host(url)
    if not _same_host(other, parsed):
        read = f"takes the host to be {visible_line(other)!r}" if other else "finds no host in it"
        warnings.append(f"other software reads this URL otherwise (Python's urllib {read}): a browser goes to {host}")
    return UrlFacts(url, host, warnings)


def _host_warnings(parsed: WebUrl) -> list[str]:
    """What the host is: a bare IP address (which one, and whether loopback or private), an international name
    (what it reads), or a name written otherwise than the browser reads it (percent-escapes, fullwidth letters)."""
    host, written = visible_line(parsed.host), visible_line(parsed.written_host)
    ip = parsed.ip
    if ip is not None:
        address = str(ip)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            address, ip = f"{ip}, the IPv4 address {ip.ipv4_mapped}", ip.ipv4_mapped
        shown_as = f" (written {written!r})" if written.strip("[]").lower() != str(parsed.ip) else ""
        return [f"the host is a bare IP address, not a name: it is {address}{shown_as}{_address_kind(ip)}"]
    labels = parsed.host.split(".")
    reads = ".".join(_readable(label) for label in labels)
    if not parsed.written_host.isascii():
        also = f", which reads {visible_line(reads)!r}" if reads != parsed.host else ""
        return [f"the host has non-ASCII characters, which can imitate another name: as ASCII it is {host}{also}"]
    if any(label.startswith("xn--") for label in labels):
        return [
            f"the host is punycode, an international name that can imitate another: it reads {visible_line(reads)!r}"
        ]
    if written and written.lower() != parsed.host:
        return [f"the host is written {written!r}, which a browser reads as {host}"]
    return []


def _address_kind(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    if ip.is_loopback:
        return ": loopback, this machine itself"
    if ip.is_unspecified:
        return ": unspecified, which reaches this machine"
    if ip.is_link_local:
        return ": link-local, on this machine's own network segment"
    if ip.is_private:
        return ": private, an address on a local network"
    return ""


def _readable(label: str) -> str:
    """A label as it reads: punycode decoded (net/url.py has checked it), anything else as it is."""
    if not label.startswith("xn--"):
        return label
    try:
        return label[4:].encode("ascii").decode("punycode")
    except UnicodeError:
        return label


def _urllib_host(url: str) -> str | None:
    try:
        return urllib.parse.urlsplit(url).hostname
    except ValueError:
        return None


def _same_host(other: str | None, parsed: WebUrl) -> bool:
    """Whether urllib's hostname names the browser's host: the same text, address or IDNA 2003 name."""
    if other is None:
        return False
    if other == parsed.host.strip("[]"):
        return True
    try:
        if ipaddress.ip_address(other) == parsed.ip:
            return True
    except ValueError:
        pass
    try:
        return other.encode("idna").decode("ascii") == parsed.host
    except UnicodeError:
        return False


class TerminalElicitation:
    """Answers elicitation/create by asking the user at a terminal; one question at a time.

    `read_line()` gives the next line typed (None at end of input; KeyboardInterrupt for Ctrl-C) and
    `write(text)` shows text; `emit` gets an `Elicitation` event for every request answered.
    """

    def __init__(
        self,
        read_line: Read,
        write: Write,
        emit: Emit | None = None,
        interrupted: threading.Event | None = None,
        hold: Hold | None = None,
    ) -> None:
        self.read_line = read_line
        self.write = write
        self.emit = emit if emit is not None else (lambda event: None)
        self.interrupted = interrupted  # terminal_reader's: a Ctrl-C before this question is not for it
        self.hold = hold  # the terminal's owner: the terminal, held for a whole form (ui/terminal.py)
        self._lock = threading.Lock()  # two servers asking at once: one question, then the other

    def __call__(self, server: str, params: dict, calls: list[str]) -> dict:
        with self._lock, self.hold(f"server {server}") if self.hold is not None else nullcontext():
            if self.interrupted is not None:
                self.interrupted.clear()
            return self._answer(server, params, calls)

    def _answer(self, server: str, params: dict, calls: list[str]) -> dict:
        mode = params.get("mode", "form")
        message = params.get("message")
        message = cap_text(message, MAX_MESSAGE_CHARS, "message") if isinstance(message, str) else ""
        record = Elicitation(
            server=server, mode=mode if isinstance(mode, str) else repr(mode), message=message, action="", reason=""
        )
        if mode not in ("form", "url"):
            record.action, record.reason = "error", "an elicitation mode this client does not offer"
            self.emit(record)
            raise RpcError(INVALID_PARAMS, f"elicitation mode {json.dumps(mode)[:40]}: this client offers form and url")
        if not isinstance(params.get("message"), str):
            return self._refuse(record, "the request has no message saying what it is for")
        try:
            if mode == "url":
                result = self._url(server, params, record, calls)
            else:
                result = self._form(server, params, record, calls)
        except _Refused as why:
            return self._refuse(record, str(why))
        except _Declined:
            record.action, record.reason = "decline", "the user declined"
            result = {"action": "decline"}
        except _Cancelled as why:
            record.action, record.reason = "cancel", str(why)
            result = {"action": "cancel"}
        self.write(f"  → {record.action} sent to {visible_line(server)}\n")
        self.emit(record)
        return result

    def _refuse(self, record: Elicitation, why: str) -> dict:
        """Decline a request that cannot be asked as it stands, telling the user and the trace why."""
        self.write(f"decodeloop: server {visible_line(record.server)} asked for input, declined: {visible_line(why)}\n")
        record.action, record.reason = "decline", f"not asked: {why}"
        self.emit(record)
        return {"action": "decline"}

    def _header(self, server: str, what: str, message: str, calls: list[str]) -> None:
        during = f" during its {', '.join(visible_line(c) for c in calls)} call" if calls else ""
        self.write(
            f"\n── server {visible_line(server)}{during} {what} ──\n"
            f"  {quoted(message, '  │ ')}\n"
            f"  ({DECLINE} refuses, {CANCEL} or Ctrl-C dismisses, at any prompt)\n"
        )

    def _ask(self, prompt: str) -> str:
        """One line typed, stripped; `:decline` and `:cancel` end the question, as do Ctrl-C and end of input."""
        self.write(prompt)
        try:
            line = self.read_line()
        except KeyboardInterrupt:
            self.write("\n")
            raise _Cancelled("the user pressed Ctrl-C") from None
        if line is None:
            self.write("\n")
            raise _Cancelled("end of input")
        text = line.strip()
        if text == DECLINE:
            raise _Declined()
        if text == CANCEL:
            raise _Cancelled("the user cancelled")
        return text

    # -- form mode ----------------------------------------------------------------------

    def _form(self, server: str, params: dict, record: Elicitation, calls: list[str]) -> dict:
        try:
            fields = parse_schema(params.get("requestedSchema"))
        except SchemaError as exc:
            raise _Refused(str(exc)) from None
        record.fields = [field.name for field in fields]
        self._header(server, "asks you for input", record.message, calls)
        answers: dict[str, Any] = {}
        start = {field.name: field.default for field in fields if field.default is not MISSING}
        while True:
            answers = {}
            for n, field in enumerate(fields, 1):
                value = self._field(field, n, len(fields), start.get(field.name, MISSING))
                if value is not MISSING:
                    answers[field.name] = value
            self.write(f"  to send to {visible_line(server)}:\n")
            for field in fields:
                shown = _shown(answers[field.name]) if field.name in answers else "(left out)"
                self.write(f"    {_label(field.name)} = {shown}\n")
            while True:
                word = self._ask("  send it? y sends, n declines, e edits the answers: ").lower()
                if word in YES or word in NO or word in ("e", "edit"):
                    break
                self.write("  answer y, n or e\n")
            if word in NO:
                raise _Declined()
            if word in YES:
                break
            start = dict(answers)  # edit: every field again, its answer the default
        why = content_problem(fields, answers)
        if why is not None:  # never: each answer was checked as it was typed
            raise _Refused(f"the answers do not fit the schema: {why}")
        record.action, record.reason, record.content = "accept", "the user sent the answers", answers
        return {"action": "accept", "content": answers}

    def _field(self, field: Field, n: int, total: int, default: Any) -> Any:
        """Ask for one field until its answer fits: the value, or MISSING for an optional field left out."""
        self.write(f"  [{n}/{total}] {_label(field.name)}" + (f" ({_label(field.title)})" if field.title else ""))
        self.write(f": {_describe(field, default)}\n")
        if field.description:
            description = cap_text(field.description, MAX_DESCRIPTION_CHARS, "description")
            self.write(f"        {quoted(description, '        │ ')}\n")
        if SECRET.search(field.name) or (field.title and SECRET.search(field.title)):
            self.write(
                "        ! this looks like a secret: MCP forbids asking for one in a form (a server should use a "
                "URL); what you type goes to the server and into the trace\n"
            )
        for k, (value, title) in enumerate(field.options, 1):
            label = _label(title) + f"  [{_label(value)}]" if title is not None else _label(value)
            self.write(f"        {k}. {label}\n")
        while True:
            text = self._ask("  > ")
            if text == SKIP or (not text and default is MISSING):
                if not field.required:
                    return MISSING
                self.write("  required: type a value\n")
                continue
            if not text:
                return default
            try:
                return field.parse(text)
            except ValueError as exc:
                self.write(f"  {visible_line(str(exc))}; again\n")

    # -- URL mode -----------------------------------------------------------------------

    def _url(self, server: str, params: dict, record: Elicitation, calls: list[str]) -> dict:
        url, ident = params.get("url"), params.get("elicitationId")
        if not isinstance(url, str) or not isinstance(ident, str):
            raise _Refused("a URL request needs a url and an elicitationId, both text")
        record.url = cap_text(url, MAX_URL_CHARS, "URL")
        try:
            facts = inspect_url(url)
        except ValueError as exc:
            raise _Refused(str(exc)) from None
        self._header(server, "asks you to open a web page", record.message, calls)
        self.write(f"  url:  {visible_line(facts.url)}\n  host: >>> {visible_line(facts.host)} <<<\n")
        for warning in facts.warnings:
            self.write(f"  ! {warning}\n")
        self.write("  decodeloop opens nothing: to go there, copy the URL into a browser yourself.\n")
        while True:
            word = self._ask("  will you open it? y accepts (you go there yourself), n declines: ").lower()
            if word in YES:
                record.action, record.reason = "accept", "the user will open the URL"
                return {"action": "accept"}
            if word in NO:
                raise _Declined()
            self.write("  answer y or n\n")


class _Refused(_Declined):
    """A request declined unasked: `args[0]` says why."""


def _label(text: str) -> str:
    return visible_line(cap_text(text, MAX_LABEL_CHARS, "label"))


def _shown(value: Any) -> str:
    return visible(json.dumps(value, ensure_ascii=False))


def _describe(field: Field, default: Any) -> str:
    """A field's type, constraints, default and whether it is required, in words."""
    bits = [
        {"choice": "one of", "choices": "any of (numbers or values, separated by commas)", "boolean": "y/n"}.get(
            field.type, field.type
        )
    ]
    if field.format:
        bits.append(field.format)
    if field.min_length is not None or field.max_length is not None:
        bits.append(_range(field.min_length, field.max_length, "characters"))
    if field.minimum is not None or field.maximum is not None:
        bits.append(_range(field.minimum, field.maximum, ""))
    if field.min_items is not None or field.max_items is not None:
        bits.append(_range(field.min_items, field.max_items, "choices"))
    if field.pattern is not None:
        bits.append(f"matching {visible_line(cap_text(field.pattern, MAX_LABEL_CHARS, 'pattern'))}")
    bits.append("required" if field.required else f"optional ({SKIP} leaves it out)")
    if default is not MISSING:
        bits.append(f"Enter takes {cap_text(_shown(default), MAX_LABEL_CHARS, 'default')}")
    elif not field.required:
        bits.append("Enter leaves it out")
    return ", ".join(bits)


def _range(low: float | None, high: float | None, unit: str) -> str:
    unit = f" {unit}" if unit else ""
    if low is not None and high is not None:
        return f"{low:g} to {high:g}{unit}"
    return f"at least {low:g}{unit}" if low is not None else f"at most {high:g}{unit}"


class Unattended:
    """Answers elicitation/create when nobody can: declined, with an event saying why."""

    def __init__(self, emit: Emit | None = None, why: str = "stdin is not a terminal") -> None:
        self.emit = emit if emit is not None else (lambda event: None)
        self.why = why

    def __call__(self, server: str, params: dict, calls: list[str]) -> dict:
        mode, message = params.get("mode", "form"), params.get("message")
        self.emit(
            Elicitation(
                server=server,
                mode=mode if isinstance(mode, str) else repr(mode),
                message=cap_text(message, MAX_MESSAGE_CHARS, "message") if isinstance(message, str) else "",
                action="decline",
                reason=f"nobody to ask: {self.why}",
                url=cap_text(params["url"], MAX_URL_CHARS, "URL") if isinstance(params.get("url"), str) else None,
            )
        )
        return {"action": "decline"}


def terminal_reader(stdin: TextIO, interrupted: threading.Event) -> Read:
    """read_line for a real terminal: a line of `stdin` (None at its end), given up when `interrupted` is set.

    A server's request on the 2025-11-25 wire is answered on its session's reader thread, and Ctrl-C
    reaches only the main thread (which then stops the call): the read looks at `interrupted` between
    short waits for input, so it ends with the call rather than taking the next line typed.
    """

    def read() -> str | None:
        try:
            fd: int | None = stdin.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        while fd is not None:
            if interrupted.is_set():
                raise KeyboardInterrupt
            try:
                ready, _, _ = select.select([fd], [], [], POLL_SECONDS)
            except (OSError, ValueError):  # not a file select can wait on: read it as it is
                break
            if ready:
                break
        line = stdin.readline()
        return line or None

    return read


@contextmanager
def ctrl_c_noted(interrupted: threading.Event) -> Iterator[None]:
    """While inside: Ctrl-C sets `interrupted` before doing what it did (on the main thread only; else nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def noted(signum: int, frame: Any) -> None:
        interrupted.set()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, noted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
