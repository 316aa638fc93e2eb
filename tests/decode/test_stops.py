"""Stops: eos, stop strings held back and never shown, call spans, the token cap, segments."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decodeloop.decode.stops import Stops, StopSettings, Verdict
from decodeloop.formats.calls.base import Call, CallShape, ParsedCall, SpanText
from decodeloop.formats.calls.scan import CloserScanner
from decodeloop.formats.calls.shapes import CANONICAL

EOS = 0
TEXT = 1  # any token id that is not end-of-sequence


class BracketScanner:
    """A call closes at the first "]" outside double quotes; a backslash escapes the next character."""

    def __init__(self):
        self.length = 0
        self._quoted = False
        self._escaped = False

    def feed(self, piece):
        for index, char in enumerate(piece):
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == '"':
                self._quoted = not self._quoted
            elif char == "]" and not self._quoted:
                self.length += index + 1
                return index + 1
        self.length += len(piece)
        return None


class ToySyntax:
    """A call format of one shape, opened by `opener` (None: no calls) and closed where `scanner` says, its span
    kept as written (not parsed); and reasoning markers."""

    def __init__(self, opener=None, scanner=BracketScanner, reasoning=()):
        def read(span, closed, tools):
            return [ParsedCall(span, CANONICAL)]

        self.shapes = () if opener is None else (CallShape(CANONICAL, opener, scanner, read),)
        self.reasoning = reasoning


def make(stop_strings=(), opener=None, reasoning=(), reasoning_open=False, **settings):
    settings.setdefault("max_tokens", 10_000)
    return Stops(
        ToySyntax(opener, reasoning=reasoning),
        eos_ids={EOS},
        settings=StopSettings(stop_strings=stop_strings, **settings),
        reasoning_open=reasoning_open,
    )


def feed(stops, pieces, eos=False):
    """Check each piece as one token (then an eos token if asked); stop at the first reason."""
    verdicts = []
    for piece in list(pieces) + ([None] if eos else []):
        verdict = stops.check(EOS, "") if piece is None else stops.check(TEXT, piece)
        verdicts.append(verdict)
        if verdict.reason is not None:
            break
    return verdicts


def released(verdicts):
    return "".join(v.delta for v in verdicts)


def chunkings(text, max_pieces=None):
    """Every way to cut text into non-empty consecutive pieces."""
    for cuts in range(len(text)):
        if max_pieces is not None and cuts + 1 > max_pieces:
            break
        for points in itertools.combinations(range(1, len(text)), cuts):
            bounds = (0, *points, len(text))
            yield [text[a:b] for a, b in zip(bounds, bounds[1:])]


def assert_never_shows(verdicts, stop_strings):
    shown = ""
    for verdict in verdicts:
        shown += verdict.delta
        for stop in stop_strings:
            assert stop not in shown


# --- stop strings -------------------------------------------------------------


def test_stop_string_one_char_per_token():
    stops = make(["\n\nUser:"])
    text = "Hello there.\n\nUser: hi"
    verdicts = feed(stops, text)
    assert verdicts[-1].reason == "stop_sequence"
    assert released(verdicts) == "Hello there."
    assert len(verdicts) == len("Hello there.\n\nUser:")  # stops on the token that completes it
    assert_never_shows(verdicts, ["\n\nUser:"])
    # Nothing of the stop string is shown while it is being written.
    assert all("\n" not in v.delta for v in verdicts)


def test_stop_string_split_in_every_way():
    stop = "\n\nUser:"
    text = "ok\n\nUser:x"
    expected = "ok"
    count = 0
    for pieces in chunkings(text):
        verdicts = feed(make([stop]), pieces)
        assert verdicts[-1].reason == "stop_sequence", pieces
        assert released(verdicts) == expected, pieces
        assert_never_shows(verdicts, [stop])
        count += 1
    assert count == 2 ** (len(text) - 1)


@pytest.mark.parametrize(
    "split", list(itertools.combinations(range(1, 7), 1)) + list(itertools.combinations(range(1, 7), 2))
)
def test_stop_string_split_across_two_or_three_tokens(split):
    stop = "\n\nUser:"
    bounds = (0, *split, len(stop))
    pieces = ["Hi"] + [stop[a:b] for a, b in zip(bounds, bounds[1:])] + [" more"]
    verdicts = feed(make([stop]), pieces)
    assert [v.reason for v in verdicts][-1] == "stop_sequence"
    assert len(verdicts) == len(bounds)  # "Hi" plus each part of the stop string
    assert released(verdicts) == "Hi"
    assert all(v.delta == "" for v in verdicts[1:])


def test_false_start_is_released_in_full():
    stop = "\n\nUser:"
    text = "\n\nUse it wisely.\n\nUs"
    verdicts = feed(make([stop]), text, eos=True)
    assert verdicts[-1].reason == "eos"
    assert released(verdicts) == text
    assert verdicts[-1].delta == "\n\nUs"  # the held tail comes out at eos
    assert max(len(v.held) for v in verdicts) == len("\n\nUse")


def test_false_start_then_real_stop():
    stop = "\n\nUser:"
    for pieces in chunkings("a\n\nUse\n\nUser:", max_pieces=3):
        verdicts = feed(make([stop]), pieces)
        assert verdicts[-1].reason == "stop_sequence"
        assert released(verdicts) == "a\n\nUse"


def test_overlapping_stop_strings_first_completed_wins():
    # "bc" is complete before "abcd" could be; cutting the text differently must not change that.
    for pieces in chunkings("xabcd"):
        verdicts = feed(make(["abcd", "bc"]), pieces)
        assert verdicts[-1].reason == "stop_sequence"
        assert released(verdicts) == "xa"
    # Completed together: the one that started first wins.
    for pieces in chunkings("xabc"):
        assert released(feed(make(["bc", "abc"]), pieces)) == "x"


def test_empty_piece_changes_nothing():
    stops = make(["END"])
    verdicts = feed(stops, ["E", "", "N", "", "D"])
    assert verdicts[-1].reason == "stop_sequence"
    assert released(verdicts) == ""


def test_no_stop_strings_streams_immediately():
    stops = make()
    assert [stops.check(TEXT, c).delta for c in "abc"] == ["a", "b", "c"]


# --- eos --------------------------------------------------------------------------


def test_eos_releases_held_text():
    stops = make(["STOP"])
    verdicts = feed(stops, ["hi ", "ST"], eos=True)
    assert [v.reason for v in verdicts] == [None, None, "eos"]
    assert [v.delta for v in verdicts] == ["hi ", "", "ST"]
    assert verdicts[-1].held == ""


def test_any_eos_id_ends_the_turn_and_its_piece_is_ignored():
    stops = Stops(eos_ids={0, 3}, settings=StopSettings(stop_strings=["X"]))
    verdict = stops.check(3, "<|user|>")
    assert verdict.reason == "eos" and verdict.delta == "" and verdict.count == 1


# --- tool calls -----------------------------------------------------------------------


def test_call_in_one_piece_with_text_around():
    stops = make(opener="[call ")
    verdicts = feed(stops, ["ok [call f x=1]tail"])
    (verdict,) = verdicts
    assert verdict.reason == "tool_call"
    assert verdict.delta == "ok "
    assert verdict.call_text == "[call f x=1]"
    assert verdict.in_call


def test_opener_split_across_tokens():
    for pieces in chunkings("Ok. [call weather c=P]", max_pieces=4):
        verdicts = feed(make(["\n\nUser:"], opener="[call "), pieces)
        assert verdicts[-1].reason == "tool_call", pieces
        assert verdicts[-1].call_text == "[call weather c=P]"
        assert released(verdicts) == "Ok. "
        assert all("[" not in v.delta for v in verdicts)


def test_call_states_per_token():
    stops = make(opener="[call ")
    verdicts = feed(stops, ["A", "[", "ca", "ll ", "f", "]"])
    assert [v.delta for v in verdicts] == ["A", "", "", "", "", ""]
    assert [v.held for v in verdicts] == ["", "[", "[ca", "", "", ""]
    assert [v.in_call for v in verdicts] == [False, False, False, True, True, True]
    assert [v.reason for v in verdicts] == [None] * 5 + ["tool_call"]


def test_bracket_inside_quotes_does_not_close():
    text = '[call search q="a]b" n=2]'
    for pieces in chunkings(text, max_pieces=3):
        verdicts = feed(make(opener="[call "), pieces)
        assert verdicts[-1].reason == "tool_call"
        assert verdicts[-1].call_text == text


def test_escaped_quote_inside_quotes():
    text = r'[call echo s="say \"]\" now"]'
    verdicts = feed(make(opener="[call "), text)
    assert verdicts[-1].reason == "tool_call"
    assert verdicts[-1].call_text == text


def test_text_after_the_closer_is_dropped():
    verdicts = feed(make(opener="[call "), ["[call f", "] and more"])
    assert verdicts[-1].call_text == "[call f]"
    assert released(verdicts) == ""


def test_stop_strings_inside_a_call_are_call_text():
    verdicts = feed(make(["\n\nUser:"], opener="[call "), ['[call f s="\n\nUser:"]'])
    assert verdicts[-1].reason == "tool_call"
    assert verdicts[-1].call_text == '[call f s="\n\nUser:"]'


def test_eos_inside_a_call_hands_over_the_partial_call():
    verdicts = feed(make(opener="[call "), ["Sure. [call f x=", "1"], eos=True)
    assert verdicts[-1].reason == "tool_call"
    assert verdicts[-1].call_text == "[call f x=1"
    assert verdicts[-1].in_call
    assert released(verdicts) == "Sure. "


def test_over_long_call_is_an_error_that_names_the_cap():
    stops = make(opener="[call ", max_call_chars=20)
    verdicts = feed(stops, ["[call f "] + ["x"] * 30)
    assert verdicts[-1].reason == "tool_call" and verdicts[-1].count == 14  # stopped once past the cap
    [call] = verdicts[-1].parsed
    assert call.call is None and "longer than the 20 characters a call may have (max_call_chars)" in str(call.error)
    assert call.text == "[call f xxxxxxxxxxxx"  # what is kept of it: the cap's worth


@pytest.mark.parametrize("pieces", [["[call f x=" + "y" * 30 + "]"], ["[call f x="] + ["y"] * 30 + ["]"]])
def test_a_call_over_the_cap_fails_alike_whole_or_in_pieces(pieces):
    stops = make(opener="[call ", max_call_chars=20)
    [call] = feed(stops, pieces)[-1].parsed
    assert call.call is None and "max_call_chars" in str(call.error)


def test_earliest_of_stop_string_and_opener_wins():
    stop_first = feed(make(["END"], opener="[call "), ["a END [call f]"])
    assert stop_first[-1].reason == "stop_sequence" and released(stop_first) == "a "
    call_first = feed(make(["END"], opener="[call "), ["a [call f] END"])
    assert call_first[-1].reason == "tool_call" and released(call_first) == "a "


def test_after_a_call_new_segment_starts_fresh():
    stops = make(["STOP"], opener="[call ", max_tokens=10)
    first = feed(stops, ["x ST", "[call f]"])  # "ST" was held when the call opened
    assert first[-1].reason == "tool_call"
    assert released(first) == "x ST"
    stops.new_segment()
    second = feed(stops, ["fine", "ST"], eos=True)
    assert released(second) == "fineST"
    assert second[-1].count == 5  # the count runs on across segments


def test_new_segment_discards_a_call_in_progress_and_held_text():
    stops = make(["STOP"], opener="[call ")
    feed(stops, ["[call f x="])
    assert stops.in_call
    stops.new_segment()
    assert not stops.in_call and stops.held == ""
    verdict = stops.check(TEXT, "plain")
    assert verdict.delta == "plain" and not verdict.in_call


def test_with_the_compact_syntax_scanner():
    calls = pytest.importorskip("decodeloop.formats.calls.compact")
    syntax = calls.CompactSyntax()
    stops = Stops(syntax, eos_ids={EOS})
    verdicts = feed(stops, ["I'll look. [ca", 'll search q="a]b', '" n=2]', " bye"])
    assert verdicts[-1].reason == "tool_call"
    assert verdicts[-1].call_text == '[call search q="a]b" n=2]'
    assert released(verdicts) == "I'll look. "


# --- max_tokens -------------------------------------------------------------------------


def test_max_tokens_flushes_held_text():
    stops = make(["STOP"], max_tokens=3)
    verdicts = feed(stops, ["a", "b", "ST", "c"])
    assert [v.reason for v in verdicts] == [None, None, "max_tokens"]
    assert released(verdicts) == "abST"
    assert verdicts[-1].held == "" and stops.held == ""


def test_max_tokens_drops_a_partial_call():
    stops = make(opener="[call ", max_tokens=3)
    verdicts = feed(stops, ["hi ", "[call f", " x=1"])
    assert verdicts[-1].reason == "max_tokens"
    assert verdicts[-1].call_text is None
    assert released(verdicts) == "hi "
    assert not stops.in_call


def test_other_reasons_win_over_max_tokens():
    stops = make(["END"], max_tokens=2)
    verdicts = feed(stops, ["a", "END"])
    assert verdicts[-1].reason == "stop_sequence"
    stops = make(max_tokens=1)
    assert stops.check(EOS, "").reason == "eos"


class MessageSyntax:
    """A toy format whose spans are messages: <msg>TEXT</msg> is text, <msg>call NAME</msg> a call."""

    shape = "msg"

    @staticmethod
    def read(span, closed, tools):
        body = span.removeprefix("<msg>").removesuffix("</msg>")
        if body.startswith("call "):
            return [ParsedCall(span, "msg", Call(body[5:], {}) if closed else None)]
        return [SpanText("content", body)]

    shapes = (CallShape("msg", "<msg>", lambda: CloserScanner("</msg>"), read, holds_text=True),)


def test_a_span_that_holds_text_is_bounded_by_the_token_cap_not_the_call_cap():
    stops = Stops(MessageSyntax(), eos_ids={EOS}, settings=StopSettings(max_call_chars=10, max_tokens=100))
    verdicts = feed(stops, ["<msg>", "a long message, longer than a call", "</msg>"], eos=True)
    assert released(verdicts) == "a long message, longer than a call"
    assert verdicts[-1].reason == "eos" and not verdicts[-1].warnings


def test_a_span_that_holds_text_keeps_it_at_the_token_cap_and_drops_its_call():
    stops = Stops(MessageSyntax(), eos_ids={EOS}, settings=StopSettings(max_tokens=3))
    verdicts = feed(stops, ["<msg>", "cut ", "here"])
    assert verdicts[-1].reason == "max_tokens" and released(verdicts) == "cut here"
    stops = Stops(MessageSyntax(), eos_ids={EOS}, settings=StopSettings(max_tokens=3))
    verdicts = feed(stops, ["<msg>", "call ", "f"])
    assert verdicts[-1].reason == "max_tokens" and not verdicts[-1].parsed and released(verdicts) == ""
    assert any("cut off a call" in w for w in verdicts[-1].warnings)


# --- configuration -------------------------------------------------------------------


def test_conditions_name_only_configured_checks():
    assert make(["x"], opener="[call ").conditions == ("eos", "stop_sequence", "tool_call", "max_tokens")
    assert make().conditions == ("eos", "max_tokens")
    assert Stops(eos_ids=(), settings=StopSettings(stop_strings=["x"])).conditions == ("stop_sequence", "max_tokens")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(stop_strings=["ok", ""]), "non-empty"),
        (dict(stop_strings="STOP"), "sequence of strings"),
        (dict(opener=""), "opener"),
        (dict(max_tokens=0), "max_tokens"),
        (dict(max_call_chars=0), "max_call_chars"),
        (dict(calls_in_reasoning="always"), "calls_in_reasoning"),
        (dict(reasoning=(("<think>", ""),)), "reasoning markers"),
    ],
)
def test_invalid_configuration_raises(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make(**kwargs)


def test_verdict_is_a_slotted_record():
    verdict = make().check(TEXT, "a")
    assert isinstance(verdict, Verdict)
    assert not hasattr(verdict, "__dict__")
    assert (verdict.reason, verdict.delta, verdict.call_text, verdict.held, verdict.in_call, verdict.count) == (
        None,
        "a",
        None,
        "",
        False,
        1,
    )


# --- work per token does not grow with the text -----------------------------------------------


class CountingSet(frozenset):
    lookups = 0

    def __contains__(self, item):
        CountingSet.lookups += 1
        return frozenset.__contains__(self, item)


def test_work_per_token_is_bounded_by_the_watched_strings():
    stop_strings = ["\n\nUser:", "</s>"]
    stops = make(stop_strings, opener="[call ", max_tokens=10**9)
    stops._prefixes = CountingSet(stops._prefixes)
    longest = max(len(s) for s in stop_strings + ["[call "])
    assert stops.max_held == longest - 1
    # Many false starts of every watched string, over a long stream.
    chunk = "text \n\nUse </ [cal \n\nUser </s [ca "
    tokens = 0
    for _ in range(2000):
        for char in chunk:
            before = CountingSet.lookups
            verdict = stops.check(TEXT, char)
            tokens += 1
            assert verdict.reason is None
            assert len(verdict.held) <= longest - 1
            # The suffix search looks at most at one suffix per possible held length.
            assert CountingSet.lookups - before <= longest - 1
    assert tokens == 2000 * len(chunk)


# --- properties ----------------------------------------------------------------------------

ALPHABET = "ab\n:["


def first_completed(text, watched):
    """(start, end, string) of the watched occurrence completed first; ties: earliest start, then list order."""
    best = None
    for string in watched:
        start = text.find(string)
        if start >= 0:
            key = (start + len(string), start)
            if best is None or key < best[0]:
                best = (key, string)
    if best is None:
        return None
    (end, start), string = best
    return start, end, string


@st.composite
def chunked_text(draw, alphabet=ALPHABET, max_len=40):
    text = draw(st.text(alphabet=alphabet, max_size=max_len))
    cuts = draw(st.sets(st.integers(min_value=1, max_value=max(len(text) - 1, 1)), max_size=len(text)))
    bounds = [0, *sorted(c for c in cuts if c < len(text)), len(text)]
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    # Sprinkle empty pieces (partial UTF-8 characters) in.
    empties = draw(st.lists(st.integers(min_value=0, max_value=len(pieces)), max_size=3))
    for at in sorted(empties, reverse=True):
        pieces.insert(at, "")
    return text, pieces


stop_lists = st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=4), min_size=1, max_size=3)


@settings(max_examples=400, deadline=None)
@given(chunked_text(), stop_lists)
def test_property_released_text_is_text_before_first_stop(case, stop_strings):
    text, pieces = case
    stops = make(stop_strings)
    longest = max(len(s) for s in stop_strings)
    shown = ""
    consumed = ""
    verdicts = []
    for piece in pieces + [None]:
        if piece is None:
            verdict = stops.check(EOS, "")
        else:
            consumed += piece
            verdict = stops.check(TEXT, piece)
        verdicts.append(verdict)
        shown += verdict.delta
        assert not any(stop in shown for stop in stop_strings)
        assert len(verdict.held) <= longest - 1
        if verdict.reason is not None:
            break
        # Everything seen is either shown or held, in order.
        assert shown + verdict.held == consumed
    hit = first_completed(text, stop_strings)
    if hit is None:
        assert verdicts[-1].reason == "eos"
        assert shown == text
    else:
        start, end, _ = hit
        assert verdicts[-1].reason == "stop_sequence"
        assert shown == text[:start]
        # It stopped on the token that completed the stop string, not later.
        assert len(consumed) >= end and len(consumed) - len(pieces[len(verdicts) - 1]) < end


@settings(max_examples=400, deadline=None)
@given(chunked_text(alphabet='ab:[]"', max_len=30), stop_lists.map(lambda ss: [s.replace("\n", "b") for s in ss]))
def test_property_calls_and_stops_together(case, stop_strings):
    text, pieces = case
    opener = "[a"
    stops = make(stop_strings, opener=opener)
    verdicts = feed(stops, pieces, eos=True)
    shown = released(verdicts)
    hit = first_completed(text, stop_strings + [opener])
    last = verdicts[-1]
    if hit is None:
        assert last.reason == "eos" and shown == text
        return
    start, end, string = hit
    assert shown == text[:start]
    if string != opener or string in stop_strings:
        assert last.reason == "stop_sequence"
        return
    assert last.reason == "tool_call"
    scanner = BracketScanner()
    close = scanner.feed(text[end:])
    expected = opener + (text[end:] if close is None else text[end : end + close])
    assert last.call_text == expected


# --- reasoning ------------------------------------------------------------------------------------------------

THINK_OR_ANSWER = (("<think>", "</think>"), ("<think>", "<answer>"))


@pytest.mark.parametrize("pieces", list(chunkings("plan, then<answer>the answer", max_pieces=3)))
def test_a_reasoning_block_ends_at_the_first_of_the_closers_its_opener_pairs_with(pieces):
    stops = make(reasoning=THINK_OR_ANSWER, reasoning_open=True)
    verdicts = feed(stops, pieces, eos=True)
    assert "".join(v.reasoning for v in verdicts) == "plan, then"
    assert released(verdicts) == "the answer"  # the closer itself is not shown


def test_the_closer_completed_first_ends_the_block_and_the_other_is_text_after_it():
    stops = make(reasoning=THINK_OR_ANSWER)
    verdicts = feed(stops, ["<think>plan</think>the <answer> is text"], eos=True)
    assert ("".join(v.reasoning for v in verdicts), released(verdicts)) == ("plan", "the <answer> is text")


def test_a_closer_paired_with_another_opener_does_not_end_the_block():
    stops = make(reasoning=(("<think>", "</think>"), ("<plan>", "<answer>")), reasoning_open=True)
    verdicts = feed(stops, ["a<answer>b</think>c"], eos=True)
    assert ("".join(v.reasoning for v in verdicts), released(verdicts)) == ("a<answer>b", "c")
