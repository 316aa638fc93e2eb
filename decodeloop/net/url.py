"""URLs read as a browser reads them: the WHATWG URL Standard's parser, as far as it decides where a URL goes.

A URL shown to the user before they open it must be read the way their browser will read it, and Python's
`urllib.parse` is not that reader: it ends the authority at `/` only, so in `https://evil.example\\@pay.example.com/`
it finds the host `pay.example.com` where every browser goes to `evil.example` (a backslash is a slash in an
http URL); it takes `https://2130706433/` for a name, where a browser goes to 127.0.0.1. This module follows the
standard's basic URL parser (https://url.spec.whatwg.org/#concept-basic-url-parser) for the special schemes
(http, https, ws, wss, ftp, file) and keeps what decides the destination: the scheme, the user info, the host and
the port. The path, query and fragment are not read beyond finding where the authority ends.

The steps, in the standard's order:

- the input: leading and trailing C0 controls and spaces stripped, every tab and newline removed;
- the scheme, up to the first `:`; a URL without one is relative and needs a `base`;
- the authority: after any run of `/` and `\\`, up to the first `/`, `\\`, `?` or `#`; the user info is everything
  before its LAST `@`, the host and port what follows;
- the host: `[...]` is an IPv6 address; anything else is percent-decoded, read as UTF-8, mapped to ASCII by
  UTS #46 (IDNA: case folded, compatibility forms unified, ignored characters dropped, international labels as
  punycode), refused if it holds a forbidden code point, and read as an IPv4 address when its last label is a
  number (decimal, `0x` hex or `0`-prefixed octal, with short forms: `127.1` is 127.0.0.1, `2130706433` too);
- the port: digits only, 0 to 65535; the scheme's default port is dropped.

Anything the standard calls a failure is a `UrlError`, with a one-line reason: a browser would not open the URL.

Where this reader is stricter than a browser, on purpose (the answer is then a refusal, never another host):
UTS #46's mapping comes from `unicodedata` (Unicode as this Python knows it) rather than from the IDNA mapping
table, so a character newer than that is refused; and a zero-width non-joiner between letters is allowed only for
letters whose joining shows in Unicode's Arabic presentation forms (the standard library has no Joining_Type).
The mapping is UTS #46's as the Web Platform Tests expect it today (revision 31, Unicode 15.1, and later): `ẞ` is
`ß`, not `ss`, as in a current browser; a browser with older IDNA tables may read those few characters otherwise.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import re
import unicodedata
from collections.abc import Iterable

SPECIAL_SCHEMES = {"ftp": 21, "file": None, "http": 80, "https": 443, "ws": 80, "wss": 443}  # with default ports

C0_OR_SPACE = "".join(chr(n) for n in range(0x21))
TAB_OR_NEWLINE = re.compile("[\t\n\r]")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
AUTHORITY_END = re.compile(r"[/\\?#]")  # in a special URL a backslash ends the authority like a slash

# code points no host may hold, and those no domain may hold besides (the standard's two lists)
FORBIDDEN_HOST = set("\x00\t\n\r #/:<>?@[\\]^|")
FORBIDDEN_DOMAIN = FORBIDDEN_HOST | {chr(n) for n in range(0x20)} | {"%", "\x7f"}

# the userinfo percent-encode set, less the C0 controls and non-ASCII (always encoded)
USERINFO_ENCODED = set(' "#<>?^`{}/:;=@[\\]|')

# UTS #46 (IDNA) statuses the mapping cannot derive from unicodedata alone
IDNA_DEVIATIONS = {"\u00df", "\u03c2", "\u200c", "\u200d"}  # kept as they are (nontransitional processing)
IDNA_IGNORED = (
    {"\u00ad", "\u034f", "\u180b", "\u180c", "\u180d", "\u180e", "\u180f", "\u200b", "\u2060", "\u2064", "\ufeff"}
    | {chr(n) for n in range(0x206A, 0x2070)}
    | {chr(n) for n in range(0xFE00, 0xFE10)}
    | {chr(n) for n in range(0x1BCA0, 0x1BCA4)}
    | {chr(n) for n in range(0xE0100, 0xE01F0)}
)
IDNA_FULL_STOPS = {"\u3002", "\uff0e", "\uff61"}  # mapped to "."
IDNA_SPECIAL_MAPPINGS = {"\u1e9e": "\u00df"}  # capital sharp s folds to ss, but UTS #46 (since 15.1) maps it to ß
# disallowed although NFKC_Casefold keeps or maps them: Hangul fillers, ideographic description characters, ...
IDNA_DISALLOWED = set("\u115f\u1160\u17b4\u17b5\u1806\u3164\ufe12\uffa0\ufffc\ufffd") | {
    chr(n) for n in range(0x2FF0, 0x2FFC)
}
VIRAMA = 9  # the canonical combining class a joiner may follow

BIDI_RTL = {"R", "AL"}
BIDI_RTL_ALLOWED = {"R", "AL", "AN", "EN", "ES", "CS", "ET", "ON", "BN", "NSM"}
BIDI_LTR_ALLOWED = {"L", "EN", "ES", "CS", "ET", "ON", "BN", "NSM"}

MAX_QUOTED_CHARS = 60  # of the URL's own text in an error message


class UrlError(ValueError):
    """A URL the standard refuses, so a browser would not open it; `str()` says why in one line."""


@dataclasses.dataclass(frozen=True)
class WebUrl:
    """Where a URL goes, as the WHATWG URL Standard reads it."""

    scheme: str  # lower case, one of SPECIAL_SCHEMES
    host: str  # serialized: an ASCII domain, a dotted-decimal IPv4 address, [an IPv6 address], or "" (file only)
    port: int | None  # None: the scheme's default
    username: str = ""  # percent-encoded as the standard serializes it
    password: str = ""
    userinfo: str | None = None  # the text before the last @ of the authority as written; None without an @
    written_host: str = ""  # the text the host was read from, as written

    @property
    def host_port(self) -> str:
        """The host, and the port when it is not the scheme's default: what the standard calls `host`."""
        return self.host if self.port is None else f"{self.host}:{self.port}"

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        """The address when the host is a bare IP address (in whatever notation it was written), else None."""
        if self.host.startswith("["):
            return ipaddress.IPv6Address(self.host[1:-1])
        try:
            return ipaddress.IPv4Address(self.host)
        except ValueError:  # a domain: the parser turns any host that ends in a number into an address
            return None


