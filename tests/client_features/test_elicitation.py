"""Elicitation at a terminal (client_features/elicitation.py), against the real asking server on both wires.

A scripted terminal types the user's lines into the real TerminalElicitation; each test reads what the
server got back (the `elicit` tool answers with the client's answer as JSON), what the terminal showed,
and the event recorded.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import urllib.request
import webbrowser

import pytest
from conftest import ROOT, WIRES, Recorder

from decodeloop.client_features.elicitation import (
    TerminalElicitation,
    Unattended,
    ctrl_c_noted,
    inspect_url,
    terminal_reader,
)
from decodeloop.client_features.form import SchemaError, content_problem, parse_schema
from decodeloop.errors import RpcError
from decodeloop.events import Elicitation
from decodeloop.mcp.client_features import ClientFeatures
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.startup import ClientOptions, start_servers
from decodeloop.ui.trace import TraceView

ASKING = [sys.executable, os.path.join(ROOT, "tests", "servers", "asking.py")]
UNSAFE_RAW = ("\x1b", "\u202e", "\u2066", "\x07")


class Terminal:
    """Lines typed in order (KeyboardInterrupt: Ctrl-C; past the last: end of input), and what was shown."""

    def __init__(self, *lines) -> None:
        self.lines = list(lines)
        self.shown: list[str] = []

    def read(self):
        if not self.lines:
            return None
        line = self.lines.pop(0)
        if line is KeyboardInterrupt:
            raise KeyboardInterrupt
        return line + "\n"

    def write(self, text: str) -> None:
        self.shown.append(text)

    @property
    def text(self) -> str:
        return "".join(self.shown)


def elicit(wire: str, request: dict, terminal: Terminal, events: Recorder | None = None) -> dict:
    """The request asked by the asking server at `wire`, answered at `terminal`: what the server got back."""
    events = events if events is not None else Recorder()
    features = ClientFeatures(elicitation=TerminalElicitation(terminal.read, terminal.write, events))
    with start_servers(
        [ServerSpec("asking", ASKING, protocol=wire)], events, options=ClientOptions(features=features)
    ) as router:
        result = router.clients["asking"].call_tool("elicit", {"request": request})
    return json.loads(result.content[0]["text"])


def form(schema: dict, message: str = "Tell me about you") -> dict:
    return {"mode": "form", "message": message, "requestedSchema": {"type": "object", **schema}}


PERSON = form(
    {
        "properties": {
            "name": {"type": "string", "title": "Full name", "minLength": 2},
            "age": {"type": "integer", "minimum": 18, "maximum": 130},
            "email": {"type": "string", "format": "email"},
        },
        "required": ["name", "age", "email"],
    }
)


@pytest.mark.parametrize("wire", WIRES)
def test_typed_values_are_checked_asked_again_and_sent_on_accept(wire, events):
    terminal = Terminal("A", "Ann", "abc", "17", "30", "not-mail", "ann@example.com", "y")
    answer = elicit(wire, PERSON, terminal, events)
    assert answer == {"result": {"action": "accept", "content": {"name": "Ann", "age": 30, "email": "ann@example.com"}}}
    assert terminal.lines == []  # every line was read: each invalid one asked again
    shown = terminal.text
    assert "server asking during its elicit call asks you for input" in shown
    assert "Tell me about you" in shown and ":decline" in shown and ":cancel" in shown
    assert "name (Full name): string, at least 2 characters, required" in shown
    assert "age: integer, 18 to 130, required" in shown
    for reason in ("shorter than 2 characters", "not a whole number", "less than the minimum 18", "not an email"):
        assert reason in shown
    assert 'name = "Ann"' in shown and "age = 30" in shown
    [record] = events.of("elicitation")
    assert (record.server, record.mode, record.action) == ("asking", "form", "accept")
    assert record.fields == ["name", "age", "email"] and record.content == answer["result"]["content"]


CHOICES = form(
    {
        "properties": {
            "city": {"type": "string", "default": "Polson"},
            "size": {"type": "string", "enum": ["S", "M", "L"]},
            "color": {
                "type": "string",
                "oneOf": [{"const": "#f00", "title": "Red"}, {"const": "#0f0", "title": "Green"}],
            },
            "plan": {"type": "string", "enum": ["a", "b"], "enumNames": ["Basic", "Better"], "default": "a"},
            "extras": {"type": "array", "items": {"enum": ["wifi", "bike", "pool"]}, "maxItems": 2},
            "tags": {
                "type": "array",
                "items": {"anyOf": [{"const": "x", "title": "Ex"}, {"const": "y", "title": "Why"}]},
            },
            "newsletter": {"type": "boolean", "default": True},
            "pets": {"type": "boolean"},
            "when": {"type": "string", "format": "date"},
            "nights": {"type": "number", "default": 2.5},
            "note": {"type": "string"},
        },
        "required": ["size", "color", "extras", "pets", "when"],
    }
)


@pytest.mark.parametrize("wire", WIRES)
def test_defaults_choices_by_number_value_or_title_booleans_and_left_out_fields(wire):
    terminal = Terminal(
        "",  # city: the default
        "4",  # size: no fourth choice
        "2",  # size M, by number
        "Green",  # color by title
        "",  # plan: the default
        "1,2,3",  # extras: more than two
        "wifi, 3",  # by value and number
        ":skip",  # tags: optional, left out
        "",  # newsletter: default true
        "maybe",  # not y or n
        "n",
        "2025-02-30",  # no such day
        "2025-02-28",
        "",  # nights: the default
        "",  # note: optional, left out
        "y",
    )
    answer = elicit(wire, CHOICES, terminal)
    assert answer["result"] == {
        "action": "accept",
        "content": {
            "city": "Polson",
            "size": "M",
            "color": "#0f0",
            "plan": "a",
            "extras": ["wifi", "pool"],
            "newsletter": True,
            "pets": False,
            "when": "2025-02-28",
            "nights": 2.5,
        },
    }
    assert terminal.lines == []
    shown = terminal.text
    assert "1. Red  [#f00]" in shown and "2. Basic  [b]" not in shown and "2. Better  [b]" in shown
    assert "more than 2 choices" in shown and "answer y or n" in shown and "not a date (YYYY-MM-DD)" in shown
    assert "'4' is not one of the choices" in shown
    assert "tags = (left out)" in shown and "note = (left out)" in shown


@pytest.mark.parametrize("wire", WIRES)
def test_edit_asks_every_field_again_with_the_answers_as_defaults(wire):
    schema = form({"properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a", "b"]})
    terminal = Terminal("one", "1", "e", "", "2", "y")
    assert elicit(wire, schema, terminal)["result"] == {"action": "accept", "content": {"a": "one", "b": 2}}
    assert 'Enter takes "one"' in terminal.text and terminal.lines == []


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    "lines, action, reason",
    [
        (["Ann", ":decline"], "decline", "the user declined"),
        (["Ann", "30", "a@b.co", "n"], "decline", "the user declined"),
        ([":cancel"], "cancel", "the user cancelled"),
        (["Ann", KeyboardInterrupt], "cancel", "the user pressed Ctrl-C"),
        (["Ann"], "cancel", "end of input"),
    ],
)
def test_decline_cancel_ctrl_c_and_end_of_input(wire, lines, action, reason, events):
    terminal = Terminal(*lines)
    assert elicit(wire, PERSON, terminal, events) == {"result": {"action": action}}
    [record] = events.of("elicitation")
    assert (record.action, record.reason, record.content) == (action, reason, None)
    assert f"→ {action} sent to asking" in terminal.text


HOSTILE = "Pay now\x1b[2J\x1b]0;owned\x07 \u202eevil\u202c\nsecond line \u2066x"


@pytest.mark.parametrize("wire", WIRES)
def test_hostile_server_text_is_shown_escaped(wire, events):
    schema = form(
        {
            "properties": {
                "f\x1b[31m": {
                    "type": "string",
                    "title": "T\u202eitle",
                    "description": "D\x1b[1m\nmore",
                    "enum": ["v\x07"],
                }
            }
        },
        HOSTILE,
    )
    terminal = Terminal("1", "y")
    assert elicit(wire, schema, terminal, events)["result"] == {"action": "accept", "content": {"f\x1b[31m": "v\x07"}}
    shown = terminal.text
    assert not any(char in shown for char in UNSAFE_RAW)
    assert "Pay now\\x1b[2J\\x1b]0;owned\\x07 \\u202eevil\\u202c" in shown
    assert "\n  │ second line \\u2066x" in shown  # the message's next line behind the margin
    assert "f\\x1b[31m (T\\u202eitle)" in shown and "D\\x1b[1m" in shown and "1. v\\x07" in shown
    # the trace shows the event escaped too
    out = _Out()
    TraceView(out, color=False)(events.of("elicitation")[0])
    assert not any(char in out.text for char in UNSAFE_RAW) and "\\u202e" in out.text


class _Out:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    "schema, reason",
    [
        ({"properties": {"who": {"type": "object", "properties": {}}}}, "nested objects are not allowed"),
        ({"properties": {"pw": {"type": "string", "format": "password"}}}, 'format "password" is not one of'),
        ({"properties": {"l": {"type": "array", "items": {"type": "object"}}}}, "an array must be a multi-select"),
        ({"properties": {"a": {"type": "string"}}, "required": ["b"]}, "it requires 'b', which it does not define"),
        (
            {"properties": {"n": {"type": "integer", "minimum": 5, "default": 1}}},
            "its default is less than the minimum",
        ),
        ({"properties": {"c": {"type": "string", "enum": ["a", "a"]}}}, "holds a value twice"),
        ({"properties": {"p": {"type": "string", "pattern": "("}}}, "not a regular expression"),
        ({"properties": {"n" * 201: {"type": "string"}}}, "a field's name is 201 characters long, more than 200"),
        ({"properties": {"big": {"type": "string", "default": "x" * 70_000}}}, "characters of JSON, more than 64,000"),
    ],
)
def test_a_schema_the_spec_does_not_allow_is_declined_unasked_saying_why(wire, schema, reason, events):
    terminal = Terminal()  # nothing typed: nothing is asked
    assert elicit(wire, form(schema), terminal, events) == {"result": {"action": "decline"}}
    assert reason in terminal.text and "asked for input, declined" in terminal.text
    [record] = events.of("elicitation")
    assert record.action == "decline" and reason in record.reason and record.reason.startswith("not asked:")


def test_a_schema_that_is_not_an_object_is_declined():
    for schema in (None, [], {"type": "array"}, {"type": "object", "properties": []}):
        with pytest.raises(SchemaError):
            parse_schema(schema)
    assert parse_schema({"type": "object"}) == []  # no fields: a yes or no


def test_content_is_checked_against_the_form():
    fields = parse_schema(PERSON["requestedSchema"])
    assert content_problem(fields, {"name": "Ann", "age": 30, "email": "a@b.co"}) is None
    assert content_problem(fields, {"name": "Ann", "age": 30}) == "'email' required but missing"
    assert content_problem(fields, {"name": "Ann", "age": True, "email": "a@b.co"}) == "'age' is not a number"
    assert content_problem(fields, {"name": "Ann", "age": 30, "email": "a@b.co", "x": 1}) == (
        "'x' is not a field of the form"
    )


@pytest.fixture
def nothing_opens(monkeypatch):
    """Fail the test if anything tries to open or fetch a URL."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"something tried to open or fetch {args!r}")

    for name in ("open", "open_new", "open_new_tab", "get"):
        monkeypatch.setattr(webbrowser, name, refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)


