"""`decodeloop auth login|logout|status` and `run` with a stored token, as a user runs them: the CLI in a
subprocess, tests/servers/oauth_server.py as the MCP server and its authorization server in another, the
token store in a temporary folder ($DECODELOOP_TOKEN_DIR). The server records every request (GET /seen),
with a hash of the token each carried, so what is asserted is what went over the wire.

The browser is played two ways: a GET of the printed URL, whose redirect lands on the CLI's loopback
listener, and the redirect URL pasted on stdin. Token lifetimes are set far in the past, never waited out.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import urllib.request

import pytest
from conftest import ROOT
from test_auth_extensions import AuthServer as ExtensionsServer

from decodeloop.mcp.auth.oauth import follow_redirect
from decodeloop.mcp.auth.store import TOKEN_DIR_ENV, TokenStore

LONG_AGO = 946_684_800  # 2000-01-01: a token that expired then
PROMPT = "What's the weather in Polson, MT?"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class AuthServer(ExtensionsServer):
    """The OAuth test server, read past any proxy the environment names (the CLI's requests go direct too)."""

    def __init__(self, *args: str) -> None:
        super().__init__(*args)
        self.mcp = self.url + "/mcp"

    def seen(self, path: str | None = None) -> list[dict]:
        with NO_PROXY.open(self.url + "/seen", timeout=10) as response:
            entries = json.load(response)["seen"]
        return [e for e in entries if path is None or e["path"] == path]

    def post(self, path: str) -> None:
        NO_PROXY.open(urllib.request.Request(self.url + path, data=b"", method="POST"), timeout=10).close()


@pytest.fixture
def server():
    started: list[AuthServer] = []

    def start(*args: str) -> AuthServer:
        started.append(AuthServer(*args))
        return started[-1]

    yield start
    for one in started:
        one.stop()


class Cli:
    """The CLI with its token store in the test's folder."""

    def __init__(self, tmp_path) -> None:
        self.tmp = tmp_path
        self.tokens = str(tmp_path / "tokens")
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")},
            TOKEN_DIR_ENV: self.tokens,
            "PYTHONPATH": ROOT,
            "NO_COLOR": "1",
        }

    def config(self, servers: dict[str, str], name: str = "servers.json") -> str:
        path = str(self.tmp / name)
        with open(path, "w") as f:
            json.dump({"mcpServers": {n: {"url": url} for n, url in servers.items()}}, f)
        return path

    def __call__(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "decodeloop", *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=self.env,
            timeout=120,
        )

    def login(self, name: str, config: str, paste: bool = False, pasted_first: bytes = b"") -> tuple[int, str]:
        """Log in, playing the browser; (exit status, stderr). `pasted_first`: lines pasted before the address,
        read as a UTF-8 locale reads stdin (a byte that is not UTF-8 raises as it is read)."""
        wait = ["--wait", "60"] if pasted_first else []  # a stdin that stopped being read ends in a minute
        proc = subprocess.Popen(
            [sys.executable, "-m", "decodeloop", "auth", "login", name, "--mcp-config", config, *wait],
            stdin=subprocess.PIPE if paste else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env={**self.env, "PYTHONIOENCODING": "utf-8"} if pasted_first else self.env,
        )
        lines = []
        try:
            for line in proc.stderr:
                lines.append(line)
                if line.startswith("  http"):
                    url = line.strip()
                    break
            else:
                proc.wait(30)
                return proc.returncode, "".join(lines)
            if paste:  # the browser ran elsewhere: the user copies the address it ended at
                proc.stdin.buffer.write(pasted_first)
                proc.stdin.write(follow_redirect(url) + "\n")
                proc.stdin.close()
            else:  # the browser follows the redirect to the CLI's listener on 127.0.0.1
                with NO_PROXY.open(url, timeout=30) as page:
                    assert b"decodeloop received the authorization" in page.read()
            rest = proc.stderr.read()
            proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return proc.returncode, "".join(lines) + rest

    def printed(self, name: str, config: str) -> tuple[int | None, str]:
        """What login prints up to its wait for the browser, which never comes: (exit status or None, stderr)."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "decodeloop", "auth", "login", name, "--mcp-config", config],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env=self.env,
        )
        lines = []
        try:
            for line in proc.stderr:
                lines.append(line)
                if line.startswith("Waiting for the browser"):
                    break
            else:
                proc.wait(30)
        finally:
            status = proc.poll()
            if status is None:
                proc.kill()
                proc.wait()
        return status, "".join(lines)

    def stored(self, name: str = "svc") -> dict:
        with open(TokenStore(self.tokens).path(name)) as f:
            return json.load(f)


@pytest.fixture
def cli(tmp_path) -> Cli:
    return Cli(tmp_path)


def token_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def test_login_stores_a_0600_token_and_run_uses_it_without_asking_again(server, cli):
    srv = server()
    config = cli.config({"svc": srv.mcp})
    status, err = cli.login("svc", config)
    assert status == 0, err
    path = TokenStore(cli.tokens).path("svc")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(cli.tokens).st_mode) == 0o700
    stored = cli.stored()
    assert stored["url"] == srv.mcp and stored["token_type"] == "Bearer" and stored["issuer"] == srv.url
    assert stored["refresh_token"] and stored["client_id"].startswith("dyn-") and stored["resource"] == srv.mcp
    assert "logged in to svc" in err and "accepts it: 2 tools listed" in err
    [authorization] = srv.seen("/authorize")
    assert authorization["query"]["redirect_uri"].startswith("http://127.0.0.1:")
    before = len(srv.seen("/mcp"))

    p = cli("run", "--json", "--mcp-config", config, PROMPT)
    assert p.returncode == 0, p.stderr
    mcp = srv.seen("/mcp")[before:]
    assert mcp and all(e["token_id"] == token_id(stored["access_token"]) and e["known"] for e in mcp)
    assert len(srv.seen("/authorize")) == 1 and len(srv.seen("/token")) == 1  # no second authorization
    assert any(json.loads(line).get("event") == "tool_result" for line in p.stdout.splitlines())


def test_login_shows_the_host_a_browser_goes_to_with_its_warnings(server, cli):
    srv = server()
    status, err = cli.login("svc", cli.config({"svc": srv.mcp}))
    assert status == 0, err
    port = srv.url.rsplit(":", 1)[1]
    assert f"  host: >>> 127.0.0.1:{port} <<<\n" in err
    assert "  ! not https" in err and "  ! the host is a bare IP address, not a name: it is 127.0.0.1: loopback" in err


def test_login_shows_the_browsers_host_of_an_authorization_url_urllib_reads_otherwise(server, cli):
    srv = server("--authorization-endpoint", "https://evil.example\\@pay.example.com/authorize")
    status, err = cli.printed("svc", cli.config({"svc": srv.mcp}))
    assert status is None, err  # it waits for the browser, which the test never sends there
    assert "  https://evil.example\\@pay.example.com/authorize?" in err
    assert "  host: >>> evil.example <<<" in err and "pay.example.com <<<" not in err
    assert "Python's urllib takes the host to be 'pay.example.com'" in err


def test_login_refuses_an_authorization_url_no_browser_should_open(server, cli):
    srv = server("--authorization-endpoint", "javascript:alert(1)//")
    status, err = cli.printed("svc", cli.config({"svc": srv.mcp}))
    assert status == 1 and "Traceback" not in err
    [line] = err.strip().splitlines()
    assert line.startswith("decodeloop auth login: error: the authorization server's URL is not one to open")
    assert "only http and https URLs are shown" in line and "nothing stored" in line
    assert not os.path.exists(cli.tokens) or not os.listdir(cli.tokens)


def test_no_token_reaches_the_trace_the_json_lines_or_stderr(server, cli):
    srv = server()
    config = cli.config({"svc": srv.mcp})
    status, err = cli.login("svc", config)
    assert status == 0, err
    first = cli.stored()
    store = TokenStore(cli.tokens)  # expired: this run refreshes, so the new tokens pass through too
    token = store.load("svc", srv.mcp)
    token.expires_at = LONG_AGO
    store.save(token)
    json_run = cli("run", "--json", "--mcp-config", config, PROMPT)
    trace_run = cli("run", "--verbose", "--mcp-config", config, PROMPT)
    assert json_run.returncode == 0 and trace_run.returncode == 0, json_run.stderr + trace_run.stderr
    second = cli.stored()
    assert second["access_token"] != first["access_token"]
    secrets = [first["access_token"], first["refresh_token"], second["access_token"], second["refresh_token"]]
    outputs = [err, json_run.stdout, json_run.stderr, trace_run.stdout, trace_run.stderr]
    assert '"event": "rpc"' in json_run.stdout  # the JSON-RPC traffic is there; the headers are not
    assert not [s for s in secrets for text in outputs if s in text]


def test_login_by_pasting_the_redirect_url(server, cli):
    srv = server()
    status, err = cli.login("svc", cli.config({"svc": srv.mcp}), paste=True)
    assert status == 0, err
    assert cli.stored()["access_token"] and len(srv.seen("/authorize")) == 1


def test_a_pasted_line_that_is_not_utf8_is_refused_and_the_next_one_read(server, cli):
    # it stopped the reading of stdin (a UnicodeDecodeError, silently), so the address pasted next was never read
    srv = server()
    status, err = cli.login("svc", cli.config({"svc": srv.mcp}), paste=True, pasted_first=b"http://caf\xe9/?code=x\n")
    assert status == 0, err
    assert "decodeloop auth login: not an address: not UTF-8: byte 0xe9 at offset 10; paste it again\n" in err
    assert cli.stored()["access_token"] and len(srv.seen("/authorize")) == 1


def test_an_expired_token_is_refreshed_before_the_first_request(server, cli):
    srv = server()
    config = cli.config({"svc": srv.mcp})
    assert cli.login("svc", config)[0] == 0
    store = TokenStore(cli.tokens)
    token = store.load("svc", srv.mcp)
    token.expires_at = LONG_AGO
    store.save(token)
    before = len(srv.seen("/mcp"))

    p = cli("run", "--json", "--mcp-config", config, PROMPT)
    assert p.returncode == 0, p.stderr
    refresh = [e for e in srv.seen("/token") if e["grant"] == "refresh_token"]
    assert len(refresh) == 1 and refresh[0]["form"]["resource"] == srv.mcp
    assert refresh[0]["form"]["client_id"] == token.client_id
    stored = cli.stored()
    assert stored["access_token"] != token.access_token and stored["refresh_token"] != token.refresh_token
    assert stored["expires_at"] != LONG_AGO
    mcp = srv.seen("/mcp")[before:]
    assert mcp and all(e["token_id"] == token_id(stored["access_token"]) and e["known"] for e in mcp)
    assert len(srv.seen("/authorize")) == 1


def test_a_refused_token_is_refreshed_and_the_request_retried(server, cli):
    srv = server()
    config = cli.config({"svc": srv.mcp})
    assert cli.login("svc", config)[0] == 0
    srv.post("/forget")  # the server forgets every access token, as when they expire early
    p = cli("run", "--json", "--mcp-config", config, PROMPT)
    assert p.returncode == 0, p.stderr
    assert [e["grant"] for e in srv.seen("/token")] == ["authorization_code", "refresh_token"]
    assert srv.seen("/mcp")[-1]["token_id"] == token_id(cli.stored()["access_token"])


def test_a_refresh_refused_too_says_to_log_in_again(server, cli):
    srv = server()
    config = cli.config({"svc": srv.mcp})
    assert cli.login("svc", config)[0] == 0
    store = TokenStore(cli.tokens)
    token = store.load("svc", srv.mcp)
    token.refresh_token = "not-a-refresh-token"
    store.save(token)
    srv.post("/forget")
    p = cli("run", "--quiet", "--mcp-config", config, PROMPT)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    [line] = p.stderr.strip().splitlines()
    assert "the server refused the stored token" in line
    assert f"decodeloop auth login svc --mcp-config {config}" in line
    assert len(srv.seen("/authorize")) == 1  # run never starts a login itself


def test_a_server_that_wants_a_login_and_has_no_token(server, cli):
    srv = server()
    config = cli.config({"svc": srv.mcp})
    p = cli("run", "--quiet", "--mcp-config", config, PROMPT)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    [line] = p.stderr.strip().splitlines()
    assert line.startswith("decodeloop: cannot start: ") and "the server wants authorization" in line
    assert f"log in with `decodeloop auth login svc --mcp-config {config}`" in line
    assert not srv.seen("/authorize") and not srv.seen("/register")


def test_a_token_for_one_url_is_never_sent_to_another(server, cli):
    a, b = server(), server()
    assert cli.login("svc", cli.config({"svc": a.mcp}))[0] == 0
    token = cli.stored()["access_token"]
    moved = cli.config({"svc": b.mcp}, "moved.json")  # the same name, now another server
    p = cli("run", "--json", "--mcp-config", moved, PROMPT)
    assert p.returncode == 1 and "decodeloop auth login svc" in p.stderr
    seen = b.seen("/mcp")
    assert seen and all(e["token_id"] is None for e in seen)
    assert f"was issued for {a.mcp}, not {b.mcp}; not sent" in p.stdout
    assert token not in p.stdout + p.stderr
    assert cli.stored()["url"] == a.mcp  # left as it was


def test_logout_revokes_and_removes_the_file(server, cli):
    srv = server()
    assert cli.login("svc", cli.config({"svc": srv.mcp}))[0] == 0
    stored = cli.stored()
    p = cli("auth", "logout", "svc")
    assert p.returncode == 0, p.stderr
    assert not os.path.exists(TokenStore(cli.tokens).path("svc"))
    revoked = {e["hint"]: e for e in srv.seen("/revoke")}
    assert (
        revoked["refresh_token"]["token_id"] == token_id(stored["refresh_token"]) and revoked["refresh_token"]["known"]
    )
    assert revoked["access_token"]["token_id"] == token_id(stored["access_token"]) and revoked["access_token"]["known"]
    assert "revoked the refresh token" in p.stderr and "logged out of svc" in p.stderr
    again = cli("auth", "logout", "svc")
    assert again.returncode == 0 and "no token stored for svc" in again.stderr


def test_status_lists_servers_and_never_a_token(server, cli):
    srv = server()
    assert cli.login("svc", cli.config({"svc": srv.mcp}))[0] == 0
    stored = cli.stored()
    p = cli("auth", "status")
    assert p.returncode == 0, p.stderr
    assert f"  svc: {srv.mcp} (expires " in p.stdout and "a refresh token" in p.stdout
    assert stored["access_token"] not in p.stdout and stored["refresh_token"] not in p.stdout


def test_a_server_name_with_a_path_stays_in_the_store(server, cli):
    srv = server()
    config = cli.config({"../../x": srv.mcp})
    status, err = cli.login("../../x", config)
    assert status == 0, err
    [name] = os.listdir(cli.tokens)
    assert "/" not in name and not name.startswith(".")
    assert sorted(os.listdir(cli.tmp)) == ["servers.json", "tokens"] and not os.path.exists(cli.tmp.parent / "x")
    assert "../../x: " in cli("auth", "status").stdout


@pytest.mark.parametrize(
    "args, status, message",
    [  # the exit statuses of docs/cli.md: 2 usage, 78 configuration, 1 the login failed
        (["auth", "login", "nosuch", "--mcp-config", "{config}"], 2, "no server named 'nosuch'"),
        (["auth", "login", "local", "--mcp-config", "{config}"], 2, "local is a stdio server"),
        (["auth", "login", "svc", "--mcp-config", "{tmp}/missing.json"], 78, "cannot read MCP config"),
        (["auth", "login", "svc"], 2, "--mcp-config FILE is needed"),
        (["auth", "login", "header", "--mcp-config", "{config}"], 78, "has an Authorization header in"),
        (["auth", "login", "closed", "--mcp-config", "{config}"], 1, "cannot connect to http://127.0.0.1:9/mcp"),
    ],
)
def test_errors_are_one_line_without_a_traceback(cli, args, status, message):
    config = str(cli.tmp / "servers.json")
    with open(config, "w") as f:
        json.dump(
            {
                "mcpServers": {
                    "local": {"command": "python3", "args": ["-m", "decodeloop.servers.weather"]},
                    "closed": {"url": "http://127.0.0.1:9/mcp"},  # the discard port: nobody listens
                    "header": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}},
                }
            },
            f,
        )
    p = cli(*[a.format(config=config, tmp=cli.tmp) for a in args])
    assert p.returncode == status and "Traceback" not in p.stderr
    [line] = p.stderr.strip().splitlines()
    assert line.startswith("decodeloop auth login: error: ") and message in line