def parse(url: str, base: str | None = None) -> WebUrl:
    """Where `url` (resolved against `base` when it is relative) goes; UrlError when a browser would not open it."""
    text = _prepared(url)
    scheme, rest = _split_scheme(text)
    if scheme is None:  # the standard's "no scheme state": only a base can say where it goes
        return _relative(text, _base(base))
    if scheme not in SPECIAL_SCHEMES:
        raise UrlError(f"{_quoted(scheme + ':')} is not a scheme read here (only {', '.join(sorted(SPECIAL_SCHEMES))})")
    base_url = _base(base) if base is not None and scheme_of(base) == scheme else None
    if scheme == "file":
        return _file(rest, base_url)
    if base_url is not None and not rest.startswith("//"):
        # "http:foo" against an http base is relative to it ("special relative or authority state")
        return _relative(rest, base_url)
    return _authority(scheme, rest.lstrip("/\\"))


def scheme_of(url: str) -> str | None:
    """The scheme of `url` in lower case, as the standard finds it; None for a relative URL."""
    return _split_scheme(_prepared(url))[0]


def _prepared(url: str) -> str:
    """The input as the parser reads it: scalar values only, C0 controls and spaces trimmed, tabs and newlines gone."""
    text = LONE_SURROGATE.sub("\ufffd", url)
    return TAB_OR_NEWLINE.sub("", text.strip(C0_OR_SPACE))


def _split_scheme(text: str) -> tuple[str | None, str]:
    """(scheme, what follows its ':'), or (None, text) when the text does not start with a scheme."""
    found = re.match(r"[A-Za-z][A-Za-z0-9+\-.]*:", text)
    if found is None:
        return None, text
    return found.group()[:-1].lower(), text[found.end() :]


def _base(base: str | None) -> WebUrl:
    if base is None:
        raise UrlError("it is relative (no scheme) and there is no base URL to resolve it against")
    try:
        return parse(base)
    except UrlError as exc:
        raise UrlError(f"it is relative, and its base is not a URL read here: {exc}") from None


