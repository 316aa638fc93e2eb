"""DPoP, sender-constrained access tokens (RFC 9449), as the MCP DPoP extension uses them.

This module owns the client's proof-of-possession key and the proofs it signs:
one fresh ES256 JWT per HTTP request (`typ` dpop+jwt, the public key in the
`jwk` header, claims `jti`, `htm`, `htu` without query or fragment, `iat`, and
for a resource request `ath`, the hash of the access token it goes with), and
the nonces servers hand out (`DPoP-Nonce`), remembered per origin so the token
endpoint's nonce never goes to the MCP server and the other way round. A
`use_dpop_nonce` error is answered by one retry with the new nonce (`oauth.py`
does that for the token endpoint, the transport through `OAuth.authorize` for
the MCP server). Signing needs the `auth` extra (see `jwt.py`).
"""

from __future__ import annotations

import secrets
import threading
import time
import urllib.parse
from collections.abc import Mapping

from decodeloop.mcp.auth.jwt import SigningKey, sha256_b64url, thumbprint


def origin_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def target_uri(url: str) -> str:
    """The `htu` of a request: its URL without query and fragment (RFC 9449 section 4.2)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class DPoP:
    """A DPoP key pair and the nonces servers asked for; `proof()` signs one proof for one request."""

    def __init__(self, key: SigningKey | None = None) -> None:
        self.key = key or SigningKey.generate("ES256")
        self.jwk = self.key.public_jwk
        self.jkt = thumbprint(self.jwk)  # what a DPoP-bound token's cnf.jkt names
        self._nonces: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def alg(self) -> str:
        return self.key.alg

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        claims: dict[str, object] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": target_uri(url),
            "iat": int(time.time()),
        }
        nonce = self.nonce_for(url)
        if nonce is not None:
            claims["nonce"] = nonce
        if access_token is not None:
            claims["ath"] = sha256_b64url(access_token)
        return self.key.sign({"typ": "dpop+jwt", "jwk": self.jwk}, claims)

    def nonce_for(self, url: str) -> str | None:
        with self._lock:
            return self._nonces.get(origin_of(url))

    def take_nonce(self, url: str, headers: Mapping[str, str]) -> bool:
        """Remember the `DPoP-Nonce` a response from `url` carries; True if it is a new one."""
        nonce = headers.get("DPoP-Nonce")
        if not nonce:
            return False
        with self._lock:
            key = origin_of(url)
            fresh = self._nonces.get(key) != nonce
            self._nonces[key] = nonce
        return fresh
