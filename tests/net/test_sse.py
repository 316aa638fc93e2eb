"""The Server-Sent Events parser (net/sse.py) on its own: line endings split anywhere, fields, caps, linear cost.

The MCP transports and the remote engine read their streams through it; their own tests cover it on a real wire.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_http_faults import MAX_COPIES, MB, READ, CopyMeter

from decodeloop.net.sse import SseNotAField, SseParser, SseTooLarge


def events_of(*chunks: bytes) -> list[tuple[str, str, str | None, int | None]]:
    parser = SseParser()
    out = []
    for chunk in chunks:
        out += [(e.event, e.text, e.id, e.retry) for e in parser.feed(chunk)]
    return out


def test_sse_parser_line_endings_split_anywhere():
    stream = (
        b"\xef\xbb\xbfid: 1\r\nevent: note\r\ndata: a\r\ndata:b\r\n\r\n: comment\n\ndata: c\r\rretry: 250\ndata: d\n\n"
    )
    expected = [("note", "a\nb", "1", None), ("message", "c", "1", None), ("message", "d", "1", 250)]
    assert events_of(stream) == expected
    for size in (1, 2, 3, 7):  # every split point, CR and LF in different reads
        assert events_of(*[stream[i : i + size] for i in range(0, len(stream), size)]) == expected


def test_sse_parser_ignores_bad_fields_and_keeps_the_last_id():
    assert events_of(b"retry: soon\nid: a\0b\nfoo: bar\ndata\n\nid\ndata: x\n\n") == [
        ("message", "", None, None),
        ("message", "x", "", None),
    ]


def test_sse_parser_big_event_in_small_reads_is_linear():
    size = 20 * MB
    data = b"data: " + b"z" * size + b"\n\n"
    chunks = [data[i : i + READ] for i in range(0, len(data), READ)]
    del data
    parser = SseParser()
    events = []
    with CopyMeter() as meter:
        for chunk in chunks:
            meter.step()  # each feed is one read
            events += parser.feed(chunk)
    assert len(events) == 1 and events[0].data == b"z" * size
    assert meter.allocated < MAX_COPIES * size, f"{meter.allocated / size:.1f} copies of the event"


line_text = st.text(st.characters(blacklist_characters="\r\n\0", blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(line_text, max_size=3),
            st.one_of(st.none(), line_text),
            st.one_of(st.none(), line_text.filter(lambda t: t.strip() == t and t)),
        ),
        max_size=6,
    ),
    st.lists(st.sampled_from([b"\n", b"\r", b"\r\n"]), min_size=1, max_size=4),
    st.lists(st.integers(1, 50), max_size=30),
)
def test_sse_parser_property_any_split_any_line_ending(events, endings, cuts):
    stream, expected, last_id, k = bytearray(), [], None, 0

    def line(text: str) -> None:
        nonlocal k
        ending = endings[k % len(endings)]
        if not text and ending == b"\n" and stream.endswith(b"\r"):
            ending = b"\r\n"  # CR then LF would be one CRLF: the blank line would vanish
        stream.extend(text.encode() + ending)
        k += 1

    for data, event_id, kind in events:
        line(": a comment")
        if kind is not None:
            line(f"event: {kind}")
        if event_id is not None:
            line(f"id: {event_id}")
            last_id = event_id
        for text in data:
            line(f"data: {text}")
        line("")
        if data:
            expected.append((kind or "message", "\n".join(data), last_id, None))
    pieces, start = [], 0
    for cut in cuts:
        pieces.append(bytes(stream[start : start + cut]))
        start += cut
    pieces.append(bytes(stream[start:]))
    assert events_of(*pieces) == expected


def test_a_strict_parser_refuses_a_field_the_standard_does_not_define():
    parser = SseParser(strict=True)
    assert [e.text for e in parser.feed(b"event: x\nid: 1\nretry: soon\ndata: a\n\n")] == ["a"]
    with pytest.raises(SseNotAField) as info:
        parser.feed(b"<html>\n")
    assert info.value.line == b"<html>"
    assert SseParser().feed(b"<html>\ndata: b\n\n")[0].text == "b"  # the standard ignores it


def test_the_caps_name_what_they_cap():
    with pytest.raises(SseTooLarge, match=r"10-byte cap on one message \(max_message_bytes\)") as info:
        SseParser(10, cap_name="max_message_bytes").feed(b"data: 0123456789ab\n")
    assert (info.value.what, info.value.cap) == ("event", 10)
    with pytest.raises(SseTooLarge) as info:
        SseParser(max_line_bytes=8).feed(b"data: 0123")  # an unfinished line too
    assert (info.value.what, info.value.cap) == ("line", 8)
    parser = SseParser(max_line_bytes=8)
    assert [e.text for e in parser.feed(b"data: 01\ndata: 23\n\n")] == ["01\n23"]  # each line within it


def test_unfinished_hands_over_the_event_a_stream_ended_in():
    parser = SseParser()
    assert [e.text for e in parser.feed(b"data: a\n\ndata: b\ndata: c")] == ["a"]
    last = parser.unfinished()
    assert last is not None and last.text == "b\nc"
    assert parser.unfinished() is None  # and the parser starts over
    parser.feed(b"data: d\n")
    parser.finish()  # the standard's way: discarded
    assert parser.unfinished() is None
