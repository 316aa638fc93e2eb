"""OAuth 2.1 for MCP servers over HTTP, as the MCP authorization spec (2025-11-25, 2026-07-28) describes it.

This module owns getting and holding an access token. The Streamable HTTP
transport asks `header()` before each request and calls `authorize()` when the
server answers 401 (or 403 with `insufficient_scope`); `authorize` then walks
the flow and returns True when a retry may succeed:

1. protected resource metadata (RFC 9728): the `resource_metadata` URL of the
   WWW-Authenticate challenge, else /.well-known/oauth-protected-resource with
   the server's path, then at the root; its `resource` must cover the server URL;
2. authorization server metadata (RFC 8414, OpenID Discovery), trying the
   well-known locations in the spec's order for an issuer with or without a path;
   a document whose `issuer` is not exactly the one asked for is not used;
3. the client's identity: pre-registered credentials, else a client ID metadata
   document URL when the server supports those, else dynamic registration (RFC 7591,
   with `application_type`); an identity belongs to its authorization server, so
   a change of server means identifying again;
4. scope: the challenge's `scope`, else the resource's `scopes_supported`, else none
   (a step-up keeps the scopes already granted);
5. authorization code with PKCE S256 (refused when the server does not list S256),
   `state` checked, the redirect's `iss` compared exactly with the issuer (RFC 9207;
   required when the server says it sends one), and the `resource` parameter
   (RFC 8707) in both requests;
6. the token request, authenticating as the server allows (client_secret_basic,
   client_secret_post, private_key_jwt with a `client_key`, or none), with a DPoP
   proof when the server offers DPoP (`dpop.py`); a DPoP-bound token then goes
   out as `Authorization: DPoP` with a fresh proof on every request.

A token answer's refresh_token and expires_in are kept. A token past its expiry is
refreshed (the refresh_token grant) before the next request goes out, and a 401
is first answered by refreshing; only when that fails does the full flow run
again. `restore()` starts from a token kept elsewhere (mcp/auth/store.py), and
`on_tokens` hears of every new token so that it can be kept. With
`login_message` and no `authorize_url`, the flow is never run here: a 401 that a
refresh cannot answer raises LoginRequired with that message (the CLI's `run`,
which tells the user to run `decodeloop auth login`).

Steps 5 and 6 are the authorization code grant, the default. A machine client
passes a `grant` instead: client credentials (`client_credentials.py`), workload
identity federation (`workload.py`) or enterprise-managed authorization
(`enterprise.py`); each supplies the token request's form and the rest is shared.

The user-facing step, visiting the authorization URL, is the `authorize_url`
callable: it gets the URL and returns the redirect URL the browser was sent
back to (with `code` and `state`). Everything else is standard library HTTP,
except signing (private_key_jwt, DPoP), which needs the `auth` extra (`jwt.py`).
Tokens and secrets are never written to the log, and each is held for redaction
(`hold_secret`, text/credentials.py) as soon as it is configured, obtained or
made: a server that echoes one shows `[redacted: access token of SERVER]`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from decodeloop.errors import AuthorizationError, McpError
from decodeloop.mcp.transports.httpbase import HttpClient, preview
from decodeloop.text.credentials import hold, hold_authorization, label

if TYPE_CHECKING:
    from decodeloop.mcp.auth.dpop import DPoP
    from decodeloop.mcp.auth.jwt import SigningKey

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"  # RFC 7523 section 2.1
EXPIRY_MARGIN = 30.0  # seconds: a token this close to its expiry is refreshed first, so it does not lapse in flight
CLIENT_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "private_key_jwt", "none")

_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


def parse_challenge(header: str) -> dict[str, str]:
    """The parameters of a `Bearer` or `DPoP` WWW-Authenticate challenge: scope, resource_metadata, error, ..."""
    match = re.search(r"\b(?:Bearer|DPoP)\b", header, re.IGNORECASE)
    if match is None:
        return {}
    params: dict[str, str] = {}
    for found in _PARAM.finditer(header, match.end()):
        value = found.group(2) if found.group(2) is not None else found.group(3)
        params.setdefault(found.group(1).lower(), re.sub(r"\\(.)", r"\1", value))
    return params


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge)."""
    verifier = secrets.token_urlsafe(48)  # 64 characters of the unreserved set
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def protected_resource_urls(server_url: str) -> list[str]:
    parts = urllib.parse.urlsplit(server_url)
    root = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource"
    path = parts.path.rstrip("/")
    return [root + path, root] if path else [root]


