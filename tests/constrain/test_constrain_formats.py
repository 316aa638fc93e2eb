"""--constrain in the families' own formats (formats/calls/form.py): on BPE-like vocabularies holding each format's
special tokens, random logits write calls that the format's own parser (its shapes, through parse_output) reads
as valid calls whose arguments satisfy the schema; `required` writes a call first; a model whose own choices are a
valid call is left alone; each call of a section is followed from its own opener; every mask equals walking each
token through the grammar; and the formats the grammar cannot express are refused with the reason."""

from __future__ import annotations

import random
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import ROOT, WEATHER
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_constrain import RandomLogits, lab_tools, tool_schemas
from test_constrain_bpe import PIECES, PieceTokenizer

from decodeloop.constrain.matchers import UNEXPRESSED, ByteMatcher, unsupported
from decodeloop.constrain.processor import CallConstraint
from decodeloop.constrain.token_matcher import TokenMatcher
from decodeloop.decode.bundle import ModelBundle
from decodeloop.decode.context import Context
from decodeloop.decode.engine import LocalEngine
from decodeloop.decode.loop import generate
from decodeloop.decode.parse import parse_output
from decodeloop.decode.stops import Stops, StopSettings
from decodeloop.events import Token as TokenEvent
from decodeloop.formats.calls.base import Call
from decodeloop.formats.calls.form import CallForm, Token
from decodeloop.formats.calls.formats import get_format
from decodeloop.formats.lab import SPECIALS as LAB_SPECIALS
from decodeloop.formats.lab import CharTokenizer, LabChat
from decodeloop.formats.tokenizer import StreamDecoder
from decodeloop.harness import Harness, TurnConfig
from decodeloop.sampling import Sampler
from decodeloop.sampling.processors import ProcessorState
from decodeloop.schema import check_value, validate_arguments
from decodeloop.tools.startup import ClientOptions, start_stdio_servers

CONSTRAINED = [
    "mistral",
    "mistral-v3",
    "mistral-think-text",
    "llama3-json",
    "deepseek-v3",
    "deepseek-v31",
    "kimi-k2",
    "harmony",
]
# pieces of the formats' own text, so that tokens cross their boundaries ('"}', "\n```", ":0")
FORMAT_PIECES = [
    "function",
    "functions.",
    "functions",
    ":0",
    "commentary",
    " to",
    "=",
    " json",
    "json",
    "```",
    "\n```json\n",
    "\n```",
    "parameters",
    '{"type": "',
    "\n{",
    "}\n",
    "} ;",
    ";",
    " [{",
]


def specials_of(syntax) -> list[str]:
    """The special tokens a format's vocabulary has: every token its form writes, and its shapes' markers."""
    form: CallForm = syntax.grammar
    found: list[str] = []
    for template in form.templates.values():
        found += [t for t in template.tokens() if t not in found]
    found += [p.text for p in form.required if isinstance(p, Token) and p.text not in found]
    for shape in syntax.shapes:
        for text in (shape.opener, shape.closer, *shape.markers):
            if len(text) > 1 and text[0] in "<[" and text not in found:
                found.append(text)
    return found


