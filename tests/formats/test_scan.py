"""The scanners formats find a span's end with: the same end however the text is cut."""

from __future__ import annotations

import pytest

from decodeloop.formats.calls.scan import CloserScanner, ValueScanner, outside_strings

SPAN = '{"text": "a </end> b"} </end> after'
END = SPAN.index("</end> after") + len("</end>")


def cuts(text: str):
    yield [text]
    yield list(text)
    yield [text[i : i + 3] for i in range(0, len(text), 3)]
    yield [text[i : i + 7] for i in range(0, len(text), 7)]


def end_of(scanner, pieces) -> int | None:
    consumed = 0
    for piece in pieces:
        at = scanner.feed(piece)
        if at is not None:
            return consumed + at
        consumed += len(piece)
    return None


@pytest.mark.parametrize("pieces", list(cuts(SPAN)))
def test_a_closer_inside_a_string_does_not_end_the_span(pieces):
    assert end_of(CloserScanner("</end>", outside_strings), pieces) == END


def test_without_a_test_the_first_closer_ends_it():
    assert end_of(CloserScanner("</end>"), [SPAN]) == SPAN.index("</end>") + len("</end>")


@pytest.mark.parametrize("pieces", list(cuts("  [f(a=\"x]\"), g(b='y)')] rest")))
def test_a_value_ends_where_its_brackets_close(pieces):
    text = "".join(pieces)
    assert end_of(ValueScanner(quotes="\"'"), pieces) == text.index("] rest") + 1


def test_a_span_that_is_not_a_value_is_abandoned_at_its_first_character():
    scanner = ValueScanner()
    assert scanner.feed("  hello") == 2 and scanner.abandoned


def test_outside_strings_follows_escapes():
    assert outside_strings('{"a": "b\\"c"}') and not outside_strings('{"a": "b\\"}')
