"""A JSON Schema `pattern` read without Python's backtracking matcher: a DFA for the string grammar, and
`search` for checking values.

`search(pattern, text)` gives re.search's answer in time linear in the text (a
lazily built automaton over the exact sets Python uses, with a step budget), so
a server's `^(a+)+$` cannot hang the harness; decodeloop/schema/ checks every `pattern`
and `patternProperties` key with it.

The schema validators read a pattern as Python's `re.search` does, so a pattern stands for
every string that contains a match (unless anchored). This module compiles a
pattern to a deterministic automaton that accepts a subset of exactly those
strings, and says so when it cannot (`Unsupported`, with the reason), so a
pattern is never silently dropped.

Supported: literals and escapes (\\n \\t \\xhh \\uhhhh \\N{...} ...), `.`, classes
`[...]` with ranges and negation, \\d \\w \\s and their negations, groups
`(...)` `(?:...)` `(?P<name>...)`, alternation, the quantifiers * + ? {m} {m,}
{,n} {m,n} (lazy forms too: the language is the same), and the anchors ^ \\A
at the start and $ \\Z at the end of a top-level alternative. Not supported
(reported): lookarounds, backreferences, \\b, anchors elsewhere, inline flags,
possessive and atomic forms, conditionals, counts above 1000, patterns over
MAX_PATTERN_CHARS (4,096) characters.

Where the automaton is stricter than `re.search`, the grammar is stricter too,
which keeps the guarantee (whatever the grammar allows, the validators accept):
`$` is taken as the end of the string (Python also matches before a final
newline); \\d \\w \\s match their ASCII members only (Python's match other
Unicode digits, letters and spaces too), and their negations, and negated
classes that contain them, leave out every non-ASCII character.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right

from decodeloop.patterns import charset as cs
from decodeloop.patterns.charset import TEXT, Ranges

MAX_COUNT = 1000  # the largest {m,n} count expanded
MAX_NFA_STATES = 20_000
MAX_DFA_STATES = 4_096
MAX_PATTERN_CHARS = 4_096  # a server's pattern longer than this is not read
SEARCH_STEPS = 2_000_000  # NFA states visited on one value's cache misses before TooCostly
_SEARCH_STATES = 4_096  # cached automaton states per pattern; the cache starts over beyond
_PATTERNS_KEPT = 256  # patterns whose searchers, and whose grammar DFAs, are kept (the oldest goes first)


class Unsupported(ValueError):
    """A pattern the grammar cannot enforce; the message says why."""


_DIGIT = cs.span("0", "9")
_WORD = cs.union(cs.span("a", "z"), cs.span("A", "Z"), _DIGIT, cs.of("_"))
_SPACE = cs.of(" \t\n\r\f\v")
_NON_ASCII = ((0x80, cs.MAX_CP),)
# (under, over): a subset and a superset of what Python's shorthand class matches
_SHORTHAND = {
    "d": (_DIGIT, cs.union(_DIGIT, _NON_ASCII)),
    "w": (_WORD, cs.union(_WORD, _NON_ASCII)),
    "s": (_SPACE, cs.union(_SPACE, cs.span(0x1C, 0x1F), _NON_ASCII)),
}
for _k in "dws":
    _under, _over = _SHORTHAND[_k]
    _SHORTHAND[_k.upper()] = (cs.complement(_over), cs.complement(_under))
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}
_QUANTIFIER = re.compile(r"\{(\d*)(,?)(\d*)\}")

# AST: ("chars", ranges) ("cat", [nodes]) ("alt", [nodes]) ("rep", node, lo, hi|None) ("bol",) ("eol",)


class _Parser:
    """A pattern read as an AST. `exact`: the sets as Python's `re` reads them (for `search`), not a subset."""

    def __init__(self, pattern: str, exact: bool = False) -> None:
        self.p = pattern
        self.i = 0
        self.exact = exact
        self.universe = cs.ALL if exact else TEXT

    def error(self, reason: str) -> Unsupported:
        return Unsupported(f"{reason} (at position {self.i} of the pattern)")

    def peek(self, n: int = 0) -> str:
        j = self.i + n
        return self.p[j] if j < len(self.p) else ""

    def parse(self) -> list[tuple]:
        """Top-level alternatives as (node, anchored_start, anchored_end, end_before_newline).

        end_before_newline: the alternative ends in `$` (not `\\Z`), which Python also matches before
        a final newline; only the exact reading uses it (the grammar's subset takes `$` as the end).
        """
        alternatives = self.alternatives()
        if self.i < len(self.p):
            raise self.error("unbalanced parenthesis")
        out = []
        for items in alternatives:
            bol = eol = False
            before_newline = True
            while items and items[0] == ("bol",):
                items.pop(0)
                bol = True
            while items and items[-1][0] == "eol":
                before_newline = before_newline and items.pop()[1] == "$"
                eol = True
            node = ("cat", items)
            if _has_anchor(node):
                raise Unsupported("an anchor (^, $, \\A, \\Z) that is not at the start or end of the pattern")
            out.append((node, bol, eol, eol and before_newline and self.exact))
        return out

    def alternatives(self) -> list[list]:
        alts = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            alts.append(self.sequence())
        return alts

    def sequence(self) -> list:
        items = []
        while self.i < len(self.p) and self.peek() not in "|)":
            atom = self.atom()
            if atom is None:
                continue
            items.append(self.quantified(atom))
        return items

    def quantified(self, atom):
        while True:
            ch = self.peek()
            if ch in ("*", "+", "?") and ch:
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
            elif ch == "{":
                m = _QUANTIFIER.match(self.p, self.i)
                if not m or (not m.group(2) and not m.group(1)):
                    return atom  # not a quantifier ("{}", "{x}"): the next atom is a literal "{"
                if not m.group(2):
                    lo = hi = int(m.group(1))
                else:
                    lo = int(m.group(1)) if m.group(1) else 0
                    hi = int(m.group(3)) if m.group(3) else None
                self.i = m.end()
            else:
                return atom
            if atom[0] in ("bol", "eol"):
                raise self.error("a quantified anchor")
            if lo > MAX_COUNT or (hi is not None and hi > MAX_COUNT):
                raise self.error(f"a repeat count above {MAX_COUNT}")
            if self.peek() == "+":
                raise self.error("a possessive quantifier")
            if self.peek() == "?":
                self.i += 1  # lazy: the same language
            atom = ("rep", atom, lo, hi)

    def atom(self):
        ch = self.peek()
        if ch == "(":
            return self.group()
        if ch == "[":
            return ("chars", self.char_class())
        self.i += 1
        if ch == ".":
            return ("chars", cs.subtract(self.universe, cs.of("\n")))
        if ch == "^":
            return ("bol",)
        if ch == "$":
            return ("eol", "$")
        if ch == "\\":
            return self.escape(in_class=False)
        return ("chars", cs.of(ch))

    def group(self):
        p = self.p
        self.i += 1
        if p.startswith("?:", self.i):
            self.i += 2
        elif p.startswith("?P<", self.i):
            end = p.find(">", self.i)
            self.i = end + 1
        elif p.startswith("?#", self.i):
            end = p.find(")", self.i)
            self.i = end + 1
            return None
        elif p.startswith("?", self.i):
            kinds = {
                "?=": "a lookahead",
                "?!": "a lookahead",
                "?<=": "a lookbehind",
                "?<!": "a lookbehind",
                "?P=": "a backreference",
                "?>": "an atomic group",
                "?(": "a conditional",
            }
            for prefix, what in kinds.items():
                if p.startswith(prefix, self.i):
                    raise self.error(what)
            raise self.error("inline flags")
        alts = self.alternatives()
        if self.peek() != ")":
            raise self.error("unbalanced parenthesis")
        self.i += 1
        return ("alt", [("cat", items) for items in alts]) if len(alts) > 1 else ("cat", alts[0])

    def escape(self, in_class: bool, negated: bool = False):
        """After a backslash: a ("chars", ranges) node (or an anchor outside classes)."""
        ch = self.peek()
        if not ch:
            raise self.error("a trailing backslash")
        self.i += 1
        if ch in _SHORTHAND:
            if self.exact:
                return ("chars", _exact_shorthand(ch))
            under, over = _SHORTHAND[ch]
            return ("chars", cs.intersect(over if negated else under, TEXT))
        if ch in _SIMPLE_ESCAPES:
            return ("chars", cs.of(_SIMPLE_ESCAPES[ch]))
        if ch == "b":
            if in_class:
                return ("chars", cs.of("\b"))
            raise self.error("a word boundary (\\b)")
        if ch == "B":
            raise self.error("\\B")
        if ch in "AZ":
            if in_class:
                raise self.error(f"\\{ch} in a class")
            return ("bol",) if ch == "A" else ("eol", "Z")
        if ch in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[ch]
            digits = self.p[self.i : self.i + n]
            self.i += n
            return ("chars", cs.span(int(digits, 16), int(digits, 16)))
        if ch == "N":
            end = self.p.find("}", self.i)
            name = self.p[self.i + 1 : end]
            self.i = end + 1
            return ("chars", cs.of(unicodedata.lookup(name)))
        if ch == "0" or (ch in "1234567" and in_class):
            digits = ch
            while len(digits) < 3 and self.peek() in "01234567" and self.peek():
                digits += self.peek()
                self.i += 1
            return ("chars", cs.span(int(digits, 8), int(digits, 8)))
        if ch.isdigit():
            if (
                len(self.p) >= self.i + 2
                and ch in "01234567"
                and self.peek() in "01234567"
                and self.peek()
                and self.peek(1) in "01234567"
                and self.peek(1)
            ):
                digits = ch + self.p[self.i : self.i + 2]
                self.i += 2
                return ("chars", cs.span(int(digits, 8), int(digits, 8)))
            raise self.error("a backreference")
        return ("chars", cs.of(ch))

    def char_class(self) -> Ranges:
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        items: list[Ranges] = []
        first = True
        while True:
            ch = self.peek()
            if not ch:
                raise self.error("an unterminated class")
            if ch == "]" and not first:
                self.i += 1
                break
            first = False
            lo_set = self.class_item(negated)
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                # a range, if both ends are single characters
                save = self.i
                self.i += 1
                hi_set = self.class_item(negated)
                if _single(lo_set) is not None and _single(hi_set) is not None:
                    items.append(cs.span(_single(lo_set), _single(hi_set)))
                    continue
                self.i = save
            items.append(lo_set)
        found = cs.union(*items)
        return cs.intersect(cs.complement(found) if negated else found, self.universe)

    def class_item(self, negated: bool) -> Ranges:
        ch = self.peek()
        self.i += 1
        if ch == "\\":
            return self.escape(in_class=True, negated=negated)[1]
        return cs.of(ch)


