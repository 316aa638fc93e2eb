"""The OAuth client credentials grant for MCP (the io.modelcontextprotocol/oauth-client-credentials extension).

This module owns how a machine client, one with no user to send to a browser,
gets a token: `grant_type=client_credentials` at the token endpoint, with the
`resource` (RFC 8707) and scope the flow chose, authenticated either with a
client secret (client_secret_basic or client_secret_post) or with a signed JWT
assertion, private_key_jwt (RFC 7523 section 2.2; `client_assertion` here, the
signing in `jwt.py`, which needs the `auth` extra). Discovery, the choice of
authentication method and the token request itself are `oauth.OAuth`'s:

    OAuth(grant=ClientCredentials(), client_id="svc", client_secret="...")
    OAuth(grant=ClientCredentials(), client_id="svc", client_key=SigningKey.from_pem(pem))
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING

from decodeloop.errors import AuthorizationError
from decodeloop.mcp.auth.jwt import SigningKey

if TYPE_CHECKING:
    from decodeloop.mcp.auth.oauth import OAuth
    from decodeloop.mcp.transports.httpbase import HttpClient

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def client_assertion(key: SigningKey, client_id: str, audience: str, lifetime: int = 60) -> str:
    """A private_key_jwt client assertion: iss = sub = the client id, aud = the authorization server."""
    now = int(time.time())
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + lifetime,
        "jti": secrets.token_urlsafe(16),
    }
    return key.sign({"typ": "JWT"}, claims)


class ClientCredentials:
    """The client credentials grant; the client's id and secret or key are the OAuth object's."""

    name = "client credentials"

    def token_form(
        self, oauth: OAuth, http: HttpClient, meta: dict, resource: str, scope: str | None
    ) -> dict[str, str]:
        if oauth.client_id is None:
            raise AuthorizationError("the client credentials grant needs a client_id")
        form = {"grant_type": "client_credentials", "resource": resource}
        if scope:
            form["scope"] = scope
        return form
