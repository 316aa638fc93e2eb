"""Character machines: the pieces a call grammar is assembled from.

A machine reads characters (code points) and says, in any of its states,
which characters may come next (`chars`, a charset.Ranges), where a character
leads (`step`), and whether what it has read so far is complete (`final`).
States are immutable and hashable (ints, strings, tuples), so the byte layer
(bytes.py) can memoize every state's mask and successors.

The invariant every machine keeps: a character in `chars(s)` leads to a
state from which a final state can still be reached. So a mask built from
`chars` never walks the model into a dead end: whatever it has written can be
finished. Composite machines keep it given parts that keep it; the leaves
keep it by construction (a trie only holds prefixes of its words, a string
with a pattern and a length checks that an accepting path of a fitting length
is left, a number checks that some completion lies within its bounds).

Whitespace runs between JSON tokens and between compact arguments are at
most MAX_WS characters of space, tab, line feed and carriage return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any, ClassVar

from decodeloop.patterns import charset as cs
from decodeloop.patterns.charset import EMPTY, TEXT, Ranges
from decodeloop.patterns.regex import Dfa

MAX_WS = 8
WS = cs.of(" \t\n\r")
_QUOTE, _BACKSLASH = ord('"'), ord("\\")

# every character str.isspace() calls whitespace (a test checks this against the whole of Unicode)
UNICODE_SPACE = cs.normalize(
    [
        (0x09, 0x0D),
        (0x1C, 0x20),
        (0x85, 0x85),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
    ]
)
# a bare value of the compact syntax: no whitespace, '"', '[', ']', '=' or '\'
BARE = cs.subtract(TEXT, cs.union(UNICODE_SPACE, cs.of('"[]=\\')))
# a compact argument name: [A-Za-z_][A-Za-z0-9_.-]*
KEY_FIRST = cs.union(cs.span("a", "z"), cs.span("A", "Z"), cs.of("_"))
KEY_REST = cs.union(KEY_FIRST, cs.span("0", "9"), cs.of(".-"))
# raw in a JSON string: everything but control characters, '"' and '\'
JSON_RAW = cs.subtract(TEXT, cs.union(cs.span(0, 0x1F), cs.of('"\\')))
_JSON_ESCAPES = {
    ord('"'): 0x22,
    ord("\\"): 0x5C,
    ord("/"): 0x2F,
    ord("b"): 8,
    ord("f"): 12,
    ord("n"): 10,
    ord("r"): 13,
    ord("t"): 9,
}
_JSON_ESCAPABLE = cs.union(cs.span(0, 0x1F), cs.of('"\\/'))
_CONTROL = cs.span(0, 0x1F)
_HEX = {ord(h): int(h, 16) for h in "0123456789abcdefABCDEF"}
_COMPACT_ESCAPES = {ord('"'): ord('"'), ord("\\"): ord("\\"), ord("n"): 10, ord("t"): 9}


class Machine:
    """The interface (see the module docstring)."""

    start: Any = None

    def chars(self, s) -> Ranges:
        raise NotImplementedError

    def step(self, s, c: int):
        raise NotImplementedError

    def final(self, s) -> bool:
        raise NotImplementedError

    def empty(self) -> bool:
        """Whether no text at all is accepted."""
        return not self.final(self.start) and not self.chars(self.start)

    def run(self, text: str, s=None):
        """The state after `text`, or None if some character is not allowed (tests and compile-time checks)."""
        s = self.start if s is None else s
        for ch in text:
            c = ord(ch)
            if not cs.contains(self.chars(s), c):
                return None
            s = self.step(s, c)
        return s

    def accepts(self, text: str) -> bool:
        s = self.run(text)
        return s is not None and self.final(s)


class Nothing(Machine):
    """Accepts nothing."""

    start = 0

    def chars(self, s):
        return EMPTY

    def final(self, s):
        return False


class Trie(Machine):
    """Exactly the given words."""

    def __init__(self, words: Iterable[str]) -> None:
        self.children: list[dict[int, int]] = [{}]
        self.word: list[str | None] = [None]
        for w in dict.fromkeys(words):
            node = 0
            for ch in w:
                nxt = self.children[node].get(ord(ch))
                if nxt is None:
                    nxt = len(self.children)
                    self.children.append({})
                    self.word.append(None)
                    self.children[node][ord(ch)] = nxt
                node = nxt
            self.word[node] = w
        self.start = 0
        self._chars = [cs.normalize((c, c) for c in kids) for kids in self.children]

    def chars(self, s):
        return self._chars[s]

    def step(self, s, c):
        return self.children[s][c]

    def final(self, s):
        return self.word[s] is not None


class Text(Machine):
    """Strings over an alphabet, with a length range and (optionally) a pattern's DFA.

    State (dfa state, length); without a maximum the length stops counting at
    the minimum, so the states stay few.
    """

    def __init__(self, alphabet: Ranges, min_len: int = 0, max_len: int | None = None, dfa: Dfa | None = None):
        self.alphabet = alphabet
        self.min = max(0, min_len)
        self.max = max_len
        self.dfa = dfa
        self.start = (dfa.start if dfa is not None else 0, 0)
        self._live_memo: dict = {}
        self._chars_memo: dict = {}
        self._dead = (
            (max_len is not None and max_len < self.min)
            or (dfa is not None and dfa.empty)
            or (not alphabet and self.min > 0)
            or not self._live(self.start[0], 0)
        )

    def chars(self, s):
        if self._dead:
            return EMPTY
        d, n = s
        if self.max is not None and n >= self.max:
            return EMPTY
        if self.dfa is None:
            return self.alphabet
        found = self._chars_memo.get(s)
        if found is None:
            found = cs.normalize((lo, hi) for lo, hi, t in self.dfa.trans[d] if self._live(t, n + 1))
            self._chars_memo[s] = found
        return found

    def step(self, s, c):
        d, n = s
        if self.dfa is not None:
            d = self.dfa.step(d, c)
        n += 1
        if self.max is None and n > self.min:
            n = self.min
        return (d, n)

    def final(self, s):
        d, n = s
        return not self._dead and n >= self.min and (self.dfa is None or self.dfa.accepting[d])

    def _live(self, d: int, n: int) -> bool:
        """Whether an accepting state is reachable from d with a total length in [min, max]."""
        lo_k = max(0, self.min - n)
        hi_k = None if self.max is None else self.max - n
        if hi_k is not None and hi_k < lo_k:
            return False
        if self.dfa is None:
            return bool(self.alphabet) or lo_k == 0
        key = (d, lo_k, hi_k)
        found = self._live_memo.get(key)
        if found is not None:
            return found
        trans, accepting = self.dfa.trans, self.dfa.accepting
        layer = frozenset((d,))
        seen = set()
        k = 0
        result = False
        while layer:
            if k >= lo_k and any(accepting[x] for x in layer):
                result = True
                break
            if hi_k is not None and k >= hi_k:
                break
            if k >= lo_k:
                if layer in seen:
                    break
                seen.add(layer)
            layer = frozenset(t for x in layer for _, _, t in trans[x])
            k += 1
        self._live_memo[key] = result
        return result


class Union(Machine):
    """Any of several machines, run side by side: state is a tuple (None for a part that fell out)."""

    def __init__(self, parts: Iterable[Machine]) -> None:
        self.parts = tuple(p for p in parts if not p.empty())
        self.start = tuple(p.start for p in self.parts)

    def chars(self, s):
        return cs.union(*(p.chars(x) for p, x in zip(self.parts, s) if x is not None))

    def step(self, s, c):
        return tuple(
            p.step(x, c) if x is not None and cs.contains(p.chars(x), c) else None for p, x in zip(self.parts, s)
        )

    def final(self, s):
        return any(x is not None and p.final(x) for p, x in zip(self.parts, s))


def union(parts: Iterable[Machine]) -> Machine:
    parts = [p for p in parts if not p.empty()]
    if not parts:
        return Nothing()
    return parts[0] if len(parts) == 1 else Union(parts)


class Number(Machine):
    """A JSON number without an exponent: -?(0|[1-9][0-9]*)(.[0-9]+)?, the fraction only if not `integer`.

    `lower` and `upper` are (Fraction, strict) or None: only characters that
    leave some completion within them are allowed, and a number is final only
    inside them (compared exactly). State: the text so far.
    """

    _DIGITS = "0123456789"

    def __init__(self, integer: bool, lower=None, upper=None) -> None:
        self.integer = integer
        self.lower = lower
        self.upper = upper
        self.start = ""
        self._memo: dict = {}

    def _next(self, t: str) -> str:
        if t == "":
            return "-" + self._DIGITS
        if t == "-":
            return self._DIGITS
        body = t.lstrip("-")
        if "." in body:
            return self._DIGITS
        dot = "" if self.integer else "."
        return dot if body == "0" else self._DIGITS + dot

    def chars(self, t):
        found = self._memo.get(t)
        if found is None:
            found = cs.of("".join(ch for ch in self._next(t) if self._live(t + ch)))
            self._memo[t] = found
        return found

    def step(self, t, c):
        return t + chr(c)

    def final(self, t):
        body = t.lstrip("-")
        if not body or body.endswith("."):
            return False
        return self._inside(Fraction(t))

    def _inside(self, v: Fraction) -> bool:
        if self.lower is not None:
            lo, strict = self.lower
            if v < lo or (strict and v == lo):
                return False
        if self.upper is not None:
            hi, strict = self.upper
            if v > hi or (strict and v == hi):
                return False
        return True

    def _live(self, t: str) -> bool:
        """Whether some completion of the prefix t is a number within the bounds."""
        if self.lower is None and self.upper is None:
            return True
        neg = t.startswith("-")
        body = t[1:] if neg else t
        # the bounds on the magnitude m (value = -m for a negative number, m >= 0)
        if neg:
            mlo = None if self.upper is None else (-self.upper[0], self.upper[1])
            mhi = None if self.lower is None else (-self.lower[0], self.lower[1])
        else:
            mlo, mhi = self.lower, self.upper
        if mlo is None or mlo[0] < 0:
            mlo = (Fraction(0), False)
        if mhi is not None and (mhi[0] < 0 or (mhi[0] == 0 and mhi[1])):
            return False
        if body == "":
            return self._meets(Fraction(0), None, mlo, mhi)
        if "." in body:
            whole, frac = body.split(".")
            start = Fraction(whole + "." + (frac or "0"))
            return self._meets(start, start + Fraction(1, 10 ** len(frac)), mlo, mhi)
        d = int(body)
        if d == 0:
            return self._meets(Fraction(0), Fraction(1), mlo, mhi)
        # the k-digit extensions of d lie in [d*10^k, (d+1)*10^k): start at the first k that reaches mlo
        k = 0
        if mlo[0] >= d + 1:
            k = max(0, len(str(_floor(mlo[0] / (d + 1)))) - 1)
            while k > 0 and (d + 1) * 10 ** (k - 1) > mlo[0]:
                k -= 1
            while (d + 1) * 10**k <= mlo[0]:
                k += 1
        while True:
            low = Fraction(d * 10**k)
            if mhi is not None and low > mhi[0]:
                return False
            if self._meets(low, Fraction((d + 1) * 10**k), mlo, mhi):
                return True
            if mhi is None:
                return True  # an ever longer number ends up inside [mlo, infinity)
            k += 1

    def _meets(self, a: Fraction, b: Fraction | None, mlo, mhi) -> bool:
        """Whether [a, b) (b None: unbounded; integers only if `integer`) meets the magnitude bounds.

        With `integer`, [a, b) stands for the integers a..b-1 (a, b integers), and
        for a == 0, b == 1 just 0.
        """
        if self.integer:
            lo_int = _ceil(mlo[0]) if not mlo[1] else _floor(mlo[0]) + 1
            first = max(int(a), lo_int)
            if mhi is None:
                return b is None or first <= int(b) - 1
            hi_int = _floor(mhi[0]) if not mhi[1] else _ceil(mhi[0]) - 1
            last = hi_int if b is None else min(int(b) - 1, hi_int)
            return first <= last
        # real numbers: [max(a, mlo), min(b, mhi)) nonempty, respecting strictness
        if mlo[0] >= a:
            low, low_open = mlo[0], mlo[1]
        else:
            low, low_open = a, False
        if b is None and mhi is None:
            return True
        if mhi is not None and (b is None or mhi[0] < b):
            high, high_open = mhi[0], mhi[1]
        else:
            high, high_open = b, True
        return low < high or (low == high and not low_open and not high_open)


def _floor(x: Fraction) -> int:
    return x.numerator // x.denominator


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


class JsonString(Machine):
    """A JSON string whose decoded characters an inner machine reads: '"' ... '"'.

    Characters are written raw where JSON allows; '"' '\\' and the short
    escapes (\\n \\t ...) as escapes; other control characters as \\u00XX.
    State (phase, inner state, escape): phase 0 before the opening quote,
    1 inside, 2 after the closing quote.
    """

    def __init__(self, inner: Machine) -> None:
        self.inner = inner
        self.start = (0, inner.start, None)

    def empty(self) -> bool:
        return self.inner.empty()

    def chars(self, s):
        phase, x, esc = s
        if phase == 0:
            return cs.of('"')
        if phase == 2:
            return EMPTY
        inner = self.inner
        ic = inner.chars(x)
        if esc is None:
            out = [cs.intersect(ic, JSON_RAW)]
            if cs.intersect(ic, _JSON_ESCAPABLE):
                out.append(cs.of("\\"))
            if inner.final(x):
                out.append(cs.of('"'))
            return cs.union(*out)
        if esc == "\\":
            letters = [letter for letter, target in _JSON_ESCAPES.items() if cs.contains(ic, target)]
            if cs.intersect(ic, _CONTROL):
                letters.append(ord("u"))
            return cs.normalize((c, c) for c in letters)
        value, k = esc
        out = []
        for h, digit in _HEX.items():
            prefix = value * 16 + digit
            rest = 3 - k
            lo = prefix << (4 * rest)
            hi = lo + (1 << (4 * rest)) - 1
            if lo <= 0x1F and cs.overlaps(ic, lo, min(hi, 0x1F)):
                out.append((h, h))
        return cs.normalize(out)

    def step(self, s, c):
        phase, x, esc = s
        if phase == 0:
            return (1, x, None)
        if esc is None:
            if c == _QUOTE:
                return (2, x, None)
            if c == _BACKSLASH:
                return (1, x, "\\")
            return (1, self.inner.step(x, c), None)
        if esc == "\\":
            if c == ord("u"):
                return (1, x, (0, 0))
            return (1, self.inner.step(x, _JSON_ESCAPES[c]), None)
        value, k = esc
        value = value * 16 + _HEX[c]
        if k == 3:
            return (1, self.inner.step(x, value), None)
        return (1, x, (value, k + 1))

    def final(self, s):
        return s[0] == 2


class CompactValue(Machine):
    """A compact-syntax value: bare (`bare` reads it) or double-quoted with \\" \\\\ \\n \\t (`quoted` reads it).

    State (phase, inner state, escaped): 0 before the value, 1 bare, 2 quoted, 3 after the closing quote.
    """

    def __init__(self, bare: Machine | None, quoted: Machine) -> None:
        self.bare = bare if bare is not None and not bare.empty() else None
        self.quoted = quoted
        self.start = (0, None, False)

    def empty(self) -> bool:
        return self.quoted.empty() and self.bare is None

    def chars(self, s):
        phase, x, esc = s
        if phase == 0:
            out = [] if self.quoted.empty() else [cs.of('"')]
            if self.bare is not None:
                out.append(self.bare.chars(self.bare.start))
            return cs.union(*out)
        if phase == 1:
            return self.bare.chars(x)
        if phase == 3:
            return EMPTY
        ic = self.quoted.chars(x)
        if esc:
            return cs.normalize(
                (letter, letter) for letter, target in _COMPACT_ESCAPES.items() if cs.contains(ic, target)
            )
        out = [cs.subtract(ic, cs.of('"\\'))]
        if cs.intersect(ic, cs.of('"\\\n\t')):
            out.append(cs.of("\\"))
        if self.quoted.final(x):
            out.append(cs.of('"'))
        return cs.union(*out)

    def step(self, s, c):
        phase, x, esc = s
        if phase == 0:
            if c == _QUOTE:
                return (2, self.quoted.start, False)
            return (1, self.bare.step(self.bare.start, c), False)
        if phase == 1:
            return (1, self.bare.step(x, c), False)
        if esc:
            return (2, self.quoted.step(x, _COMPACT_ESCAPES[c]), False)
        if c == _QUOTE:
            return (3, x, False)
        if c == _BACKSLASH:
            return (2, x, True)
        return (2, self.quoted.step(x, c), False)

    def final(self, s):
        phase, x, _ = s
        return phase == 3 or (phase == 1 and self.bare.final(x))


OTHER_KEY = ("other key",)  # the state of a free key once it can no longer be a declared or excluded one


class KeyMachine(Machine):
    """An object key: one of `names`, or (with `free`) any other key not in `excluded`. State: the text so far,
    until a free key can no longer become a declared or excluded one: then OTHER_KEY, whatever follows. Keeping
    every free key's text would make a state of every prefix of every token in a BPE vocabulary (millions at
    152k tokens, each with its row of the token table); so two free keys of one object may be the same (the
    JSON reader then reports the repeated key), as in free-form JSON values."""

    def __init__(
        self,
        names: Iterable[str],
        free: bool,
        excluded: Iterable[str] = (),
        first: Ranges = TEXT,
        rest: Ranges = TEXT,
        min_len: int = 0,
    ) -> None:
        self.names = frozenset(names)
        self.free = free
        self.excluded = frozenset(excluded)
        self.first, self.rest, self.min_len = first, rest, min_len
        nxt: dict[str, set[int]] = {}
        for name in self.names:
            for i in range(len(name)):
                nxt.setdefault(name[:i], set()).add(ord(name[i]))
        self._next = {prefix: cs.normalize((c, c) for c in chars) for prefix, chars in nxt.items()}
        # texts a key must keep: the prefixes (and whole) of declared and excluded keys
        self._kept = frozenset(k[:i] for k in self.names | self.excluded for i in range(len(k) + 1))
        self.start = ""

    def empty(self) -> bool:
        return not self.names and not self.free

    def chars(self, t):
        if t is OTHER_KEY:
            return self.rest
        named = self._next.get(t, EMPTY)
        if self.free:
            return cs.union(named, self.first if t == "" else self.rest)
        return named

    def step(self, t, c):
        if t is OTHER_KEY:
            return t
        t += chr(c)
        if self.free and t not in self._kept and len(t) >= self.min_len:
            return OTHER_KEY
        return t

    def final(self, t):
        if t is OTHER_KEY:
            return True
        if t in self.names:
            return True
        return self.free and len(t) >= self.min_len and t not in self.excluded


def _ws(ws: int) -> Ranges:
    return WS if ws < MAX_WS else EMPTY


class Fields:
    """Declared fields and the rule for other keys, shared by JSON objects and compact arguments.

    `values` maps each declared key to a factory of its value machine;
    `additional` is the factory for any other key's value, or None when other
    keys are not allowed. Machines are made on first use (free-form JSON nests
    without end), and memoized.
    """

    def __init__(
        self,
        values: dict[str, Callable[[], Machine]],
        required: Iterable[str],
        additional: Callable[[], Machine] | None,
        writable: Callable[[str], bool] = lambda key: True,
    ) -> None:
        self._factories = dict(values)
        self.required = frozenset(required)
        self.writable = writable  # whether the syntax can write a key (compact: [A-Za-z_][A-Za-z0-9_.-]*)
        self._additional_factory = additional
        self._machines: dict[str, Machine] = {}
        self._additional: Machine | None = None
        self._keys: dict = {}

    def value(self, key: str) -> Machine:
        machine = self._machines.get(key)
        if machine is None:
            factory = self._factories.get(key)
            if factory is None:
                if self._additional is None:
                    # the key grammar offers an undeclared key only when free(), which needs the factory
                    assert self._additional_factory is not None
                    self._additional = self._additional_factory()
                return self._additional
            machine = self._machines[key] = factory()
        return machine

    def names(self) -> list[str]:
        return [k for k in self._factories if not self.value(k).empty()]

    def free(self) -> bool:
        if self._additional_factory is None:
            return False
        if self._additional is None:
            self._additional = self._additional_factory()
        return not self._additional.empty()

    def satisfiable(self) -> bool:
        """Whether every required key can be given a value: a declared one, or another if other keys are allowed."""
        names = set(self.names())
        return all(k in names or (k not in self._factories and self.writable(k) and self.free()) for k in self.required)

    def can_add(self, seen: frozenset) -> bool:
        return any(k not in seen for k in self.names()) or self.free()

    def can_close(self, seen: frozenset) -> bool:
        return self.required <= seen


class JsonObject(Machine):
    """A JSON object: declared keys (each once, any order), required keys before '}', other keys if allowed.

    State (phase, seen keys, sub state, whitespace run).
    """

    OPEN0, OPEN, KEY, COLON, PREVALUE, VALUE, AFTER, COMMA, CLOSED = range(9)

    def __init__(self, fields: Fields) -> None:
        self.fields = fields
        self.start = (self.OPEN0, frozenset(), None, 0)
        self._empty: bool | None = None

    def empty(self) -> bool:
        if self._empty is None:
            self._empty = not self.fields.satisfiable()
        return self._empty

    def key_string(self, seen: frozenset) -> JsonString:
        machine = self.fields._keys.get(seen)
        if machine is None:
            f = self.fields
            names = [k for k in f.names() if k not in seen]
            machine = JsonString(KeyMachine(names, f.free(), set(f._factories) | seen))
            f._keys[seen] = machine
        return machine

    def chars(self, s):
        phase, seen, sub, ws = s
        f = self.fields
        if phase == self.OPEN0:
            return cs.of("{")
        if phase == self.KEY:
            return self.key_string(seen).chars(sub)
        if phase == self.COLON:
            return cs.union(_ws(ws), cs.of(":"))
        if phase == self.PREVALUE:
            vm = f.value(sub)
            return cs.union(_ws(ws), vm.chars(vm.start))
        if phase == self.CLOSED:
            return EMPTY
        out = []
        if phase == self.VALUE:
            key, v = sub
            vm = f.value(key)
            out.append(vm.chars(v))
            if not vm.final(v):
                return out[0]
            ws = 0
        out.append(_ws(ws))
        if phase == self.COMMA:
            out.append(cs.of('"'))
            return cs.union(*out)
        if phase == self.OPEN or phase == self.AFTER or phase == self.VALUE:
            if phase == self.OPEN:
                if f.can_add(seen):
                    out.append(cs.of('"'))
            elif f.can_add(seen):
                out.append(cs.of(","))
            if f.can_close(seen):
                out.append(cs.of("}"))
        return cs.union(*out)

    def step(self, s, c):
        phase, seen, sub, ws = s
        f = self.fields
        if phase == self.OPEN0:
            return (self.OPEN, seen, None, 0)
        if phase == self.KEY:
            ks = self.key_string(seen)
            sub = ks.step(sub, c)
            if ks.final(sub):
                key = sub[1]
                return (self.COLON, seen if key is OTHER_KEY else seen | {key}, key, 0)
            return (self.KEY, seen, sub, 0)
        if phase == self.VALUE:
            key, v = sub
            vm = f.value(key)
            if cs.contains(vm.chars(v), c):
                return (self.VALUE, seen, (key, vm.step(v, c)), 0)
            phase, sub, ws = self.AFTER, None, 0
        if cs.contains(WS, c):
            return (phase, seen, sub, ws + 1)
        if phase == self.PREVALUE:
            vm = f.value(sub)
            return (self.VALUE, seen, (sub, vm.step(vm.start, c)), 0)
        ch = chr(c)
        if ch == '"':
            ks = self.key_string(seen)
            return (self.KEY, seen, ks.step(ks.start, c), 0)
        if ch == ":":
            return (self.PREVALUE, seen, sub, 0)
        if ch == ",":
            return (self.COMMA, seen, None, 0)
        return (self.CLOSED, seen, None, 0)  # "}"

    def final(self, s):
        return s[0] == self.CLOSED


class JsonArray(Machine):
    """A JSON array: `item(i)` is the machine for the i-th item (None: no item there); min/max items.

    State (phase, items so far, item state, whitespace run); without a
    maximum the count stops at `cap` (past it every item is read alike).
    """

    OPEN0, OPEN, ITEM, AFTER, COMMA, CLOSED = range(6)

    def __init__(
        self, item: Callable[[int], Machine | None], min_items: int = 0, max_items: int | None = None, cap: int = 0
    ) -> None:
        self._item_factory = item
        self._items: dict[int, Machine | None] = {}
        self.min = max(0, min_items)
        self.max = max_items
        self.cap = max(cap, self.min)
        self.start = (self.OPEN0, 0, None, 0)

    def item(self, i: int) -> Machine | None:
        if i not in self._items:
            m = self._item_factory(i)
            self._items[i] = None if m is None or m.empty() else m
        return self._items[i]

    def _count(self, n: int) -> int:
        return n if self.max is not None else min(n, self.cap)

    def can_more(self, done: int) -> bool:
        return (self.max is None or done < self.max) and self.item(done) is not None

    def empty(self) -> bool:
        if self.max is not None and self.max < self.min:
            return True
        return any(self.item(i) is None for i in range(self.min))

    def chars(self, s):
        phase, n, sub, ws = s
        if phase == self.OPEN0:
            return cs.of("[")
        if phase == self.CLOSED:
            return EMPTY
        out = []
        if phase == self.ITEM:
            im = self.item(n)
            out.append(im.chars(sub))
            if not im.final(sub):
                return out[0]
            n, ws = n + 1, 0
        out.append(_ws(ws))
        if phase == self.COMMA:
            im = self.item(n)
            out.append(im.chars(im.start))
            return cs.union(*out)
        if phase == self.OPEN:
            if self.can_more(0):
                im = self.item(0)
                out.append(im.chars(im.start))
        elif self.can_more(n):
            out.append(cs.of(","))
        if n >= self.min:
            out.append(cs.of("]"))
        return cs.union(*out)

    def step(self, s, c):
        phase, n, sub, ws = s
        if phase == self.OPEN0:
            return (self.OPEN, 0, None, 0)
        if phase == self.ITEM:
            im = self.item(n)
            if cs.contains(im.chars(sub), c):
                return (self.ITEM, n, im.step(sub, c), 0)
            phase, n, ws = self.AFTER, self._count(n + 1), 0
        if cs.contains(WS, c):
            return (phase, n, sub if phase != self.AFTER else None, ws + 1)
        if c == ord("]"):
            return (self.CLOSED, n, None, 0)
        if c == ord(",") and phase == self.AFTER:
            return (self.COMMA, n, None, 0)
        im = self.item(n)  # the first character of an item, after "[" or ","
        return (self.ITEM, n, im.step(im.start, c), 0)

    def final(self, s):
        return s[0] == self.CLOSED


class CompactArgs(Machine):
    """What follows the tool name in a compact call: (ws+ KEY=VALUE)* ws* "]".

    State (phase, seen keys, sub state, whitespace run).
    """

    START, SEP, KEY, VALUE, CLOSED = range(5)

    def __init__(self, fields: Fields) -> None:
        self.fields = fields
        self.start = (self.START, frozenset(), None, 0)
        self._empty: bool | None = None

    def empty(self) -> bool:
        if self._empty is None:
            self._empty = not self.fields.satisfiable()
        return self._empty

    def key_machine(self, seen: frozenset) -> KeyMachine:
        machine = self.fields._keys.get(seen)
        if machine is None:
            f = self.fields
            names = [k for k in f.names() if k not in seen]
            machine = KeyMachine(names, f.free(), set(f._factories) | seen, KEY_FIRST, KEY_REST, 1)
            f._keys[seen] = machine
        return machine

    def chars(self, s):
        phase, seen, sub, ws = s
        f = self.fields
        if phase == self.CLOSED:
            return EMPTY
        if phase == self.KEY:
            km = self.key_machine(seen)
            out = km.chars(sub)
            return cs.union(out, cs.of("=")) if km.final(sub) else out
        out = []
        if phase == self.VALUE:
            key, v = sub
            vm = f.value(key)
            out.append(vm.chars(v))
            if not vm.final(v):
                return out[0]
            out.append(WS)
        elif phase == self.START:
            out.append(WS)
        else:
            out.append(_ws(ws))
            if f.can_add(seen):
                km = self.key_machine(seen)
                out.append(km.chars(km.start))
        if f.can_close(seen):
            out.append(cs.of("]"))
        return cs.union(*out)

    def step(self, s, c):
        phase, seen, sub, ws = s
        f = self.fields
        if phase == self.KEY:
            if c == ord("="):
                vm = f.value(sub)
                return (self.VALUE, seen if sub is OTHER_KEY else seen | {sub}, (sub, vm.start), 0)
            return (self.KEY, seen, self.key_machine(seen).step(sub, c), 0)
        if phase == self.VALUE:
            key, v = sub
            vm = f.value(key)
            if cs.contains(vm.chars(v), c):
                return (self.VALUE, seen, (key, vm.step(v, c)), 0)
            phase, ws = self.SEP, 0
            if c == ord("]"):
                return (self.CLOSED, seen, None, 0)
            return (self.SEP, seen, None, 1)
        if c == ord("]"):
            return (self.CLOSED, seen, None, 0)
        if cs.contains(WS, c):
            return (self.SEP, seen, None, ws + 1)
        km = self.key_machine(seen)
        return (self.KEY, seen, km.step(km.start, c), 0)

    def final(self, s):
        return s[0] == self.CLOSED


class CompactCall(Machine):
    """After "[call ": NAME then that tool's arguments. State (0, trie node) or (1, name, arguments state)."""

    def __init__(self, tools: dict[str, Machine]) -> None:
        self.tools = {name: args for name, args in tools.items() if not args.empty()}
        self.names = Trie(self.tools)
        self.start = (0, self.names.start, None)

    def chars(self, s):
        phase, x, y = s
        if phase == 0:
            out = self.names.chars(x)
            if self.names.final(x):
                args = self.tools[self.names.word[x]]
                out = cs.union(out, args.chars(args.start))
            return out
        return self.tools[x].chars(y)

    def step(self, s, c):
        phase, x, y = s
        if phase == 0:
            nxt = self.names.children[x].get(c)
            if nxt is not None:
                return (0, nxt, None)
            name = self.names.word[x]
            args = self.tools[name]
            return (1, name, args.step(args.start, c))
        return (1, x, self.tools[x].step(y, c))

    def final(self, s):
        return s[0] == 1 and self.tools[s[1]].final(s[2])