def _single(ranges: Ranges):
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return ranges[0][0]
    return None


def _has_anchor(node) -> bool:
    kind = node[0]
    if kind in ("bol", "eol"):
        return True
    if kind in ("cat", "alt"):
        return any(_has_anchor(n) for n in node[1])
    if kind == "rep":
        return _has_anchor(node[1])
    return False


class _Nfa:
    def __init__(self) -> None:
        self.edges: list[list[tuple[Ranges, int]]] = []
        self.eps: list[list[int]] = []

    def new(self) -> int:
        if len(self.edges) >= MAX_NFA_STATES:
            raise Unsupported("the pattern is too large to enforce")
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def build(self, node) -> tuple[int, int]:
        kind = node[0]
        if kind == "chars":
            s, e = self.new(), self.new()
            if node[1]:
                self.edges[s].append((node[1], e))
            return s, e
        if kind == "cat":
            s = e = self.new()
            for item in node[1]:
                a, b = self.build(item)
                self.eps[e].append(a)
                e = b
            return s, e
        if kind == "alt":
            s, e = self.new(), self.new()
            for item in node[1]:
                a, b = self.build(item)
                self.eps[s].append(a)
                self.eps[b].append(e)
            return s, e
        if kind == "rep":
            _, sub, lo, hi = node
            s = e = self.new()
            for _ in range(lo):
                a, b = self.build(sub)
                self.eps[e].append(a)
                e = b
            if hi is None:
                a, b = self.build(sub)
                self.eps[e].append(a)
                self.eps[b].append(a)
                end = self.new()
                self.eps[e].append(end)
                self.eps[b].append(end)
                return s, end
            end = self.new()
            for _ in range(hi - lo):
                self.eps[e].append(end)
                a, b = self.build(sub)
                self.eps[e].append(a)
                e = b
            self.eps[e].append(end)
            return s, end
        raise Unsupported(f"internal: unknown node {kind}")

    def closure(self, states) -> frozenset:
        seen = set(states)
        todo = list(states)
        while todo:
            s = todo.pop()
            for t in self.eps[s]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)


