"""A server that echoes a request's credentials back never gets them shown: real server processes quote every
header of a request they were sent (tests/servers/http_echo.py, and oauth_server.py with --echo) in an error
page, a WWW-Authenticate challenge, a JSON-RPC error or a tool result, to the CLI as a user runs it, with the
credential from --mcp-header, from a config file's headers, or from an OAuth login (`decodeloop auth login`,
then `run`). Neither stderr, the trace on stdout, the JSON Lines (--json), the viewer's page (--html), nor the
text the model read (the tool_result and tool_error events, the tool message injected into the context)
holds the credential in any form the server wrote it in; each shows the marker that replaced it. The last
test reads the model's context itself, in a turn of the library's Harness.
"""

from __future__ import annotations

import json
import secrets
import urllib.parse

import pytest
from conftest import HTTP_ECHO, HttpServer, Recorder
from test_auth import PROMPT, Cli
from test_auth import AuthServer as LoginServer

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.config import url_spec
from decodeloop.tools.startup import ClientOptions, start_servers

SOURCES = ("header", "config", "oauth")


class EchoLogin(LoginServer):
    """oauth_server.py with --echo: the MCP server behind OAuth echoes an authorized request's headers."""

    def __init__(self, *args: str) -> None:
        super(LoginServer, self).__init__(*args)
        self.mcp = self.url + "/mcp"


@pytest.fixture
def cli(tmp_path) -> Cli:
    return Cli(tmp_path)


@pytest.fixture
def started():
    servers: list = []
    yield servers
    for server in servers:
        server.stop()


def forms(secret: str) -> set[str]:
    """The secret as a server may write it: as is, percent-encoded (either case), with JSON's \\/ for a slash."""
    quoted = urllib.parse.quote(secret, safe="")
    return {secret, quoted, quoted.replace("%2F", "%2f").replace("%2B", "%2b"), secret.replace("/", "\\/")}


def leaked(secrets_: list[str], texts: dict[str, str]) -> list[str]:
    return [
        f"{where} holds {form!r}"
        for s in secrets_
        for form in forms(s)
        for where, text in texts.items()
        if form in text
    ]


class Setup:
    """A server that echoes WHERE on a request, and how the CLI is given the credential it echoes."""

    def __init__(self, source: str, where: str, on: str, cli: Cli, started: list) -> None:
        self.source, self.cli = source, cli
        if source == "oauth":
            server = EchoLogin("--echo", where, "--echo-on", on)
            started.append(server)
            self.config = cli.config({"svc": server.mcp})
            self.logged_in, self.login_err = cli.login("svc", self.config)
            self.tokens = [cli.stored()["access_token"], cli.stored()["refresh_token"]] if self.logged_in == 0 else []
            self.marker = "[redacted: access token of svc]"
            self.args = ["--mcp-config", self.config]
            return
        server = HttpServer("--echo", where, "--on", on, command=HTTP_ECHO)
        started.append(server)
        self.server = server
        self.secrets = ["bt-" + secrets.token_urlsafe(24), "k/" + secrets.token_urlsafe(18) + "+/="]
        if source == "header":
            self.args = ["--mcp-url", server.url + "/mcp", "--mcp-header", f"Authorization: Bearer {self.secrets[0]}"]
            self.marker = "[redacted: Authorization header of 127.0.0.1]"
            self.secrets = self.secrets[:1]
        else:
            self.config = str(cli.tmp / "servers.json")
            headers = {"Authorization": f"Bearer {self.secrets[0]}", "X-Api-Key": self.secrets[1]}
            with open(self.config, "w") as f:
                json.dump({"mcpServers": {"echo": {"url": server.url + "/mcp", "headers": headers}}}, f)
            self.args = ["--mcp-config", self.config]
            self.marker = "[redacted: Authorization header of echo]"

    def held(self) -> list[str]:
        """Every credential the CLI held for this server: for OAuth, each token the login and refreshes stored."""
        if self.source != "oauth":
            return self.secrets
        stored = self.cli.stored()
        return [*self.tokens, stored["access_token"], stored["refresh_token"]]

    def runs(self, tmp_path) -> tuple[dict[str, str], list[dict]]:
        """Two runs of the weather question: --json, and the trace with --html; every text they showed, and
        the JSON events."""
        page = tmp_path / "page.html"
        as_json = self.cli("run", "--json", *self.args, PROMPT)
        traced = self.cli("run", "--verbose", "--html", str(page), *self.args, PROMPT)
        texts = {
            "the --json stdout": as_json.stdout,
            "the --json stderr": as_json.stderr,
            "the trace": traced.stdout,
            "the trace's stderr": traced.stderr,
            "the page": page.read_text() if page.exists() else "",
        }
        events = [json.loads(line) for line in as_json.stdout.splitlines() if line.startswith("{")]
        return texts, events


def context_texts(events: list[dict]) -> str:
    """What the model read of the servers: the result and error texts and the tool messages injected."""
    kinds = {"tool_result": "text", "tool_error": "message", "inject": "text"}
    return "\n".join(e[kinds[e["event"]]] for e in events if e["event"] in kinds)


def check(setup: Setup, tmp_path, on: str) -> dict[str, str]:
    texts, events = setup.runs(tmp_path)
    assert not leaked(setup.held(), texts), leaked(setup.held(), texts)
    if on == "call":
        read = context_texts(events)
        assert not leaked(setup.held(), {"the context": read}), read
        assert setup.marker in read and texts["the page"], read
    else:
        assert "cannot start" in texts["the --json stderr"] and setup.marker in texts["the --json stderr"], texts
    return texts


