"""A remote engine: an OpenAI-compatible /v1/completions server samples, the harness does the rest.

`OpenAIEngine` implements the `Engine` protocol (engine.py) over a streamed
completion request. The harness renders the prompt itself, with the model's own
chat template and tokenizer loaded from local files (`load_openai`), and sends
the context as token ids where the server takes them (vLLM: a list of ids and
`return_token_ids`; llama.cpp's server: a token array and `cache_prompt`), else
as text. Each streamed token comes back as an id and is appended as that id:
the context is never re-tokenized. The loop's own stop and call detection
decide when a segment ends; `stop` then hangs up, so the server stops
generating. After the MCP round trip the next request carries the extended
context, and the server's prefix cache computes only the inserted span.

A server that streams only text (llama-cpp-python's server) is supported with
a check: each streamed piece is matched to the vocabulary entry with exactly
its bytes (one token per piece, as the server sends them); a piece that is no
single token is encoded, and the count of ids that gives is compared with what
the server reports (tokens per chunk, `usage.completion_tokens`, and for a text
prompt `usage.prompt_tokens` against the context's length). A mismatch is a
notice in the trace; a server that reports no counts gets one notice saying
the ids could not be checked.

Each request is one `Request` event (trace and JSON Lines): what was sent
(ids or text), the tokens streamed, how the stream ended, and the server's own
count of prompt tokens served from its cache (`usage.prompt_tokens_details.
cached_tokens`, llama.cpp's `timings.cache_n` or `tokens_cached`), or null
when the server reports none. A token's `cached` in the trace is the server's
count where the stream's first chunk carries it, else the prefix this request
shares with the last one (what a prefix cache would serve).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, TypeGuard, TypeVar

from decodeloop.decode.engine import Engine, Step
from decodeloop.decode.model import common_prefix_len
from decodeloop.errors import RemoteError
from decodeloop.events import Notice, Request
from decodeloop.models.openai.wire import Answered, Endpoint, Stream

T = TypeVar("T")

DEFAULT_TOP = 5  # top logprobs asked for per token (the trace shows 3)
SHAPES = ("ids", "text")  # how the prompt is sent, in the order tried


class OpenAIEngine(Engine):
    """Tokens from a streamed /v1/completions request; `stop` hangs up."""

    uses_state = False  # nothing here reads the loop's processor state

    def __init__(
        self,
        endpoint: Endpoint,
        model: str,
        tokenizer,
        *,
        sampler=None,
        stop_ids=(),
        max_tokens: int = 4096,
        top: int = DEFAULT_TOP,
        prompt: str = "auto",
        emit=None,
        extra: dict[str, Any] | None = None,
        check_text: bool = True,
    ) -> None:
        if prompt not in ("auto", *SHAPES):
            raise ValueError(f"prompt must be auto, ids or text, not {prompt!r}")
        self.endpoint, self.model, self.tokenizer = endpoint, model, tokenizer
        self.sampler, self.max_tokens, self.top = sampler, max_tokens, top
        self.stop_ids = sorted(stop_ids) or [tokenizer.eos_id]
        self.emit = emit
        self.extra = dict(extra or {})  # fields added to every request (a server's own options: a grammar, say)
        self.check_text = check_text  # text prompts: compare the server's tokens for them with the context
        self.mismatches = 0  # text prompts the server read as other tokens
        self.shapes = list(SHAPES) if prompt == "auto" else [prompt]  # the first is used; a refusal drops it
        self.logprobs = True  # dropped when the server refuses logprobs
        self._accepted = False  # a request of this shape went through: later refusals are errors
        self.requests: list[Request] = []  # every request's event, also emitted
        self._stream: Stream | None = None
        self._chunks: Iterator[dict[str, Any]] = iter(())  # the open stream's chunks
        self._finish_reason: str | None = None
        self._pending: list[tuple[int, float | None, list[tuple[int, float]] | None]] = []
        self._last: list[int] = []  # the ids of the last request and what it streamed: the server's cache
        self._by_bytes: dict[bytes, int] | None = None
        self._warned: set[str] = set()
        self._step = Step(0, 0, 0)

    # -- the Engine protocol ---------------------------------------------------------------------

    def bind(self, emit) -> None:
        """The harness's event sink: requests and warnings go into the trace."""
        self.emit = emit

    def step(self, context: list[int], state: Any) -> Step:
        step = self._step
        if self._stream is None:
            self._open(context)
            first = True
        else:
            first = False
        while not self._pending:
            if not self._read():
                # the server ended the stream without an end-of-turn token the loop could stop on
                self._finish(self._finish_reason or "ended")
                if self._finish_reason == "length":
                    if not self.requests[-1].generated:  # nothing fits: asking again would loop
                        raise RemoteError(
                            f"{self.endpoint.url} stopped at its length limit before any token: "
                            f"the context ({len(context):,} tokens) may exceed its window"
                        )
                    self._open(context)  # its own cap: go on from the context as it is
                    first = True
                    continue
                self._pending.append((self.stop_ids[0], None, None))
                if self._finish_reason != "stop":  # "stop" with no stop strings sent: it sampled end of turn
                    self._warn(
                        "synthesized",
                        f"the server ended its stream ({self._finish_reason or 'no reason'}) "
                        f"without an end-of-turn token: the harness appends "
                        f"{self.tokenizer.token_text(self.stop_ids[0])!r}",
                    )
        token, prob, top = self._pending.pop(0)
        if self._stream is not None:
            self._current.generated += 1
        self._seen.append(token)
        step.token, step.prob, step.top = token, prob, top
        if first:
            cached = self._current.cached
            step.cached = cached if cached is not None else self._expected
            step.computed = len(context) - step.cached
        else:
            step.computed, step.cached = 1, len(context) - 1
        return step

    def explain(self, step: Step, n: int) -> tuple[float | None, list[tuple[int, float]]]:
        return step.prob, (step.top or [])[:n]

    def stop(self) -> None:
        """The harness ended the segment: hang up, so the server stops generating.

        A stream whose server has already finished (the finish reason came with
        its last token) is read to its end first: vLLM sends the cached count
        (`usage.prompt_tokens_details`) only in the chunk after that.
        """
        if self._stream is None:
            return
        if self._finish_reason is not None:
            try:
                for _ in range(8):  # the usage chunk and [DONE]; a server sending more is cut off
                    if not self._read():
                        break
            except RemoteError:
                pass  # the counts are a report: a stream cut after its last token loses only them
        self._finish("closed")

    # -- requests ----------------------------------------------------------------------------------

    def _body(self, context: list[int], shape: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "stream": True,
            # usage and timings with every chunk: a stream hung up early still says what the server cached
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "timings_per_token": True,
            "cache_prompt": True,  # llama.cpp's server: keep the prompt's KV for the next request
            "return_token_ids": True,  # vLLM: ids of the prompt and of each streamed token
            "skip_special_tokens": False,  # vLLM: the end-of-turn token's text too
            "prompt": list(context) if shape == "ids" else self.tokenizer.decode(context),
        }
        if self.logprobs:
            body["logprobs"] = self.top
        sampler = self.sampler
        if sampler is not None:
            # every setting sent, the neutral ones too: servers' own defaults differ (llama-cpp-python's
            # server samples with top-k 40, top-p 0.95, min-p 0.05 and a repetition penalty of 1.1 unless told)
            body.update(
                temperature=sampler.temperature,
                top_p=sampler.top_p,
                min_p=sampler.min_p,
                top_k=sampler.top_k or 0,  # 0: off, for vLLM and llama.cpp alike
                repeat_penalty=1.0,
                repetition_penalty=1.0,
            )  # llama.cpp's name, vLLM's name
            if sampler.seed is not None:
                body["seed"] = sampler.seed
        body.update(self.extra)
        return body

    def _open(self, context: list[int]) -> None:
        started = time.perf_counter()
        checked = None
        while True:
            shape = self.shapes[0]
            if shape == "text" and self.check_text and checked is None:
                checked = self._check_text(context)  # before the stream: a server may serve one at a time
            try:
                self._stream = self.endpoint.open(self._body(context, shape))
                self._accepted = True
                break
            except Answered as e:
                # until one request went through, a refusal (a 4xx, or the 500 of a server whose validation
                # fails loudly) gets the simpler request: text for token ids, then no logprobs; never silently
                if self._accepted or e.status not in (400, 422, 500):  # 404, 401...: not the request's shape
                    raise
                if shape == "ids" and len(self.shapes) > 1:
                    self.shapes.pop(0)
                    self._note(f"the server refused a token-id prompt, sending text from now on ({e})")
                elif self.logprobs:
                    self.logprobs = False
                    self._note(f"the server refused logprobs, asking without them ({e})")
                else:
                    raise
        self._chunks = self._stream.chunks()
        self._expected = common_prefix_len(self._last, context)
        self._last = list(context)
        self._seen = self._last  # what the server computed: the prompt, then each token
        self._finish_reason = None
        self._current = Request(
            url=self.endpoint.url,
            sent=shape,
            prompt=len(context),
            cached=None,
            server_prompt=checked,
            generated=0,
            finish="",
            seconds=0.0,
        )
        self._started = started
        self._counts = [0, 0]  # (ids this stream gave, tokens the server said it sent)
        self._counted = False  # the server said how many tokens some chunk held

    def _finish(self, how: str) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
        # tokens a chunk held past where the harness stopped (a server streams several a chunk when its
        # client reads slower than it generates): the context never took them, so the next request must not
        self._pending.clear()
        request = self._current
        request.finish = how
        request.seconds = round(time.perf_counter() - self._started, 4)
        if request.sent == "text" and not self._counted and request.generated:
            self._warn(
                "unchecked",
                "the server streams text and reports no token counts: the ids the harness "
                "appended could not be checked against the server's tokens",
            )
        self.requests.append(request)
        if self.emit is not None:
            self.emit(request)

    def _read(self) -> bool:
        """Read chunks until one gives tokens; False when the stream ended."""
        try:
            chunk = next(self._chunks, None)
        except RemoteError:
            stream, self._stream = self._stream, None
            if stream is not None:
                stream.close()
            raise
        if chunk is None:
            return False
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices:  # else a usage-only chunk
            choice = choices[0]
            if not isinstance(choice, dict):
                raise RemoteError(f"{self.endpoint.url} sent a choice that is not an object")
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])[:40]
            self._pending.extend(self._tokens(choice))
        self._usage(chunk)  # after the chunk's tokens: its counts include them
        return True

    def _usage(self, chunk: dict) -> None:
        """The server's counts: prompt tokens, and those its cache served."""
        request = self._current
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                request.cached = details["cached_tokens"]
            if isinstance(usage.get("prompt_tokens"), int):
                request.server_prompt = usage["prompt_tokens"]
                self._check_prompt(usage["prompt_tokens"])
            if isinstance(usage.get("completion_tokens"), int):
                self._check_generated(usage["completion_tokens"])
        timings = chunk.get("timings")
        if isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
            request.cached = timings["cache_n"]
        if isinstance(chunk.get("tokens_cached"), int):
            request.cached = chunk["tokens_cached"]
        ids = chunk.get("prompt_token_ids")
        if (
            ids is None
            and isinstance(chunk.get("choices"), list)
            and chunk["choices"]
            and isinstance(chunk["choices"][0], dict)
        ):
            ids = chunk["choices"][0].get("prompt_token_ids")
        if isinstance(ids, list) and ids and ids != self._last[: len(ids)] and ids[1:] != self._last[: len(ids) - 1]:
            self._warn(
                "prompt ids",
                f"the server's prompt ids differ from the context's at position {common_prefix_len(ids, self._last)}",
            )

    def _check_text(self, context: list[int]) -> int | None:
        """A text prompt: do the server's tokens for it equal the context's ids? (its tokenize endpoint)
        Returns how many tokens the server reads it as, or None where it cannot say."""
        tokens = self.endpoint.tokenize(self.tokenizer.decode(context), self.model)
        if tokens is None:
            self._warn(
                "untokenized",
                "the server takes text prompts and has no tokenize endpoint: whether it "
                "reads the prompt as the context's ids could not be checked",
            )
            return None
        if tokens != context and tokens[1:] != context:  # [1:]: a BOS the server adds
            at = common_prefix_len(tokens, context)
            self.mismatches += 1
            self._warn(
                "retokenized",
                f"the server reads the text prompt as other tokens than the context's "
                f"from position {at} of {len(context)} ({len(tokens)} tokens against "
                f"{len(context)}): its cache cannot serve what follows",
            )
        return len(tokens)

    def _check_prompt(self, count: int) -> None:
        n = self._current.prompt
        if self._current.sent == "text" and count not in (n, n + 1):  # + 1: a BOS the server adds
            self._warn(
                "prompt count",
                f"the server read the text prompt as {count} tokens, the context holds "
                f"{n}: its tokens are not the harness's, so its cache may not match",
            )

    def _check_generated(self, count: int) -> None:
        self._counted = True
        given = self._current.generated + len(self._pending)
        if count != given:
            self._warn("count", f"the server reports {count} generated tokens, the harness appended {given}")

    # -- tokens ------------------------------------------------------------------------------------

    def _tokens(self, choice: dict) -> list[tuple[int, float | None, list[tuple[int, float]] | None]]:
        """(id, probability, top) for each token of a chunk, ids as the server gave them where it did."""
        import math

        logprobs = _of(choice.get("logprobs"), dict) or {}
        content = _of(logprobs.get("content"), list)
        ids = choice.get("token_ids")
        if content is not None:  # llama.cpp: ids with their top logprobs
            out = []
            for entry in content:
                if not isinstance(entry, dict) or not isinstance(entry.get("id"), int):
                    raise RemoteError(f"{self.endpoint.url} sent a logprobs entry without a token id")
                top = [
                    (t["id"], math.exp(t["logprob"]))
                    for t in entry.get("top_logprobs") or ()
                    if isinstance(t, dict) and isinstance(t.get("id"), int) and _number(t.get("logprob"))
                ]
                lp = entry.get("logprob")
                out.append((self._id(entry["id"]), math.exp(lp) if _number(lp) else None, top or None))
            self._counted = True
            return out
        texts = _of(logprobs.get("tokens"), list)
        probs = _of(logprobs.get("token_logprobs"), list) or []
        tops = _of(logprobs.get("top_logprobs"), list) or []
        if isinstance(ids, list):  # vLLM: return_token_ids
            tokens = [self._id(t) for t in ids]
            self._counted = True
        elif texts is not None and all(isinstance(t, str) and t.startswith("token_id:") for t in texts):
            tokens = [self._id(_token_id(t)) for t in texts]  # vLLM: return_tokens_as_token_ids
            self._counted = True
        else:  # text only: match pieces to the vocabulary
            pieces = (
                texts if texts is not None and all(isinstance(t, str) for t in texts) else [choice.get("text") or ""]
            )
            tokens = []
            for piece in pieces:
                tokens += self._from_text(piece)
            if texts is not None:
                self._counted = True
                lost = sum(piece == "" for piece in texts)
                if lost:
                    self._warn(
                        "lost",
                        "the server streamed token(s) with no text of their own (part of a "
                        "character, which a text-only server drops): the context lacks them, "
                        "so it differs from what the server generated",
                    )
                elif len(tokens) != len(texts):
                    self._warn(
                        "pieces",
                        f"the server sent {len(texts)} token(s) as {''.join(texts)!r}; "
                        f"encoding that text gives {len(tokens)}: the context's ids may "
                        f"differ from the server's",
                    )
        out = []
        for i, token in enumerate(tokens):
            lp = probs[i] if i < len(probs) else None
            top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
            ranked = sorted(
                ((self._lookup(k), math.exp(v)) for k, v in top.items() if _number(v)), key=lambda kv: -kv[1]
            )
            out.append(
                (token, math.exp(lp) if _number(lp) else None, [(t, p) for t, p in ranked if t is not None] or None)
            )
        return out

    def _id(self, token: Any) -> int:
        if not isinstance(token, int) or isinstance(token, bool) or not 0 <= token < self.tokenizer.vocab_size:
            raise RemoteError(f"{self.endpoint.url} sent a token id outside the vocabulary: {str(token)[:40]}")
        return token

    def _lookup(self, piece: str) -> int | None:
        """The id whose text is exactly `piece` (a special token's, or a token's bytes), or None."""
        if piece.startswith("token_id:"):
            try:
                return self._id(_token_id(piece))
            except RemoteError:
                return None
        if self._by_bytes is None:
            tok = self.tokenizer
            table: dict[bytes, int] = {}
            for i in range(tok.vocab_size - 1, -1, -1):  # the lowest id wins a tie
                data = tok.token_bytes(i)
                if data:
                    table[data] = i
            for text, i in tok.special_tokens.items():
                table[text.encode()] = i
            self._by_bytes = table
        return self._by_bytes.get(piece.encode("utf-8"))

    def _from_text(self, piece: str) -> list[int]:
        if not piece:
            return []
        one = self._lookup(piece)
        if one is not None:
            return [one]
        return self.tokenizer.encode_markup(piece)

    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self._note(message)

    def _note(self, message: str) -> None:
        if self.emit is not None:
            self.emit(Notice(source="openai", message=message))


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _of(value: Any, kind: type[T]) -> T | None:
    """`value` where it is a `kind`, else None: a field of a server's JSON as the type it should have."""
    return value if isinstance(value, kind) else None