def _relative(rest: str, base: WebUrl) -> WebUrl:
    """A URL without its own scheme: relative to `base` ("relative state" and "relative slash state")."""
    if base.scheme == "file":
        return _file(rest, base)
    if rest[:1] in ("/", "\\") and rest[1:2] in ("/", "\\"):  # "//host/path" names its own host
        return _authority(base.scheme, rest.lstrip("/\\"))
    return base  # a path, query or fragment: the base's host, user info and port


def _authority(scheme: str, rest: str) -> WebUrl:
    """The user info, host and port at the start of `rest` (after the slashes) of a special URL."""
    end = AUTHORITY_END.search(rest)
    authority = rest[: end.start()] if end else rest
    userinfo: str | None = None
    if "@" in authority:
        userinfo, authority = authority.rsplit("@", 1)  # the standard's state machine keeps the LAST @
        if not authority:
            raise UrlError("it has user info before an @ but no host after it")
    host_text, port_text = _split_port(authority)
    if not host_text:
        raise UrlError("it has no host")
    username, _, password = (userinfo or "").partition(":")
    return WebUrl(
        scheme,
        parse_host(host_text),
        _port(port_text, scheme),
        _userinfo_encoded(username),
        _userinfo_encoded(password),
        userinfo,
        host_text,
    )


def _split_port(authority: str) -> tuple[str, str | None]:
    """(host, port text or None) at the first ':' outside brackets, as the standard's host state splits them."""
    inside_brackets = False
    for i, c in enumerate(authority):
        if c == "[":
            inside_brackets = True
        elif c == "]":
            inside_brackets = False
        elif c == ":" and not inside_brackets:
            return authority[:i], authority[i + 1 :]
    return authority, None


def _port(text: str | None, scheme: str) -> int | None:
    if not text:  # none, or "host:" with nothing after the colon
        return None
    if not all(c in "0123456789" for c in text):
        raise UrlError(f"the port {_quoted(text)} is not a number")
    port = int(text.lstrip("0")[:6] or "0")  # six digits tell whether it is in range; int() refuses thousands
    if port > 65535:
        raise UrlError(f"the port {_quoted(text)} is out of range (0 to 65535)")
    return None if port == SPECIAL_SCHEMES[scheme] else port


def _userinfo_encoded(text: str) -> str:
    out = []
    for c in text:
        if c in USERINFO_ENCODED or not " " < c <= "~":
            out.append("".join(f"%{b:02X}" for b in c.encode("utf-8")))
        else:
            out.append(c)
    return "".join(out)


def _file(rest: str, base: WebUrl | None) -> WebUrl:
    """A file URL ("file state", "file slash state", "file host state"): its host is "" unless one is named."""
    if rest[:1] not in ("/", "\\") or rest[1:2] not in ("/", "\\"):  # no "//": the base's host, or none
        if base is not None and base.scheme == "file":
            return base
        return WebUrl("file", "", None)
    rest = rest[2:]
    end = AUTHORITY_END.search(rest)
    host_text = rest[: end.start()] if end else rest
    if re.fullmatch(r"[A-Za-z][:|]", host_text) or not host_text:  # "file://C:/" is a drive letter, not a host
        return WebUrl("file", "", None)
    host = parse_host(host_text)
    return WebUrl("file", "" if host == "localhost" else host, None, written_host=host_text)


def _quoted(text: str) -> str:
    """Some of the URL's text for an error message, in quotes, shortened when long."""
    return repr(text if len(text) <= MAX_QUOTED_CHARS else text[: MAX_QUOTED_CHARS - 1] + "…")


# -- the host parser -------------------------------------------------------------------


