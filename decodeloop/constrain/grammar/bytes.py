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
constrained token within the mask budget (bench/constrain.py). A grammar that
is replaced is `release`d: its states link to each other in cycles, which
only the cycle collector would otherwise free.
"""

from __future__ import annotations

from decodeloop.constrain.grammar.machines import Machine
from decodeloop.patterns import charset as cs
from decodeloop.patterns.charset import MAX_CP, TEXT

# Code points no UTF-8 byte sequence spells: in a grammar each stands for one special token of the model's
# vocabulary (a matcher maps it to the token's id), so only that token, never text, is read there. The first is
# a call closer that is one special token (Qwen's `</tool_call>`); a family's template numbers the special
# tokens it writes from there (DeepSeek's <｜tool▁sep｜>, Mistral's [ARGS]).
SPECIAL = 0x110000
CLOSER_TOKEN = SPECIAL


def is_special(c: int) -> bool:
    """Whether a code point of the grammar stands for a special token."""
    return c >= SPECIAL


def _specials(chars) -> list[int]:
    """The special tokens' pseudo code points in a charset (a few, each a range of its own)."""
    return [c for lo, hi in chars if hi >= SPECIAL for c in range(max(lo, SPECIAL), hi + 1)]


class ByteState:
    """One state of the byte-level grammar; `next` and `masks` fill in as they are used."""

    __slots__ = ("__weakref__", "allowed", "final", "key", "masks", "next")

    def __init__(self, key, allowed: frozenset, final: bool) -> None:
        self.key = key
        self.allowed = allowed  # the byte values that may come next
        self.next: dict[int, ByteState] = {}
        self.final = final  # the machine has read a whole call
        self.masks: dict = {}  # for a processor: its masks of this state, by logits kind


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
                self._states.clear()  # states in use stay reachable through their `next` links
            chars = self.machine.chars(s)
            found = ByteState(key, self._allowed(chars, pending), not pending and self.machine.final(s))
            self._states[key] = found
        return found

    @property
    def size(self) -> int:
        return len(self._states)

    def release(self) -> None:
        """Forget every state: their links and memos are cleared, so the states (which link to each other in
        cycles) are freed as soon as nobody holds them, not when the cycle collector runs. A state still held
        keeps working: what it no longer remembers is asked of the machine again."""
        for state in self._states.values():
            state.next.clear()
            state.masks.clear()
        self._states.clear()

    @staticmethod
    def _allowed(chars, pending: bytes) -> frozenset:
        chars = cs.intersect(chars, TEXT)  # never a surrogate, whatever a machine says
        out: list[int] = []
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
            lo, hi, n = _pending_range(pending)
            rest = n - len(pending) - 1  # continuation bytes after the next one
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
            lo, _hi, n = _pending_range(prefix)
            if len(prefix) == n:
                found = self.state(self.machine.step(s, lo))
            else:
                found = self.state(s, prefix)
        st.next[byte] = found
        return found

    def _follow(self, st: ByteState, byte: int) -> ByteState:
        """The state after a byte `st` allows, which always leads somewhere."""
        found = self.advance(st, byte)
        assert found is not None, (st.key, byte)
        return found

    def advance_char(self, st: ByteState, char: int) -> ByteState | None:
        """The state after one whole character (a special token's included), or None; never mid-character."""
        s, pending = st.key
        if pending or not cs.contains(self.machine.chars(s), char):
            return None
        return self.state(self.machine.step(s, char))

    def finish(self, st: ByteState, limit: int = 600) -> list[int] | None:
        """A short way to end the call from `st`: byte values, and pseudo code points (SPECIAL) for special tokens.

        Breadth first, trying at every state only the characters that end
        things (quotes, brackets, `=`, the closer) where any is allowed, else
        those that begin short values, else each range's first: a free string
        or key closes instead of growing. If that finds no end within `limit`
        states, the first of those candidates at every state; then breadth
        first over more candidates. Memoized on the state and on the states
        along the way; None when `limit` states did not reach the end.
        """
        if "finish" in st.masks:
            return st.masks["finish"]
        origin = st
        out: list[int] = []
        while st.key[1]:  # mid-character: the lowest continuation byte completes one
            byte = min(st.allowed)
            out.append(byte)
            st = self._follow(st, byte)
        start = st.key[0]
        came, end = self._search(start, True, limit)
        if end is None:
            came, end = self._greedy(start)
        if end is None:
            came, end = self._search(start, False, limit)
        if end is None:
            origin.masks["finish"] = None
            return None
        chars = []
        while came[end] is not None:
            end, c = came[end]
            chars.append(c)
        chars.reverse()
        for c in chars:
            out.extend([c] if is_special(c) else chr(c).encode("utf-8"))
        origin.masks["finish"] = out
        # the states along the way end the same way: writing the end costs no further search
        walk, rest = st, out[len(out) - sum(1 if is_special(c) else len(chr(c).encode("utf-8")) for c in chars) :]
        for i, b in enumerate(rest[:-1]):
            after = self.advance_char(walk, b) if is_special(b) else self.advance(walk, b)
            if after is None:
                break
            walk = after
            walk.masks.setdefault("finish", rest[i + 1 :])
        return out

    def _greedy(self, start, steps: int = 400):
        """The first narrow candidate at every state, as long as no state repeats: (how each was reached, final)."""
        machine = self.machine
        came: dict = {start: None}
        s = start
        for _ in range(steps):
            if machine.final(s):
                return came, s
            c = _candidates(machine.chars(s), True)[0]
            n = machine.step(s, c)
            if n in came:
                break
            came[n] = (s, c)
            s = n
        return came, None

    def _search(self, start, narrow: bool, limit: int):
        """Breadth first from machine state `start` to a final one: (how each state was reached, the final or None)."""
        machine = self.machine
        came: dict = {start: None}
        frontier = [start]
        end = start if machine.final(start) else None
        while frontier and end is None and len(came) < limit:
            following = []
            for s in frontier:
                for c in _candidates(machine.chars(s), narrow):
                    n = machine.step(s, c)
                    if n in came:
                        continue
                    came[n] = (s, c)
                    if machine.final(n):
                        end = n
                        break
                    following.append(n)
                if end is not None:
                    break
            frontier = following
        return came, end

    def accepts(self, data: bytes) -> bool:
        st = self.start
        for b in data:
            after = self.advance(st, b)
            if after is None:
                return False
            st = after
        return st.final