@pytest.mark.parametrize("source, on", [("header", "start"), ("config", "start"), *[(s, "call") for s in SOURCES]])
def test_an_error_page_that_quotes_the_request_shows_no_credential(cli, started, tmp_path, source, on):
    setup = Setup(source, "body", on, cli, started)
    assert source != "oauth" or setup.logged_in == 0, setup.login_err
    texts = check(setup, tmp_path, on)
    assert "Your request" in texts["the --json stderr" if on == "start" else "the --json stdout"]


@pytest.mark.parametrize("source, on", [("header", "start"), ("config", "start"), *[(s, "call") for s in SOURCES]])
def test_a_json_rpc_error_that_quotes_the_request_shows_no_credential(cli, started, tmp_path, source, on):
    setup = Setup(source, "rpc-error", on, cli, started)
    assert source != "oauth" or setup.logged_in == 0, setup.login_err
    texts = check(setup, tmp_path, on)
    assert "not allowed for the request with these headers" in texts["the --json stdout"] + texts["the --json stderr"]


@pytest.mark.parametrize("source", SOURCES)
def test_a_tool_result_that_quotes_the_request_shows_no_credential(cli, started, tmp_path, source):
    setup = Setup(source, "result", "call", cli, started)
    assert source != "oauth" or setup.logged_in == 0, setup.login_err
    texts = check(setup, tmp_path, "call")
    notices = [json.loads(line) for line in texts["the --json stdout"].splitlines() if '"notice"' in line]
    assert any(f"from the result of get_weather: {setup.marker}" in n["message"] for n in notices), notices
    [result] = [json.loads(line) for line in texts["the --json stdout"].splitlines() if '"tool_result"' in line]
    assert "(seen: " in result["text"] and "Polson, MT" in result["text"]  # the rest of the result is intact


def test_a_challenge_that_quotes_the_request_shows_no_credential(cli, started, tmp_path):
    # a config file's API key and cookie go with `auth login`'s first POST; the challenge names a metadata URL
    # that carries them percent-encoded, which the login fetches and reports missing
    server = HttpServer("--echo", "challenge", "--on", "start", command=HTTP_ECHO)
    started.append(server)
    key, session = "k/" + secrets.token_urlsafe(18) + "+/=", secrets.token_urlsafe(20)
    config = str(tmp_path / "servers.json")
    headers = {"X-Api-Key": key, "Cookie": f"theme=dark; session={session}"}
    with open(config, "w") as f:
        json.dump({"mcpServers": {"echo": {"url": server.url + "/mcp", "headers": headers}}}, f)
    login = cli("auth", "login", "echo", "--mcp-config", config)
    assert login.returncode == 1 and "no protected resource metadata at" in login.stderr, login.stderr
    texts = {"auth login's stderr": login.stderr, "auth login's stdout": login.stdout}
    # run never shows a challenge; with the same headers, nor does it show them any other way
    run = cli("run", "--json", "--mcp-config", config, PROMPT)
    texts |= {"run's stderr": run.stderr, "run's stdout": run.stdout}
    assert not leaked([key, session], texts), leaked([key, session], texts)
    assert "[redacted: X-Api-Key header of echo]" in login.stderr
    assert "[redacted: Cookie header of echo]" in login.stderr and "theme%3Ddark" in login.stderr  # not a secret

    # a token from a login: the server takes it for initialize, then refuses tools/list with a challenge that
    # quotes it; the token is refreshed, refused again, and the login reports the metadata it could not find
    oauth = EchoLogin("--echo", "challenge", "--echo-on", "list")
    started.append(oauth)
    status, err = cli.login("svc", cli.config({"svc": oauth.mcp}))
    assert status == 1 and "no protected resource metadata at" in err, err
    stored = cli.stored()
    tokens = [stored["access_token"], stored["refresh_token"]]
    assert not leaked(tokens, {"auth login's stderr": err}), err
    assert "[redacted: access token of svc]" in err


def test_the_model_never_reads_an_echoed_credential():
    """The context itself: a turn whose call is answered with the request's headers quoted, in each form."""
    secret = "bt-" + secrets.token_urlsafe(24)
    tokenizer = CharTokenizer()
    table = {"<|user|>Go.<|assistant|>": "[call get_weather city=Polson state=MT]", "<|assistant|>": "Ok.<|eos|>"}
    for where in ("body", "rpc-error", "result"):
        server = HttpServer("--echo", where, "--on", "call", command=HTTP_ECHO)
        events = Recorder()
        try:
            spec = url_spec(server.url + "/mcp", {"Authorization": f"Bearer {secret}"}, name="echo")
            with start_servers([spec], events, options=ClientOptions(timeout=30)) as router:
                harness = Harness(lab_bundle(TableModel(tokenizer, table), tokenizer), Sampler(), router, events)
                result = harness.run("Go.")
        finally:
            server.stop()
        read = tokenizer.decode(result.context)
        assert not leaked([secret], {"the context": read}), (where, read)
        assert "[redacted: Authorization header of echo]" in read, (where, read)
        if where != "body":  # an error page is redacted where the transport reads it; the rest where it is admitted
            assert any(e.kind == "notice" and "redacted 1 credential(s)" in e.message for e in events), where