URL = {
    "mode": "url",
    "elicitationId": "e-1",
    "url": "https://pay.example.com/checkout?id=7",
    "message": "Finish paying at the link",
}


@pytest.mark.parametrize("wire", WIRES)
def test_url_mode_shows_the_url_and_its_host_opens_nothing_and_accepts(wire, events, nothing_opens):
    terminal = Terminal("maybe", "y")
    assert elicit(wire, URL, terminal, events) == {"result": {"action": "accept"}}
    shown = terminal.text
    assert "asks you to open a web page" in shown and "Finish paying at the link" in shown
    assert "url:  https://pay.example.com/checkout?id=7" in shown and "host: >>> pay.example.com <<<" in shown
    assert "decodeloop opens nothing" in shown and "answer y or n" in shown
    assert "! " not in shown  # an https URL with a plain host: no warning
    [record] = events.of("elicitation")
    assert (record.mode, record.action, record.url, record.content) == ("url", "accept", URL["url"], None)


@pytest.mark.parametrize("wire", WIRES)
def test_url_mode_decline_and_the_servers_word_that_it_is_complete(wire, events, nothing_opens):
    terminal = Terminal("n")
    features = ClientFeatures(elicitation=TerminalElicitation(terminal.read, terminal.write, events))
    with start_servers(
        [ServerSpec("asking", ASKING, protocol=wire)], events, options=ClientOptions(features=features)
    ) as router:
        client = router.clients["asking"]
        answer = json.loads(client.call_tool("elicit", {"request": URL}).content[0]["text"])
        client.call_tool("complete", {"elicitationId": "e-1"})
    assert answer == {"result": {"action": "decline"}}
    notices = [e.message for e in events.of("notice") if e.source == "asking"]
    assert any("interaction at the URL it asked you to open is complete (elicitation e-1)" in n for n in notices)


