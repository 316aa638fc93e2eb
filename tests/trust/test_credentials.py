"""text/credentials.py: what is held, the forms a held secret is found in, cuts that never keep part of one,
and the choke points that redact through it (the terminal escaping, the events' JSON form, cap_text, the HTTP
error preview, the admission into the context). The end-to-end cases, real servers echoing real requests to
the CLI, are in test_credential_echoes.py."""

from __future__ import annotations

import base64
import io
import json
import secrets
import urllib.parse

from conftest import Recorder

from decodeloop.events import Rpc, ToolReturned
from decodeloop.mcp.client import Tool
from decodeloop.mcp.transports.httpbase import PREVIEW_CHARS, preview
from decodeloop.text import credentials
from decodeloop.text.credentials import MIN_CHARS, Credentials, label
from decodeloop.text.untrusted import cap_text, quoted, visible_line
from decodeloop.trust.admit import admit_result, admit_tool
from decodeloop.trust.markers import Markers
from decodeloop.ui.jsonl import JsonlView


def fresh(*secrets_: str, what: str = "token of s") -> Credentials:
    held = Credentials()
    for secret in secrets_:
        held.hold(secret, what)
    return held


def test_nothing_held_changes_nothing():
    held = Credentials()
    text, value = "Authorization: Bearer abcdefgh12345678", {"a": ["Bearer abcdefgh12345678"]}
    assert held.redact(text) is text and held.redact_value(value) is value and not held.held
    assert held.redact(text, cut=True) is text and held.clip(text, 10) == text[:10]


def test_a_secret_is_found_as_written_and_as_a_server_may_escape_it():
    secret = "s3cr/t+tok=en"
    held = fresh(secret, what="access token of weather")
    mark = "[redacted: access token of weather]"
    for written in (
        f"Authorization: Bearer {secret}",
        "?t=" + urllib.parse.quote(secret, safe=""),  # %2F, %2B, %3D
        "?t=" + urllib.parse.quote(secret, safe="").lower(),
        json.dumps({"h": secret}).replace("/", "\\/"),  # PHP's JSON
        json.dumps({"h": secret}, ensure_ascii=True).replace("+", "\\u002b").replace("/", "\\u002F"),
        "<pre>" + secret.replace("/", "&#47;").replace("+", "&#x2B;").replace("=", "&#61") + "</pre>",
    ):
        shown = held.redact(written)
        assert mark in shown and "s3cr" not in shown, (written, shown)
    assert held.redact("s3cr/t+tok") == "s3cr/t+tok"  # only the whole secret, not a part of it
    assert held.redact_counted(f"{secret} and {secret}") == (f"{mark} and {mark}", [mark, mark])


def test_short_secrets_and_ordinary_headers_are_not_held():
    held = Credentials()
    held.hold("x" * (MIN_CHARS - 1), "short")
    held.hold_headers(
        {"Accept": "application/json", "User-Agent": "decodeloop/1.0", "Authorization": "Bearer t0ken"}, "s"
    )
    assert not held.held  # a 5-character token could not be told from ordinary text
    held.hold_headers({"Accept": "application/json", "Authorization": "Bearer " + "t" * MIN_CHARS}, "s")
    assert (
        held.redact("application/json; Bearer tttttttt")
        == "application/json; Bearer [redacted: Authorization header of s]"
    )


def test_credential_headers_and_their_parts():
    password = "p@ss:w%rd+1"
    basic = "Basic " + base64.b64encode(f"svc-client:{urllib.parse.quote_plus(password)}".encode()).decode()
    held = Credentials()
    held.hold_headers(
        {
            "Proxy-Authorization": basic,
            "Cookie": "theme=dark; session=0123456789abcdef",
            "X-Api-Key": "key-0123456789",
            "X-Request-Id": "req-0123456789",  # not a credential: its name says nothing of one
        },
        "search",
    )
    shown = held.redact(
        f"{basic[6:]} | svc-client:{urllib.parse.quote_plus(password)} | {password} | session=0123456789abcdef "
        "| theme=dark | key-0123456789 | req-0123456789"
    )
    assert shown == (
        "[redacted: Proxy-Authorization header of search] | svc-client:[redacted: Proxy-Authorization header of "
        "search] | [redacted: Proxy-Authorization header of search] | session=[redacted: Cookie header of search] "
        "| theme=dark | [redacted: X-Api-Key header of search] | req-0123456789"
    )