class FormatTokenizer(PieceTokenizer):
    """A PieceTokenizer (end-of-sequence, every byte, pieces) with special tokens: empty bytes, read by their text.
    The lab chat's markers are among them, so that LabChat can frame a Harness turn."""

    def __init__(self, pieces, specials) -> None:
        super().__init__(pieces)
        self.special_tokens = {LAB_SPECIALS[0]: self.eos_id}
        for text in [*LAB_SPECIALS[1:], *specials]:
            self.special_tokens[text] = len(self.table)
            self.table.append(b"")
        self.vocab_size = len(self.table)
        self._texts = {i: t for t, i in self.special_tokens.items()}

    def special(self, name: str) -> int:
        return self.special_tokens[name]

    def token_text(self, token: int) -> str:
        return self._texts.get(token) or self.table[token].decode("utf-8", "replace")

    def decode(self, ids) -> str:
        return "".join(self._texts.get(i) or self.table[i].decode("utf-8", "replace") for i in ids)

    def bytes_of(self, ids) -> bytes:
        """What token ids spell, special tokens as their text."""
        return b"".join(self._texts[i].encode("utf-8") if i in self._texts else self.table[i] for i in ids)

    def units(self, text: str | bytes) -> list[int]:
        """Text in which the special tokens' texts stand for their ids (a call as the model writes it), the rest
        by longest match."""
        data = text.encode("utf-8") if isinstance(text, str) else text
        texts = sorted((t.encode("utf-8") for t in self.special_tokens), key=len, reverse=True)
        out, i = [], 0
        while i < len(data):
            special = next((t for t in texts if data.startswith(t, i)), None)
            if special is not None:
                out.append(self.special_tokens[special.decode("utf-8")])
                i += len(special)
                continue
            for n in range(min(self._longest, len(data) - i), 0, -1):
                token = self._ids.get(data[i : i + n])
                if token is not None and not any(data.startswith(t, i + 1, i + n) for t in texts):
                    out.append(token)
                    i += n
                    break
        return out


class ScriptModel:
    """A model that means to write `script` (token ids): at each step its logits favour the next token of the
    script's rest, tokenized from where what is written so far stands; off the script, all logits are equal."""

    name = "script"

    def __init__(self, tokenizer: FormatTokenizer, script: list[int], prompt: int) -> None:
        self.tokenizer, self.prompt = tokenizer, prompt
        self.data = tokenizer.bytes_of(script)
        self.last_computed = 1

    def forward(self, context):
        logits = [0.0] * self.tokenizer.vocab_size
        written = self.tokenizer.bytes_of(context[self.prompt :])
        if self.data.startswith(written) and len(written) < len(self.data):
            logits[self.tokenizer.units(self.data[len(written) :])[0]] = 10.0
        return logits


def stops_for(syntax, tokenizer, tools, max_tokens):
    return Stops(
        syntax,
        eos_ids={tokenizer.eos_id},
        settings=StopSettings(max_tokens=max_tokens, max_call_chars=10**6),  # the format's own collect_calls
        specials={i: t for t, i in tokenizer.special_tokens.items()},
        tools={t.name: t.input_schema for t in tools},
    )


def format_turn(syntax, tools, tokenizer, model, *, mode="required", temperature=0.0, seed=0, max_tokens=400):
    """One turn through the real generate, Stops (the format's shapes) and the constraint: (verdict, constraint,
    the turn's token ids, its token events)."""
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=syntax, opener_id=None, closer_id=None)
    notices: list = []
    constraint = CallConstraint(bundle, lambda: tools, mode=mode, emit=notices.append, max_tokens=max_tokens)
    engine = LocalEngine(model, Sampler(temperature=temperature, seed=seed), [constraint])
    context = Context()
    context.extend(tokenizer.encode("prompt"), "user")
    state = ProcessorState(context=context.ids, generated=len(context))
    events: list = []
    verdict = generate(
        engine,
        stops_for(syntax, tokenizer, tools, max_tokens),
        context,
        StreamDecoder(tokenizer),
        tokenizer,
        events.append,
        [],
        state,
        detail=False,
    )
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    return verdict, constraint, context.ids[state.generated :], tokens


def valid_calls(syntax, tokenizer, tools, output, truncated):
    """The output's calls as the format's parser reads them (parse_output over its shapes): each a call to a tool
    that exists, whose arguments pass validate_arguments and check_value."""
    schemas = {t.name: t.input_schema for t in tools}
    parsed = parse_output(output, schemas, format=syntax, tokenizer=tokenizer, truncated=truncated)
    calls = []
    for item in parsed.calls:
        assert item.error is None, (tokenizer.decode(output), item.error)
        call = item.call
        assert call is not None and call.name in schemas, tokenizer.decode(output)
        converted = validate_arguments(call.name, call.arguments, schemas[call.name])
        assert check_value(converted, schemas[call.name] or {}) == [], (tokenizer.decode(output), converted)
        calls.append(call)
    return calls


