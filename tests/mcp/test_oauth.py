"""The pieces of the OAuth flow that are pure functions (the flow itself runs in the conformance suite)."""

from __future__ import annotations

import base64
import hashlib

from decodeloop.mcp.auth.oauth import (
    authorization_server_urls,
    covers,
    parse_challenge,
    pkce_pair,
    protected_resource_urls,
)
from decodeloop.tools.startup import describe_notification


def test_bearer_challenge_parameters():
    header = (
        'Bearer error="insufficient_scope", scope="mcp:basic mcp:write", '
        'resource_metadata="http://h:1/.well-known/oauth-protected-resource/mcp", realm=x'
    )
    assert parse_challenge(header) == {
        "error": "insufficient_scope",
        "scope": "mcp:basic mcp:write",
        "realm": "x",
        "resource_metadata": "http://h:1/.well-known/oauth-protected-resource/mcp",
    }
    assert parse_challenge('Basic realm="a"') == {}
    assert parse_challenge('Bearer scope="say \\"hi\\""') == {"scope": 'say "hi"'}


def test_pkce_s256():
    verifier, challenge = pkce_pair()
    assert 43 <= len(verifier) <= 128
    digest = hashlib.sha256(verifier.encode()).digest()
    assert challenge == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert pkce_pair()[0] != verifier


def test_discovery_order():
    assert protected_resource_urls("http://h:1/mcp") == [
        "http://h:1/.well-known/oauth-protected-resource/mcp",
        "http://h:1/.well-known/oauth-protected-resource",
    ]
    assert protected_resource_urls("http://h:1/") == ["http://h:1/.well-known/oauth-protected-resource"]
    assert authorization_server_urls("https://as.example/tenant1") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration",
    ]
    assert authorization_server_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration",
    ]


def test_resource_must_cover_the_server():
    assert covers("http://h:1/mcp", "http://h:1/mcp") and covers("http://h:1", "http://h:1/mcp")
    assert not covers("http://h:1/other", "http://h:1/mcp") and not covers("http://h:2/mcp", "http://h:1/mcp")
    assert not covers("http://h:1/mc", "http://h:1/mcp")


def test_notifications_in_the_trace():
    assert (
        describe_notification(
            "notifications/progress", {"progressToken": 1, "progress": 2, "total": 5, "message": "halfway"}
        )
        == "progress 2/5: halfway"
    )
    assert describe_notification("notifications/progress", {"progress": 0.5}) == "progress 0.5"
    assert (
        describe_notification("notifications/message", {"level": "warning", "data": "low disk"})
        == "log warning: low disk"
    )
    assert describe_notification("notifications/tools/list_changed", {}) == "notifications/tools/list_changed"