def test_a_suspicious_url_is_shown_with_warnings_and_escaped(nothing_opens):
    facts = inspect_url("http://accounts.example.com@xn--pypal-4ve.com:8443/\u202elogin")
    assert facts.host == "xn--pypal-4ve.com:8443"
    warnings = " | ".join(facts.warnings)
    assert "not https" in warnings
    assert "'accounts.example.com' before an @" in warnings
    assert "punycode" in warnings and "pаypal" in warnings  # the Cyrillic а it imitates with
    assert "control, format or invisible characters" in warnings
    assert any("non-ASCII" in w for w in inspect_url("https://pаypal.com/").warnings)
    assert any("bare IP address" in w for w in inspect_url("https://10.0.0.1/").warnings)
    terminal = Terminal("n")
    asker = TerminalElicitation(terminal.read, terminal.write)
    request = dict(URL, url="http://accounts.example.com@xn--pypal-4ve.com/\u202elogin\x1b[2J")
    assert asker("asking", request, []) == {"action": "decline"}
    assert not any(char in terminal.text for char in UNSAFE_RAW)
    assert "\\u202elogin\\x1b[2J" in terminal.text and "host: >>> xn--pypal-4ve.com <<<" in terminal.text


@pytest.mark.parametrize(
    "url, reason",
    [
        ("javascript:alert(1)", "only http and https URLs are shown"),
        ("file:///etc/passwd", "only http and https URLs are shown"),
        ("https://", "the URL does not parse as a browser reads it: it has no host"),
        ("https://user@/x", "the URL does not parse as a browser reads it"),
        ("https://[::1/", "the URL does not parse as a browser reads it"),
        ("https://0x7f.256.1.1/", "the URL does not parse as a browser reads it"),
    ],
)
def test_a_url_that_is_not_a_web_address_is_declined_unasked(url, reason, events, nothing_opens):
    terminal = Terminal()
    asker = TerminalElicitation(terminal.read, terminal.write, events)
    assert asker("asking", dict(URL, url=url), []) == {"action": "decline"}
    assert reason in terminal.text and reason in events.of("elicitation")[0].reason