def test_a_cut_never_keeps_the_beginning_of_a_secret():
    secret = "tok_" + secrets.token_urlsafe(16)
    held = fresh(secret)
    text = "the header was: Bearer " + secret + " and more"
    for limit in range(len("the header was: Bearer ") + 4, len(text)):
        kept = held.clip(text, limit)
        assert secret[:4] not in kept and kept.startswith("the header was: Bearer "), (limit, kept)
        assert kept.endswith("[redacted: token of s]") or kept.endswith(" and more"[: limit - len(text) + 9])
    assert held.clip(text, 26) == "the header was: Bearer tok"  # three characters tell nothing
    assert held.redact("ends with tok_", cut=True) == "ends with [redacted: token of s]"
    assert held.redact("ends with tok_") == "ends with tok_"  # not cut: an ordinary word


def test_a_replaced_credential_keeps_its_last_two_values():
    held = Credentials()
    tokens = [f"access-token-{n:04d}" for n in range(5)]
    for token in tokens:
        held.hold(token, "access token", slot="oauth")
    held.hold("client-secret-0001", "client secret")
    assert [held.redact(t) for t in tokens] == tokens[:3] + ["[redacted: access token]"] * 2
    assert held.redact("client-secret-0001") == "[redacted: client secret]"


def test_a_marker_names_the_server_in_harmless_characters():
    assert label("access token", "weather") == "access token of weather"
    assert label("access token", "evil\x1b[2J<|eos|>\u202e") == "access token of evil__2J__eos___"
    assert label("private signing key", None) == "private signing key"


def test_every_choke_point_redacts_what_the_process_holds():
    secret = "bt-" + secrets.token_urlsafe(20)
    credentials.hold(secret, "Authorization header of echo")
    mark = "[redacted: Authorization header of echo]"
    echoed = f"Your request: Authorization: Bearer {secret}"
    # the terminal
    assert mark in visible_line(echoed) and mark in quoted(echoed) and secret not in quoted(echoed)
    # the events' JSON form, and the JSON Lines written from it
    event = Rpc("echo", "recv", {"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": echoed}})
    assert event.to_json()["message"]["error"]["message"] == f"Your request: Authorization: Bearer {mark}"
    assert event.message["error"]["message"] == echoed  # the event itself keeps what was sent

    out = io.StringIO()
    JsonlView(out)(ToolReturned("get_weather", [{"type": "text", "text": echoed}], False, echoed))
    assert secret not in out.getvalue() and out.getvalue().count(mark) == 2
    # cuts: the result cap and the HTTP error preview, each cutting inside the secret
    at = len("Your request: Authorization: Bearer ") + 10
    assert secret[:10] not in cap_text(echoed, at) and mark in cap_text(echoed, at)
    page = ("x" * (PREVIEW_CHARS - len("Bearer ") - 10) + f" Bearer {secret}").encode()
    assert secret[:8] not in preview(page) and preview(page).endswith(mark + "...")


def test_admission_redacts_and_says_so():
    secret = "bt-" + secrets.token_urlsafe(20)
    credentials.hold(secret, "access token of svc")
    mark = "[redacted: access token of svc]"
    events = Recorder()
    split = secret[:5] + "\u200b" + secret[5:]  # a secret invisible characters split is found once they are gone
    admitted = admit_result(f"{secret} then {split}", "the result of get_weather", events, None)
    assert admitted.text == f"{mark} then {mark}" and secret not in admitted.sent
    [*_, notice] = events.of("notice")
    assert notice.message == f"redacted 2 credential(s) from the result of get_weather: {mark}"
    tool = Tool("peek", f"Shows {secret}", {"type": "object", "properties": {"t": {"default": secret}}}, title=secret)
    shown = admit_tool(tool, events, Markers([]))
    assert (shown.title, shown.description, shown.input_schema["properties"]["t"]["default"]) == (
        mark,
        f"Shows {mark}",
        mark,
    )
    assert events.of("notice")[-1].message == f"redacted 3 credential(s) from the definition of peek: {mark}"
