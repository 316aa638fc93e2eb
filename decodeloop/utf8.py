"""Text from outside that must be UTF-8 and is not: where its first bad byte is, for a one-line error.

Bytes that are not UTF-8 (a config file in Latin-1 or UTF-16, a shell's argument, a line on stdin) are
refused with the offset of the first bad one, never replaced by U+FFFD: the model, a tool's arguments and a
server would read other text than was written. Python hands such bytes over as lone surrogates, one per byte
(surrogateescape: U+DC80 to U+DCFF for 0x80 to 0xFF): in argv always, on stdin under the C locale, and on a
stdin the CLI reconfigured so that reading it never raises (`lenient`). `in_text` finds them there and
`in_bytes` in raw bytes; both say where in the same words.
"""

from __future__ import annotations

import re

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def in_bytes(data: bytes) -> str | None:
    """'byte 0xe9 at offset 18' for the first byte of `data` that is not UTF-8; None when all of it is."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"byte 0x{data[e.start]:02x} at offset {e.start}"
    return None


def in_text(text: str) -> str | None:
    """The same for text decoded with surrogateescape: its first lone surrogate, as the byte it stands for
    and that byte's offset in the text's bytes; None when the text has none."""
    found = LONE_SURROGATE.search(text)
    if found is None:
        return None
    code, offset = ord(found.group()), len(text[: found.start()].encode("utf-8"))
    if 0xDC80 <= code <= 0xDCFF:
        return f"byte 0x{code - 0xDC00:02x} at offset {offset}"
    return f"a lone surrogate U+{code:04X} at offset {offset}"  # no byte made it: text built in this process


def lenient(stream) -> None:
    """Make a text stdin hand undecodable bytes over as lone surrogates (see the module docstring) instead of
    raising UnicodeDecodeError mid-read, which loses the line; its reader then refuses the line, `in_text`."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and not getattr(stream, "closed", True):
        reconfigure(errors="surrogateescape")


def lines(stream):
    """The lines of a stream as text: a binary stream's (or a text stdin's own bytes, `.buffer`) decoded
    with surrogateescape, so a bad byte never stops the reading and `in_text` finds it in its line; a text
    stream's (a StringIO) as they are."""
    binary = getattr(stream, "buffer", stream)
    for line in binary:
        yield line.decode("utf-8", "surrogateescape") if isinstance(line, bytes) else line
