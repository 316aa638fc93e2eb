"""Enterprise-managed authorization for MCP (the io.modelcontextprotocol/enterprise-managed-authorization extension).

This module owns the two-step grant by which a user already signed in to their
organization's identity provider (IdP) reaches an MCP server without a consent
screen of its own:

1. token exchange at the IdP (RFC 8693): the user's ID token is exchanged for an
   identity assertion JWT authorization grant (ID-JAG): `subject_token_type`
   id_token, `requested_token_type` id-jag, `audience` the MCP server's
   authorization server (its issuer), `resource` the MCP server;
2. the JWT bearer grant (RFC 7523) at the authorization server with the ID-JAG as
   the `assertion`, the client authenticating as `OAuth` is configured to
   (client_secret_basic with a pre-registered client, typically).

The IdP sign-in that produced the ID token is the caller's; the ID token may be
a string or a callable returning a current one. Standard library only.

    OAuth(grant=EnterpriseManaged(idp_token_endpoint=..., id_token=..., idp_client_id=...),
          client_id="mcp-client", client_secret="...")
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING

from decodeloop.errors import AuthorizationError
from decodeloop.mcp.auth.oauth import JWT_BEARER, basic_authorization
from decodeloop.text.credentials import hold_authorization, label

if TYPE_CHECKING:
    from decodeloop.mcp.auth.oauth import OAuth
    from decodeloop.mcp.transports.httpbase import HttpClient

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"


class EnterpriseManaged:
    """ID token -> ID-JAG at the IdP, then ID-JAG -> access token at the MCP server's authorization server."""

    name = "enterprise-managed authorization"

    def __init__(
        self,
        *,
        idp_token_endpoint: str,
        id_token: str | Callable[[], str],
        idp_client_id: str | None = None,
        idp_client_secret: str | None = None,
    ) -> None:
        self.idp_token_endpoint = idp_token_endpoint
        self._id_token = id_token
        self.idp_client_id, self.idp_client_secret = idp_client_id, idp_client_secret

    def token_form(
        self, oauth: OAuth, http: HttpClient, meta: dict, resource: str, scope: str | None
    ) -> dict[str, str]:
        id_jag = self.identity_assertion(oauth, http, meta["issuer"], resource, scope)
        form = {"grant_type": JWT_BEARER, "assertion": id_jag}
        if scope:
            form["scope"] = scope
        return form

    def identity_assertion(
        self, oauth: OAuth, http: HttpClient, audience: str, resource: str, scope: str | None
    ) -> str:
        """The token exchange at the IdP: the ID-JAG for `audience` (an authorization server) and `resource`."""
        id_token = self._id_token() if callable(self._id_token) else self._id_token
        oauth.hold_secret(id_token, "ID token")
        oauth.hold_secret(self.idp_client_secret, "IdP client secret", replaced=False)
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": id_token,
            "subject_token_type": ID_TOKEN,
            "requested_token_type": ID_JAG,
            "audience": audience,
            "resource": resource,
        }
        if scope:
            form["scope"] = scope
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if self.idp_client_secret is not None:
            headers["Authorization"] = basic_authorization(self.idp_client_id or "", self.idp_client_secret)
            hold_authorization(headers["Authorization"], label("IdP client credentials", oauth.server))
        elif self.idp_client_id is not None:
            form["client_id"] = self.idp_client_id
        answer = oauth.post(
            http, self.idp_token_endpoint, urllib.parse.urlencode(form).encode(), headers, "IdP token exchange"
        )
        if answer.get("issued_token_type") not in (None, ID_JAG) or not isinstance(answer.get("access_token"), str):
            kind = answer.get("issued_token_type")
            raise AuthorizationError(f"the IdP's token exchange answer holds no ID-JAG (issued_token_type {kind!r})")
        oauth.hold_secret(answer["access_token"], "ID-JAG")
        oauth.log("the IdP issued an identity assertion grant (ID-JAG)")
        return answer["access_token"]
