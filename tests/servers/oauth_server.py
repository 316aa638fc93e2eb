"""An MCP server behind OAuth, with its authorization server and an identity provider, for the auth extension tests.

Run as `python3 tests/servers/oauth_server.py [options]`; it listens on 127.0.0.1 (a free port) and prints the
port on stdout. One origin plays three parts:

- the MCP server, POST /mcp: the bundled weather server's tools as JSON answers, for a request with a token this
  server issued (`Bearer`, or `DPoP` with a valid proof for a DPoP-bound token); else 401 with a challenge naming
  its protected resource metadata (GET /.well-known/oauth-protected-resource/mcp);
- the authorization server (GET /.well-known/oauth-authorization-server, POST /token): the grants client_credentials
  (client_secret_basic with CLIENT_ID:CLIENT_SECRET, or private_key_jwt verified against --client-jwk) and the JWT
  bearer grant (a workload JWT whose aud is this issuer, or an ID-JAG this IdP issued). With --dpop it lists ES256 in
  dpop_signing_alg_values_supported and binds a token to the key of a valid DPoP proof; with --nonce both the
  token endpoint and /mcp want a DPoP nonce first (use_dpop_nonce);
- the identity provider, POST /idp/token: token exchange of the ID token ID_TOKEN for an ID-JAG;
- for a user's login (`decodeloop auth login`): dynamic registration (POST /register), the authorization code
  grant with PKCE S256 (GET /authorize answers at once with a redirect carrying the code, state and iss, as if
  the user had agreed; --authorization-endpoint names another URL in the metadata instead), refresh tokens
  (rotated on each use), RFC 7009 revocation (POST /revoke), and POST /forget, which forgets every access token
  issued so far, as a server does when tokens expire early.

With `--echo WHERE` (and `--echo-on REQUEST`), an authorized MCP request of that kind is answered with its
headers, the token among them, echoed as http_echo.py does it (an error page, a challenge, a JSON-RPC
error, a tool result). With `--echo-token-requests`, POST /token refuses every request with an
invalid_request whose error_description quotes its Authorization header and its form.

Every check that fails is answered as the RFC says (400/401 with `error`), and written to GET /seen with each
request: path, grant, the Authorization scheme, `token_id` (the first 16 hex digits of the SHA-256 of the token a
request carried) and the decoded DPoP proof, never a secret. DPoP proofs and
private_key_jwt assertions are verified with the `cryptography` package (the auth extra).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import secrets
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from http_echo import ON, WHERE, echo

from decodeloop.servers.weather import build_server

CLIENT_ID, CLIENT_SECRET = "svc-client", "svc-secret"
ID_TOKEN = "an-id-token-from-the-idp"
AS_NONCE, RS_NONCE = "as-nonce-1", "rs-nonce-1"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
# This server reads no clock, so a slow machine cannot fail it: a time is current when it lies in this
# window, as every time a client writes today does; the tests' expired tokens end in 2000, before it
NOT_BEFORE = 1_577_836_800  # 2020-01-01
NOT_AFTER = 4_102_444_800  # 2100-01-01

parser = argparse.ArgumentParser()
parser.add_argument("--dpop", action="store_true")
parser.add_argument("--nonce", action="store_true")
parser.add_argument("--client-jwk", help="the public JWK (JSON) private_key_jwt assertions must verify against")
parser.add_argument("--echo", choices=WHERE, help="echo an authorized request's headers back (http_echo.py)")
parser.add_argument("--echo-on", choices=sorted(ON), default="call", help="the request --echo answers")
parser.add_argument("--echo-token-requests", action="store_true", help="refuse token requests, quoting them")
parser.add_argument("--authorization-endpoint", help="the authorization_endpoint to name (default: GET /authorize)")
args = parser.parse_args()

mcp = build_server()
lock = threading.Lock()
seen: list[dict] = []
tokens: dict[str, str | None] = {}  # access token -> the jkt it is bound to (None: a bearer token)
jtis: set[str] = set()
id_jags: set[str] = set()
clients: dict[str, list[str]] = {}  # registered client id -> its redirect URIs
codes: dict[str, dict] = {}  # authorization code -> the request it answers
refresh_tokens: dict[str, str] = {}  # refresh token -> the client it was issued to


def token_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def decode(jwt: str) -> tuple[dict, dict]:
    head, body, _ = jwt.split(".")
    return json.loads(b64d(head)), json.loads(b64d(body))


def verify(jwt: str, jwk: dict) -> bool:
    """The JWS signature of an ES256 or RS256 JWT under a public JWK."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

    head, body, signature = jwt.split(".")
    data, raw = f"{head}.{body}".encode(), b64d(signature)
    try:
        if jwk["kty"] == "EC":
            numbers = ec.EllipticCurvePublicNumbers(
                int.from_bytes(b64d(jwk["x"]), "big"), int.from_bytes(b64d(jwk["y"]), "big"), ec.SECP256R1()
            )
            half = len(raw) // 2
            der = utils.encode_dss_signature(int.from_bytes(raw[:half], "big"), int.from_bytes(raw[half:], "big"))
            numbers.public_key().verify(der, data, ec.ECDSA(hashes.SHA256()))
        else:
            key = rsa.RSAPublicNumbers(int.from_bytes(b64d(jwk["e"]), "big"), int.from_bytes(b64d(jwk["n"]), "big"))
            key.public_key().verify(raw, data, padding.PKCS1v15(), hashes.SHA256())
    except (InvalidSignature, ValueError, KeyError):
        return False
    return True