def _token_id(text: str) -> int:
    try:
        return int(text[len("token_id:") :])
    except ValueError:
        raise RemoteError(f"a token named {text[:40]!r} is not token_id:N") from None


def load_openai(
    url: str,
    model: str,
    tokenizer_path: str,
    *,
    syntax: str | None = None,
    max_tokens: int = 4096,
    timeout: float = 60.0,
    prompt: str = "auto",
    top: int = DEFAULT_TOP,
    extra: dict[str, Any] | None = None,
):
    """The bundle: the chat format and tokenizer from local files, tokens from the server at `url`."""
    from decodeloop.models.hf import load_tokenizer

    endpoint = Endpoint(url, timeout=timeout)
    bundle = load_tokenizer(tokenizer_path, syntax=syntax)
    stop_ids = bundle.chat.stop_ids

    def make_engine(sampler, processors):
        if processors:
            raise ValueError(
                "an OpenAI-compatible server samples for itself: logits processors "
                "(--repetition-penalty, --constrain) cannot run on its logits"
            )
        return OpenAIEngine(
            endpoint,
            model,
            bundle.tokenizer,
            sampler=sampler,
            stop_ids=stop_ids,
            max_tokens=max_tokens,
            top=top,
            prompt=prompt,
            extra=extra,
        )

    bundle.name = f"openai:{model}"
    bundle.make_engine = make_engine
    bundle.info = {
        "url": url,
        "model": model,
        "tokenizer": bundle.info.get("path"),
        "vocab": bundle.info.get("vocab"),
        "template tools": bundle.info.get("template tools"),
    }
    return bundle


__all__ = ["OpenAIEngine", "RemoteError", "load_openai"]
