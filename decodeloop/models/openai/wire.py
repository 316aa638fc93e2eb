"""An OpenAI-compatible `/v1/completions` endpoint on the wire: one streamed request at a time.

This module owns the bytes: the POST (http.client, standard library only), the
server-sent events of the answer (parsed by net/sse.py, strictly: a line that is
not server-sent events is an error), the timeouts, and turning every failure into
`RemoteError` with one line saying what happened: a refused connection, a
status other than 200, a body that is not JSON, a stream cut before `[DONE]`,
silence past the timeout. A status other than 200 is `Answered` (`Rejected`
for a 4xx), so the engine can try a simpler request (a text prompt where token
ids were refused: llama-cpp-python's server answers those with a 500). It knows nothing
of tokens, tokenizers or the loop; models/openai/engine.py does.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

from decodeloop.errors import RemoteError
from decodeloop.net.http import BadUrl, content_type, new_connection, shut, split_http_url
from decodeloop.net.sse import SseNotAField, SseParser, SseTooLarge
from decodeloop.text.untrusted import cap_text, visible_line

MAX_LINE = 4 << 20  # one line of the event stream (one chunk with its top logprobs)
READ_SIZE = 1 << 16  # what one read of the stream asks for: whatever has arrived, up to this
MAX_ERROR_BODY = 64_000  # what is read of a failed request's body, for its message


class Answered(RemoteError):
    """The server answered the request with a status other than 200."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Rejected(Answered):
    """The server refused the request (a 4xx status): its shape, not the server, is at fault."""


def completions_url(url: str) -> tuple[str, str, int | None, str]:
    """(scheme, host, port, path of /v1/completions) from a base URL (`http://host:8000` or `.../v1`)."""
    try:
        parts = split_http_url(url)
    except BadUrl as e:
        if e.part == "scheme":
            raise ValueError(
                f"not an http(s) URL: {url!r} (give the server's base URL, e.g. http://127.0.0.1:8000/v1)"
            ) from None
        if e.part == "port":
            raise ValueError(f"bad port in {url!r}: {e}") from None
        raise
    path = parts.path.rstrip("/")
    if path.endswith("/completions"):
        pass
    elif path.endswith("/v1"):
        path += "/completions"
    else:
        path += "/v1/completions"
    return parts.scheme, parts.hostname or "", parts.port, path


class Endpoint:
    """POST a completion request, read its answer as a stream of JSON chunks."""

    def __init__(self, url: str, *, timeout: float = 60.0, headers: dict[str, str] | None = None) -> None:
        self.url = url
        self.scheme, self.host, self.port, self.path = completions_url(url)
        self.timeout = timeout  # seconds to connect, and of silence while waiting for the next chunk
        self.headers = dict(headers or {})
        self._tokenize_at: str | None = None  # the tokenize endpoint that answered; "": none did

    def open(self, body: dict[str, Any]) -> Stream:
        """Send one request; the answer's status is checked before this returns."""
        conn = new_connection(self.scheme, self.host, self.port, self.timeout)
        where = f"{self.scheme}://{self.host}{f':{self.port}' if self.port else ''}{self.path}"
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **self.headers}
        try:
            conn.request("POST", self.path, body=data, headers=headers)
            response = conn.getresponse()
        except TimeoutError:
            conn.close()
            raise RemoteError(f"no answer from {where} within {self.timeout:g}s") from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise RemoteError(f"cannot reach {where}: {visible_line(str(e)) or type(e).__name__}") from None
        if response.status != 200:
            try:
                text = response.read(MAX_ERROR_BODY).decode("utf-8", "replace")
            except (OSError, http.client.HTTPException):
                text = ""
            conn.close()
            message = (
                f"{where} answered {response.status} {visible_line(response.reason or '')}: "
                f"{visible_line(cap_text(_error_message(text), 500, 'error'))}"
            )
            raise (Rejected if 400 <= response.status < 500 else Answered)(response.status, message)
        kind = content_type(response.getheader("Content-Type"))
        if kind not in ("text/event-stream", "application/json"):
            conn.close()
            raise RemoteError(
                f"{where} answered with {visible_line(kind[:80]) or 'no Content-Type'}, "
                "not an event stream: is this an OpenAI-compatible server?"
            )
        return Stream(conn, response, where, self.timeout, kind == "application/json")

    def tokenize(self, text: str, model: str | None = None) -> list[int] | None:
        """The server's own token ids for `text`, or None where it has no tokenize endpoint.

        llama-cpp-python's server: POST /extras/tokenize {"input"}; llama.cpp's server: POST /tokenize
        {"content"}. Either way the text's special-token names are read as special tokens, as a text
        prompt's are. The first endpoint that answers is remembered.
        """
        base = self.path[: -len("/completions")].removesuffix("/v1")
        tries = [
            (base + "/extras/tokenize", {"input": text, **({"model": model} if model else {})}),
            (base + "/tokenize", {"content": text, "add_special": False, "parse_special": True}),
        ]
        if self._tokenize_at is not None:
            tries = [t for t in tries if t[0] == self._tokenize_at]
        for path, body in tries:
            conn = new_connection(self.scheme, self.host, self.port, self.timeout)
            try:
                conn.request(
                    "POST",
                    path,
                    body=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json", **self.headers},
                )
                response = conn.getresponse()
                data = response.read(MAX_LINE * 4)
            except (OSError, http.client.HTTPException):
                return None
            finally:
                conn.close()
            if response.status != 200:
                continue
            try:
                tokens = json.loads(data).get("tokens")
            except (ValueError, AttributeError):
                continue
            if isinstance(tokens, list) and all(isinstance(t, int) for t in tokens):
                self._tokenize_at = path
                return tokens
        self._tokenize_at = ""  # none: do not ask again
        return None