def random_tools(schemas):
    return [SimpleNamespace(name=f"tool_{i}", input_schema=s) for i, s in enumerate(schemas)]


vocabularies = st.lists(
    st.text(alphabet='{}[]":, =_abcxyz0123456789.-<>/\\né°;`\n', min_size=2, max_size=7), max_size=40
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.sampled_from(CONSTRAINED),
    st.lists(tool_schemas, min_size=1, max_size=3) | st.just(None),
    vocabularies,
    st.sampled_from(["specials", "text", "bytes"]),
    st.integers(0, 2**32),
    st.sampled_from([0.0, 1.0, 2.0]),
)
def test_random_logits_write_calls_the_formats_own_parser_reads_as_valid(
    name, schemas, extra, vocabulary, seed, temperature
):
    syntax = get_format(name)
    tools = lab_tools() if schemas is None else random_tools(schemas)
    # "text": the vocabulary has none of the format's tokens, and the template writes their text; "bytes": the
    # lab's one-byte vocabulary (ByteMatcher), the same
    if vocabulary == "bytes":
        tokenizer = CharTokenizer()
    else:
        tokenizer = FormatTokenizer(
            PIECES + FORMAT_PIECES + extra, specials_of(syntax) if vocabulary == "specials" else []
        )
    model = RandomLogits(seed, tokenizer.vocab_size, 3.0)
    verdict, constraint, output, _ = format_turn(syntax, tools, tokenizer, model, temperature=temperature, seed=seed)
    assert isinstance(constraint.matcher, ByteMatcher if vocabulary == "bytes" else TokenMatcher)
    if not constraint.matcher.tools:
        return  # no tool can be called validly: nothing is required (test_constrain.py checks the notice)
    assert output[: len(constraint.opener_ids)] == constraint.opener_ids  # required: the turn opens a call
    if verdict.reason == "max_tokens" and constraint._state is not None:
        # only where the shortest end's search finds none (it tries closing characters, not the names of required
        # keys) does the cap cut a call
        assert constraint._follows.finish(constraint._state) is None, tokenizer.decode(output)
        return
    calls = valid_calls(syntax, tokenizer, tools, output, verdict.reason == "max_tokens")
    assert calls and verdict.parsed and verdict.parsed[0].call == calls[0]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.sampled_from(CONSTRAINED), st.integers(0, 2**32), st.integers(60, 120))
def test_a_call_still_open_near_the_cap_is_closed_within_it(name, seed, cap):
    syntax = get_format(name)
    tools = lab_tools()
    tokenizer = FormatTokenizer(PIECES + FORMAT_PIECES, specials_of(syntax))
    model = RandomLogits(seed, tokenizer.vocab_size, 3.0)
    verdict, _, output, _ = format_turn(syntax, tools, tokenizer, model, temperature=3.0, seed=seed, max_tokens=cap)
    assert len(output) <= cap and verdict.parsed, tokenizer.decode(output)
    assert valid_calls(syntax, tokenizer, tools, output, verdict.reason == "max_tokens")


ALL_SPECIALS = tuple(dict.fromkeys(t for name in CONSTRAINED for t in specials_of(get_format(name))))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A byte-level BPE trained in-process and a seeded random Llama (tests/tiny_hf.py), the tokenizer's added tokens
    every constrained format's."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import tiny_hf

    directory = str(tmp_path_factory.mktemp("format_model"))
    tiny_hf.build_model(directory, added=ALL_SPECIALS)
    return directory