def thumbprint(jwk: dict) -> str:
    members = ("crv", "kty", "x", "y") if jwk["kty"] == "EC" else ("e", "kty", "n")
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return b64e(hashlib.sha256(canonical.encode()).digest())


def check_proof(proof: str | None, method: str, url: str, token: str | None, nonce: str | None) -> tuple[dict, str]:
    """(the proof's header and claims, the problem or "" when it is valid)."""
    if not proof:
        return {}, "no DPoP proof"
    try:
        header, claims = decode(proof)
    except ValueError:
        return {}, "the DPoP proof is not a JWT"
    found = {"header": header, "claims": claims}
    jwk = header.get("jwk") or {}
    problems = [
        (header.get("typ") != "dpop+jwt", "typ is not dpop+jwt"),
        (header.get("alg") != "ES256", "alg is not ES256"),
        ("d" in jwk, "the jwk holds a private key"),
        (not jwk or not verify(proof, jwk), "the signature does not verify"),
        (claims.get("htm") != method, "htm is not the request's method"),
        (claims.get("htu") != url, "htu is not the request's URL"),
        (
            not isinstance(claims.get("iat"), int) or not NOT_BEFORE <= claims["iat"] < NOT_AFTER,
            "iat is not a time now",
        ),
        (not isinstance(claims.get("jti"), str), "no jti"),
        (claims.get("jti") in jtis, "the jti was used before"),
        (
            token is not None and claims.get("ath") != b64e(hashlib.sha256(token.encode()).digest()),
            "ath is not the token's hash",
        ),
    ]
    for bad, problem in problems:
        if bad:
            return found, problem
    jtis.add(claims["jti"])
    if nonce is not None and claims.get("nonce") != nonce:
        return found, "use_dpop_nonce"
    return found, ""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def record(self, **entry) -> dict:
        entry = {"method": self.command, "path": self.path, **entry}
        with lock:
            seen.append(entry)
        return entry

    def do_GET(self):
        if self.path == "/seen":
            with lock:
                return self.answer(200, {"seen": seen})
        if self.path.startswith("/authorize?"):
            return self.authorize(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query)))
        self.record()
        if self.path == "/.well-known/oauth-protected-resource/mcp":
            return self.answer(200, {"resource": self.base + "/mcp", "authorization_servers": [self.base]})
        if self.path == "/.well-known/oauth-authorization-server":
            meta = {
                "issuer": self.base,
                "token_endpoint": self.base + "/token",
                "authorization_endpoint": args.authorization_endpoint or self.base + "/authorize",
                "registration_endpoint": self.base + "/register",
                "revocation_endpoint": self.base + "/revoke",
                "code_challenge_methods_supported": ["S256"],
                "grant_types_supported": ["client_credentials", JWT_BEARER, "authorization_code", "refresh_token"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "private_key_jwt", "none"],
                "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
            }
            if args.dpop:
                meta["dpop_signing_alg_values_supported"] = ["ES256"]
            return self.answer(200, meta)
        self.answer(404, {"error": "not_found"})

    def do_POST(self):
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/mcp":
            return self.mcp(data)
        if self.path == "/register":
            return self.register(json.loads(data))
        if self.path == "/forget":
            with lock:
                tokens.clear()
            self.record()
            return self.answer(200, {})
        form = dict(urllib.parse.parse_qsl(data.decode()))
        if self.path == "/revoke":
            return self.revoke(form)
        if self.path == "/idp/token":
            return self.idp(form)
        if self.path == "/token":
            return self.token(form)
        self.answer(404, {"error": "not_found"})

    def idp(self, form: dict) -> None:
        self.record(form={k: v for k, v in form.items() if k != "subject_token"})
        if (
            form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange"
            or form.get("subject_token") != ID_TOKEN
            or form.get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token"
            or form.get("requested_token_type") != "urn:ietf:params:oauth:token-type:id-jag"
            or form.get("audience") != self.base
            or form.get("resource") != self.base + "/mcp"
        ):
            return self.answer(400, {"error": "invalid_request", "error_description": "not a valid ID-JAG request"})
        id_jag = "id-jag-" + secrets.token_urlsafe(8)
        id_jags.add(id_jag)
        self.answer(200, {"access_token": id_jag, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"})

    def register(self, body: dict) -> None:
        client_id = "dyn-" + secrets.token_urlsafe(6)
        with lock:
            clients[client_id] = list(body.get("redirect_uris") or [])
        self.record(client_id=client_id, redirect_uris=body.get("redirect_uris"))
        answer = {"client_id": client_id, "redirect_uris": clients[client_id], "token_endpoint_auth_method": "none"}
        self.answer(201, answer)

    def authorize(self, query: dict) -> None:
        """The user's consent, given at once: a redirect to the client with a code (or an error)."""
        self.record(path="/authorize", query={k: v for k, v in query.items() if k != "code_challenge"})
        redirect = query.get("redirect_uri", "")
        if query.get("client_id") not in clients or redirect not in clients[query["client_id"]]:
            return self.answer(400, {"error": "invalid_request", "error_description": "unknown client or redirect"})
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256":
            answer = {"error": "invalid_request", "state": query.get("state", "")}
        elif query.get("resource") != self.base + "/mcp":
            answer = {"error": "invalid_target", "state": query.get("state", "")}
        else:
            code = secrets.token_urlsafe(12)
            with lock:
                codes[code] = dict(query)
            answer = {"code": code, "state": query.get("state", ""), "iss": self.base}
        self.send_response(302)
        self.send_header("Location", redirect + ("&" if "?" in redirect else "?") + urllib.parse.urlencode(answer))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def revoke(self, form: dict) -> None:
        token = form.get("token", "")
        with lock:
            known = tokens.pop(token, 0) != 0 or refresh_tokens.pop(token, None) is not None
        self.record(
            token_id=token_id(token), hint=form.get("token_type_hint"), client_id=form.get("client_id"), known=known
        )
        self.answer(200, {})

    def user_grant(self, grant: str, form: dict) -> str:
        """The problem with an authorization_code or refresh_token request ("" when it is good)."""
        with lock:
            if grant == "authorization_code":
                asked = codes.pop(form.get("code", ""), None)
                if asked is None:
                    return "unknown or used code"
                challenge = b64e(hashlib.sha256(form.get("code_verifier", "").encode()).digest())
                if challenge != asked["code_challenge"]:
                    return "the code_verifier does not match the code_challenge"
                if form.get("redirect_uri") != asked["redirect_uri"] or form.get("client_id") != asked["client_id"]:
                    return "not the client or redirect the code was issued for"
                return ""
            owner = refresh_tokens.pop(form.get("refresh_token", ""), None)  # rotated: each is good once
            if owner is None or owner != form.get("client_id"):
                return "unknown refresh token"
            return ""

    def client(self, form: dict) -> str:
        """The client this token request authenticated as ("" if none, "!" if it failed)."""
        authorization = self.headers.get("Authorization") or ""
        if authorization.startswith("Basic "):
            user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            return CLIENT_ID if (user, password) == (CLIENT_ID, CLIENT_SECRET) else "!"
        assertion = form.get("client_assertion")
        if assertion:
            _, claims = decode(assertion)
            good = (
                form.get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
                and args.client_jwk
                and verify(assertion, json.loads(args.client_jwk))
                and claims.get("iss") == claims.get("sub") == CLIENT_ID
                and claims.get("aud") == self.base
                and claims.get("exp", 0) > NOT_BEFORE
            )
            return CLIENT_ID if good else "!"
        return ""

    def token(self, form: dict) -> None:
        grant = form.get("grant_type")
        client = self.client(form)
        proof, problem = (
            check_proof(self.headers.get("DPoP"), "POST", self.base + "/token", None, AS_NONCE if args.nonce else None)
            if args.dpop
            else ({}, "")
        )
        entry = self.record(
            grant=grant,
            client=client,
            auth_scheme=(self.headers.get("Authorization") or " ").split(" ")[0],
            form={k: v for k, v in form.items() if k not in ("client_secret", "client_assertion", "assertion")},
            dpop=proof,
            dpop_problem=problem,
        )
        if args.echo_token_requests:
            quoted = json.dumps({"authorization": self.headers.get("Authorization"), "form": form})
            return self.answer(400, {"error": "invalid_request", "error_description": "cannot take " + quoted})
        if client == "!":
            return self.answer(401, {"error": "invalid_client"})
        if problem == "use_dpop_nonce":
            return self.answer(400, {"error": "use_dpop_nonce"}, {"DPoP-Nonce": AS_NONCE})
        if problem:
            return self.answer(400, {"error": "invalid_dpop_proof", "error_description": problem})
        if form.get("resource") is not None and form["resource"] != self.base + "/mcp":
            return self.answer(400, {"error": "invalid_target"})
        if grant == "client_credentials":
            if client != CLIENT_ID:
                return self.answer(401, {"error": "invalid_client"})
        elif grant == JWT_BEARER:
            assertion = form.get("assertion") or ""
            if assertion in id_jags:
                if client != CLIENT_ID:
                    return self.answer(401, {"error": "invalid_client"})
            else:
                try:
                    _, claims = decode(assertion)
                except ValueError:
                    return self.answer(400, {"error": "invalid_grant", "error_description": "not a JWT"})
                if claims.get("aud") != self.base or claims.get("exp", 0) <= NOT_BEFORE:
                    entry["refused"] = "invalid_grant"
                    return self.answer(
                        400, {"error": "invalid_grant", "error_description": "wrong audience or expired"}
                    )
        elif grant in ("authorization_code", "refresh_token"):
            problem = self.user_grant(grant, form)
            if problem:
                entry["refused"] = "invalid_grant"
                return self.answer(400, {"error": "invalid_grant", "error_description": problem})
        else:
            return self.answer(400, {"error": "unsupported_grant_type"})
        token = secrets.token_urlsafe(16)
        bound = thumbprint(proof["header"]["jwk"]) if args.dpop and proof else None
        answer = {"access_token": token, "token_type": "DPoP" if bound else "Bearer", "expires_in": 3600}
        with lock:
            tokens[token] = bound
            if grant in ("authorization_code", "refresh_token"):
                answer["refresh_token"] = secrets.token_urlsafe(16)
                refresh_tokens[answer["refresh_token"]] = form["client_id"]
        entry["token_id"] = token_id(token)
        self.answer(200, answer)

    def mcp(self, data: bytes) -> None:
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        challenge = f'{"DPoP" if args.dpop else "Bearer"} resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'
        with lock:
            known = token in tokens
            bound = tokens.get(token)
        proof, problem = {}, ""
        if known and bound is not None:
            proof, problem = check_proof(
                self.headers.get("DPoP"), "POST", self.base + "/mcp", token, RS_NONCE if args.nonce else None
            )
            if not problem and thumbprint(proof["header"]["jwk"]) != bound:
                problem = "the proof's key is not the token's"
            if scheme != "DPoP":
                problem = "a DPoP-bound token sent as " + scheme
        self.record(
            auth_scheme=scheme,
            token_id=token_id(token) if token else None,
            known=known,
            dpop=proof,
            dpop_problem=problem,
        )
        if not known:
            return self.answer(401, {"error": "invalid_token"}, {"WWW-Authenticate": challenge})
        if problem == "use_dpop_nonce":
            return self.answer(
                401,
                {"error": "use_dpop_nonce"},
                {"WWW-Authenticate": 'DPoP error="use_dpop_nonce"', "DPoP-Nonce": RS_NONCE},
            )
        if problem:
            return self.answer(401, {"error": "invalid_dpop_proof", "error_description": problem})
        message = json.loads(data)
        response = mcp.handle(message)
        if args.echo and isinstance(message, dict) and message.get("method") in ON[args.echo_on]:
            answer = echo(args.echo, dict(self.headers.items()), message, self.base, response)
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.kind)
            self.send_header("Content-Length", str(len(answer.body)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)
            return
        if response is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.answer(200, response)


if __name__ == "__main__":
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()