# the host a browser goes to (the WHATWG URL Standard), where Python's urllib reads another


def test_a_backslash_ends_the_host_so_what_follows_the_at_sign_is_not_it(nothing_opens):
    facts = inspect_url("https://evil.example\\@pay.example.com/")
    assert facts.host == "evil.example"  # every browser goes there; urllib said pay.example.com
    warnings = " | ".join(facts.warnings)
    assert "Python's urllib takes the host to be 'pay.example.com'" in warnings
    assert "a browser goes to evil.example" in warnings and "what follows the @" not in warnings


def test_the_user_info_ends_at_the_last_at_sign(nothing_opens):
    facts = inspect_url("https://pay.example.com@x@evil.example/")
    assert facts.host == "evil.example"
    assert "'pay.example.com@x' before an @: that is not the host; the browser goes to evil.example" in " ".join(
        facts.warnings
    )


@pytest.mark.parametrize(
    "url, address",
    [
        ("https://2130706433/", "127.0.0.1"),
        ("https://0x7f.1/", "127.0.0.1"),
        ("https://0177.0.0.1/", "127.0.0.1"),
        ("https://127.1/", "127.0.0.1"),
        ("https://%31%32%37.0.0.1/", "127.0.0.1"),
        ("https://[::ffff:127.0.0.1]/", "::ffff:7f00:1, the IPv4 address 127.0.0.1"),
    ],
)
def test_a_bare_ip_address_in_any_notation_says_which_address_it_is(url, address, nothing_opens):
    facts = inspect_url(url)
    assert facts.host in ("127.0.0.1", "[::ffff:7f00:1]")
    [warning] = [w for w in facts.warnings if "bare IP address" in w]
    assert f"it is {address}" in warning and "loopback, this machine itself" in warning


