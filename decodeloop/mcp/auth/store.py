"""Stored OAuth tokens, one file per MCP server, so that `decodeloop auth login NAME` lasts between runs.

This module owns the token store: where it lives, what a file holds, and the rules for reading and
writing one. Standard library only.

- Where: `$DECODELOOP_TOKEN_DIR`, else `$XDG_CONFIG_HOME/decodeloop/tokens`, else
  `~/.config/decodeloop/tokens` (a `directory` argument wins over all three). The directory is
  created mode 0700.
- One JSON file per server, named after the server's name made safe for a file name (`file_name`:
  letters, digits, `_`, `-` and `.` kept, anything else `_`, no leading dot, and a hash of the real
  name appended whenever the name was changed, so `a/b` and `a_b` never share a file and `../../x`
  stays inside the directory). The file also records the name, and a file whose name does not match
  is not used.
- A token belongs to the URL it was issued for: `load(name, url)` returns None, with a warning, when the
  file was saved for another URL, so a token never goes to a server it was not issued for, even when a
  config entry keeps its name and changes its URL.
- Files are written mode 0600 and atomically (a temporary file in the same directory, created 0600 with
  O_EXCL, then `os.replace`). A file that group or others may read or write, that belongs to another
  user, or that is a symbolic link is refused, not repaired: it is ignored with a warning that says how to
  fix it (as ssh treats a private key), because a token another user could read may already be theirs.
- Only bearer tokens are stored. A DPoP-bound token is useless without its private key, and storing that
  key too would put a signing key on disk next to the token; `save` refuses it (`decodeloop auth login`
  asks for bearer tokens).

What a file holds: the server's name and URL, the access token, its type, the refresh token, the
expiry (seconds since the epoch), the scope, the authorization server's issuer and the resource the
token was asked for, and the client identity used (client_id, and a client_secret when dynamic
registration issued one). Nothing here logs a token; `StoredToken`'s repr leaves the secrets out.

`stored_oauth` joins the store to oauth.py: an OAuth that starts from a server's stored token, refreshes
it, saves every new one, and never runs the browser flow itself (LoginRequired says to log in).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from decodeloop.mcp.auth.oauth import OAuth

TOKEN_DIR_ENV = "DECODELOOP_TOKEN_DIR"
MAX_FILE_BYTES = 256 * 1024  # a token file is a few KB; a bigger one is not ours
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class TokenStoreError(Exception):
    """A token could not be stored (the message says why); reading never raises it: a bad file is skipped."""


@dataclass
class StoredToken:
    server: str
    url: str
    access_token: str = field(repr=False)
    token_type: str = "Bearer"
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None  # seconds since the epoch; None: the server did not say
    scope: str | None = None
    issuer: str | None = None  # the authorization server, whose metadata names the token endpoint
    resource: str | None = None  # RFC 8707: the resource the token was asked for
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: object) -> StoredToken | None:
        """The token a file's JSON describes, or None when a field is missing or of the wrong type."""
        if not isinstance(data, dict):
            return None
        strings = ("server", "url", "access_token", "token_type")
        optional = ("refresh_token", "scope", "issuer", "resource", "client_id", "client_secret")
        if not all(isinstance(data.get(k), str) and data[k] for k in strings):
            return None
        if not all(data.get(k) is None or isinstance(data[k], str) for k in optional):
            return None
        expires = data.get("expires_at")
        if expires is not None and (isinstance(expires, bool) or not isinstance(expires, (int, float))):
            return None
        fields: dict = {k: data.get(k) for k in (*strings, *optional, "expires_at")}
        return cls(**fields)


def default_directory() -> str:
    """$DECODELOOP_TOKEN_DIR, else $XDG_CONFIG_HOME/decodeloop/tokens, else ~/.config/decodeloop/tokens."""
    named = os.environ.get(TOKEN_DIR_ENV)
    if named:
        return os.path.abspath(os.path.expanduser(named))
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(os.path.abspath(config), "decodeloop", "tokens")


