"""`decodeloop auth login|logout|status`: a user's OAuth login to an MCP server of a config file, kept in the
token store (mcp/auth/store.py) for `run` and `chat` to use.

login reads the server's entry from the --mcp-config files (named as `run` names them), asks the server
for its challenge with one unauthenticated POST, and walks the OAuth flow of oauth.py on this thread:
the authorization URL is printed, escaped (the authorization server chose most of it), with the host a
browser goes to and warnings as for an elicitation's URL (a URL that is not http or https, or that browsers
would not open, ends the login), and opened in a browser only with --open; the redirect comes back to a
listener on 127.0.0.1 (loopback.py), or is pasted on stdin when the browser runs elsewhere. The token is
asked for as a bearer token (the store keeps no DPoP keys), saved 0600, then tried: the server is connected
to with it and its tools listed.
logout revokes the stored tokens where the authorization server lists a revocation_endpoint (RFC 7009,
best effort; --no-revoke skips it) and removes the file. status lists what is stored, never a token.

Everything printed goes to stderr but status's list; a failure is one line, `decodeloop auth ACTION: ...`,
with the exit status of docs/cli.md's table: 2 for a SERVER the files cannot log in to, 78 for a config file
that cannot be used as it is, 1 for a login or logout that failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import webbrowser
from collections.abc import Callable

from decodeloop import utf8
from decodeloop.cli.options import EXIT_CONFIG, EXIT_ERROR, EXIT_OK, EXIT_USAGE
from decodeloop.errors import ConfigError, McpError, Misconfigured
from decodeloop.text.credentials import hold_headers
from decodeloop.text.untrusted import visible_line

DEFAULT_WAIT = 300.0  # seconds to wait for the browser's redirect
MAX_AUTHORIZATION_URL_CHARS = 16_000  # the authorization server's endpoint and the flow's query: longer is odd


class _Unusable(ConfigError):
    """The command line names no server that can log in (a usage error, exit status 2)."""


def auth_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.mcp.auth.store import TokenStoreError

    action = ACTIONS[args.auth_command]
    try:
        return action(args, parser)
    except (ConfigError, McpError, TokenStoreError) as e:  # the config, the servers, the store: one line each
        _say(args, f"error: {visible_line(str(e))}")
        if isinstance(e, _Unusable):
            return EXIT_USAGE
        return EXIT_CONFIG if isinstance(e, Misconfigured) else EXIT_ERROR


def _say(args: argparse.Namespace, text: str) -> None:
    print(f"decodeloop auth {args.auth_command}: {text}", file=sys.stderr, flush=True)


def _server(args: argparse.Namespace):
    """The named server of the --mcp-config files, as `run` would name it."""
    from decodeloop.tools.config import load_config
    from decodeloop.tools.startup import unique_names

    if not args.mcp_config:
        raise _Unusable("--mcp-config FILE is needed: the server's entry says where it is")
    specs = unique_names([spec for path in args.mcp_config for spec in load_config(path)])
    found = [spec for spec in specs if spec.name == args.server]
    if not found:
        names = ", ".join(spec.name for spec in specs) or "none"
        raise _Unusable(f"no server named {args.server!r} in {', '.join(args.mcp_config)} (servers: {names})")
    spec = found[0]
    if spec.url is None:
        raise _Unusable(f'{spec.name} is a stdio server; only HTTP servers (a "url") log in')
    if spec.transport == "sse":
        raise _Unusable(f"{spec.name} is a legacy SSE server, which decodeloop does not authorize")
    if any(name.lower() == "authorization" for name in spec.headers):
        raise Misconfigured(
            f"{spec.name} has an Authorization header in {spec.config_file}; the header would be sent instead "
            "of a stored token: remove it first"
        )
    return spec


def _login(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.mcp import McpClient
    from decodeloop.mcp.auth.loopback import LoopbackRedirect
    from decodeloop.mcp.auth.oauth import OAuth
    from decodeloop.mcp.auth.store import TokenStore, token_of

    spec = _server(args)
    assert spec.url is not None
    store = TokenStore()
    hold_headers(spec.headers, spec.name)  # a server that echoes them shows a marker (text/credentials.py)
    status, challenge = _challenge(spec.url, spec.headers, args.timeout)
    if status not in (401, 403):
        _say(args, f"{spec.name} did not ask for authorization (HTTP {status}); nothing stored")
        return EXIT_OK
    saved: list[str] = []
    with LoopbackRedirect() as redirect:
        oauth = OAuth(
            authorize_url=_browser(args, spec.name, redirect),
            redirect_uri=redirect.redirect_uri,
            dpop=False,  # a bearer token, which the store can keep
            timeout=args.timeout,
            log=lambda line: _say(args, visible_line(line)),
            on_tokens=lambda o: saved.append(store.save(token_of(o, spec.name, spec.url or ""))),
            server=spec.name,
        )
        if not oauth.authorize(spec.url, status, challenge) or not saved:
            raise ConfigError(
                f"{spec.name} refused the request (HTTP {status}) for another reason than a missing token"
            )
    _say(args, f"logged in to {visible_line(spec.name)}; the token is stored in {saved[-1]}")
    # the proof: the server takes the token (a refused one is refreshed or reported, never sent elsewhere)
    with McpClient.connect_url(
        spec.url,
        headers=spec.headers,
        transport=spec.transport,
        auth=oauth,
        timeout=args.timeout,
        name=spec.name,
        protocol=spec.protocol or "auto",
    ) as client:
        tools = client.list_tools()
    _say(args, f"{visible_line(spec.name)} accepts it: {len(tools)} tool{'s' * (len(tools) != 1)} listed")
    return EXIT_OK


def _challenge(url: str, headers: dict[str, str], timeout: float) -> tuple[int, str]:
    """(status, WWW-Authenticate) of one unauthenticated POST: how the server asks for authorization."""
    from decodeloop.mcp.transports.httpbase import HttpClient

    http = HttpClient(url, headers, connect_timeout=timeout, read_timeout=timeout)
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "ping"}).encode()
    try:
        response = http.request(
            "POST",
            url,
            body,
            {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
        )
        status, challenge = response.status, response.headers.get("WWW-Authenticate", "")
        response.error_preview()  # drain it
    finally:
        http.close()
    return status, challenge


def _browser(args: argparse.Namespace, name: str, redirect) -> Callable[[str], str]:
    """The user's step: print (and with --open, open) the URL, with the host a browser goes to and what is odd
    about it (elicitation's inspect_url, which reads the URL as browsers do); the redirect from the listener or
    stdin. A URL no browser should be sent to (not http or https, or one the URL Standard refuses) ends the login."""
    from decodeloop.client_features.elicitation import inspect_url
    from decodeloop.errors import AuthorizationError

    def visit(url: str) -> str:
        try:
            facts = inspect_url(url, max_chars=MAX_AUTHORIZATION_URL_CHARS)
        except ValueError as why:
            raise AuthorizationError(
                f"the authorization server's URL is not one to open in a browser ({why}); nothing stored"
            ) from None
        warnings = "".join(f"  ! {warning}\n" for warning in facts.warnings)
        print(
            f"decodeloop auth login: open this URL in a browser to let decodeloop use {visible_line(name)}:\n\n"
            f"  {visible_line(url)}\n"
            f"  host: >>> {facts.host} <<<\n{warnings}\n"
            f"Waiting for the browser to come back to {redirect.redirect_uri} (if the browser runs on another "
            "machine, paste the address it ends up at here and press Enter).",
            file=sys.stderr,
            flush=True,
        )
        if args.open:
            webbrowser.open(url)
        threading.Thread(target=_pasted, args=(redirect,), name="oauth-paste", daemon=True).start()
        landed = redirect.wait(args.wait)
        if landed is None:
            raise AuthorizationError(f"no redirect came back within {args.wait:g} s; nothing stored")
        return landed

    return visit


def _pasted(redirect) -> None:
    """Lines typed or piped on stdin, each offered as the redirect URL, until one is taken or stdin ends; a
    line that is not UTF-8 is refused (one line says where) and the next one read."""
    try:
        utf8.lenient(sys.stdin)
        for line in sys.stdin:
            bad = utf8.in_text(line)
            if bad is not None:
                print(f"decodeloop auth login: not an address: not UTF-8: {bad}; paste it again", file=sys.stderr)
            elif redirect.offer_line(line):
                return
    except (OSError, ValueError):  # no stdin, or closed
        return


def _logout(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.mcp.auth.oauth import OAuth
    from decodeloop.mcp.auth.store import TokenStore, restore

    store = TokenStore()

    def warn(line: str) -> None:
        _say(args, visible_line(line))

    token = store.get(args.server, warn=warn)
    if token is not None and not args.no_revoke:
        oauth = OAuth(login_message="", dpop=False, timeout=args.timeout, server=args.server)
        restore(oauth, token)
        for line in oauth.revoke():  # best effort: the file goes whatever the server says
            warn(line)
    path = store.path(args.server)
    if store.delete(args.server):
        _say(args, f"logged out of {visible_line(args.server)}; removed {path}")
    else:
        _say(args, f"no token stored for {visible_line(args.server)} (in {store.directory})")
    return EXIT_OK


def _status(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from decodeloop.mcp.auth.store import TokenStore

    store = TokenStore()
    entries = store.entries(warn=lambda line: _say(args, visible_line(line)))
    if not entries:
        print(f"no stored tokens in {store.directory}")
        return EXIT_OK
    print(f"stored tokens in {store.directory}:")
    now = time.time()
    for token in entries:
        if token.expires_at is None:
            expiry = "no expiry given"
        elif token.expires_at <= now:
            expiry = "expired " + _when(token.expires_at)
        else:
            expiry = "expires " + _when(token.expires_at)
        refresh = "a refresh token" if token.refresh_token else "no refresh token"
        issuer = f", issuer {token.issuer}" if token.issuer else ""
        print(visible_line(f"  {token.server}: {token.url} ({expiry}, {refresh}{issuer})"))
    return EXIT_OK


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


ACTIONS: dict[str, Callable[[argparse.Namespace, argparse.ArgumentParser], int]] = {
    "login": _login,
    "logout": _logout,
    "status": _status,
}
