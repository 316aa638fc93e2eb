"""A scripted OpenAI-compatible /v1/completions server: answers from a fixed script, at once.

`python tests/servers/openai_replay.py SCRIPT.json [--port N] [--delay SECONDS]`
serves the script; it prints `listening on PORT` when ready. Standard library only.

The script is {"replies": [{"ids": [...], "texts": [...]}, ...]}: one reply per
assistant segment of a conversation, in order. A request gets the first reply
whose ids do not occur in its prompt yet (replies before it are the
conversation so far), so a conversation of a call, its result and an answer
is two replies, and every new conversation starts again at the first. Each
reply streams one token per chunk in vLLM's shape (`token_ids`, text,
continuous usage with `completion_tokens` so far and the prompt's length), then
`finish_reason: "stop"` and `[DONE]`. `--delay` sleeps that long before each
token: an engine that decodes every stream at the same rate however many are in
flight. A token-id prompt is required (a text prompt is refused with 400).

GET /stats gives {"requests", "tokens", "in_flight", "max_in_flight"}: how
many streams were open at once.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from json_reply import reply_json  # tests/servers/, this script's own folder


class Script:
    def __init__(self, replies: list[dict]) -> None:
        self.replies = [(list(r["ids"]), list(r.get("texts") or [""] * len(r["ids"]))) for r in replies]
        # the ids of each reply as text, so "does the prompt hold it" is one substring search
        self._keys = [_key(ids) for ids, _ in self.replies]

    def reply(self, prompt: list[int]) -> tuple[list[int], list[str]]:
        text = _key(prompt)
        for i, key in enumerate(self._keys):
            if key not in text:
                return self.replies[i]
        return self.replies[-1]


def _key(ids: list[int]) -> str:
    return "," + ",".join(map(str, ids)) + ","


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = self.tokens = self.in_flight = self.max_in_flight = 0

    def as_dict(self) -> dict:
        with self.lock:
            return {
                "requests": self.requests,
                "tokens": self.tokens,
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
            }


def handler(script: Script, stats: Stats, delay: float, model: str):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the answer ends when the connection closes

        def log_message(self, *args) -> None:
            pass

        def _json(self, status: int, body: dict) -> None:
            reply_json(self, status, body)

        def do_GET(self) -> None:
            if self.path == "/stats":
                self._json(200, stats.as_dict())
            elif self.path.rstrip("/") in ("/v1/models", "/models"):
                self._json(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            if not self.path.rstrip("/").endswith("/completions"):
                return self._json(404, {"error": {"message": "not found"}})
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                prompt = body["prompt"]
                assert isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)
            except (ValueError, KeyError, AssertionError, TypeError):
                return self._json(400, {"error": {"message": "this server takes a prompt of token ids"}})
            ids, texts = script.reply(prompt)
            with stats.lock:
                stats.requests += 1
                stats.in_flight += 1
                stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for n, (token, text) in enumerate(zip(ids, texts), 1):
                    if delay:
                        time.sleep(delay)
                    last = n == len(ids)
                    chunk = {
                        "id": "cmpl-scripted",
                        "object": "text_completion",
                        "model": model,
                        "choices": [
                            {
                                "index": 0,
                                "text": text,
                                "token_ids": [token],
                                "logprobs": None,
                                "finish_reason": "stop" if last else None,
                            }
                        ],
                        "usage": {
                            "prompt_tokens": len(prompt),
                            "completion_tokens": n,
                            "total_tokens": len(prompt) + n,
                        },
                    }
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    with stats.lock:
                        stats.tokens += 1
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client hung up: it stopped the segment itself
            finally:
                with stats.lock:
                    stats.in_flight -= 1

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the listen backlog: many episodes connect at once (the default, 5, resets some)


def serve(script: Script, port: int = 0, delay: float = 0.0, model: str = "scripted") -> ThreadingHTTPServer:
    """A started server (on a daemon thread); `server.server_address[1]` is its port."""
    stats = Stats()
    server = _Server(("127.0.0.1", port), handler(script, stats, delay, model))
    server.stats = stats
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--model", default="scripted")
    args = parser.parse_args()
    with open(args.script, encoding="utf-8") as f:
        script = Script(json.load(f)["replies"])
    server = serve(script, args.port, args.delay, args.model)
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