class JsonCall(Machine):
    """After "<tool_call>": {"name": NAME, "arguments": {...}} then the closer, whitespace between.

    "name" comes first (the arguments' grammar depends on it); "arguments" may
    be left out when the tool accepts no arguments. With an empty closer (bare
    JSON, formats/calls/shapes.py; a family's call object, formats/calls/form.py) the
    object's "}" ends the call. `arguments_keys`: the keys the arguments may stand
    under (Llama's "parameters" or "arguments"); `type_member`: `"type": "function"`
    may come first (Llama 3's calls). State (phase, tool, sub, ws).
    """

    (
        PRE,
        OPEN,
        NAME_KEY,
        COLON1,
        PRE_NAME,
        NAME,
        AFTER_NAME,
        ARGS_KEY0,
        ARGS_KEY,
        COLON2,
        PRE_ARGS,
        ARGS,
        AFTER_ARGS,
        PRE_CLOSE,
        CLOSER,
        DONE,
        KEY1,
        TYPE_KEY,
        COLON_T,
        PRE_TYPE,
        TYPE_VALUE,
        AFTER_TYPE,
        PRE_NAME_KEY,
    ) = range(23)
    _LITERALS: ClassVar[dict[int, str]] = {NAME_KEY: '"name"', TYPE_KEY: '"type"', TYPE_VALUE: '"function"'}
    _SINGLE: ClassVar[dict[int, str]] = {
        PRE: "{",
        OPEN: '"',
        COLON1: ":",
        PRE_NAME: '"',
        ARGS_KEY0: '"',
        COLON2: ":",
        AFTER_ARGS: "}",
        COLON_T: ":",
        PRE_TYPE: '"',
        AFTER_TYPE: ",",
        PRE_NAME_KEY: '"',
    }

    def __init__(
        self,
        tools: dict[str, Machine],
        closer: str | tuple[int, ...],
        arguments_keys: tuple[str, ...] = ("arguments",),
        type_member: bool = False,
    ) -> None:
        self.tools = {name: args for name, args in tools.items() if not args.empty()}
        self.name_string = JsonString(Trie(self.tools))
        # code points; bytes.CLOSER_TOKEN stands for a closer that is one special token
        self.closer = tuple(map(ord, closer)) if isinstance(closer, str) else tuple(closer)
        self.arguments_key = Trie(key + '"' for key in arguments_keys)  # after its opening quote
        self.type_member = type_member
        self.start = (self.PRE, None, None, 0)
        self._no_args = {name: args.accepts("{}") for name, args in self.tools.items()}

    def chars(self, s):
        phase, tool, sub, ws = s
        lit = self._LITERALS.get(phase)
        if lit is not None:
            return cs.of(lit[sub])
        if phase == self.ARGS_KEY:
            return self.arguments_key.chars(sub)
        if phase == self.KEY1:
            return cs.of("nt")  # "name" or "type"
        if phase == self.CLOSER:
            return ((self.closer[sub], self.closer[sub]),)
        if phase == self.NAME:
            return self.name_string.chars(sub)
        if phase == self.DONE:
            return EMPTY
        if phase == self.ARGS:
            args = self.tools[tool]
            inside = args.chars(sub)
            if not args.final(sub):
                return inside
            return cs.union(inside, WS, cs.of("}"))
        nxt = self._SINGLE.get(phase)
        out = [_ws(ws)]
        if nxt is not None:
            out.append(cs.of(nxt))
        elif phase == self.PRE_CLOSE:
            out.append(((self.closer[0], self.closer[0]),))
        elif phase == self.AFTER_NAME:
            out.append(cs.of(","))
            if self._no_args[tool]:
                out.append(cs.of("}"))
        elif phase == self.PRE_ARGS:
            args = self.tools[tool]
            out.append(args.chars(args.start))
        return cs.union(*out)

    def step(self, s, c):
        phase, tool, sub, ws = s
        lit = self._LITERALS.get(phase)
        if lit is not None:
            sub += 1
            if sub == len(lit):
                return (phase + 1, tool, None, 0)
            return (phase, tool, sub, 0)
        if phase == self.ARGS_KEY:
            sub = self.arguments_key.step(sub, c)
            return (self.COLON2, tool, None, 0) if self.arguments_key.final(sub) else (phase, tool, sub, 0)
        if phase == self.KEY1:
            return (self.NAME_KEY if c == ord("n") else self.TYPE_KEY, tool, 2, 0)
        if phase == self.CLOSER:
            sub += 1
            return (self.DONE, tool, None, 0) if sub == len(self.closer) else (phase, tool, sub, 0)
        if phase == self.NAME:
            sub = self.name_string.step(sub, c)
            if self.name_string.final(sub):
                return (self.AFTER_NAME, self.name_string.inner.word[sub[1]], None, 0)
            return (self.NAME, tool, sub, 0)
        if phase == self.ARGS:
            args = self.tools[tool]
            if cs.contains(args.chars(sub), c):
                return (self.ARGS, tool, args.step(sub, c), 0)
            phase, ws = self.AFTER_ARGS, 0
        if phase == self.PRE_ARGS and not cs.contains(WS, c):
            args = self.tools[tool]
            return (self.ARGS, tool, args.step(args.start, c), 0)
        if cs.contains(WS, c):
            return (phase, tool, sub, ws + 1)
        if phase == self.PRE:
            return (self.OPEN, tool, None, 0)
        if phase == self.OPEN:
            return (self.KEY1, tool, None, 0) if self.type_member else (self.NAME_KEY, tool, 1, 0)
        if phase in (self.COLON1, self.COLON2, self.COLON_T):
            return (phase + 1, tool, None, 0)
        if phase == self.PRE_TYPE:
            return (self.TYPE_VALUE, tool, 1, 0)
        if phase == self.AFTER_TYPE:
            return (self.PRE_NAME_KEY, tool, None, 0)
        if phase == self.PRE_NAME_KEY:
            return (self.NAME_KEY, tool, 1, 0)
        if phase == self.PRE_NAME:
            return (self.NAME, tool, self.name_string.step(self.name_string.start, c), 0)
        if phase == self.AFTER_NAME:
            if c == 0x2C:  # ","
                return (self.ARGS_KEY0, tool, None, 0)
            return (self.PRE_CLOSE, tool, None, 0) if self.closer else (self.DONE, tool, None, 0)
        if phase == self.ARGS_KEY0:
            return (self.ARGS_KEY, tool, self.arguments_key.start, 0)
        if phase == self.AFTER_ARGS:
            return (self.PRE_CLOSE, tool, None, 0) if self.closer else (self.DONE, tool, None, 0)
        if phase == self.PRE_CLOSE:
            if len(self.closer) == 1:
                return (self.DONE, tool, None, 0)
            return (self.CLOSER, tool, 1, 0)
        raise ValueError(f"no step from phase {phase} on U+{c:04X}")

    def final(self, s):
        return s[0] == self.DONE


