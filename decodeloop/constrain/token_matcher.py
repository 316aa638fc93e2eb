"""The byte grammar lifted to a vocabulary of multi-byte tokens (BPE): one token mask per grammar state.

A token is allowed in a grammar state when walking its bytes through the
byte grammar (bytes.py) never leaves it, or reaches the end of the call on
the way (the bytes after the closer are free text again, the stop check's
business). A special token (empty bytes) is allowed only where the grammar
reads the pseudo code point that stands for it (bytes.SPECIAL: a closer that
is one token, a family template's separators), never as text.

How a mask is made. Every token's bytes sit in one numpy matrix, rows sorted
by length, longest first, so the tokens still walking at byte j are a prefix
of the rows. The walk starts every token at the state and moves all of them
one byte per column through a dense transition table (state index x byte ->
state index). A (state, byte) pair the table has not seen yet is asked of the
grammar once, in Python, and written into the table; after that a column is
two numpy gathers. So the first mask of a broad state (inside a free string,
where most of the vocabulary is allowed) costs a few milliseconds, and every
later visit to the state finds its mask memoized: a constrained token then
costs an argmax and a copy of the logits with the shorter side of the mask applied
(bench/constrain_bpe.py).
Nothing walks the vocabulary in Python per token.

Memory stays bounded however many tool sets one process compiles grammars
for (`decodeloop eval` over BFCL entries, each with its own functions). A
mask is 152 KB at Qwen2.5's vocabulary, plus its index array and, on a GPU,
a bool tensor, so the masks of every matcher in the process share one budget,
`MASK_MEMORY` bytes, least recently used dropped first (`MASKS`, which holds
states weakly, so it never keeps a grammar alive): a dropped mask is walked
again if its state comes back. `start` releases the grammar it replaces at
once (its masks, and the links between its states), and `release` does so
for a matcher done with, without waiting for the cycle collector, which in a
process holding a model may not run for many turns. The tables of a
vocabulary (every token's bytes as a matrix) are made once per tokenizer and
shared by its matchers, so a new harness per entry costs no new copy of them.

numpy is imported by whoever builds a TokenMatcher (constrain/processor.py does so only
for a BPE vocabulary); torch only when torch logits arrive.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from math import inf

import numpy as np

from decodeloop.constrain.grammar.bytes import ByteGrammar, ByteState, is_special
from decodeloop.constrain.matchers import GrammarMatcher, compile_call

_UNKNOWN, _DEAD = -2, -1
MASK_MEMORY = 256 << 20  # bytes of memoized masks in the process, every matcher and grammar together


class MaskMemo:
    """Which grammar states hold memoized masks, in the order they were last used, and the bytes they hold.

    One for the process (`MASKS`): past `MASK_MEMORY` bytes the least recently used state's masks are
    dropped (never the state's table index or its memoized end, which cost no vocabulary-sized memory).
    States are held weakly: the memo never keeps a grammar alive, and a state freed takes its masks along.
    """

    def __init__(self) -> None:
        self._entries: OrderedDict = OrderedDict()  # id(state) -> [weak reference to it, id(its grammar), bytes]
        self.bytes = 0
        self._lock = threading.Lock()  # harnesses on threads (eval --concurrency) share it
        self._freed: list = []  # (id, reference) of states freed since: settled at the next change

    def __len__(self) -> int:
        with self._lock:
            self._settle()
            return len(self._entries)

    def _settle(self) -> None:
        """Forget the states freed (their masks went with them); a reused id holds another state's entry."""
        while self._freed:
            key, ref = self._freed.pop()
            entry = self._entries.get(key)
            if entry is not None and entry[0] is ref:
                del self._entries[key]
                self.bytes -= entry[2]

    def used(self, state: ByteState) -> None:
        with self._lock:
            if id(state) in self._entries:
                self._entries.move_to_end(id(state))

    def add(self, state: ByteState, grammar: ByteGrammar | None, size: int) -> None:
        """`state` holds `size` more bytes of masks; older states' masks are dropped while over the budget."""
        with self._lock:
            self._settle()
            key = id(state)
            entry = self._entries.get(key)
            if entry is None:
                freed = self._freed

                def forget(ref: weakref.ReferenceType[ByteState]) -> None:
                    # runs wherever the state is freed (even inside the cycle collector): it only appends
                    freed.append((key, ref))

                ref = weakref.ref(state, forget)
                entry = self._entries[key] = [ref, id(grammar), 0]
            else:
                self._entries.move_to_end(key)
            entry[2] += size
            self.bytes += size
            while self.bytes > MASK_MEMORY and len(self._entries) > 1:
                _, (oldest, _, held) = self._entries.popitem(last=False)
                self.bytes -= held
                _drop_masks(oldest())

    def release(self, grammar: ByteGrammar) -> None:
        """Drop the masks of every state of `grammar` (it is being replaced)."""
        with self._lock:
            self._settle()
            gone = [key for key, (_, owner, _) in self._entries.items() if owner == id(grammar)]
            for key in gone:
                ref, _, held = self._entries.pop(key)
                self.bytes -= held
                _drop_masks(ref())


def _drop_masks(state: ByteState | None) -> None:
    if state is None:
        return  # freed already, its masks with it
    for key in [k for k in state.masks if k == "tokens" or (type(k) is tuple and k[0] in ("plan", "torch"))]:
        del state.masks[key]


MASKS = MaskMemo()


class _Vocabulary:
    """A vocabulary's tables for the walk: every token's bytes as rows of a matrix, longest first."""

    def __init__(self, tokenizer, size: int) -> None:
        data = [tokenizer.token_bytes(t) for t in range(size)]
        self.token_bytes = data
        lengths = np.fromiter((len(b) for b in data), dtype=np.int64, count=size)
        self.order = np.argsort(-lengths, kind="stable")  # row r of the matrix is token order[r]
        width = int(lengths.max()) if size else 0
        matrix = np.zeros((size, max(width, 1)), dtype=np.uint8)
        for row, token in enumerate(self.order.tolist()):
            b = data[token]
            if b:
                matrix[row, : len(b)] = np.frombuffer(b, dtype=np.uint8)
        self.matrix = matrix
        self.lengths = lengths[self.order]
        # walking at column j: rows [0, live[j]) (the tokens longer than j)
        self.live = [int((self.lengths > j).sum()) for j in range(width)]
        # a token for each byte value that has one of its own (every byte-level BPE has all 256)
        self.byte_token: dict[int, int] = {}
        for token, b in enumerate(data):
            if len(b) == 1 and b[0] not in self.byte_token:
                self.byte_token[b[0]] = token


# per tokenizer (while it lives) and size: a harness per entry builds a matcher each time, not its tables
_VOCABULARIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_VOCABULARIES_LOCK = threading.Lock()


def _vocabulary(tokenizer, size: int) -> _Vocabulary:
    try:
        with _VOCABULARIES_LOCK:
            found = _VOCABULARIES.setdefault(tokenizer, {}).get(size)
    except TypeError:  # a tokenizer that cannot be weakly referenced: tables of its own
        return _Vocabulary(tokenizer, size)
    if found is None:
        found = _Vocabulary(tokenizer, size)
        with _VOCABULARIES_LOCK:
            _VOCABULARIES[tokenizer][size] = found
    return found


class TokenMatcher(GrammarMatcher):
    """The constrain.Matcher for multi-byte vocabularies (see the module docstring)."""

    def __init__(self, tokenizer, vocab_size: int | None = None, closer_id: int | None = None) -> None:
        super().__init__()
        size = vocab_size or tokenizer.vocab_size
        self.closer_id = closer_id  # a closer that is one special token: the grammar's CLOSER_TOKEN
        self.specials = dict(getattr(tokenizer, "special_tokens", {}) or {})  # text -> id, for a template's tokens
        self.tokens: dict[int, int] = {}  # the grammar's special tokens: pseudo code point -> id
        self._pseudo: dict[int, int] = {}  # id -> pseudo code point
        self.encode = tokenizer.encode
        vocabulary = _vocabulary(tokenizer, size)
        self.vocab = size
        self.token_bytes = vocabulary.token_bytes
        self.order, self.matrix, self.lengths = vocabulary.order, vocabulary.matrix, vocabulary.lengths
        self.live = vocabulary.live
        self._byte_token = vocabulary.byte_token
        self._reset_tables()

    def __copy__(self) -> TokenMatcher:
        """A matcher of the same vocabulary (its tables shared) with no grammar yet: `start` gives it its own."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.grammar, other.tools, other.tokens, other._pseudo = None, [], {}, {}
        other._reset_tables()
        return other

    def _reset_tables(self) -> None:
        self._states: list[ByteState] = []
        # 64 states to begin with (64 KB), doubled as they are met: a grammar that serves one call stays small
        self._final = np.zeros(64, dtype=bool)
        self._table = np.full((64, 256), _UNKNOWN, dtype=np.int32)

    # --- the Matcher interface ---------------------------------------------------------------------------

    def start(self, tools, syntax) -> list[str]:
        compiled = compile_call(tools, syntax, self.specials, self.closer_id)
        self.release()
        self.grammar = ByteGrammar(compiled.machine)
        self.tools = compiled.tools
        self.tokens = {code: token for code, token in compiled.tokens.items() if 0 <= token < self.vocab}
        self._pseudo = {token: code for code, token in self.tokens.items()}
        return compiled.problems

    def release(self) -> None:
        """Free the grammar now (its masks, its states' links, the table of its states) rather than when the
        cycle collector finds it: `start` does so for the grammar it replaces; whoever is done with a matcher
        may too. The grammar is this matcher's alone (a copy starts without one)."""
        if self.grammar is not None:
            MASKS.release(self.grammar)
            self.grammar.release()
        self.grammar, self.tools = None, []
        self._reset_tables()

    def advance_bytes(self, state: ByteState, data: bytes) -> ByteState | None:
        """The state after `data`; a final state as soon as the call is complete (later bytes are not the call's)."""
        for byte in data:
            if state.final:
                return state
            after = state.next.get(byte) or self._started().advance(state, byte)
            if after is None:
                return None
            state = after
        return state

    def advance(self, state: ByteState, token: int) -> ByteState | None:
        code = self._pseudo.get(token)
        if code is not None:
            return self._started().advance_char(state, code)
        data = self.token_bytes[token] if 0 <= token < self.vocab else b""
        return self.advance_bytes(state, data) if data else None

    def done(self, state: ByteState) -> bool:
        return state.final

    def finish(self, state: ByteState) -> list[int] | None:
        """The tokens of a short way to end the call (ByteGrammar.finish), or None.

        The end's text is encoded by the tokenizer, so it takes as few tokens as
        the vocabulary allows (any tokenization of the same bytes walks the byte
        grammar to the same state); bytes that are not whole characters, or text
        whose encoding does not give back its bytes, go as single-byte tokens.
        """
        plan = self._started().finish(state)
        if plan is None:
            return None
        out: list[int | None] = []  # None: a special token with no id
        segment = bytearray()
        for b in [*plan, None]:
            if b is not None and not is_special(b):
                segment.append(b)
                continue
            if segment and not self._encode_into(out, bytes(segment)):
                return None
            segment.clear()
            out.append(None if b is None else self.tokens.get(b))
        out.pop()  # the sentinel appended above
        ids = [t for t in out if t is not None]
        return ids if len(ids) == len(out) else None

    def _encode_into(self, out: list[int | None], data: bytes) -> bool:
        """Append tokens spelling `data`: the bytes that finish a character begun earlier one by one, then the
        text by the tokenizer (byte by byte where its encoding does not give back the bytes)."""
        lead = 0
        while lead < len(data) and 0x80 <= data[lead] <= 0xBF:
            lead += 1
        ids = [self._byte_token.get(b) for b in data[:lead]]
        try:
            text_ids = self.encode(data[lead:].decode("utf-8"))
        except UnicodeDecodeError:
            text_ids = None
        if (
            text_ids is None
            or b"".join(self.token_bytes[t] if 0 <= t < self.vocab else b"\0" for t in text_ids) != data[lead:]
        ):
            text_ids = [self._byte_token.get(b) for b in data[lead:]]
        ids += text_ids
        if None in ids:
            return False
        out.extend(ids)
        return True

    def allowed_ids(self, state: ByteState) -> list[int]:
        return np.flatnonzero(self.mask(state)).tolist()

    def apply(self, logits, state: ByteState):
        """(logits with every forbidden token at -inf, override) as ByteMatcher.apply; the input is never changed.

        On the CPU (numpy arrays, float32/float64 torch tensors, through a zero-copy numpy view) the copy is
        made and then only the shorter side is touched: the forbidden ids set to -inf, or the allowed ids
        copied into a row of -inf (index arrays memoized per state). Elsewhere (CUDA, half precision) one
        masked_fill with a memoized bool tensor on the logits' device.
        """
        mask, count = self._mask(state)
        if type(logits) is list:
            out, override = self.apply(np.asarray(logits, dtype=np.float64), state)
            return out.tolist(), override
        view = None
        if isinstance(logits, np.ndarray):
            view = logits if logits.dtype.kind == "f" else logits.astype(np.float64)
        elif (
            logits.device.type == "cpu"
            and logits.dim() == 1
            and str(logits.dtype) in ("torch.float32", "torch.float64")
        ):
            view = logits.numpy()
        if view is None:
            return self._apply_masked_fill(logits, state, mask, count)
        n = len(view)
        wanted = int(view.argmax())
        sparse, ids = self._plan(state, mask, n)
        if sparse:
            out = np.full(n, -inf, dtype=view.dtype)
            out[ids] = view[ids]
        else:
            out = view.copy()
            out[ids] = -inf
        override = None if wanted < self.vocab and mask[wanted] else (wanted, count)
        if isinstance(logits, np.ndarray):
            return out, override
        import torch

        return torch.from_numpy(out), override

    def _plan(self, state: ByteState, mask, n: int):
        """(sparse, ids) for logits of length n: the allowed ids when they are fewer, else the forbidden ones."""
        key = ("plan", n)
        plan = state.masks.get(key)
        if plan is None:
            sized = self._sized(mask, n)
            allowed = np.flatnonzero(sized)
            sparse = len(allowed) <= n // 2
            ids = allowed if sparse else np.flatnonzero(~sized)
            plan = state.masks[key] = (sparse, ids.astype(np.int32))
            MASKS.add(state, self.grammar, plan[1].nbytes)
        return plan

    def _apply_masked_fill(self, logits, state: ByteState, mask, count: int):
        key = ("torch", logits.device, len(logits))
        forbidden = state.masks.get(key)
        if forbidden is None:
            import torch

            forbidden = torch.from_numpy(~self._sized(mask, len(logits))).to(logits.device)
            state.masks[key] = forbidden
            MASKS.add(state, self.grammar, forbidden.numel())
        wanted = int(logits.argmax())
        out = (
            logits.masked_fill(forbidden, -inf)
            if logits.is_floating_point()
            else logits.float().masked_fill(forbidden, -inf)
        )
        ruled_out = wanted >= self.vocab or not mask[wanted]
        return out, ((wanted, count) if ruled_out else None)

    # --- masks -------------------------------------------------------------------------------------------

    def _sized(self, mask, n: int):
        """The mask for logits of length n: ids past the tokenizer's vocabulary are never allowed."""
        if n == self.vocab:
            return mask
        if n < self.vocab:
            return mask[:n]
        return np.concatenate([mask, np.zeros(n - self.vocab, dtype=bool)])

    def mask(self, state: ByteState):
        """The allowed tokens of a state as a bool array over the vocabulary, memoized on the state."""
        return self._mask(state)[0]

    def _mask(self, state: ByteState):
        """(mask, how many tokens it allows), memoized on the state within the process's budget (MASKS)."""
        found = state.masks.get("tokens")
        if found is not None:
            MASKS.used(state)
            return found
        mask = self._walk(state)
        for code, token in self.tokens.items():
            mask[token] = self._started().advance_char(state, code) is not None
        found = state.masks["tokens"] = (mask, int(mask.sum()))
        MASKS.add(state, self.grammar, mask.nbytes)
        return found

    def _index(self, state: ByteState) -> int:
        index = state.masks.get("index")
        if index is None or index >= len(self._states) or self._states[index] is not state:
            index = len(self._states)
            if index == len(self._final):
                self._final = np.concatenate([self._final, np.zeros(index, dtype=bool)])
                self._table = np.concatenate([self._table, np.full((index, 256), _UNKNOWN, dtype=np.int32)])
            self._states.append(state)
            self._final[index] = state.final
            state.masks["index"] = index
        return index

    def _fill(self, pairs) -> None:
        """Ask the grammar about (state index, byte) pairs the table does not know yet."""
        grammar, states = self._started(), self._states
        for pair in np.unique(pairs).tolist():
            s, byte = divmod(pair, 256)
            st = states[s]
            found = None if st.final else grammar.advance(st, byte)
            target = _DEAD if found is None else self._index(found)  # may grow the table: index it first
            self._table[s, byte] = target

    def _walk(self, state: ByteState):
        rows = len(self.order)
        current = np.full(self.live[0] if self.live else 0, self._index(state), dtype=np.int32)
        accepted = np.zeros(rows, dtype=bool)  # reached the end of the call inside the token
        for column, live in enumerate(self.live):
            cur = current[:live]
            walking = cur >= 0
            byte = self.matrix[:live, column].astype(np.int32)
            nxt = np.full(live, _DEAD, dtype=np.int32)
            nxt[walking] = self._table[cur[walking], byte[walking]]
            unknown = nxt == _UNKNOWN
            if unknown.any():
                self._fill(cur[unknown].astype(np.int64) * 256 + byte[unknown])
                nxt[unknown] = self._table[cur[unknown], byte[unknown]]
            done = (nxt >= 0) & self._final[np.maximum(nxt, 0)]
            if done.any():
                accepted[:live] |= done
                nxt[done] = _DEAD  # walked no further: the rest is after the call
            current[:live] = nxt
            if not (nxt >= 0).any():
                break
        allowed_rows = accepted
        allowed_rows[: len(current)] |= current >= 0
        mask = np.zeros(self.vocab, dtype=bool)
        mask[self.order[allowed_rows]] = True  # rows of empty tokens never walk, so never allowed
        return mask