def parse_host(text: str) -> str:
    """A special URL's host as the standard serializes it, from its text as written; UrlError when it is not one."""
    if text.startswith("["):
        if not text.endswith("]"):
            raise UrlError(f"the host {_quoted(text)} opens an IPv6 address with '[' and never closes it")
        return "[" + _ipv6_serialized(_ipv6(text[1:-1])) + "]"
    domain = _percent_decoded(text).decode("utf-8", errors="replace")
    ascii_domain = domain_to_ascii(domain)
    forbidden = sorted({c for c in ascii_domain if c in FORBIDDEN_DOMAIN})
    if forbidden:
        raise UrlError(f"the host has a character no host may have: {_quoted(forbidden[0])}")
    if _ends_in_a_number(ascii_domain):
        return _ipv4_serialized(_ipv4(ascii_domain))
    return ascii_domain


def _percent_decoded(text: str) -> bytes:
    raw = text.encode("utf-8")
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i] == 0x25 and re.fullmatch(rb"[0-9A-Fa-f]{2}", raw[i + 1 : i + 3]):
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return bytes(out)


def domain_to_ascii(domain: str) -> str:
    """The standard's "domain to ASCII": UTS #46 ToASCII, nontransitional, with CheckBidi and CheckJoiners."""
    labels = domain.split(".")
    if domain.isascii() and not any(label[:4].lower() == "xn--" for label in labels):
        result = domain.lower()  # the standard's shortcut for plain ASCII names
    else:
        result = _uts46_to_ascii(domain)
    if not result:
        raise UrlError("the host is empty once read as a name")
    return result


def _uts46_to_ascii(domain: str) -> str:
    mapped = unicodedata.normalize("NFC", "".join(_idna_mapped(c) for c in domain))
    labels = mapped.split(".")
    unicode_labels = [_idna_label(label) for label in labels]
    if any(unicodedata.bidirectional(c) in ("R", "AL", "AN") for label in unicode_labels for c in label):
        for label in unicode_labels:
            _check_bidi(label)
    return ".".join(label if label.isascii() else "xn--" + _punycode(label) for label in labels)


def _idna_mapped(c: str) -> str:
    """One code point under UTS #46's mapping: itself (valid), its mapping, "" (ignored), or UrlError (disallowed)."""
    if c.isascii():
        return c.lower()  # every other ASCII character is valid when STD3 rules are off (the URL parser checks)
    if c in IDNA_DEVIATIONS:
        return c
    if c in IDNA_IGNORED:
        return ""
    if c in IDNA_FULL_STOPS:
        return "."
    if c in IDNA_SPECIAL_MAPPINGS:
        return IDNA_SPECIAL_MAPPINGS[c]
    category = unicodedata.category(c)
    if c in IDNA_DISALLOWED or category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
        raise UrlError(f"the host holds a character no international name may hold: U+{ord(c):04X}")
    mapped = _nfkc_casefold(c)
    if category == "Zs" and mapped != " ":
        raise UrlError(f"the host holds a character no international name may hold: U+{ord(c):04X}")
    if "." in mapped or any(not m.isascii() and unicodedata.category(m) in ("Cn", "Cf") for m in mapped):
        # a character that would turn into a dot ("⒈" is "1.") is disallowed rather than split the name
        raise UrlError(f"the host holds a character no international name may hold: U+{ord(c):04X}")
    return mapped


def _nfkc_casefold(text: str) -> str:
    """NFKC_Casefold, which UTS #46 maps by: compatibility forms and case folded until nothing changes."""
    while True:
        folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
        if folded == text:
            return folded
        text = folded


def _idna_label(label: str) -> str:
    """The label in Unicode (punycode decoded), checked by UTS #46's validity criteria; UrlError when it fails them."""
    if label[:4] == "xn--":
        if not label.isascii():
            raise UrlError(f"the host has a label {_quoted(label)} that is punycode with non-ASCII characters")
        try:
            decoded = label[4:].encode("ascii").decode("punycode")
        except (UnicodeError, ValueError):
            raise UrlError(f"the host has a label {_quoted(label)} that is not valid punycode") from None
        if not decoded or decoded.isascii():
            raise UrlError(f"the host has a label {_quoted(label)} that is not the punycode of an international name")
        if any(_idna_mapped_or_none(c) != c for c in decoded):
            raise UrlError(f"the host has a label {_quoted(label)} whose punycode holds characters a name may not hold")
        label = decoded
    if unicodedata.normalize("NFC", label) != label:
        raise UrlError(f"the host has a label {_quoted(label)} that is not in normalization form C")
    if label[:4] == "xn--" or "." in label:
        raise UrlError(f"the host has a label {_quoted(label)} that is punycode of a name no label may hold")
    if label and unicodedata.category(label[0]).startswith("M"):
        raise UrlError(f"the host has a label {_quoted(label)} that starts with a combining mark")
    _check_joiners(label)
    return label


