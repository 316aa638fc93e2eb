"""The byte grammar lifted to a vocabulary of multi-byte tokens (BPE): one token mask per grammar state.

A token is allowed in a grammar state when walking its bytes through the
byte grammar (bytes.py) never leaves it, or reaches the end of the call on
the way (the bytes after the closer are free text again, the stop check's
business). Special tokens (empty bytes) are never allowed inside a call.

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

numpy is imported by whoever builds a TokenMatcher (constrain.py does so only
for a BPE vocabulary); torch only when torch logits arrive.
"""

from __future__ import annotations

from math import inf

import numpy as np

from decodeloop.grammar.bytes import CLOSER_TOKEN, ByteGrammar, ByteState
from decodeloop.grammar.compile import call_grammar

_UNKNOWN, _DEAD = -2, -1
_MAX_MASKS = 2048          # states with memoized masks (49 KB each at 49k, and an index array); oldest dropped first


class TokenMatcher:
    """The constrain.Matcher for multi-byte vocabularies (see the module docstring)."""

    def __init__(self, tokenizer, vocab_size: int | None = None, closer_id: int | None = None) -> None:
        size = vocab_size or tokenizer.vocab_size
        self.closer_id = closer_id      # a closer that is one special token: the grammar's CLOSER_TOKEN
        self.encode = tokenizer.encode
        data = [tokenizer.token_bytes(t) for t in range(size)]
        self.vocab = size
        self.token_bytes = data
        lengths = np.fromiter((len(b) for b in data), dtype=np.int64, count=size)
        self.order = np.argsort(-lengths, kind="stable")          # row r of the matrix is token order[r]
        width = int(lengths.max()) if size else 0
        matrix = np.zeros((size, max(width, 1)), dtype=np.uint8)
        for row, token in enumerate(self.order.tolist()):
            b = data[token]
            if b:
                matrix[row, :len(b)] = np.frombuffer(b, dtype=np.uint8)
        self.matrix = matrix
        self.lengths = lengths[self.order]
        # walking at column j: rows [0, live[j]) (the tokens longer than j)
        self.live = [int((self.lengths > j).sum()) for j in range(width)]
        # a token for each byte value that has one of its own (every byte-level BPE has all 256)
        self._byte_token = {}
        for token, b in enumerate(data):
            if len(b) == 1 and b[0] not in self._byte_token:
                self._byte_token[b[0]] = token
        self.grammar: ByteGrammar | None = None
        self.tools: list[str] = []
        self._reset_tables()

    def _reset_tables(self) -> None:
        self._states: list[ByteState] = []
        self._final = np.zeros(1024, dtype=bool)
        self._table = np.full((1024, 256), _UNKNOWN, dtype=np.int32)
        self._masked: list[ByteState] = []

    # --- the Matcher interface ---------------------------------------------------------------------------

    def start(self, tools, syntax) -> list[str]:
        closer = getattr(syntax, "closer", "]")
        if self.closer_id is not None and syntax.name == "json":
            closer = (CLOSER_TOKEN,)
        compiled = call_grammar(tools, syntax.name, closer)
        self.grammar = ByteGrammar(compiled.machine)
        self.tools = compiled.tools
        self._reset_tables()
        return compiled.problems

    def begin(self) -> ByteState | None:
        return self.grammar.start if self.grammar is not None and self.tools else None

    def advance_bytes(self, state: ByteState, data: bytes) -> ByteState | None:
        """The state after `data`; a final state as soon as the call is complete (later bytes are not the call's)."""
        grammar = self.grammar
        for byte in data:
            if state.final:
                return state
            state = state.next.get(byte) or grammar.advance(state, byte)
            if state is None:
                return None
        return state

    def advance(self, state: ByteState, token: int) -> ByteState | None:
        if token == self.closer_id:
            return self.grammar.advance_char(state, CLOSER_TOKEN)
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
        plan = self.grammar.finish(state)
        if plan is None:
            return None
        out: list[int] = []
        segment = bytearray()
        for b in plan + [CLOSER_TOKEN]:
            if b != CLOSER_TOKEN:
                segment.append(b)
                continue
            if segment and not self._encode_into(out, bytes(segment)):
                return None
            segment.clear()
            out.append(self.closer_id)
        out.pop()                            # the sentinel appended above
        return out if None not in out else None

    def _encode_into(self, out: list[int], data: bytes) -> bool:
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
        if text_ids is None or \
                b"".join(self.token_bytes[t] if 0 <= t < self.vocab else b"\0" for t in text_ids) != data[lead:]:
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
        mask = self.mask(state)
        count = state.masks["count"]
        if type(logits) is list:
            out, override = self.apply(np.asarray(logits, dtype=np.float64), state)
            return out.tolist(), override
        view = None
        if isinstance(logits, np.ndarray):
            view = logits if logits.dtype.kind == "f" else logits.astype(np.float64)
        elif logits.device.type == "cpu" and logits.dim() == 1 and str(logits.dtype) in ("torch.float32",
                                                                                         "torch.float64"):
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
        return plan

    def _apply_masked_fill(self, logits, state: ByteState, mask, count: int):
        key = ("torch", logits.device, len(logits))
        forbidden = state.masks.get(key)
        if forbidden is None:
            import torch

            forbidden = torch.from_numpy(~self._sized(mask, len(logits))).to(logits.device)
            state.masks[key] = forbidden
        wanted = int(logits.argmax())
        out = logits.masked_fill(forbidden, -inf) if logits.is_floating_point() else \
            logits.float().masked_fill(forbidden, -inf)
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
        found = state.masks.get("tokens")
        if found is not None:
            return found
        mask = self._walk(state)
        if self.closer_id is not None and 0 <= self.closer_id < self.vocab:
            mask[self.closer_id] = self.grammar.advance_char(state, CLOSER_TOKEN) is not None
        state.masks["tokens"], state.masks["count"] = mask, int(mask.sum())
        self._masked.append(state)
        if len(self._masked) > _MAX_MASKS:
            self._masked.pop(0).masks.clear()
        return mask

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
        grammar, states = self.grammar, self._states
        for pair in np.unique(pairs).tolist():
            s, byte = divmod(pair, 256)
            st = states[s]
            found = None if st.final else grammar.advance(st, byte)
            target = _DEAD if found is None else self._index(found)     # may grow the table: index it first
            self._table[s, byte] = target

    def _walk(self, state: ByteState):
        rows = len(self.order)
        current = np.full(self.live[0] if self.live else 0, self._index(state), dtype=np.int32)
        accepted = np.zeros(rows, dtype=bool)             # reached the end of the call inside the token
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
                nxt[done] = _DEAD                          # walked no further: the rest is after the call
            current[:live] = nxt
            if not (nxt >= 0).any():
                break
        allowed_rows = accepted
        allowed_rows[:len(current)] |= current >= 0
        mask = np.zeros(self.vocab, dtype=bool)
        mask[self.order[allowed_rows]] = True         # rows of empty tokens never walk, so never allowed
        return mask