class Literal(Machine):
    """Exactly these code points (a special token's pseudo code point among them, bytes.SPECIAL). State: how many
    have been read."""

    def __init__(self, codes: Iterable[int]) -> None:
        self.codes = tuple(codes)
        self.start = 0

    def chars(self, s):
        return ((self.codes[s], self.codes[s]),) if s < len(self.codes) else EMPTY

    def step(self, s, c):
        return s + 1

    def final(self, s):
        return s == len(self.codes)


NAME, ARGS = "name", "arguments"  # the parts of a Sequence that depend on the tool


class Sequence(Machine):
    """Parts read one after another: machines, a tool's NAME (a Trie, or a JsonString of one) and that tool's
    ARGS (`arguments`: the tool's machine, by name). A part that may end where the next may begin is followed
    both ways, so the parts need not be told apart by their first characters.

    State: a frozenset of (part index, tool, part state), each way the text read so far can be split into the
    parts; (len(parts), tool, None) once every part is read.
    """

    def __init__(self, parts: list, names: Machine | None = None, arguments: dict[str, Machine] | None = None):
        self.parts = parts
        self.names = names
        self.arguments = arguments or {}
        self.start = self._closure([(0, None, self._part(0, None).start)] if parts else [(0, None, None)])

    def _part(self, i: int, tool) -> Machine:
        part = self.parts[i]
        if part is NAME:
            assert self.names is not None
            return self.names
        if part is ARGS:
            return self.arguments[tool]
        return part

    def _word(self, sub) -> str:
        names = self.names
        if isinstance(names, JsonString):
            return names.inner.word[sub[1]]  # type: ignore[attr-defined]
        return names.word[sub]  # type: ignore[union-attr]

    def _closure(self, items) -> frozenset:
        """The items, and the next parts' starts wherever an item's part is complete."""
        out: set = set()
        stack = list(items)
        n = len(self.parts)
        while stack:
            item = stack.pop()
            if item in out:
                continue
            out.add(item)
            i, tool, sub = item
            if i < n and self._part(i, tool).final(sub):
                if self.parts[i] is NAME:
                    tool = self._word(sub)
                j = i + 1
                stack.append((j, tool, self._part(j, tool).start) if j < n else (n, tool, None))
        return frozenset(out)

    def chars(self, s):
        n = len(self.parts)
        return cs.union(*(self._part(i, tool).chars(sub) for i, tool, sub in s if i < n))

    def step(self, s, c):
        n = len(self.parts)
        moved = []
        for i, tool, sub in s:
            if i < n:
                part = self._part(i, tool)
                if cs.contains(part.chars(sub), c):
                    moved.append((i, tool, part.step(sub, c)))
        return self._closure(moved)

    def final(self, s):
        n = len(self.parts)
        return any(i == n for i, _, _ in s)