def _idna_mapped_or_none(c: str) -> str | None:
    try:
        return _idna_mapped(c)
    except UrlError:
        return None


def _check_joiners(label: str) -> None:
    """RFC 5892's context rules: a zero-width joiner only after a virama; a non-joiner after one, or between
    letters that join (dual- or left-joining before it, dual- or right-joining after it, transparent marks aside)."""
    for i, c in enumerate(label):
        if c not in ("\u200c", "\u200d"):
            continue
        if i > 0 and unicodedata.combining(label[i - 1]) == VIRAMA:
            continue
        if c == "\u200c" and _joins(reversed(label[:i]), ("L", "D")) and _joins(label[i + 1 :], ("R", "D")):
            continue
        raise UrlError(f"the host has a zero-width joiner (U+{ord(c):04X}) where a name may not have one")


def _joins(neighbours: Iterable[str], types: tuple[str, ...]) -> bool:
    """Whether the first neighbour that is not transparent (a mark) has one of the joining types."""
    for c in neighbours:
        kind = _joining_type(c)
        if kind != "T":
            return kind in types
    return False


def _joining_type(c: str) -> str:
    """Unicode's Joining_Type, as far as the standard library shows it: T for marks and format characters; D, R
    or L for a letter whose Arabic presentation forms show how it joins (unicodedata has no Joining_Type itself,
    so a letter without presentation forms counts as non-joining: a non-joiner beside it is refused)."""
    if c in ("\u200c", "\u200d"):
        return "U"
    if unicodedata.category(c) in ("Mn", "Me", "Cf"):
        return "T"
    return _arabic_joining_types().get(c, "U")


@functools.cache
def _arabic_joining_types() -> dict[str, str]:
    """Letter -> D, R or L, from the <initial>/<medial>/<final> forms in the Arabic presentation form blocks."""
    forms: dict[str, set[str]] = {}
    for n in list(range(0xFB50, 0xFE00)) + list(range(0xFE70, 0xFF00)):
        tag, _, letter = unicodedata.decomposition(chr(n)).partition(" ")
        if tag in ("<initial>", "<medial>", "<final>") and " " not in letter:
            forms.setdefault(chr(int(letter, 16)), set()).add(tag)
    types = {}
    for letter, tags in forms.items():
        if "<medial>" in tags or {"<initial>", "<final>"} <= tags:
            types[letter] = "D"
        elif "<final>" in tags:
            types[letter] = "R"
        elif "<initial>" in tags:
            types[letter] = "L"
    return types


def _check_bidi(label: str) -> None:
    """RFC 5893's rule for a label of a name that holds right-to-left characters."""
    if not label:
        return
    classes = [unicodedata.bidirectional(c) for c in label]
    last = next((k for k in reversed(classes) if k != "NSM"), "NSM")  # trailing marks aside
    if classes[0] in BIDI_RTL:
        ok = (
            all(k in BIDI_RTL_ALLOWED for k in classes)
            and last in ("R", "AL", "EN", "AN")
            and not ("EN" in classes and "AN" in classes)
        )
    else:
        ok = classes[0] == "L" and all(k in BIDI_LTR_ALLOWED for k in classes) and last in ("L", "EN")
    if not ok:
        raise UrlError(f"the host mixes right-to-left and left-to-right text in a way no name may ({_quoted(label)})")


def _punycode(label: str) -> str:
    return label.encode("punycode").decode("ascii")


# -- IPv4 ------------------------------------------------------------------------------


def _ends_in_a_number(domain: str) -> bool:
    """Whether the last label (a trailing dot aside) is a number, which makes the host an IPv4 address or nothing."""
    labels = domain.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    if last and all(c in "0123456789" for c in last):
        return True
    return _ipv4_number(last) is not None


