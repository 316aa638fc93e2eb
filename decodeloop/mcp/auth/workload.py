"""Workload identity federation for MCP (the io.modelcontextprotocol/auth/wif extension).

This module owns the JWT bearer grant (RFC 7523 section 2.1) as a workload uses
it: a token its platform issued to it (a Kubernetes service account token, a
cloud instance identity token, a CI job's OIDC token) is presented as the
`assertion` of `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, with no
client secret and no user. The assertion is read when a token is needed, so a
file the platform rotates is always read fresh. A refused grant (invalid_grant,
invalid_scope, unauthorized_client) is reported as it came: the flow neither
retries it nor falls back to another grant. The JWT is the platform's, signed
already, so this needs nothing beyond the standard library.

    OAuth(grant=WorkloadIdentity.from_file("/var/run/secrets/tokens/mcp"), client_id="my-workload")
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from decodeloop.errors import AuthorizationError
from decodeloop.mcp.auth.oauth import JWT_BEARER

if TYPE_CHECKING:
    from decodeloop.mcp.auth.oauth import OAuth
    from decodeloop.mcp.transports.httpbase import HttpClient


class WorkloadIdentity:
    """The JWT bearer grant with a workload's own JWT: a string, or a callable that returns a current one."""

    name = "workload identity"

    def __init__(self, assertion: str | Callable[[], str]) -> None:
        self._assertion = assertion

    @classmethod
    def from_file(cls, path: str | Path) -> WorkloadIdentity:
        return cls(lambda: Path(path).read_text(encoding="utf-8").strip())

    def token_form(
        self, oauth: OAuth, http: HttpClient, meta: dict, resource: str, scope: str | None
    ) -> dict[str, str]:
        assertion = self._assertion() if callable(self._assertion) else self._assertion
        if not assertion:
            raise AuthorizationError("workload identity: no JWT to present as the assertion")
        oauth.hold_secret(assertion, "workload JWT")
        form = {"grant_type": JWT_BEARER, "assertion": assertion, "resource": resource}
        if scope:
            form["scope"] = scope
        return form