def _error_message(text: str) -> str:
    """The message of an error body: OpenAI's {"error": {"message"}}, FastAPI's {"detail"}, else the text."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip() or "(no body)"
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data))
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])
        return json.dumps(error)[:2000]
    return text.strip()


class Stream:
    """The chunks of one streamed answer; `close` hangs up (the server stops generating)."""

    def __init__(
        self,
        conn: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
        where: str,
        timeout: float,
        whole: bool = False,
    ) -> None:
        self._conn, self._response, self.where, self.timeout = conn, response, where, timeout
        self.whole = whole  # a server that ignored stream: true sends one JSON body
        self.closed = False

    def chunks(self) -> Iterator[dict[str, Any]]:
        """Each event's JSON object, until `[DONE]`; RemoteError for anything else."""
        try:
            if self.whole:
                yield self._parse(self._response.read(MAX_LINE * 4).decode("utf-8", "replace"))
                return
            # strict: a body that is not an event stream at all is named at its first foreign line
            parser = SseParser(max_line_bytes=MAX_LINE, strict=True)
            while True:
                piece = self._response.read1(READ_SIZE)
                if not piece:
                    last = parser.unfinished()
                    if last is not None:  # an event not ended by a blank line
                        yield self._parse(last.text)
                    raise RemoteError(f"{self.where} closed the stream before [DONE]")
                for event in parser.feed(piece):
                    payload = event.text
                    if payload.strip() == "[DONE]":
                        return
                    yield self._parse(payload)
        except SseTooLarge as e:
            what = "an event line" if e.what == "line" else "an event"
            raise RemoteError(f"{self.where} sent {what} over {e.cap:,} bytes") from None
        except SseNotAField as e:
            text = e.line.decode("utf-8", "replace")
            raise RemoteError(
                f"{self.where} sent a line that is not server-sent events: {visible_line(cap_text(text, 200, 'line'))}"
            ) from None
        except TimeoutError:
            raise RemoteError(f"{self.where} sent nothing for {self.timeout:g}s mid-stream") from None
        except (OSError, http.client.HTTPException) as e:
            if self.closed:
                return
            raise RemoteError(f"{self.where} broke the stream: {visible_line(str(e)) or type(e).__name__}") from None

    def _parse(self, payload: str) -> dict[str, Any]:
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise RemoteError(
                f"{self.where} sent an event that is not JSON: {visible_line(cap_text(payload, 200, 'event'))}"
            ) from None
        if not isinstance(chunk, dict):
            raise RemoteError(f"{self.where} sent an event that is not a JSON object")
        if "error" in chunk and "choices" not in chunk:
            error = chunk["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise RemoteError(
                f"{self.where} reported an error mid-stream: {visible_line(cap_text(str(message), 500, 'error'))}"
            )
        return chunk

    def close(self) -> None:
        """Hang up: closing the socket tells the server to stop generating for this request."""
        if self.closed:
            return
        self.closed = True
        shut(self._conn.sock)  # close() alone may wait for the rest of a chunked body
        self._response.close()
        self._conn.close()


__all__ = ["Answered", "Endpoint", "Rejected", "RemoteError", "Stream", "completions_url"]
