"""The authorization extensions against a real server process: client credentials, DPoP, workload identity and
enterprise-managed authorization, each walked end to end by McpClient over HTTP.

tests/servers/oauth_server.py is the MCP server, its authorization server and an identity provider in one
process; it checks every token request and DPoP proof as the RFCs say and records what it saw (GET /seen), so
the assertions here are on the wire, not on the client's own account of it.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.request

import pytest
from conftest import ROOT

from decodeloop.errors import AuthorizationError
from decodeloop.mcp import McpClient
from decodeloop.mcp.auth.client_credentials import ClientCredentials
from decodeloop.mcp.auth.dpop import DPoP, target_uri
from decodeloop.mcp.auth.enterprise import EnterpriseManaged
from decodeloop.mcp.auth.jwt import SigningKey, thumbprint, unverified_claims
from decodeloop.mcp.auth.oauth import OAuth
from decodeloop.mcp.auth.workload import WorkloadIdentity
from decodeloop.text.credentials import redact
from decodeloop.text.untrusted import visible

pytest.importorskip("cryptography")  # the auth extra: the test extra installs it

SERVER = os.path.join(ROOT, "tests", "servers", "oauth_server.py")
# token lifetimes far from any clock: a valid one ends in 2100, an expired one ended in 2000
FAR_FUTURE, LONG_AGO = 4_102_444_800, 946_684_800
CLIENT_ID, CLIENT_SECRET = "svc-client", "svc-secret"


class AuthServer:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, SERVER, *args], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"the OAuth test server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line)}"

    def seen(self, path: str | None = None) -> list[dict]:
        with urllib.request.urlopen(self.url + "/seen", timeout=5) as response:
            entries = json.load(response)["seen"]
        return [e for e in entries if path is None or e["path"] == path]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def server():
    started: list[AuthServer] = []

    def start(*args: str) -> AuthServer:
        started.append(AuthServer(*args))
        return started[-1]

    yield start
    for one in started:
        one.stop()


def call(server: AuthServer, auth: OAuth, logs: list[str]) -> str:
    with McpClient.connect_url(server.url + "/mcp", auth=auth, timeout=30, log=logs.append, name="weather") as client:
        names = [tool.name for tool in client.list_tools()]
        assert names
        return names[0]


def test_client_credentials_with_a_secret(server):
    srv = server()
    logs: list[str] = []
    auth = OAuth(grant=ClientCredentials(), client_id=CLIENT_ID, client_secret=CLIENT_SECRET, log=logs.append)
    call(srv, auth, logs)
    [token] = srv.seen("/token")
    assert token["grant"] == "client_credentials" and token["client"] == CLIENT_ID and token["auth_scheme"] == "Basic"
    assert token["form"]["resource"] == srv.url + "/mcp"
    assert auth.token_type == "Bearer" and all(e["auth_scheme"] == "Bearer" for e in srv.seen("/mcp")[1:])
    assert not any(auth.access_token in line or CLIENT_SECRET in line for line in logs)


def test_client_credentials_with_a_wrong_secret_is_refused_once(server):
    srv = server()
    auth = OAuth(grant=ClientCredentials(), client_id=CLIENT_ID, client_secret="wrong")
    with pytest.raises(AuthorizationError, match="invalid_client"):
        call(srv, auth, [])
    assert len(srv.seen("/token")) == 1


def test_client_credentials_with_private_key_jwt(server):
    key = SigningKey.generate("ES256")
    srv = server("--client-jwk", json.dumps(key.public_jwk))
    auth = OAuth(grant=ClientCredentials(), client_id=CLIENT_ID, client_key=key)
    call(srv, auth, [])
    [token] = srv.seen("/token")
    assert token["client"] == CLIENT_ID and token["auth_scheme"] == ""
    assert token["form"]["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    # another key with the same client id is refused: the server does verify the signature
    other = OAuth(grant=ClientCredentials(), client_id=CLIENT_ID, client_key=SigningKey.generate("ES256"))
    with pytest.raises(AuthorizationError, match="invalid_client"):
        call(srv, other, [])


def test_dpop_bound_token_and_fresh_proofs(server):
    srv = server("--dpop")
    logs: list[str] = []
    auth = OAuth(grant=ClientCredentials(), client_id=CLIENT_ID, client_secret=CLIENT_SECRET, log=logs.append)
    call(srv, auth, logs)
    assert auth.token_type == "DPoP" and auth.dpop is not None
    [token] = srv.seen("/token")
    assert token["dpop_problem"] == "" and token["dpop"]["header"]["jwk"] == auth.dpop.jwk
    assert "ath" not in token["dpop"]["claims"] and "d" not in token["dpop"]["header"]["jwk"]
    used = srv.seen("/mcp")[1:]  # the first went out without a token and was answered 401
    assert used and all(e["auth_scheme"] == "DPoP" and e["dpop_problem"] == "" for e in used)
    jtis = [e["dpop"]["claims"]["jti"] for e in used] + [token["dpop"]["claims"]["jti"]]
    assert len(set(jtis)) == len(jtis)
    assert not any(auth.access_token in line for line in logs)


def test_dpop_nonces_from_the_token_endpoint_and_the_mcp_server(server):
    srv = server("--dpop", "--nonce")
    auth = OAuth(grant=ClientCredentials(), client_id=CLIENT_ID, client_secret=CLIENT_SECRET)
    call(srv, auth, [])
    first, second = srv.seen("/token")
    assert first["dpop_problem"] == "use_dpop_nonce" and "nonce" not in first["dpop"]["claims"]
    assert second["dpop_problem"] == "" and second["dpop"]["claims"]["nonce"] == "as-nonce-1"
    mcp = srv.seen("/mcp")[1:]
    assert mcp[0]["dpop_problem"] == "use_dpop_nonce"
    assert all(e["dpop_problem"] == "" and e["dpop"]["claims"]["nonce"] == "rs-nonce-1" for e in mcp[1:])
    assert len(mcp) >= 2


def test_dpop_refused_when_asked_not_to(server):
    srv = server("--dpop")
    auth = OAuth(grant=ClientCredentials(), client_id=CLIENT_ID, client_secret=CLIENT_SECRET, dpop=False)
    with pytest.raises(AuthorizationError, match="no DPoP proof"):
        call(srv, auth, [])


def test_workload_identity(server, tmp_path):
    srv = server()
    workload_jwt = _unsigned({"iss": "https://idp.example", "sub": "job-1", "aud": srv.url, "exp": FAR_FUTURE})
    path = tmp_path / "token"
    path.write_text(workload_jwt + "\n")
    call(srv, OAuth(grant=WorkloadIdentity.from_file(path), client_id="job"), [])
    [token] = srv.seen("/token")
    assert token["grant"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" and token["form"]["client_id"] == "job"


def test_workload_identity_refusal_is_reported_not_retried(server):
    srv = server()
    expired = _unsigned({"aud": "http://127.0.0.1:1", "exp": LONG_AGO})
    with pytest.raises(AuthorizationError, match="invalid_grant: wrong audience or expired"):
        call(srv, OAuth(grant=WorkloadIdentity(expired)), [])
    assert [e["grant"] for e in srv.seen("/token")] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]


def test_enterprise_managed_authorization(server):
    srv = server()
    grant = EnterpriseManaged(
        idp_token_endpoint=srv.url + "/idp/token", id_token="an-id-token-from-the-idp", idp_client_id="idp-client"
    )
    call(srv, OAuth(grant=grant, client_id=CLIENT_ID, client_secret=CLIENT_SECRET), [])
    [exchange] = srv.seen("/idp/token")
    assert exchange["form"]["audience"] == srv.url and exchange["form"]["resource"] == srv.url + "/mcp"
    [token] = srv.seen("/token")
    assert token["grant"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" and token["client"] == CLIENT_ID


def test_enterprise_managed_authorization_with_a_bad_id_token(server):
    srv = server()
    grant = EnterpriseManaged(idp_token_endpoint=srv.url + "/idp/token", id_token="forged")
    with pytest.raises(AuthorizationError, match="IdP token exchange .* invalid_request"):
        call(srv, OAuth(grant=grant, client_id=CLIENT_ID, client_secret=CLIENT_SECRET), [])
    assert srv.seen("/token") == []


def test_jwk_thumbprint_rfc7638_example():
    jwk = {
        "kty": "RSA",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    }
    assert thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_signed_jwt_verifies_and_the_key_stays_private():
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, utils

    from decodeloop.mcp.auth.jwt import b64url_decode

    dpop = DPoP()
    proof = dpop.proof("post", "https://mcp.example/mcp?x=1#f", access_token="tok")
    head, body, signature = proof.split(".")
    header = json.loads(b64url_decode(head))
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256" and set(header["jwk"]) == {"kty", "crv", "x", "y"}
    claims = unverified_claims(proof)
    assert claims["htm"] == "POST" and claims["htu"] == "https://mcp.example/mcp"
    assert claims["ath"] == "GnZ0607njffhrEOak8P6jjyUV4TU3sn9jjARc4svHWI"  # base64url(sha256("tok"))
    jwk = header["jwk"]
    public = ec.EllipticCurvePublicNumbers(
        int.from_bytes(b64url_decode(jwk["x"]), "big"), int.from_bytes(b64url_decode(jwk["y"]), "big"), ec.SECP256R1()
    ).public_key()
    raw = b64url_decode(signature)
    der = utils.encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))  # raises if it does not verify
    assert target_uri("http://h:1/a/b?q#f") == "http://h:1/a/b"


def test_nonces_are_kept_per_origin():
    dpop = DPoP()
    assert dpop.take_nonce("http://as.example/token", {"DPoP-Nonce": "n1"})
    assert not dpop.take_nonce("http://as.example/other", {"DPoP-Nonce": "n1"})
    assert dpop.nonce_for("http://as.example/x") == "n1" and dpop.nonce_for("http://rs.example/mcp") is None
    assert "nonce" not in unverified_claims(dpop.proof("POST", "http://rs.example/mcp"))


def test_without_cryptography_the_message_names_the_extra(monkeypatch):
    for name in list(sys.modules):
        if name == "cryptography" or name.startswith("cryptography."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cryptography", None)
    with pytest.raises(AuthorizationError, match=r"\[auth\]"):
        SigningKey.generate("ES256")


def _unsigned(claims: dict) -> str:
    from decodeloop.mcp.auth.jwt import b64url

    return ".".join(b64url(json.dumps(part).encode()) for part in ({"alg": "ES256"}, claims)) + ".c2ln"


@pytest.mark.parametrize("how", ["client secret", "private_key_jwt", "workload identity", "enterprise"])
def test_a_token_endpoint_that_quotes_the_request_shows_no_credential(server, how):
    """The authorization server refuses the token request with an error_description that quotes its
    Authorization header and form: the message a user would see (the CLI prints it through visible) holds
    none of the credentials the request carried, each replaced by its marker."""
    key = SigningKey.generate("ES256")
    srv = server("--echo-token-requests", "--client-jwk", json.dumps(key.public_jwk))
    sent = []  # what the request carries that the test knows
    if how == "client secret":
        auth = OAuth(grant=ClientCredentials(), client_id=CLIENT_ID, client_secret=CLIENT_SECRET, server="svc")
        sent = [CLIENT_SECRET, base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()]
    elif how == "private_key_jwt":
        auth = OAuth(grant=ClientCredentials(), client_id=CLIENT_ID, client_key=key, server="svc")
    elif how == "workload identity":
        workload_jwt = _unsigned({"iss": "https://idp.example", "sub": "job-2", "aud": srv.url, "exp": FAR_FUTURE})
        auth = OAuth(grant=WorkloadIdentity(workload_jwt), client_id="job", server="svc")
        sent = [workload_jwt]
    else:
        grant = EnterpriseManaged(idp_token_endpoint=srv.url + "/idp/token", id_token="an-id-token-from-the-idp")
        auth = OAuth(grant=grant, client_id=CLIENT_ID, client_secret=CLIENT_SECRET, server="svc")
        sent = [CLIENT_SECRET]
    with pytest.raises(AuthorizationError) as refused:
        call(srv, auth, [])
    shown = visible(str(refused.value))
    assert "invalid_request: cannot take " in shown, shown
    assert not [s for s in sent if s in shown] and '"eyJ' not in shown and "id-jag-" not in shown, shown
    assert {
        "client secret": '"authorization": "Basic [redacted: ',
        "private_key_jwt": '"client_assertion": "[redacted: client assertion of svc]"',
        "workload identity": '"assertion": "[redacted: workload JWT of svc]"',
        "enterprise": '"assertion": "[redacted: ID-JAG of svc]"',
    }[how] in shown, shown


def test_a_signing_keys_private_half_is_held():
    from decodeloop.mcp.auth.jwt import b64url

    key = SigningKey.generate("ES256")
    d = b64url(key._key.private_numbers().private_value.to_bytes(32, "big"))  # its JWK's "d"
    assert redact(f'{{"d": "{d}"}}') == '{"d": "[redacted: private signing key]"}'