@pytest.mark.parametrize("name", CONSTRAINED)
def test_a_transformers_model_with_the_formats_tokens_sends_valid_calls_to_the_weather_server(
    tiny_model_dir, events, name
):
    # random weights, torch logits, the format's markers as added tokens of a trained tokenizer: every turn, forced
    # to open with a call, writes one in the format that the weather server accepts
    from decodeloop.registry import load_model

    bundle = load_model("hf:" + tiny_model_dir, syntax=name)
    specials = bundle.tokenizer.special_tokens
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=30)) as router:
        for seed in range(2):
            events.clear()
            chat = Harness(
                bundle,
                Sampler(temperature=1.0, seed=seed),
                router,
                events,
                config=TurnConfig(max_tokens=100, constrain="required", max_retries=0),
            )
            chat.run("What's the weather in Polson, MT?")
            assert set(chat.constraint.matcher.tokens.values()) <= set(specials.values())
            tokens = events.of("token")
            assert tokens[0].id == specials[bundle.syntax.grammar.required[0].text]  # the opener, one token
            calls = events.of("tool_call")
            assert calls and calls[0].name in ("get_weather", "get_forecast"), [t.text for t in tokens]
            assert [e for e in events.of("tool_error") if e.stage in ("parse", "route", "arguments")] == []


def test_the_cli_refuses_a_format_the_grammar_cannot_express_with_the_reason(tiny_model_dir):
    run = subprocess.run(
        [sys.executable, "-m", "decodeloop", "run", "--model", "hf:" + tiny_model_dir, "--call-format", "qwen3-xml"]
        + ["--constrain", "calls", "--quiet", "hi"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 78 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == f"decodeloop: cannot start: {UNEXPRESSED['qwen3-xml']}"


CALL = Call("get_weather", {"city": "Polson", "state": "MT"})


def written(syntax, call: Call = CALL) -> str:
    """A call as the model writes it: the format's render, behind its special token where the render is bare."""
    text = syntax.render(call)
    return "<|python_tag|>" + text if syntax.name == "llama3-json" else text


@pytest.mark.parametrize("name", CONSTRAINED)
@pytest.mark.parametrize("mode", ["calls", "required"])
def test_a_model_that_writes_a_valid_call_is_left_alone(name, mode):
    syntax = get_format(name)
    tokenizer = FormatTokenizer(PIECES + FORMAT_PIECES, specials_of(syntax))
    script = tokenizer.units(written(syntax))
    model = ScriptModel(tokenizer, script, len(tokenizer.encode("prompt")))
    verdict, _, output, tokens = format_turn(syntax, lab_tools(), tokenizer, model, mode=mode)
    assert tokenizer.bytes_of(output).startswith(tokenizer.bytes_of(script))
    assert [t for t in tokens if t.masked is not None] == []  # the mask changed nothing
    assert any(t.forced for t in tokens) or name == "mistral-v3"  # text the grammar leaves no choice in: jumped
    assert verdict.parsed[0].call == CALL


def test_an_analysis_message_that_names_a_function_stays_free_and_the_call_after_it_is_followed():
    syntax = get_format("harmony")
    tokenizer = FormatTokenizer(PIECES + FORMAT_PIECES, specials_of(syntax) + ["<|start|>"])
    thought = "<|channel|>analysis<|message|>I could write to=functions.get_time now.<|end|><|start|>assistant"
    wrong = '<|channel|>commentary to=functions.get_xeather <|constrain|>json<|message|>{"city": "Polson"}<|call|>'
    script = tokenizer.units(thought + wrong)
    model = ScriptModel(tokenizer, script, len(tokenizer.encode("prompt")))
    verdict, _, output, tokens = format_turn(syntax, lab_tools(), tokenizer, model, mode="calls")
    text = tokenizer.decode(output)
    assert text.startswith(thought + "<|channel|>commentary to=functions.get_")
    masked = [t for t in tokens if t.masked is not None]
    assert masked and masked[0].masked == "x"  # get_|x: no tool is named so
    [call] = valid_calls(syntax, tokenizer, lab_tools(), output, verdict.reason == "max_tokens")
    assert call.name in ("get_weather", "get_forecast", "get_time_zone")


@pytest.mark.parametrize(
    "name, between",
    [
        ("deepseek-v31", ""),  # <｜tool▁call▁end｜><｜tool▁call▁begin｜>: chained with nothing between
        ("deepseek-v3", ""),
        ("kimi-k2", ""),
        ("mistral", ""),  # each call behind its own [TOOL_CALLS]
        ("llama3-json", "; "),  # Llama 3.2: the next call after ";" in the same span
    ],
)
def test_every_call_of_a_message_is_followed_from_its_own_opener(name, between):
    syntax = get_format(name)
    tokenizer = FormatTokenizer(PIECES + FORMAT_PIECES, specials_of(syntax))
    first, second = written(syntax), written(syntax, Call("get_xeather", {"city": "Polson", "state": "MT"}))
    if name.startswith(("deepseek", "kimi")):  # one section: the second call's own opener, no second section
        opener = "<｜tool▁call▁begin｜>" if name.startswith("deepseek") else "<|tool_call_begin|>"
        section_end = syntax.shapes[0].closer
        first, second = first[: -len(section_end)], second[second.index(opener) :]
    elif name == "llama3-json":
        second = second[len("<|python_tag|>") :]
    script = tokenizer.units(first + between + second)
    model = ScriptModel(tokenizer, script, len(tokenizer.encode("prompt")))
    verdict, _, output, tokens = format_turn(syntax, lab_tools(), tokenizer, model, mode="calls", max_tokens=200)
    text = tokenizer.decode(output)
    assert text.startswith(first + between), text
    masked = [t for t in tokens if t.masked is not None]
    assert masked and masked[0].masked == "x", text  # the second call's get_|x, ruled out
    calls = valid_calls(syntax, tokenizer, lab_tools(), output, verdict.reason == "max_tokens")
    assert len(calls) >= 2 and calls[0] == CALL and calls[1].name.startswith("get_")


def brute_force_mask(matcher: TokenMatcher, state) -> list[bool]:
    """Each token walked through the grammar one byte at a time in plain Python; a special token by its code."""
    grammar, codes, out = matcher.grammar, {t: c for c, t in matcher.tokens.items()}, []
    for token in range(matcher.vocab):
        if token in codes:
            out.append(grammar.advance_char(state, codes[token]) is not None)
            continue
        data, st = matcher.token_bytes[token], state
        for byte in data:
            if st.final:
                break
            st = grammar.advance(st, byte)
            if st is None:
                break
        out.append(bool(data) and st is not None)
    return out


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.sampled_from(CONSTRAINED), st.lists(tool_schemas, min_size=1, max_size=2), vocabularies, st.integers(0, 2**32)
)
def test_every_mask_equals_walking_each_token_through_the_template(name, schemas, extra, seed):
    syntax = get_format(name)
    tokenizer = FormatTokenizer(PIECES + FORMAT_PIECES + extra, specials_of(syntax))
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=syntax, opener_id=None, closer_id=None)
    constraint = CallConstraint(bundle, lambda: random_tools(schemas), mode="calls")
    rng = random.Random(seed)
    for opener in syntax.grammar.templates:  # each template: the canonical shape's and the others
        matcher = constraint._template_matcher(opener)
        assert set(matcher.tokens.values()) <= set(tokenizer.special_tokens.values())
        state = matcher.begin()
        for _ in range(40):  # a random walk through allowed tokens, checking every state met
            if state is None or matcher.done(state):
                break
            mask = matcher.mask(state)
            assert mask.tolist() == brute_force_mask(matcher, state)
            allowed = np.flatnonzero(mask).tolist()
            assert allowed, "a state the grammar reached must allow some token"
            state = matcher.advance(state, rng.choice(allowed))


