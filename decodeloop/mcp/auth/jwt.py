"""Signed JSON Web Tokens (RFC 7515, RFC 7519) for the authorization extensions.

This module owns the one place that needs cryptography: signing a JWT with an
asymmetric key (ES256, ES384, RS256, PS256), describing a public key as a JWK
(RFC 7517) and its thumbprint (RFC 7638). The standard library cannot do
elliptic-curve or RSA signatures, so the signing comes from the `cryptography`
package, the `auth` extra (`pip install -e '.[auth]'` in the clone, or `pip install cryptography`), imported only when
a key is loaded or made; everything else in decodeloop works without it.
Encoding helpers (base64url, unverified claim decoding) are standard library.
"""

from __future__ import annotations

import base64
import hashlib
import json
from types import SimpleNamespace
from typing import Any

from decodeloop.errors import AuthorizationError
from decodeloop.text.credentials import hold

EXTRA_MESSAGE = (
    "signing a JWT (private_key_jwt, DPoP) needs the 'cryptography' package: "
    "pip install -e '.[auth]' in the clone (the auth extra), or pip install cryptography"
)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sha256_b64url(text: str) -> str:
    """base64url(SHA-256(text)): a DPoP proof's `ath`, a PKCE challenge."""
    return b64url(hashlib.sha256(text.encode("ascii")).digest())


def unverified_claims(token: str) -> dict:
    """The payload of a compact JWT, not verified: for reading what a server sent, never for trusting it."""
    try:
        claims = json.loads(b64url_decode(token.split(".")[1]))
    except (IndexError, ValueError) as exc:
        raise ValueError(f"not a JWT: {exc}") from None
    if not isinstance(claims, dict):
        raise ValueError("not a JWT: the payload is not a JSON object")
    return claims


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils
    except ImportError:
        raise AuthorizationError(EXTRA_MESSAGE) from None

    return SimpleNamespace(hashes=hashes, serialization=serialization, ec=ec, padding=padding, rsa=rsa, utils=utils)


_CURVES = {"ES256": ("secp256r1", "P-256", 32), "ES384": ("secp384r1", "P-384", 48)}


class SigningKey:
    """A private key that signs JWTs with one algorithm; `public_jwk` is what a verifier needs."""

    def __init__(self, key: Any, alg: str) -> None:
        crypto = _crypto()
        if alg in _CURVES:
            if not isinstance(key, crypto.ec.EllipticCurvePrivateKey) or key.curve.name != _CURVES[alg][0]:
                raise AuthorizationError(f"{alg} needs an elliptic-curve key on {_CURVES[alg][1]}")
        elif alg in ("RS256", "PS256"):
            if not isinstance(key, crypto.rsa.RSAPrivateKey):
                raise AuthorizationError(f"{alg} needs an RSA key")
        else:
            raise AuthorizationError(f"unsupported JWT signing algorithm {alg!r} (ES256, ES384, RS256, PS256)")
        self._key, self.alg = key, alg
        # the private half never leaves the process as text; held all the same, as its JWK's "d" would spell it
        private = key.private_numbers()
        secret = private.private_value if alg in _CURVES else private.d
        size = _CURVES[alg][2] if alg in _CURVES else (secret.bit_length() + 7) // 8  # RFC 7518's octets
        hold(b64url(secret.to_bytes(size, "big")), "private signing key")

    @classmethod
    def generate(cls, alg: str = "ES256") -> SigningKey:
        """A fresh key pair (a DPoP key lives as long as the client that made it)."""
        crypto = _crypto()
        if alg in _CURVES:
            return cls(crypto.ec.generate_private_key(getattr(crypto.ec, _CURVES[alg][0].upper())()), alg)
        return cls(crypto.rsa.generate_private_key(public_exponent=65537, key_size=2048), alg)

    @classmethod
    def from_pem(cls, pem: str | bytes, alg: str | None = None) -> SigningKey:
        """A PEM private key (PKCS#8 or traditional); the algorithm defaults to the key's usual one."""
        crypto = _crypto()
        try:
            key = crypto.serialization.load_pem_private_key(pem.encode() if isinstance(pem, str) else pem, None)
        except (ValueError, TypeError) as exc:
            raise AuthorizationError(f"the private key is not a usable unencrypted PEM key: {exc}") from None
        if alg is None:
            if isinstance(key, crypto.ec.EllipticCurvePrivateKey):
                alg = {"secp256r1": "ES256", "secp384r1": "ES384"}.get(key.curve.name, "?")
            else:
                alg = "RS256"
        return cls(key, alg)

    @property
    def public_jwk(self) -> dict[str, str]:
        numbers = self._key.public_key().public_numbers()
        if self.alg in _CURVES:
            size = _CURVES[self.alg][2]
            return {
                "kty": "EC",
                "crv": _CURVES[self.alg][1],
                "x": b64url(numbers.x.to_bytes(size, "big")),
                "y": b64url(numbers.y.to_bytes(size, "big")),
            }
        length = (numbers.n.bit_length() + 7) // 8
        return {
            "kty": "RSA",
            "n": b64url(numbers.n.to_bytes(length, "big")),
            "e": b64url(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")),
        }

    def sign(self, header: dict[str, Any], claims: dict[str, Any]) -> str:
        """A compact JWS: header (with `alg` set to this key's) . claims . signature."""
        crypto = _crypto()
        head = b64url(json.dumps({**header, "alg": self.alg}, separators=(",", ":")).encode())
        body = b64url(json.dumps(claims, separators=(",", ":")).encode())
        data = f"{head}.{body}".encode("ascii")
        if self.alg in _CURVES:
            digest = crypto.hashes.SHA256() if self.alg == "ES256" else crypto.hashes.SHA384()
            r, s = crypto.utils.decode_dss_signature(self._key.sign(data, crypto.ec.ECDSA(digest)))
            size = _CURVES[self.alg][2]
            signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")  # JWS wants r || s, not DER
        elif self.alg == "RS256":
            signature = self._key.sign(data, crypto.padding.PKCS1v15(), crypto.hashes.SHA256())
        else:
            pss = crypto.padding.PSS(mgf=crypto.padding.MGF1(crypto.hashes.SHA256()), salt_length=32)
            signature = self._key.sign(data, pss, crypto.hashes.SHA256())
        return f"{head}.{body}.{b64url(signature)}"


def thumbprint(jwk: dict[str, str]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK (the `jkt` a DPoP-bound token names)."""
    members = ("crv", "kty", "x", "y") if jwk.get("kty") == "EC" else ("e", "kty", "n")
    canonical = json.dumps({name: jwk[name] for name in members}, separators=(",", ":"), sort_keys=True)
    return sha256_b64url(canonical)