def authorization_server_urls(issuer: str) -> list[str]:
    parts = urllib.parse.urlsplit(issuer)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [f"{base}/.well-known/oauth-authorization-server", f"{base}/.well-known/openid-configuration"]
    return [
        f"{base}/.well-known/oauth-authorization-server{path}",
        f"{base}/.well-known/openid-configuration{path}",
        f"{base}{path}/.well-known/openid-configuration",
    ]


def covers(resource: str, server_url: str) -> bool:
    """Whether a protected resource identifier covers the server URL (same origin, a path prefix)."""
    a, b = urllib.parse.urlsplit(resource), urllib.parse.urlsplit(server_url)
    if (a.scheme.lower(), a.netloc.lower()) != (b.scheme.lower(), b.netloc.lower()):
        return False
    prefix = a.path.rstrip("/")
    return b.path == prefix or b.path.startswith(prefix + "/") or not prefix


class Grant(Protocol):
    """A way to get a token other than the authorization code: it supplies the token request's form."""

    name: str

    def token_form(
        self, oauth: OAuth, http: HttpClient, meta: dict, resource: str, scope: str | None
    ) -> dict[str, str]:
        """The form of the token request (grant_type and its parameters); client authentication is added after."""
        ...


class LoginRequired(AuthorizationError):
    """The server wants a token that only the user can grant, and this OAuth may not ask (login_message)."""


