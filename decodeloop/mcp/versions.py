"""The MCP revisions this client speaks: their one copy, for the client, the config file and the CLI."""

STATELESS_VERSION = "2026-07-28"  # server/discover, no session
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # the initialize handshake
PROTOCOL_VERSION = LEGACY_VERSIONS[0]  # what initialize asks for
SUPPORTED_VERSIONS = (STATELESS_VERSION, *LEGACY_VERSIONS)
PROTOCOLS = ("auto", *SUPPORTED_VERSIONS)  # what a server may be pinned to; auto: probe, then initialize
# the legacy HTTP+SSE transport has a session: it carries the handshake's revisions only
LEGACY_SSE_REFUSAL = f"the legacy HTTP+SSE transport cannot speak MCP {STATELESS_VERSION}"


def is_stateless(version: str | None) -> bool:
    """Whether a revision is the stateless wire (server/discover, no session); None: not yet known, so no."""
    return version == STATELESS_VERSION