class Dfa:
    """A deterministic automaton over characters; every kept edge leads to a state that can still accept.

    States are ints; `trans[d]` is a tuple of (lo, hi, target) sorted by lo;
    `accepting[d]`; `start`. Characters outside the alphabet it was built for
    have no edges.
    """

    def __init__(self, trans: list, accepting: list, start: int) -> None:
        # keep only live states' edges
        n = len(trans)
        reverse: list[list[int]] = [[] for _ in range(n)]
        for d, edges in enumerate(trans):
            for _, _, t in edges:
                reverse[t].append(d)
        live = [False] * n
        todo = [d for d in range(n) if accepting[d]]
        for d in todo:
            live[d] = True
        while todo:
            d = todo.pop()
            for p in reverse[d]:
                if not live[p]:
                    live[p] = True
                    todo.append(p)
        self.live = live
        self.trans = [tuple(e for e in edges if live[e[2]]) for edges in trans]
        self.los = [[e[0] for e in edges] for edges in self.trans]
        self.accepting = accepting
        self.start = start
        self.chars = [cs.normalize((lo, hi) for lo, hi, _ in edges) for edges in self.trans]

    @property
    def empty(self) -> bool:
        return not self.live[self.start]

    def step(self, d: int, c: int):
        i = bisect_right(self.los[d], c) - 1
        if i >= 0:
            _lo, hi, t = self.trans[d][i]
            if c <= hi:
                return t
        return None

    def accepts(self, text: str) -> bool:
        d = self.start
        for ch in text:
            d = self.step(d, ord(ch))
            if d is None:
                return False
        return self.accepting[d]

    @staticmethod
    def intersection(a: Dfa, b: Dfa) -> Dfa:
        index = {(a.start, b.start): 0}
        pairs = [(a.start, b.start)]
        trans: list = []
        accepting: list = []
        k = 0
        while k < len(pairs):
            x, y = pairs[k]
            k += 1
            edges = []
            for lo1, hi1, t1 in a.trans[x]:
                for lo2, hi2, t2 in b.trans[y]:
                    lo, hi = max(lo1, lo2), min(hi1, hi2)
                    if lo > hi:
                        continue
                    key = (t1, t2)
                    if key not in index:
                        if len(pairs) >= MAX_DFA_STATES:
                            raise Unsupported("the patterns together are too complex to enforce")
                        index[key] = len(pairs)
                        pairs.append(key)
                    edges.append((lo, hi, index[key]))
            edges.sort()
            trans.append(tuple(edges))
            accepting.append(a.accepting[x] and b.accepting[y])
        return Dfa(trans, accepting, 0)