def file_name(server: str) -> str:
    """The file a server's token lives in: its name made safe, plus a hash of the name whenever that changed it."""
    safe = _SAFE.sub("_", server).lstrip(".")[:64]
    if safe == server and safe:
        return safe + ".json"
    digest = hashlib.sha256(server.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{safe or 'server'}-{digest}.json"


class TokenStore:
    """The token files of one directory. `warn` gets each warning (a file refused, a URL that changed)."""

    def __init__(self, directory: str | None = None, warn: Callable[[str], None] | None = None) -> None:
        self.directory = os.path.abspath(os.path.expanduser(directory)) if directory else default_directory()
        self.warn = warn or (lambda line: None)

    def path(self, server: str) -> str:
        return os.path.join(self.directory, file_name(server))

    def load(self, server: str, url: str, warn: Callable[[str], None] | None = None) -> StoredToken | None:
        """The token stored for this server and URL, or None (a refused file or another URL: with a warning)."""
        warn = warn or self.warn
        token = self._read(self.path(server), warn)
        if token is None:
            return None
        if token.server != server:
            warn(f"{self.path(server)} holds the token of server {token.server!r}, not {server!r}; not used")
            return None
        if token.url != url:
            # a token goes only to the URL it was issued for: a config entry that now points elsewhere logs in again
            warn(
                f"the stored token of {server} was issued for {token.url}, not {url}; not sent "
                f"(decodeloop auth login {server} replaces it)"
            )
            return None
        return token

    def get(self, server: str, warn: Callable[[str], None] | None = None) -> StoredToken | None:
        """The token stored under this name, whatever its URL (for logout and status, which send it nowhere
        but to its own authorization server)."""
        token = self._read(self.path(server), warn or self.warn)
        return token if token is not None and token.server == server else None

    def entries(self, warn: Callable[[str], None] | None = None) -> list[StoredToken]:
        """Every readable stored token, by server name."""
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return []
        except OSError as exc:
            (warn or self.warn)(f"cannot list {self.directory}: {exc.strerror or exc}")
            return []
        found = []
        for name in names:
            if name.endswith(".json") and not name.startswith("."):
                token = self._read(os.path.join(self.directory, name), warn or self.warn)
                if token is not None and file_name(token.server) == name:
                    found.append(token)
        return sorted(found, key=lambda t: t.server)

    def save(self, token: StoredToken) -> str:
        """Write the server's file (0600, atomically); returns its path. TokenStoreError when it cannot."""
        if token.token_type.lower() != "bearer":
            raise TokenStoreError(
                f"not storing the {token.token_type} token of {token.server}: a DPoP-bound token needs its "
                "private key, which decodeloop does not write to disk; log in with bearer tokens"
            )
        path = self.path(token.server)
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            data = (json.dumps(token.to_json(), indent=2) + "\n").encode()
            temporary = os.path.join(self.directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as exc:
            why = exc.strerror or exc
            raise TokenStoreError(f"cannot store the token of {token.server} in {path}: {why}") from None
        return path

    def delete(self, server: str) -> bool:
        """Remove the server's file; False when there was none."""
        try:
            os.unlink(self.path(server))
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise TokenStoreError(f"cannot remove {self.path(server)}: {exc.strerror or exc}") from None
        return True

    def _read(self, path: str, warn: Callable[[str], None]) -> StoredToken | None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: a symbolic link, refused by O_NOFOLLOW
            warn(f"cannot read the token file {path}: {exc.strerror or exc}; not used")
            return None
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            problem = _unsafe(info)
            if problem:
                warn(
                    f"the token file {path} {problem}; not used (chmod 600 it if it is yours, "
                    "or remove it and log in again)"
                )
                return None
            data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            warn(f"the token file {path} is over {MAX_FILE_BYTES} bytes; not used")
            return None
        try:
            token = StoredToken.from_json(json.loads(data))
        except ValueError:
            token = None
        if token is None:
            warn(f"the token file {path} is not a stored token; not used")
        return token


def _unsafe(info: os.stat_result) -> str:
    """Why a token file may not be trusted ("" when it may)."""
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    getuid = getattr(os, "getuid", None)
    if getuid is not None and info.st_uid != getuid():
        return "belongs to another user"
    if info.st_mode & 0o077:
        return f"is readable or writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return ""


def token_of(oauth: OAuth, server: str, url: str) -> StoredToken:
    """What an OAuth holds now, as the server's stored token."""
    if oauth.access_token is None:
        raise TokenStoreError(f"no token to store for {server}")
    return StoredToken(
        server=server,
        url=url,
        access_token=oauth.access_token,
        token_type=oauth.token_type,
        refresh_token=oauth.refresh_token,
        expires_at=oauth.expires_at,
        scope=oauth.scope,
        issuer=oauth.issuer,
        resource=oauth.resource,
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
    )


def restore(oauth: OAuth, token: StoredToken) -> None:
    """Start an OAuth from a stored token."""
    oauth.restore(
        access_token=token.access_token,
        token_type=token.token_type,
        refresh_token=token.refresh_token,
        expires_at=token.expires_at,
        scope=token.scope,
        issuer=token.issuer,
        resource=token.resource,
        client_id=token.client_id,
        client_secret=token.client_secret,
    )


def stored_oauth(
    store: TokenStore, server: str, url: str, login_message: str, log: Callable[[str], None], **options: Any
) -> OAuth:
    """The OAuth of a configured server: its stored token (when one was saved for this URL), refreshed when it
    expires or is refused, each new one saved (a failure to save is logged: the token still serves this run).
    It asks for bearer tokens (storable) and never runs the authorization code flow: a 401 that a refresh
    cannot answer raises LoginRequired, ending with `login_message`."""
    from decodeloop.mcp.auth.oauth import OAuth

    def save(oauth: OAuth) -> None:
        try:
            store.save(token_of(oauth, server, url))
        except TokenStoreError as exc:
            log(f"{exc}; the new token serves this run only")

    oauth = OAuth(log=log, on_tokens=save, login_message=login_message, dpop=False, server=server, **options)
    token = store.load(server, url, warn=log)
    if token is not None:
        restore(oauth, token)
    return oauth
