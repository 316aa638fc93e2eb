"""A character machine driven one byte at a time, with every state's mask and successors memoized.

Tokens of the lab vocabulary are bytes, and a character outside ASCII takes
two to four of them, so the grammar is run over UTF-8: a state is (machine
state, bytes of a character begun but not finished). A lead byte is allowed
when some character it can begin is allowed; each continuation byte narrows
the range of characters left. Only well-formed UTF-8 is ever allowed (no
overlong forms, no surrogates, nothing past U+10FFFF), so the text the stop
check and the parser see is exactly the characters the grammar read.

States are interned: `advance` looks up a dict on the state, and only a
state never seen before costs the machine's work. That is what keeps a
constrained token within the mask budget (bench/constrain.py).
"""

from __future__ import annotations

from decodeloop.grammar import charset as cs
from decodeloop.grammar.charset import TEXT
from decodeloop.grammar.machines import Machine


class ByteState:
    """One state of the byte-level grammar; `next` and `masks` fill in as they are used."""

    __slots__ = ("key", "allowed", "next", "final", "masks")

    def __init__(self, key, allowed: frozenset, final: bool) -> None:
        self.key = key
        self.allowed = allowed      # the byte values that may come next
        self.next: dict[int, ByteState] = {}
        self.final = final          # the machine has read a whole call
        self.masks: dict = {}       # for a processor: its masks of this state, by logits kind


def utf8_range(prefix: bytes) -> tuple[int, int, int] | None:
    """(lowest, highest code point, sequence length) a UTF-8 prefix of a multi-byte character can complete to."""
    lead = prefix[0]
    if 0xC2 <= lead <= 0xDF:
        n, bits, low, high = 2, lead & 0x1F, 0x80, 0x7FF
    elif 0xE0 <= lead <= 0xEF:
        n, bits, low, high = 3, lead & 0x0F, 0x800, 0xFFFF
    elif 0xF0 <= lead <= 0xF4:
        n, bits, low, high = 4, lead & 0x07, 0x10000, 0x10FFFF
    else:
        return None
    if len(prefix) > n:
        return None
    for b in prefix[1:]:
        if not 0x80 <= b <= 0xBF:
            return None
        bits = bits << 6 | (b & 0x3F)
    rest = 6 * (n - len(prefix))
    lo, hi = max(bits << rest, low), min((bits << rest) | ((1 << rest) - 1), high)
    return (lo, hi, n) if lo <= hi else None


class ByteGrammar:
    """`start`, `advance(state, byte)` (None if not allowed), and each state's `allowed` bytes and `final`."""

    def __init__(self, machine: Machine, max_states: int = 200_000) -> None:
        self.machine = machine
        self.max_states = max_states
        self._states: dict = {}
        self.start = self.state(machine.start, b"")

    def state(self, s, pending: bytes = b"") -> ByteState:
        key = (s, pending)
        found = self._states.get(key)
        if found is None:
            if len(self._states) >= self.max_states:
                self._states.clear()     # states in use stay reachable through their `next` links
            chars = self.machine.chars(s)
            found = ByteState(key, self._allowed(chars, pending), not pending and self.machine.final(s))
            self._states[key] = found
        return found

    @property
    def size(self) -> int:
        return len(self._states)

    @staticmethod
    def _allowed(chars, pending: bytes) -> frozenset:
        chars = cs.intersect(chars, TEXT)      # never a surrogate, whatever a machine says
        out = []
        if not pending:
            for lo, hi in chars:
                if lo > 0x7F:
                    break
                out.extend(range(lo, min(hi, 0x7F) + 1))
            if chars and chars[-1][1] >= 0x80:
                # lead bytes: 2-byte C2..DF, 3-byte E0..EF, 4-byte F0..F4, each the first of a run of characters
                out.extend(0xC0 + i for i in _indices(chars, 0, 64, 32, 0x80, 0x7FF))
                out.extend(0xE0 + i for i in _indices(chars, 0, 4096, 16, 0x800, 0xFFFF))
                out.extend(0xF0 + i for i in _indices(chars, 0, 0x40000, 5, 0x10000, 0x10FFFF))
        else:
            lo, hi, n = utf8_range(pending)
            rest = n - len(pending) - 1                  # continuation bytes after the next one
            base = lo >> (6 * (rest + 1)) << (6 * (rest + 1))
            out.extend(0x80 + i for i in _indices(chars, base, 1 << (6 * rest), 64, lo, hi))
        return frozenset(out)

    def advance(self, st: ByteState, byte: int) -> ByteState | None:
        found = st.next.get(byte)
        if found is not None:
            return found
        if byte not in st.allowed:
            return None
        s, pending = st.key
        if not pending and byte < 0x80:
            found = self.state(self.machine.step(s, byte))
        else:
            prefix = pending + bytes((byte,))
            lo, hi, n = utf8_range(prefix)
            if len(prefix) == n:
                found = self.state(self.machine.step(s, lo))
            else:
                found = self.state(s, prefix)
        st.next[byte] = found
        return found

    def accepts(self, data: bytes) -> bool:
        st = self.start
        for b in data:
            st = self.advance(st, b)
            if st is None:
                return False
        return st.final


def _indices(chars, start: int, step: int, count: int, low: int, high: int) -> set[int]:
    """The i in [0, count) whose characters [start + i*step, start + (i+1)*step) meet `chars` within [low, high]."""
    found: set[int] = set()
    low, high = max(low, start), min(high, start + step * count - 1)
    for a, b in chars:
        if b < low:
            continue
        if a > high:
            break
        found.update(range((max(a, low) - start) // step, (min(b, high) - start) // step + 1))
    return found