def _determinize(nfa: _Nfa, start: int, accepts: set[int], alphabet: Ranges) -> Dfa:
    first = nfa.closure([start])
    index = {first: 0}
    sets = [first]
    trans: list = []
    accepting: list = []
    k = 0
    while k < len(sets):
        current = sets[k]
        k += 1
        accepting.append(bool(current & accepts))
        moves = [(r, t) for s in current for r, t in nfa.edges[s]]
        points = sorted({p for r, _ in moves for lo, hi in r for p in (lo, hi + 1)})
        edges: list[tuple[int, int, int]] = []  # (low, high, target state)
        for lo, nxt in zip(points, points[1:]):
            hi = nxt - 1
            targets = [t for r, t in moves if cs.overlaps(r, lo, hi)]
            if not targets:
                continue
            for a, b in cs.intersect(((lo, hi),), alphabet):
                target = nfa.closure(targets)
                if target not in index:
                    if len(sets) >= MAX_DFA_STATES:
                        raise Unsupported("the pattern is too complex to enforce")
                    index[target] = len(sets)
                    sets.append(target)
                d = index[target]
                if edges and edges[-1][2] == d and edges[-1][1] + 1 == a:
                    edges[-1] = (edges[-1][0], b, d)
                else:
                    edges.append((a, b, d))
        trans.append(tuple(edges))
    return Dfa(trans, accepting, 0)