def test_a_special_token_of_the_template_is_allowed_where_the_template_writes_it_and_nowhere_else():
    syntax = get_format("deepseek-v31")
    tokenizer = FormatTokenizer(PIECES + FORMAT_PIECES, specials_of(syntax))
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=syntax, opener_id=None, closer_id=None)
    constraint = CallConstraint(bundle, lab_tools, mode="calls")
    matcher = constraint._template_matcher("<｜tool▁call▁begin｜>")
    sep, end = tokenizer.special("<｜tool▁sep｜>"), tokenizer.special("<｜tool▁call▁end｜>")
    state = matcher.advance_bytes(matcher.begin(), b"get_weather")
    assert np.flatnonzero(matcher.mask(state)).tolist() == [sep]  # get_weather's name is whole: only the separator
    state = matcher.advance_bytes(matcher.advance(state, sep), b'{"city": "Polson", "state": "MT"}')
    allowed = set(np.flatnonzero(matcher.mask(state)).tolist())
    assert end in allowed and sep not in allowed and tokenizer.special("<｜tool▁calls▁begin｜>") not in allowed
    assert matcher.done(matcher.advance(state, end))


def test_required_forces_the_formats_opener_token_and_harmonys_header():
    for name, first in [
        ("mistral", ["[TOOL_CALLS]"]),
        ("deepseek-v3", ["<｜tool▁calls▁begin｜>"]),
        ("kimi-k2", ["<|tool_calls_section_begin|>"]),
        ("llama3-json", ["<|python_tag|>"]),
        ("harmony", ["<|channel|>", "commentary to=functions."]),
    ]:
        syntax = get_format(name)
        tokenizer = FormatTokenizer(PIECES + FORMAT_PIECES, specials_of(syntax))
        model = ScriptModel(tokenizer, tokenizer.encode("I do not know."), len(tokenizer.encode("prompt")))
        verdict, _, output, tokens = format_turn(syntax, lab_tools(), tokenizer, model, mode="required")
        assert output[0] == tokenizer.special(first[0]) and tokens[0].masked == "I" and tokens[0].allowed == 1
        assert tokenizer.decode(output).startswith("".join(first)), name
        assert valid_calls(syntax, tokenizer, lab_tools(), output, verdict.reason == "max_tokens")


