"""A scripted OpenAI-compatible /v1/completions server, for the remote engine's tests.

Run as `python3 tests/servers/openai_scripted.py --mode MODE`; it listens on
127.0.0.1 (a free port) and prints the port on stdout. Its "model" is a script
over the lab's character tokenizer: the answer is chosen by how the prompt
ends (the weather question opens a call, the weather tool's result gets the
answer). After the call's `]` it keeps streaming filler slowly, so a client
that does not hang up would read it. It keeps a prefix cache as a server does
(the last prompt and what it generated) and reports what that cache served.

Modes, as real servers behave:
  vllm      token-id prompts; `token_ids` per chunk; `usage` with `prompt_tokens_details.cached_tokens`
  batched   vllm, four tokens a chunk (as vLLM streams when its client reads slower than it generates)
  llamacpp  token-id prompts; `logprobs.content` with ids; `timings.cache_n`; no end-of-turn token streamed
  text      refuses token-id prompts (422, as llama-cpp-python's server); text pieces with legacy logprobs;
            POST /extras/tokenize; textplain: the same, but it reads special tokens' names as plain text
  textonly  refuses token-id prompts and logprobs, has no tokenize endpoint; text only, no counts at all
  garbage   an event that is not JSON; cut: the stream ends without [DONE]; hang: silence after one token;
  error500  every request answers 500; badid: a token id outside the vocabulary; html: a 200 HTML page;
  full      every stream ends at once with finish_reason "length" (a context past the server's window)
GET /seen returns every request body, with `hung_up` (the client closed the stream before its end) and
`sent` (tokens streamed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from decodeloop.formats.lab import CharTokenizer

TOK = CharTokenizer()
QUESTION = "What's the weather in Polson, MT?"
FILLER = " and more text" * 40
SCRIPT = [  # (how the prompt ends, what the model writes)
    ("<|user|>" + QUESTION + "<|assistant|>", "[call get_weather city=Polson state=MT]" + FILLER),
    ("°F, overcast, humidity 53%, wind 21 mph SE<|assistant|>", "It is 33°F in Polson.<|eos|>"),
    ("<|assistant|>", "Hello.<|eos|>"),
]
SEEN: list[dict] = []
LOCK = threading.Lock()
CACHE: list[list[int]] = [[]]  # the server's KV cache: the last prompt and what it generated


def common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "vllm"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/seen":
            with LOCK:
                data = json.dumps(SEEN).encode()
            self._send(200, data)
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if self.path == "/extras/tokenize":  # llama-cpp-python's server has one; "textonly" stands for one without
            if self.mode not in ("text", "textplain"):
                return self._send(404, b'{"detail": "Not Found"}')
            return self._send(200, json.dumps({"tokens": self._read(body["input"])}).encode())
        record = {"body": body, "hung_up": False, "sent": 0}
        with LOCK:
            SEEN.append(record)
        mode = self.mode
        if mode == "error500":
            return self._send(500, b'{"error": {"message": "the model \\u001b[31mcrashed"}}')
        if mode == "html":
            return self._send(200, b"<html>hello</html>", "text/html")
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            if mode in ("text", "textonly", "textplain"):
                return self._send(422, b'{"detail": [{"msg": "Input should be a valid string"}]}')
            ids = prompt
        else:
            ids = self._read(prompt)
        if mode == "textonly" and body.get("logprobs") is not None:
            return self._send(400, b'{"error": {"message": "logprobs is not supported"}}')
        try:
            text = TOK.decode(ids)
        except ValueError:  # ids of another vocabulary: the last line of the script
            text = "<|assistant|>"
        reply = next(out for end, out in SCRIPT if text.endswith(end))
        tokens = TOK.encode_markup(reply)
        cached = common(CACHE[0], ids)
        if cached == len(ids):
            cached -= 1  # the last prompt position is computed again for its logits
        CACHE[0] = list(ids)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._stream(body, ids, tokens, cached, record)
        except (BrokenPipeError, ConnectionResetError):
            record["hung_up"] = True

    def _read(self, text: str) -> list[int]:
        """A text prompt's ids: "textplain" reads the names of special tokens as plain text."""
        return TOK.encode(text) if self.mode == "textplain" else TOK.encode_markup(text)

    def _event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _stream(self, body: dict, ids: list[int], tokens: list[int], cached: int, record: dict) -> None:
        mode = self.mode
        eos = TOK.eos_id
        if mode == "full":  # the context fills the server's window: it stops at once
            self._event(
                json.dumps(
                    {
                        "id": "c",
                        "object": "text_completion",
                        "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                    }
                )
            )
            self._event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        filler = False
        held: list[int] = []
        batch: list[tuple[int, str, dict]] = []  # "batched": the tokens of the chunk being gathered
        for i, token in enumerate(tokens):
            if mode == "llamacpp" and token == eos:
                break  # llama.cpp's server does not stream the end-of-generation token
            if mode in ("text", "textonly", "textplain") and token == eos:
                break
            if mode == "garbage" and i == 3:
                self._event("{not json")
                return
            if mode == "cut" and i == 3:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                self.close_connection = True
                return
            if mode == "hang" and i == 1:
                time.sleep(3600)
            piece = TOK.decode([token])
            if mode in ("text", "textplain"):  # one token per chunk, decoded alone: part of a character is lost
                piece = piece if TOK.is_special(token) else TOK.token_bytes(token).decode("utf-8", "ignore")
            elif mode == "textonly":  # tokens held until their text decodes: a chunk may hold several
                held.append(token)
                try:
                    piece = (
                        b"".join(TOK.token_bytes(t) for t in held).decode()
                        if not TOK.is_special(token)
                        else TOK.decode(held)
                    )
                except UnicodeDecodeError:
                    continue
                held.clear()
            filler = filler or TOK.decode(tokens[:i]).endswith("]")
            if filler:
                time.sleep(0.02)  # the filler after a call: slow, so a hang-up comes before its end
            top = {TOK.decode([token]): -0.1, "x": -3.0}
            choice: dict = {"index": 0, "text": piece, "finish_reason": None}
            chunk: dict = {"id": "c", "object": "text_completion", "choices": [choice]}
            if mode == "batched":
                batch.append((token, piece, top))
                if len(batch) < 4 and i + 1 < len(tokens):
                    continue
                choice["token_ids"] = [t for t, _, _ in batch]
                choice["text"] = "".join(p for _, p, _ in batch)
                choice["logprobs"] = {
                    "tokens": [p for _, p, _ in batch],
                    "token_logprobs": [-0.1] * len(batch),
                    "top_logprobs": [t for _, _, t in batch],
                }
                chunk["usage"] = {
                    "prompt_tokens": len(ids),
                    "completion_tokens": i + 1,
                    "total_tokens": 0,
                    "prompt_tokens_details": {"cached_tokens": cached},
                }
                CACHE[0].extend(t for t, _, _ in batch[:-1])
                batch.clear()
            elif mode in ("vllm", "badid", "hang", "garbage", "cut"):
                choice["token_ids"] = [10**9 if mode == "badid" else token]
                choice["logprobs"] = {"tokens": [piece], "token_logprobs": [-0.1], "top_logprobs": [top]}
                chunk["usage"] = {
                    "prompt_tokens": len(ids),
                    "completion_tokens": i + 1,
                    "total_tokens": 0,
                    "prompt_tokens_details": {"cached_tokens": cached},
                }
            elif mode == "llamacpp":
                choice["logprobs"] = {
                    "content": [
                        {
                            "id": token,
                            "token": piece,
                            "logprob": -0.1,
                            "top_logprobs": [
                                {"id": token, "token": piece, "logprob": -0.1},
                                {"id": TOK.encode("x")[0], "token": "x", "logprob": -3.0},
                            ],
                        }
                    ]
                }
                chunk["timings"] = {"cache_n": cached, "prompt_n": len(ids) - cached}
            elif mode in ("text", "textplain"):
                choice["logprobs"] = {
                    "tokens": [piece],
                    "token_logprobs": [-0.1],
                    "top_logprobs": [top],
                    "text_offset": [0],
                }
            self._event(json.dumps(chunk))
            record["sent"] = i + 1
            CACHE[0].append(token)
        final: dict = {
            "id": "c",
            "object": "text_completion",
            "choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
        }
        if mode in ("text", "textplain"):
            final["usage"] = {"prompt_tokens": len(ids), "completion_tokens": record["sent"]}
        self._event(json.dumps(final))
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="vllm")
    args = parser.parse_args()
    Handler.mode = args.mode
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