_CLOSING = [ord(c) for c in '"}]>=,:']  # characters that end a string, a key, a container, a call
_STARTING = [ord(c) for c in "0-tfn[{"]  # characters that begin the shortest values
_SPACE = frozenset(b" \t\n\r")


def _candidates(chars, narrow: bool) -> list[int]:
    """What a finishing search tries from a state allowing `chars`.

    Narrow: only the first non-empty tier of closing characters (and special
    tokens), value starters, then each range's first non-space character; so the
    search hardly branches. Wide: all of those tiers together (at most 8).
    """
    tiers = [[c for c in _CLOSING if cs.contains(chars, c)], [c for c in _STARTING if cs.contains(chars, c)], []]
    tiers[0][:0] = _specials(chars)  # a special token (a closer, a separator) ends a part of the call
    for lo, hi in chars:
        c = next((c for c in range(lo, min(hi, lo + 4) + 1) if c not in _SPACE), None)
        if c is not None and not 0xD800 <= c <= 0xDFFF and c <= MAX_CP:
            tiers[2].append(c)
        if len(tiers[2]) >= 4:
            break
    if narrow:
        out = next((tier for tier in tiers if tier), [])
        if cs.contains(chars, 0x20) and 0x20 not in out:
            out = out + [0x20]  # a space ends a compact call's bare value (and is tried last)
    else:
        out = list(dict.fromkeys(tiers[0] + tiers[1] + tiers[2]))[:8]
    return out or [lo for lo, _ in chars[:1]]


def _pending_range(prefix: bytes) -> tuple[int, int, int]:
    """utf8_range of a prefix made of allowed bytes, which always begins a character."""
    found = utf8_range(prefix)
    assert found is not None, prefix
    return found


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