def _ipv4_number(text: str) -> int | None:
    """One part of an IPv4 address: decimal, hex after 0x, octal after a leading 0; None when it is none of them."""
    if not text:
        return None
    radix, digits = 10, "0123456789"
    if text[:2] in ("0x", "0X"):
        text, radix, digits = text[2:], 16, "0123456789abcdefABCDEF"
    elif len(text) > 1 and text[0] == "0":
        text, radix, digits = text[1:], 8, "01234567"
    if not text:
        return 0  # "0x" alone is zero
    if not all(c in digits for c in text):
        return None
    if radix == 10 and len(text.lstrip("0")) > 20:
        return 2**64  # out of range for any part; int() refuses a decimal number thousands of digits long
    return int(text, radix)


def _ipv4(domain: str) -> int:
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        raise UrlError(
            f"the host {_quoted(domain)} ends in a number but has more than four parts: it is no IPv4 address"
        )
    numbers = [_ipv4_number(part) for part in parts]
    if None in numbers:
        raise UrlError(f"the host {_quoted(domain)} ends in a number but is no IPv4 address")
    values = [n for n in numbers if n is not None]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        raise UrlError(f"the host {_quoted(domain)} is an IPv4 address out of range")
    return values[-1] + sum(n * 256 ** (3 - i) for i, n in enumerate(values[:-1]))


def _ipv4_serialized(address: int) -> str:
    return ".".join(str((address >> shift) & 0xFF) for shift in (24, 16, 8, 0))


# -- IPv6 ------------------------------------------------------------------------------


def _ipv6(text: str) -> list[int]:
    """The eight 16-bit pieces of an IPv6 address, by the standard's IPv6 parser (compression, embedded IPv4)."""
    bad = UrlError(f"the host {_quoted('[' + text + ']')} is not an IPv6 address")
    pieces = [0] * 8
    index, compress, i = 0, None, 0
    if text[:1] == ":":
        if text[1:2] != ":":
            raise bad
        i, index, compress = 2, 1, 1
    while i < len(text):
        if index == 8:
            raise bad
        if text[i] == ":":
            if compress is not None:
                raise bad
            i, index = i + 1, index + 1
            compress = index
            continue
        value = length = 0
        while length < 4 and i < len(text) and text[i] in "0123456789abcdefABCDEF":
            value, i, length = value * 0x10 + int(text[i], 16), i + 1, length + 1
        if i < len(text) and text[i] == ".":  # an IPv4 address in the last 32 bits
            if length == 0 or index > 6:
                raise bad
            _embedded_ipv4(text[i - length :], pieces, index, bad)
            index += 2
            break
        if i < len(text) and text[i] == ":":
            i += 1
            if i == len(text):
                raise bad
        elif i < len(text):
            raise bad
        pieces[index] = value
        index += 1
    if compress is not None:
        moved = index - compress
        pieces[compress:index], pieces[8 - moved :] = [0] * moved, pieces[compress:index]
    elif index != 8:
        raise bad
    return pieces


def _embedded_ipv4(text: str, pieces: list[int], index: int, bad: UrlError) -> None:
    """Four dotted decimal numbers (no leading zeros, none above 255) into pieces[index] and pieces[index + 1]."""
    numbers = text.split(".")
    if len(numbers) != 4:
        raise bad
    for k, number in enumerate(numbers):
        if not number or not all(c in "0123456789" for c in number) or (len(number) > 1 and number[0] == "0"):
            raise bad
        if int(number) > 255:
            raise bad
        pieces[index + k // 2] = pieces[index + k // 2] * 0x100 + int(number)


def _ipv6_serialized(pieces: list[int]) -> str:
    """The standard's IPv6 serializer: lower-case hex, the first longest run of two or more zero pieces as '::'."""
    best_start, best_length, start = None, 1, None
    for i, piece in enumerate(pieces + [1]):
        if piece == 0 and start is None:
            start = i
        elif piece != 0 and start is not None:
            if i - start > best_length:
                best_start, best_length = start, i - start
            start = None
    if best_start is None:
        return ":".join(f"{p:x}" for p in pieces)
    head = ":".join(f"{p:x}" for p in pieces[:best_start])
    tail = ":".join(f"{p:x}" for p in pieces[best_start + best_length :])
    return f"{head}::{tail}"