def test_private_and_link_local_addresses_are_called_out(nothing_opens):
    assert "it is 192.168.1.1 (written '0xc0a80101'): private" in " ".join(inspect_url("https://0xc0a80101/").warnings)
    assert "it is 169.254.169.254 (written '169.254.43518'): link-local" in " ".join(
        inspect_url("https://169.254.43518/").warnings
    )
    assert "it is 10.0.0.1: private" in " ".join(inspect_url("https://10.0.0.1/").warnings)
    assert not any("bare IP" in w for w in inspect_url("https://1.2.3.4.example/").warnings)


def test_a_host_written_otherwise_than_it_reads_is_shown_as_it_reads(nothing_opens):
    facts = inspect_url("https://%65xample.com/")
    assert facts.host == "example.com"
    assert "the host is written '%65xample.com', which a browser reads as example.com" in facts.warnings
    facts = inspect_url("https:///path")  # a browser skips the slashes; urllib finds no host
    assert facts.host == "path"
    assert any("Python's urllib finds no host in it" in w for w in facts.warnings)
    assert inspect_url("https://ＥＸＡＭＰＬＥ.com/").host == "example.com"


@pytest.mark.parametrize("wire", WIRES)
def test_the_terminal_shows_the_host_a_browser_goes_to_not_urllibs(wire, events, nothing_opens):
    terminal = Terminal("n")
    request = dict(URL, url="https://evil.example\\@pay.example.com/checkout")
    assert elicit(wire, request, terminal, events) == {"result": {"action": "decline"}}
    shown = terminal.text
    assert "host: >>> evil.example <<<" in shown and "pay.example.com <<<" not in shown
    assert "! other software reads this URL otherwise (Python's urllib takes the host to be 'pay.example.com')" in (
        shown
    )
    assert "url:  https://evil.example\\@pay.example.com/checkout" in shown


@pytest.mark.parametrize("wire", WIRES)
def test_the_terminal_names_the_address_behind_a_number(wire, events, nothing_opens):
    terminal = Terminal("n")
    assert elicit(wire, dict(URL, url="https://2130706433/pay"), terminal, events) == {"result": {"action": "decline"}}
    shown = terminal.text
    assert "host: >>> 127.0.0.1 <<<" in shown
    assert "! the host is a bare IP address, not a name: it is 127.0.0.1 (written '2130706433'): loopback" in shown


@pytest.mark.parametrize("wire", WIRES)
def test_a_mode_this_client_does_not_offer_is_refused_as_invalid_params(wire, events):
    request = {"mode": "telepathy", "message": "think of a number"}
    if wire == "2025-11-25":
        answer = elicit(wire, request, Terminal(), events)
        assert answer["error"]["code"] == -32602 and "offers form and url" in answer["error"]["message"]
    else:  # an input request has no error answer: the call fails on our side
        with pytest.raises(RpcError) as refused:
            elicit(wire, request, Terminal(), events)
        assert refused.value.code == -32602
    assert [e.action for e in events.of("elicitation")] == ["error"]


@pytest.mark.parametrize("wire", WIRES)
def test_without_a_terminal_every_request_is_declined_with_an_event(wire, events):
    features = ClientFeatures(elicitation=Unattended(events, "stdin is not a terminal"))
    with start_servers(
        [ServerSpec("asking", ASKING, protocol=wire)], events, options=ClientOptions(features=features)
    ) as router:
        for request in (PERSON, URL):
            result = router.clients["asking"].call_tool("elicit", {"request": request})
            assert json.loads(result.content[0]["text"]) == {"result": {"action": "decline"}}
    records = events.of("elicitation")
    assert [(r.mode, r.action, r.reason) for r in records] == [
        ("form", "decline", "nobody to ask: stdin is not a terminal"),
        ("url", "decline", "nobody to ask: stdin is not a terminal"),
    ]
    assert records[1].url == URL["url"]