class OAuth:
    def __init__(
        self,
        *,
        authorize_url: Callable[[str], str] | None = None,
        redirect_uri: str | None = None,
        client_name: str = "decodeloop",
        client_id: str | None = None,
        client_secret: str | None = None,
        client_key: SigningKey | None = None,
        client_metadata_url: str | None = None,
        grant: Grant | None = None,
        dpop: bool | DPoP | None = None,
        timeout: float = 30.0,
        log: Callable[[str], None] | None = None,
        on_tokens: Callable[[OAuth], None] | None = None,
        login_message: str | None = None,
        server: str | None = None,
    ) -> None:
        """`grant` None is the authorization code grant, which needs `authorize_url` and `redirect_uri`.

        `client_key` signs private_key_jwt client assertions. `dpop`: None uses DPoP when the
        authorization server lists ES256 in dpop_signing_alg_values_supported and the auth extra
        is installed; True always (a DPoP object brings its own key); False never.

        `on_tokens(oauth)` is called after every new token (the flow's or a refresh's), to keep it.
        `login_message`: never run the authorization code flow here; a 401 that a refresh cannot
        answer raises LoginRequired ending with this text. `server` names the MCP server in the markers
        that replace this OAuth's tokens and secrets wherever a server echoes them.
        """
        if grant is None and login_message is None and (authorize_url is None or redirect_uri is None):
            raise ValueError("the authorization code grant needs authorize_url and redirect_uri")
        self.authorize_url = authorize_url
        self.redirect_uri = redirect_uri
        self.client_name = client_name
        self.client_id, self.client_secret, self.client_key = client_id, client_secret, client_key
        self.server = server
        self.hold_secret(client_secret, "client secret", replaced=False)
        self.client_metadata_url = client_metadata_url
        self.grant = grant
        self.dpop_setting = dpop
        self.dpop: DPoP | None = None  # the key in use once the server offered DPoP (or it was asked for)
        self.auth_method: str | None = None
        self.timeout = timeout
        self.log = log or (lambda line: None)
        self.on_tokens = on_tokens
        self.login_message = login_message
        self.access_token: str | None = None
        self.token_type = "Bearer"
        self.scope: str | None = None
        self.refresh_token: str | None = None
        self.expires_at: float | None = None  # seconds since the epoch; None: the server did not say
        self.resource: str | None = None  # the resource the token was asked for (RFC 8707), sent again on refresh
        self._credentials_issuer: str | None = None  # the authorization server the client id belongs to
        self._refresh_failed: str | None = None  # the refresh token that was refused: not tried twice
        self._refreshed: str | None = None  # the last refresh's access token: a 401 for it is not about expiry
        self._lock = threading.Lock()

    def hold_secret(self, value: str | None, what: str, replaced: bool = True) -> None:
        """Redact `value` wherever a server's text shows it, as `[redacted: WHAT of SERVER]`; `replaced`: a
        credential that a later one replaces (a token), only the last ones of which stay held."""
        hold(value, label(what, self.server), (self, what) if replaced else None)

    @property
    def issuer(self) -> str | None:
        """The authorization server that issued the token and the client identity."""
        return self._credentials_issuer

    def restore(
        self,
        *,
        access_token: str,
        token_type: str = "Bearer",
        refresh_token: str | None = None,
        expires_at: float | None = None,
        scope: str | None = None,
        issuer: str | None = None,
        resource: str | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
    ) -> None:
        """Start from a token kept from an earlier run (a bearer token: a DPoP one would need its key)."""
        if token_type.lower() != "bearer":
            raise ValueError("only a bearer token can be restored")
        self.hold_secret(access_token, "access token")
        self.hold_secret(refresh_token, "refresh token")
        self.hold_secret(client_secret, "client secret", replaced=False)
        with self._lock:
            self.access_token, self.token_type, self.scope = access_token, "Bearer", scope
            self.refresh_token, self.expires_at, self.resource = refresh_token, expires_at, resource
            self._credentials_issuer = issuer
            if client_id is not None:
                self.client_id, self.client_secret = client_id, client_secret

    def expired(self, now: float | None = None) -> bool:
        """Whether the token is past its expiry, or within EXPIRY_MARGIN of it."""
        now = time.time() if now is None else now
        return self.expires_at is not None and now >= self.expires_at - EXPIRY_MARGIN

    def header(self) -> str | None:
        """The Authorization header's value (a DPoP-bound token also needs its proof: see request_headers)."""
        self._refresh_if_expired()
        token = self.access_token
        return f"{self.token_type} {token}" if token else None

    def request_headers(self, method: str, url: str) -> dict[str, str]:
        """The headers that authorize one request: Authorization, and a fresh DPoP proof for a DPoP-bound token."""
        self._refresh_if_expired()
        token, token_type, dpop = self.access_token, self.token_type, self.dpop
        if not token:
            return {}
        if token_type == "DPoP" and dpop is not None:
            return {"Authorization": f"DPoP {token}", "DPoP": dpop.proof(method, url, token)}
        return {"Authorization": f"Bearer {token}"}

    def authorize(
        self, server_url: str, status: int, www_authenticate: str, headers: Mapping[str, str] | None = None
    ) -> bool:
        """Run the flow after a 401 (or a 403 asking for more scope); True if a retry may succeed.

        `headers` are the response's: a `use_dpop_nonce` challenge is answered with the
        nonce they carry, without a new token.
        """
        challenge = parse_challenge(www_authenticate)
        if challenge.get("error") == "use_dpop_nonce" and self.dpop is not None and self.access_token:
            fresh = self.dpop.take_nonce(server_url, headers or {})
            self.log("the MCP server asked for a DPoP nonce" + ("" if fresh else " it already had"))
            return fresh
        if status == 403 and challenge.get("error") != "insufficient_scope":
            return False  # forbidden for another reason: a new token would not help
        held = self.access_token
        with self._lock:
            if self.access_token != held and status == 401:
                return True  # another thread got a token while this one waited
            http = HttpClient(server_url, connect_timeout=self.timeout, read_timeout=self.timeout)
            try:
                # a refused token is most often an expired one: refresh it, unless it is the one a refresh just gave
                if status == 401 and held is not None and held != self._refreshed and self._refresh(http):
                    return True
                if self.grant is None and self.authorize_url is None:
                    raise LoginRequired(
                        ("the server refused the stored token" if held else "the server wants authorization")
                        + (f"; {self.login_message}" if self.login_message else "")
                    )
                self._flow(http, server_url, status, challenge)
            finally:
                http.close()
        return True

    # -- refresh -------------------------------------------------------------------

    def _refresh_if_expired(self) -> None:
        if not (self.refresh_token and self.expired()):
            return
        with self._lock:
            if not (self.refresh_token and self.expired()):
                return  # another thread refreshed it while this one waited
            http = HttpClient(self._credentials_issuer or "http://localhost", read_timeout=self.timeout)
            try:
                self._refresh(http)
            finally:
                http.close()

    def _refresh(self, http: HttpClient) -> bool:
        """The refresh_token grant (RFC 6749 section 6); True with a new token. A refusal is logged, not raised:
        the caller falls back to the full flow (or to LoginRequired), and that refresh token is not tried again."""
        refresh, issuer = self.refresh_token, self._credentials_issuer
        if not refresh or not issuer or refresh == self._refresh_failed:
            return False
        try:
            meta = self._server_metadata(http, issuer)
            if self.auth_method is None:
                self.auth_method = self._auth_method(meta)
            form = {"grant_type": "refresh_token", "refresh_token": refresh}
            if self.resource:
                form["resource"] = self.resource
            tokens = self._token(http, meta, form)
        except AuthorizationError as exc:
            self._refresh_failed = refresh
            self.log(f"refreshing the token failed: {exc}")
            return False
        self._take(tokens, self.scope, "refresh token")
        self._refreshed = self.access_token
        return True

    def _take(self, tokens: dict, scope: str | None, how: str) -> None:
        """Hold a token answer: the access token, its type, scope, refresh token and expiry; then on_tokens."""
        self.hold_secret(tokens["access_token"], "access token")
        self.hold_secret(tokens.get("refresh_token"), "refresh token")
        self.access_token = tokens["access_token"]
        bound = str(tokens.get("token_type", "")).lower() == "dpop" and self.dpop is not None
        self.token_type = "DPoP" if bound else "Bearer"
        self.scope = tokens.get("scope") if isinstance(tokens.get("scope"), str) else scope
        if isinstance(tokens.get("refresh_token"), str):  # else the old one stays good (RFC 6749 section 6)
            self.refresh_token = tokens["refresh_token"]
        lifetime = tokens.get("expires_in")
        if isinstance(lifetime, (int, float)) and not isinstance(lifetime, bool):
            self.expires_at = time.time() + lifetime
        else:
            self.expires_at = None
        self.log(f"authorized ({how}, {self.token_type} token)" + (f" with scope {self.scope}" if self.scope else ""))
        if self.on_tokens is not None:
            self.on_tokens(self)

    def revoke(self) -> list[str]:
        """Revoke the refresh and access tokens at the authorization server (RFC 7009), best effort: returns
        what happened, one line each; nothing when the server lists no revocation_endpoint."""
        issuer = self._credentials_issuer
        if not issuer:
            return []
        http = HttpClient(issuer, connect_timeout=self.timeout, read_timeout=self.timeout)
        done: list[str] = []
        try:
            meta = self._server_metadata(http, issuer)
            endpoint = meta.get("revocation_endpoint")
            if not isinstance(endpoint, str):
                return []
            if self.auth_method is None:
                self.auth_method = self._auth_method(meta)
            for hint, token in (("refresh_token", self.refresh_token), ("access_token", self.access_token)):
                if token:
                    form, headers = self.client_authentication(meta, {"token": token, "token_type_hint": hint})
                    status, _, answer, data = self.exchange(
                        http, endpoint, urllib.parse.urlencode(form).encode(), headers, "revocation"
                    )
                    if 200 <= status < 300:
                        done.append(f"revoked the {hint.replace('_', ' ')} at {endpoint}")
                    else:
                        try:
                            _answer_or_raise(endpoint, status, answer, data, "revocation")
                        except AuthorizationError as exc:
                            done.append(f"could not revoke the {hint.replace('_', ' ')}: {exc}")
        except AuthorizationError as exc:
            done.append(f"could not revoke: {exc}")
        finally:
            http.close()
        return done

    # -- the flow ------------------------------------------------------------------

    def _flow(self, http: HttpClient, server_url: str, status: int, challenge: dict[str, str]) -> None:
        resource_meta = self._protected_resource(http, server_url, challenge.get("resource_metadata"))
        if resource_meta is None:
            # a 2025-03-26 server publishes none: its own origin is the authorization server
            resource_meta, meta = {}, self._legacy_server_metadata(http, server_url)
        else:
            meta = self._resource_server_metadata(http, server_url, resource_meta)
        resource = resource_meta.get("resource") or server_url.split("#")[0]
        issuer = meta["issuer"]
        if self._credentials_issuer not in (None, issuer):
            # a client id belongs to the authorization server that issued it; a new server means a new one
            self.log(f"the authorization server changed from {self._credentials_issuer} to {issuer}; registering again")
            self.client_id = self.client_secret = self.auth_method = None
        scope = challenge.get("scope")
        if not scope and isinstance(resource_meta.get("scopes_supported"), list):
            scope = " ".join(s for s in resource_meta["scopes_supported"] if isinstance(s, str)) or None
        if status == 403 and self.scope and scope:  # step up: keep what was granted, add what is asked
            scope = " ".join(dict.fromkeys(self.scope.split() + scope.split()))
        if self.grant is None and "S256" not in (meta.get("code_challenge_methods_supported") or []):
            raise AuthorizationError(
                "the authorization server does not list PKCE S256 in "
                "code_challenge_methods_supported; refusing to authorize without it"
            )
        self._identify(http, meta)
        self._credentials_issuer = issuer
        self._choose_dpop(meta)
        if self.grant is None:
            form = self._authorization_code(meta, issuer, resource, scope)
        else:
            form = self.grant.token_form(self, http, meta, resource, scope)
        tokens = self._token(http, meta, form)
        self.resource = resource
        self.refresh_token = None  # a new grant: a refresh token of the old one is not kept past it
        self._refresh_failed = self._refreshed = None
        self._take(tokens, scope, self.grant.name if self.grant is not None else "authorization code")

    def _authorization_code(self, meta: dict, issuer: str, resource: str, scope: str | None) -> dict[str, str]:
        """Steps 5: the user's authorization, PKCE and the redirect's checks; returns the token request's form."""
        assert self.authorize_url is not None and self.redirect_uri is not None
        verifier, challenge_s256 = pkce_pair()
        state = secrets.token_urlsafe(24)
        query = {
            "response_type": "code",
            "client_id": self.client_id or "",
            "redirect_uri": self.redirect_uri,
            "code_challenge": challenge_s256,
            "code_challenge_method": "S256",
            "state": state,
            "resource": resource,
        }
        if scope:
            query["scope"] = scope
        endpoint = _endpoint(meta, "authorization_endpoint")
        landed = self.authorize_url(endpoint + ("&" if "?" in endpoint else "?") + urllib.parse.urlencode(query))
        answer = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(landed).query))
        if answer.get("error"):
            raise AuthorizationError(f"authorization refused: {answer['error']} {answer.get('error_description', '')}")
        if answer.get("state") != state:
            raise AuthorizationError("the authorization redirect carried the wrong state; refusing the code")
        # RFC 9207: the redirect names its issuer, compared exactly (no normalization) with the one we asked
        if "iss" in answer and answer["iss"] != issuer:
            raise AuthorizationError(
                f"the authorization redirect came from issuer {answer['iss']!r}, not {issuer!r}; refusing the code"
            )
        if "iss" not in answer and meta.get("authorization_response_iss_parameter_supported") is True:
            raise AuthorizationError(
                f"the authorization server {issuer} promises an iss parameter and the "
                "redirect carried none; refusing the code"
            )
        if not answer.get("code"):
            raise AuthorizationError("the authorization redirect carried no code")
        self.hold_secret(answer["code"], "authorization code")
        self.hold_secret(verifier, "PKCE code verifier")
        return {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
            "resource": resource,
        }

    def _choose_dpop(self, meta: dict) -> None:
        if self.dpop is not None or self.dpop_setting is False:
            return
        from decodeloop.mcp.auth.dpop import DPoP

        if isinstance(self.dpop_setting, DPoP):
            self.dpop = self.dpop_setting
            return
        offered = meta.get("dpop_signing_alg_values_supported")
        if self.dpop_setting is None and not (isinstance(offered, list) and "ES256" in offered):
            return
        try:
            self.dpop = DPoP()
        except AuthorizationError as exc:
            if self.dpop_setting is True:
                raise
            self.log(f"the authorization server offers DPoP; using bearer tokens ({exc})")
            return
        self.log("using DPoP-bound tokens")

    def _protected_resource(self, http: HttpClient, server_url: str, named: str | None) -> dict | None:
        for url in [named] if named else protected_resource_urls(server_url):
            found = self._get_json(http, url)
            if found is not None:
                return found
        if named:
            raise AuthorizationError(f"no protected resource metadata at {named}, which the server named")
        return None

    def _resource_server_metadata(self, http: HttpClient, server_url: str, resource_meta: dict) -> dict:
        """The metadata of the authorization server a protected resource names (its resource must cover us)."""
        resource = resource_meta.get("resource") or server_url.split("#")[0]
        if not isinstance(resource, str) or not covers(resource, server_url):
            raise AuthorizationError(
                f"the protected resource metadata names resource {resource!r}, which does not cover {server_url}"
            )
        servers = resource_meta.get("authorization_servers")
        if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
            raise AuthorizationError("the protected resource metadata names no authorization server")
        return self._server_metadata(http, servers[0])

    def _legacy_server_metadata(self, http: HttpClient, server_url: str) -> dict:
        """2025-03-26 discovery, for a server without protected resource metadata: the authorization server
        is the MCP server's origin, described at its root, else at the default paths /authorize, /token and
        /register (with PKCE S256, which that revision required)."""
        parts = urllib.parse.urlsplit(server_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        found = self._find_server_metadata(http, origin)
        if found is not None:
            return found
        self.log(f"no authorization metadata at {origin}; using its default endpoints (the 2025-03-26 rules)")
        return {
            "issuer": origin,
            "authorization_endpoint": origin + "/authorize",
            "token_endpoint": origin + "/token",
            "registration_endpoint": origin + "/register",
            "code_challenge_methods_supported": ["S256"],
        }

    def _server_metadata(self, http: HttpClient, issuer: str) -> dict:
        """The issuer's metadata from its well-known locations; a document for another issuer is refused."""
        found = self._find_server_metadata(http, issuer)
        if found is None:
            raise AuthorizationError(f"no authorization server metadata for {issuer}")
        return found

    def _find_server_metadata(self, http: HttpClient, issuer: str) -> dict | None:
        """As _server_metadata, but None when the issuer publishes none (a document for another issuer still
        raises: a 2025-03-26 fallback never goes past it)."""
        mismatch = None
        for url in authorization_server_urls(issuer):
            found = self._get_json(http, url)
            if found is None:
                continue
            if found.get("issuer") != issuer:  # RFC 8414: metadata for another issuer must not be used
                mismatch = mismatch or f"{url} describes issuer {found.get('issuer')!r}, not {issuer!r}"
                continue
            return found
        if mismatch is None:
            return None
        raise AuthorizationError(f"no authorization server metadata for {issuer} ({mismatch}; refused)")

    def _identify(self, http: HttpClient, meta: dict) -> None:
        if self.client_id is not None and self.auth_method is not None:
            return
        if self.grant is not None:
            # a machine client is configured, not registered: it has its id (or needs none, as a workload)
            if self.auth_method is None:
                self.auth_method = self._auth_method(meta)
            return
        if self.client_id is None and meta.get("client_id_metadata_document_supported") and self.client_metadata_url:
            self.client_id, self.client_secret, self.auth_method = self.client_metadata_url, None, "none"
            return
        if self.client_id is None:
            self._register(http, meta)
        if self.auth_method is None:
            self.auth_method = self._auth_method(meta)

    def _auth_method(self, meta: dict) -> str:
        """How to authenticate at the token endpoint: the first the server offers that this client can do."""
        offered = meta.get("token_endpoint_auth_methods_supported") or (
            ["client_secret_basic"] if self.client_secret else ["none"]
        )
        able = {
            "client_secret_basic": self.client_secret is not None,
            "client_secret_post": self.client_secret is not None,
            "private_key_jwt": self.client_key is not None and self.client_id is not None,
            "none": True,
        }
        usable = [m for m in CLIENT_AUTH_METHODS if m in offered and able[m]]
        if usable:
            return usable[0]
        return "private_key_jwt" if able["private_key_jwt"] else "client_secret_basic" if self.client_secret else "none"

    def _register(self, http: HttpClient, meta: dict) -> None:
        endpoint = meta.get("registration_endpoint")
        if not isinstance(endpoint, str):
            raise AuthorizationError(
                "the authorization server offers no dynamic registration; a pre-registered client id is needed"
            )
        # native: the redirect goes to this machine, not to a web origin (OpenID's rules for redirect URIs)
        local = urllib.parse.urlsplit(self.redirect_uri or "").hostname in ("localhost", "127.0.0.1", "::1")
        body = json.dumps(
            {
                "client_name": self.client_name,
                "redirect_uris": [self.redirect_uri],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
                "application_type": "native" if local else "web",
            }
        ).encode()
        answer = self.post(http, endpoint, body, {"Content-Type": "application/json"}, "registration")
        if not isinstance(answer.get("client_id"), str):
            raise AuthorizationError("the registration answer has no client_id")
        self.client_id = answer["client_id"]
        self.client_secret = answer.get("client_secret") if isinstance(answer.get("client_secret"), str) else None
        self.hold_secret(self.client_secret, "client secret", replaced=False)
        method = answer.get("token_endpoint_auth_method")
        self.auth_method = method if method in ("client_secret_basic", "client_secret_post", "none") else None

    def client_authentication(self, meta: dict, form: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        """(form, headers) of a token request authenticated as `auth_method` says."""
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if self.auth_method == "client_secret_basic":
            headers["Authorization"] = basic_authorization(self.client_id or "", self.client_secret or "")
            hold_authorization(headers["Authorization"], label("client credentials", self.server))
            return form, headers
        form = dict(form)
        if self.client_id is not None:
            form["client_id"] = self.client_id
        if self.auth_method == "client_secret_post":
            form["client_secret"] = self.client_secret or ""
        elif self.auth_method == "private_key_jwt":
            from decodeloop.mcp.auth.client_credentials import ASSERTION_TYPE, client_assertion

            assert self.client_key is not None and self.client_id is not None
            # RFC 7523 / the client credentials extension: the audience is the authorization server's issuer
            form["client_assertion_type"] = ASSERTION_TYPE
            form["client_assertion"] = client_assertion(self.client_key, self.client_id, meta["issuer"])
            self.hold_secret(form["client_assertion"], "client assertion")
        return form, headers

    def _token(self, http: HttpClient, meta: dict, form: dict[str, str]) -> dict:
        endpoint = _endpoint(meta, "token_endpoint")
        for attempt in (0, 1):
            # a client assertion and a DPoP proof are single-use: a retry signs new ones
            body_form, headers = self.client_authentication(meta, form)
            if self.dpop is not None:
                headers["DPoP"] = self.dpop.proof("POST", endpoint)
            status, answer_headers, answer, data = self.exchange(
                http, endpoint, urllib.parse.urlencode(body_form).encode(), headers, "token"
            )
            if self.dpop is not None:
                fresh = self.dpop.take_nonce(endpoint, answer_headers)
                if status == 400 and (answer or {}).get("error") == "use_dpop_nonce" and fresh and attempt == 0:
                    self.log("the authorization server asked for a DPoP nonce; asking again with it")
                    continue
            break
        answer = _answer_or_raise(endpoint, status, answer, data, "token")
        if not isinstance(answer.get("access_token"), str):
            raise AuthorizationError("the token answer has no access_token")
        return answer

    # -- HTTP ----------------------------------------------------------------------------

    def _get_json(self, http: HttpClient, url: str) -> dict | None:
        try:
            response = http.request("GET", url, headers={"Accept": "application/json"})
        except McpError as exc:
            raise AuthorizationError(f"fetching {url}: {exc}") from None
        if not 200 <= response.status < 300:
            response.error_preview()
            return None
        data = response.read()
        response.close()
        try:
            found = json.loads(data)
        except ValueError:
            return None
        return found if isinstance(found, dict) else None

    def exchange(
        self, http: HttpClient, url: str, body: bytes, headers: dict[str, str], what: str
    ) -> tuple[int, Any, dict | None, bytes]:
        """POST and read the answer: (status, response headers (an HTTPMessage), the JSON object or None, the body)."""
        try:
            response = http.request("POST", url, body, headers, follow_redirects=False)
        except McpError as exc:
            raise AuthorizationError(f"{what} request to {url}: {exc}") from None
        data = response.read()
        response.close()
        try:
            answer = json.loads(data)
        except ValueError:
            answer = None
        return response.status, response.headers, answer if isinstance(answer, dict) else None, data

    def post(self, http: HttpClient, url: str, body: bytes, headers: dict[str, str], what: str) -> dict:
        """POST and return the JSON object of a 2xx answer; anything else raises AuthorizationError."""
        status, _, answer, data = self.exchange(http, url, body, headers, what)
        return _answer_or_raise(url, status, answer, data, what)


def _answer_or_raise(url: str, status: int, answer: dict | None, data: bytes, what: str) -> dict:
    if not 200 <= status < 300:
        if answer is not None and isinstance(answer.get("error"), str):  # RFC 6749 section 5.2
            described = f": {answer['error_description']}" if isinstance(answer.get("error_description"), str) else ""
            raise AuthorizationError(f"{what} request to {url}: HTTP {status}, {answer['error']}{described}")
        raise AuthorizationError(f"{what} request to {url}: HTTP {status}: {preview(data)}")
    if answer is None:
        # the body of a 2xx token answer may hold a token: say only that it was not JSON
        raise AuthorizationError(f"{what} answer from {url} is not a JSON object")
    return answer


def basic_authorization(user: str, password: str) -> str:
    """client_secret_basic (RFC 6749 section 2.3.1): both parts form-urlencoded, then base64."""
    quote = urllib.parse.quote
    return "Basic " + base64.b64encode(f"{quote(user, safe='')}:{quote(password, safe='')}".encode()).decode()


def _endpoint(meta: dict, key: str) -> str:
    value = meta.get(key)
    if not isinstance(value, str):
        raise AuthorizationError(f"the authorization server metadata has no {key}")
    return value


def follow_redirect(url: str, timeout: float = 30.0) -> str:
    """An `authorize_url` for authorization servers that answer at once with a redirect (no login page)."""
    http = HttpClient(url, connect_timeout=timeout, read_timeout=timeout)
    try:
        response = http.request("GET", url, follow_redirects=False)
        location = response.headers.get("Location")
        response.error_preview()
    except McpError as exc:
        raise AuthorizationError(f"authorization request: {exc}") from None
    finally:
        http.close()
    if not location:
        raise AuthorizationError(f"the authorization endpoint answered HTTP {response.status} without a redirect")
    return urllib.parse.urljoin(url, location)