@pytest.mark.parametrize("name", sorted(UNEXPRESSED))
def test_a_format_the_grammar_cannot_express_is_refused_with_the_reason(name):
    syntax = get_format(name)
    assert getattr(syntax, "grammar", None) is None
    tokenizer = FormatTokenizer(PIECES, [])
    reason = unsupported(tokenizer, syntax)
    assert reason == UNEXPRESSED[name] and reason.startswith(name + " writes")
    bundle = SimpleNamespace(tokenizer=tokenizer, syntax=syntax, opener_id=None, closer_id=None)
    with pytest.raises(ValueError) as refused:
        CallConstraint(bundle, lab_tools, mode="calls")
    assert str(refused.value) == reason
    with open(f"{ROOT}/docs/constrained-calls.md", encoding="utf-8") as f:
        assert reason in " ".join(f.read().replace("`", "").split())  # the docs give each reason as it is worded


def test_every_format_is_constrained_or_refused_with_its_reason():
    from decodeloop.formats.calls.formats import names

    for name in names():
        syntax = get_format(name)
        expressed = getattr(syntax, "grammar", None) is not None
        assert expressed == (name in CONSTRAINED or name == "hermes") and expressed != (name in UNEXPRESSED), name


# --- through the harness, against the real weather server --------------------------------------------------


class FramedChat(LabChat):
    """The lab chat format around a family's calls: only its own markers end the model's turn."""

    def __init__(self, tokenizer, syntax) -> None:
        super().__init__(tokenizer, syntax)
        self.stop_ids = frozenset({tokenizer.eos_id})


@pytest.mark.parametrize("name", CONSTRAINED)
def test_a_harness_turn_with_random_logits_sends_a_valid_call_to_the_weather_server(events, name):
    syntax = get_format(name)
    tokenizer = FormatTokenizer(PIECES + FORMAT_PIECES, specials_of(syntax))
    bundle = ModelBundle(
        f"random-{name}",
        tokenizer,
        FramedChat(tokenizer, syntax),
        syntax,
        model=RandomLogits(7, tokenizer.vocab_size, 3.0),
    )
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=10)) as router:
        harness = Harness(
            bundle,
            Sampler(temperature=1.0, seed=7),
            router,
            events,
            config=TurnConfig(constrain="required", max_tokens=300),
        )
        harness.run("What's the weather in Polson, MT?")
    calls = events.of("tool_call")
    assert calls and calls[0].name in ("get_weather", "get_forecast")
    assert [e for e in events.of("tool_error") if e.stage in ("parse", "route", "arguments")] == []
    assert any(f"in the {name} syntax are constrained" in n.message for n in events.of("notice"))