def test_the_event_in_the_trace_and_the_json_lines():
    record = Elicitation(
        "asking", "form", "Your name?", "accept", "the user sent the answers", ["name"], None, {"name": "Ann"}
    )
    out = _Out()
    TraceView(out, color=False)(record)
    assert out.text == (
        '? asking asked for input (form: name) "Your name?": accept {"name": "Ann"}, the user sent the answers\n'
    )
    assert record.to_json() == {
        "event": "elicitation",
        "server": "asking",
        "mode": "form",
        "message": "Your name?",
        "action": "accept",
        "reason": "the user sent the answers",
        "fields": ["name"],
        "url": None,
        "content": {"name": "Ann"},
    }


def test_the_cli_offers_elicitation_and_declines_it_without_a_terminal(tmp_path):
    from test_cli import run

    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"asking": {"command": sys.executable, "args": ASKING[1:]}}}))
    p = run("-m", "decodeloop", "run", "--json", "--mcp-config", str(config), "Hello")
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    sent = [e["message"] for e in events if e["event"] == "rpc" and e["direction"] == "send"]
    # the handshake (initialize on 2025-11-25) or every request's _meta (2026-07-28) declares both modes
    declared = json.dumps(sent)
    assert '"elicitation": {"form": {}, "url": {}}' in declared
    ready = [e for e in events if e["event"] == "server"]
    assert ready and ready[0]["tools"] == ["sample", "elicit", "relay", "complete"]


def test_a_terminal_read_gives_up_when_ctrl_c_was_pressed_elsewhere():
    # the question runs on a session's reader thread; Ctrl-C stops the main thread's call and sets the event
    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as stdin, os.fdopen(write_end, "w") as typed:
        interrupted = threading.Event()
        read = terminal_reader(stdin, interrupted)
        typed.write("first\n")
        typed.flush()
        assert read() == "first\n"
        outcome: list = []

        def wait_for_a_line() -> None:
            try:
                outcome.append(read())
            except KeyboardInterrupt:
                outcome.append("interrupted")

        reader = threading.Thread(target=wait_for_a_line)
        reader.start()
        interrupted.set()
        reader.join()
        assert outcome == ["interrupted"]
    read_end, write_end = os.pipe()
    os.close(write_end)
    with os.fdopen(read_end) as stdin:
        assert terminal_reader(stdin, threading.Event())() is None  # end of input


def test_a_ctrl_c_before_the_question_does_not_cancel_it():
    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as stdin, os.fdopen(write_end, "w") as typed:
        interrupted = threading.Event()
        interrupted.set()  # pressed during an earlier turn
        terminal = Terminal()
        asker = TerminalElicitation(terminal_reader(stdin, interrupted), terminal.write, None, interrupted)
        typed.write("y\n")
        typed.flush()
        assert asker("asking", form({}), []) == {"action": "accept", "content": {}}


def test_ctrl_c_is_noted_and_still_interrupts_the_main_thread():
    interrupted = threading.Event()
    # Python's own handler, whatever this process inherited (a shell's background job starts with SIGINT ignored)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), ctrl_c_noted(interrupted):
            signal.raise_signal(signal.SIGINT)
        assert interrupted.is_set() and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)


@pytest.mark.parametrize("wire", WIRES)
def test_run_asks_at_a_terminal_and_declines_without_one(wire):
    import pty

    from test_server_sampling import POLSON, run_events

    events, _ = run_events("--mcp-protocol", wire, POLSON, asks="elicit")
    [asked] = [e for e in events if e["event"] == "elicitation"]
    assert asked["action"] == "decline" and "nobody to ask" in asked["reason"]
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"2\ny\n")  # the second choice, then send it
        events, stderr = run_events("--mcp-protocol", wire, POLSON, asks="elicit", stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)
    assert "server asking during its get_weather call asks you for input" in stderr and "2. celsius" in stderr
    [asked] = [e for e in events if e["event"] == "elicitation"]
    assert asked["action"] == "accept" and asked["content"] == {"units": "celsius"}
    result = next(e for e in events if e["event"] == "tool_result")
    assert json.loads(result["text"]) == {"result": {"action": "accept", "content": {"units": "celsius"}}}