_CACHE: dict = {}  # (pattern, alphabet) -> its Dfa or why not; at most _PATTERNS_KEPT


def _nfa(pattern: str, exact: bool) -> tuple[_Nfa, int, set[int], set[int]]:
    """The pattern's NFA for re.search: (nfa, start, accepting states, accepting states that stay so).

    Raises Unsupported, naming the construct, for what it cannot read (Python's own errors included).
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise Unsupported(f"it is {len(pattern):,} characters long (at most {MAX_PATTERN_CHARS:,} are read)")
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        raise Unsupported(f"Python cannot compile it ({e}), so the argument check does not either") from None
    try:
        alternatives = _Parser(pattern, exact).parse()
        nfa = _Nfa()
        start = nfa.new()
        anything = cs.ALL if exact else TEXT
        accepts: set[int] = set()
        sticky: set[int] = set()
        for node, bol, eol, before_newline in alternatives:
            s0 = nfa.new()
            nfa.eps[start].append(s0)
            if not bol:
                nfa.edges[s0].append((anything, s0))
            a, b = nfa.build(node)
            nfa.eps[s0].append(a)
            acc = nfa.new()
            nfa.eps[b].append(acc)
            accepts.add(acc)
            if not eol:
                nfa.edges[acc].append((anything, acc))
                sticky.add(acc)
            elif before_newline:
                last = nfa.new()
                nfa.edges[acc].append((cs.of("\n"), last))
                accepts.add(last)
    except Unsupported:
        raise
    except (ValueError, KeyError, IndexError, RecursionError) as e:  # a construct the parser misread: refuse it
        raise Unsupported(f"a construct the grammar does not read ({type(e).__name__}: {e})") from None
    return nfa, start, accepts, sticky


def compile_pattern(pattern: str, alphabet: Ranges = TEXT) -> Dfa:
    """The DFA of the strings over `alphabet` in which re.search(pattern) finds a match (a subset, see above).

    Raises Unsupported, naming the construct, for what it cannot enforce.
    """
    key = (pattern, alphabet)
    if key in _CACHE:
        found = _CACHE[key]
        if isinstance(found, Unsupported):
            raise found
        return found
    if len(_CACHE) >= _PATTERNS_KEPT:  # a server's patterns come and go: keep the recent ones
        _CACHE.pop(next(iter(_CACHE)))
    try:
        nfa, start, accepts, _ = _nfa(pattern, exact=False)
        dfa = _determinize(nfa, start, accepts, alphabet)
    except Unsupported as e:
        _CACHE[key] = e
        raise
    _CACHE[key] = dfa
    return dfa


# Checking a value against a server's pattern: re.search's answer, in time linear in the value.


class TooCostly(Unsupported):
    """A value whose check would take more than the step budget; the check fails rather than run on."""


_EXACT_SETS: dict[str, Ranges] = {}


def _exact_shorthand(ch: str) -> Ranges:
    """\\d \\w \\s (or \\D \\W \\S) exactly as Python's str patterns read them (Unicode, whole range)."""
    kind = ch.lower()
    if kind not in _EXACT_SETS:
        member = {"d": str.isdecimal, "w": lambda c: c.isalnum() or c == "_", "s": str.isspace}[kind]
        ranges: list[tuple[int, int]] = []
        for code in range(cs.MAX_CP + 1):
            if member(chr(code)):
                if ranges and ranges[-1][1] == code - 1:
                    ranges[-1] = (ranges[-1][0], code)
                else:
                    ranges.append((code, code))
        _EXACT_SETS[kind] = tuple(ranges)
    return _EXACT_SETS[kind] if ch == kind else cs.complement(_EXACT_SETS[kind])


