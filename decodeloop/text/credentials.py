"""The credentials this process holds, and their redaction from every text a server's words can carry.

A server can echo what it was sent: an error page that quotes the request's headers, a challenge, a JSON-RPC
error, a tool result. The harness holds what such an echo would show: the HTTP headers given for a server
(`--mcp-header`, a config file's `headers`) whose names say they carry credentials, the OAuth access and
refresh tokens it gets or restores, client secrets and the Basic credentials made of them, the assertions
and grants it presents (private_key_jwt, a workload's JWT, an ID token, an ID-JAG), and the private half of
its signing keys. Each is held here where it is obtained or configured (`hold`, `hold_headers`), and
`redact` writes a marker in its place, `[redacted: access token of weather]`: the terminal escaping
(untrusted.visible), every cut of server text (untrusted.cap_text, the HTTP error preview), the events'
JSON form (events.py: JSON Lines and the viewer) and the admission of text into the context (admit.py) pass
through it, so a secret reaches neither a screen, a file nor the model, which could hand it to another server.

What is matched: the secret as written, and with any of its characters other than letters, digits and
`-._~` written as a percent escape (either case), a JSON `\\u` escape (or `\\/`) or an HTML character
reference; a Basic credential's base64 and its password are held each. A text cut short (`clip`, or
`redact(cut=True)`) that ends in the beginning of a secret (four characters or more) has that beginning
replaced too, so a cut keeps no part of one. A secret
shorter than MIN_CHARS is not held: it could not be told from ordinary text. A DPoP proof is not held: it
carries only the public key and is bound to one request. With nothing held, `redact` costs one comparison.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
import urllib.parse
from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

MIN_CHARS = 8  # a shorter secret is not held: redacting it would mangle ordinary text
FRAGMENT_CHARS = 4  # the shortest beginning of a secret a cut may leave that is replaced
KEEP_PER_SLOT = 2  # values kept of a credential that is replaced (a refreshed token): the new one and the last
# header names whose values are credentials (Authorization, Proxy-Authorization, Cookie, X-Api-Key, ...)
CREDENTIAL_HEADER = re.compile(r"auth|token|key|secret|session|cookie|passw|credential|signature", re.IGNORECASE)
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HTML_NAMED = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos"}
_UNSAFE_LABEL = re.compile(r"[^\w .:/@+-]")


class _Compiled(NamedTuple):
    pattern: re.Pattern[str]  # one group per secret, longest first
    markers: list[str]  # the marker of each group
    forms: list[tuple[str, str]]  # (a literal form of a secret, its marker): for the beginning left at a cut


def marker(what: str) -> str:
    return f"[redacted: {what}]"


def label(what: str, server: str | None) -> str:
    """'access token of weather': what a marker names (the server's name reduced to harmless characters)."""
    return what if not server else f"{what} of {_UNSAFE_LABEL.sub('_', server)[:64]}"


def _char(c: str) -> str:
    """A pattern for one character of a secret: itself, or as a server may have escaped it."""
    if c in _PLAIN:
        return re.escape(c)
    spellings = [re.escape(c)]
    spellings.append("".join(f"%(?i:{byte:02x})" for byte in c.encode("utf-8")))
    code = ord(c)
    if code < 0x10000:
        spellings.append(rf"\\u(?i:{code:04x})")
    spellings.append(f"&#(?:0*{code}|(?i:x0*{code:x}));?")
    if c in _HTML_NAMED:
        spellings.append(f"&(?i:{_HTML_NAMED[c]});?")
    if c == "/":
        spellings.append(r"\\/")
    return "(?:" + "|".join(spellings) + ")"


def _pattern_of(secret: str) -> str:
    return "".join(_char(c) for c in secret)


class Credentials:
    """The secrets one process holds; `redact` replaces each in a text. Safe to use from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fixed: dict[str, str] = {}  # value -> what it is; held for the process's life
        self._slots: dict[Hashable, list[tuple[str, str]]] = {}  # a replaceable credential's last values
        self._compiled: _Compiled | None = None  # None: nothing held

    def hold(self, value: Any, what: str, slot: Hashable | None = None) -> None:
        """Redact `value` from now on, as `[redacted: WHAT]`. A `slot` names a credential that is replaced
        (an access token refreshed): only its last KEEP_PER_SLOT values stay held."""
        if not isinstance(value, str) or len(value) < MIN_CHARS:
            return
        with self._lock:
            if value in self._fixed:
                return
            if slot is None:
                self._fixed[value] = what
            else:
                values = self._slots.setdefault(slot, [])
                if any(held == value for held, _ in values):
                    return
                values.append((value, what))
                del values[:-KEEP_PER_SLOT]
            self._compile()

    def hold_headers(self, headers: Mapping[str, str] | None, server: str | None) -> None:
        """Hold the credentials among HTTP headers given for `server`: every header whose name says it
        carries one (CREDENTIAL_HEADER); an Authorization value's credential after its scheme, and a Basic
        credential's password too; each value of a Cookie."""
        for name, value in (headers or {}).items():
            if not isinstance(value, str) or not CREDENTIAL_HEADER.search(name):
                continue
            what = label(f"{name} header", server)
            lowered = name.lower()
            if lowered.endswith("authorization"):
                self.hold_authorization(value, what)
            elif lowered in ("cookie", "set-cookie"):
                for pair in value.split(";"):
                    self.hold(pair.partition("=")[2].strip() or pair.strip(), what)
            else:
                self.hold(value.strip(), what)

    def hold_authorization(self, value: str, what: str, slot: Hashable | None = None) -> None:
        """An Authorization header's value: the credential after its scheme (the whole value when it has
        none), and for Basic also the password it encodes, as sent and form-decoded."""
        scheme, _, credential = value.strip().partition(" ")
        credential = credential.strip()
        if not credential:
            self.hold(value.strip(), what, slot)
            return
        self.hold(credential, what, slot)
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(credential, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return
            password = decoded.partition(":")[2]
            self.hold(password, what, None if slot is None else (slot, "password"))
            self.hold(urllib.parse.unquote_plus(password), what, None if slot is None else (slot, "decoded"))

    def _compile(self) -> None:
        entries = dict(value for values in self._slots.values() for value in values)
        entries.update(self._fixed)
        order = sorted(entries, key=len, reverse=True)  # a secret inside a longer one: the longer one first
        pattern = re.compile("|".join(f"({_pattern_of(value)})" for value in order))
        markers = [marker(entries[value]) for value in order]
        forms = []
        for value in order:
            forms.append((value, marker(entries[value])))
            quoted = urllib.parse.quote(value, safe="")
            if quoted != value:
                forms.append((quoted, marker(entries[value])))
        self._compiled = _Compiled(pattern, markers, forms)

    @property
    def held(self) -> bool:
        return self._compiled is not None

    def redact(self, text: str, cut: bool = False) -> str:
        """`text` with every held secret replaced by its marker; `cut`: the text's end was cut off, so a
        secret's beginning there is replaced too."""
        return self.redact_counted(text, cut)[0]

    def redact_counted(self, text: str, cut: bool = False) -> tuple[str, list[str]]:
        """As `redact`, and the markers written, one per secret found."""
        compiled = self._compiled
        if compiled is None:  # the common case: nothing held
            return text, []
        found: list[str] = []
        if len(text) >= MIN_CHARS:

            def replace(match: re.Match[str]) -> str:
                found.append(compiled.markers[(match.lastindex or 1) - 1])
                return found[-1]

            text = compiled.pattern.sub(replace, text)
        if cut:
            text = _drop_beginning(text, compiled.forms, found)
        return text, found

    def clip(self, text: str, limit: int) -> str:
        """`text[:limit]`, and when that cuts it, redacted with `cut`: a cut never keeps part of a secret."""
        return text if len(text) <= limit else self.redact(text[:limit], cut=True)

    def redact_value(self, value: Any) -> Any:
        """A JSON value with every held secret redacted from its strings, object keys too (the value itself
        when nothing is held)."""
        if self._compiled is None:
            return value
        return _map_strings(value, self.redact)


def _drop_beginning(text: str, forms: list[tuple[str, str]], found: list[str]) -> str:
    """The text with the beginning of a secret at its very end (FRAGMENT_CHARS or more) replaced."""
    for form, mark in forms:
        tail = text[-(len(form) - 1) :]
        start = tail.find(form[:FRAGMENT_CHARS])
        while start != -1:
            if form.startswith(tail[start:]):
                found.append(mark)
                return text[: len(text) - len(tail) + start] + mark
            start = tail.find(form[:FRAGMENT_CHARS], start + 1)
    return text


def _map_strings(value: Any, change: Any) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {change(key) if isinstance(key, str) else key: _map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_map_strings(item, change) for item in value]
    if type(value) is tuple:
        return tuple(_map_strings(item, change) for item in value)
    return value


HELD = Credentials()  # this process's: what every view, cut and admission redacts
hold = HELD.hold
hold_headers = HELD.hold_headers
hold_authorization = HELD.hold_authorization
clip = HELD.clip
redact = HELD.redact
redact_counted = HELD.redact_counted
redact_value = HELD.redact_value