class _Searcher:
    """re.search over one pattern's NFA, as an automaton built lazily: one state per set of NFA states met.

    Linear in the value: each character is one cached step, or, the first time a (state, character)
    pair is met, one pass over the NFA states of that set (counted against the step budget).
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.nfa, start, self.accepts, self.sticky = _nfa(pattern, exact=True)
        self.start = self.nfa.closure([start])
        self._reset()

    def _reset(self) -> None:
        self.sets: list[frozenset] = []
        self.index: dict[frozenset, int] = {}
        self.moves: dict[tuple[int, int], int] = {}

    def _state(self, states: frozenset) -> int:
        found = self.index.get(states)
        if found is None:
            found = self.index[states] = len(self.sets)
            self.sets.append(states)
        return found

    def search(self, text: str, budget: int = SEARCH_STEPS) -> bool:
        if len(self.sets) > _SEARCH_STATES:
            self._reset()
        nfa, moves = self.nfa, self.moves
        d = self._state(self.start)
        for ch in text:
            current = self.sets[d]
            if current & self.sticky:
                return True  # a match was found; what follows cannot undo it
            key = (d, ord(ch))
            nxt = moves.get(key)
            if nxt is None:
                code = key[1]
                targets = [t for s in current for r, t in nfa.edges[s] if cs.contains(r, code)]
                reached = nfa.closure(targets)
                budget -= len(current) + len(reached)
                if budget < 0:
                    raise TooCostly(
                        f"checking a value of {len(text):,} characters against it took more than {SEARCH_STEPS:,} steps"
                    )
                if len(self.sets) > _SEARCH_STATES:  # a pattern with too many states: start the cache over
                    self._reset()
                    moves = self.moves
                    d = self._state(current)
                nxt = moves[(d, code)] = self._state(reached)
            d = nxt
            if not self.sets[d]:
                return False  # nothing left that could match
        return bool(self.sets[d] & self.accepts)


_SEARCHERS: dict[str, _Searcher | Unsupported] = {}


def search(pattern: str, text: str) -> bool:
    """Whether `re.search(pattern, text)` finds a match, without running Python's backtracking matcher.

    The same answer as `re` for every pattern it reads (Unicode \\d \\w \\s, `$` before a final newline),
    in time linear in `text`, so a server's `^(a+)+$` cannot hang the harness. Raises Unsupported for a
    pattern it does not read (lookarounds, backreferences, ...: see the module docstring), and TooCostly
    when one value's check exceeds the step budget.
    """
    found = _SEARCHERS.pop(pattern, None)
    if found is None:
        try:
            found = _Searcher(pattern)
        except Unsupported as e:
            found = e
        if len(_SEARCHERS) >= _PATTERNS_KEPT:
            _SEARCHERS.pop(next(iter(_SEARCHERS)))
    _SEARCHERS[pattern] = found  # most recently used last
    if isinstance(found, Unsupported):
        raise found
    return found.search(text)
