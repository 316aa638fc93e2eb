"""CanIToolCall's fixtures replayed through decodeloop's own stop check (decode/parse.py).

Each fixture is one raw model output of a family, with the tools offered and the parse a correct engine
returns. Here it is read as a turn of that family's model would be read: the call format the family's
model names (`format_for`), the reasoning block the generation prompt left open, the token cap when the
output was cut by one (`truncated`). The text is split into units, the family's markers whole (they are
special tokens) and every other character alone, and the suite's chunking strategies group those units
into the deltas of a stream (`units`).
"""

from __future__ import annotations

import json
from functools import cache

from canitoolcall.chunking import split
from canitoolcall.pytest_plugin import family_for
from canitoolcall.results import ParsedToolCall, ParseResult

from decodeloop.decode.parse import OutputParser, markers_of
from decodeloop.formats.calls.formats import get_format

# the format each family's models name (formats/calls/formats.py), by family, then by model where they differ
FAMILY_FORMAT = {
    "qwen3-hermes": "hermes",
    "llama": "llama3-json",
    "mistral": "mistral",
    "qwen3-xml": "qwen3-xml",
    "glm": "glm47",
    "gemma4": "gemma4",
    "gpt-oss": "harmony",
    "deepseek": "deepseek-v3",
    "kimi": "kimi-k2",
}
MODEL_FORMAT: dict[str, str] = {
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "llama4-pythonic",
    "mistralai/Mistral-7B-Instruct-v0.3": "mistral-v3",
    "mistralai/Magistral-Small-2506": "mistral-think-text",
    "zai-org/GLM-4.5": "glm45",
    "zai-org/GLM-4.6": "glm45",
    "deepseek-ai/DeepSeek-V3.1": "deepseek-v31",
    "deepseek-ai/DeepSeek-V3.2": "deepseek-v32",
    "deepseek-ai/DeepSeek-V4-Flash": "deepseek-v4",
    "deepseek-ai/DeepSeek-V4.1-Flash": "deepseek-v41",
    "moonshotai/Kimi-K3": "kimi-k3",
}


def format_name(fixture) -> str | None:
    return MODEL_FORMAT.get(fixture.models[0]) or FAMILY_FORMAT.get(fixture.family)


@cache
def _format(name: str):
    return get_format(name)


def format_for(fixture):
    name = format_name(fixture)
    return None if name is None else _format(name)


def generation_prompt(fixture) -> str:
    """What the prompt ended with: the fixture's own, else its reference model's default."""
    if fixture.generation_prompt is not None:
        return fixture.generation_prompt
    family = family_for(fixture)
    for model in family.reference_models if family is not None else ():
        if model.repo == fixture.models[0]:
            return model.default_generation_prompt or ""
    return ""


def reasoning_open(fixture, syntax) -> bool:
    """The generation prompt opened a reasoning block it did not close."""
    prompt = generation_prompt(fixture)
    for opener, closer in getattr(syntax, "reasoning", ()):
        at = prompt.rfind(opener)
        if at >= 0 and prompt.find(closer, at) < 0:
            return True
    return False


def _markers(fixture, syntax) -> list[str]:
    family = family_for(fixture)
    texts = set(markers_of(syntax)) | set(family.markers if family is not None else ())
    return sorted(texts, key=len, reverse=True)


def units(fixture, parser: OutputParser) -> tuple[list, set]:
    """The fixture's text as units: each special marker whole (as the id the parser reads it under), every
    other character alone; and the set of special units (the `special` strategy splits at them)."""
    markers = _markers(fixture, format_for(fixture))
    text, out, specials = fixture.raw_output, [], set()
    pos = 0
    while pos < len(text):
        for marker in markers:
            if text.startswith(marker, pos):
                unit = parser.special_id(marker)
                out.append(unit)
                specials.add(unit)
                pos += len(marker)
                break
        else:
            out.append(text[pos])
            pos += 1
    return out, specials


def parser_for(fixture) -> OutputParser:
    syntax = format_for(fixture)
    return OutputParser(
        syntax,
        fixture.tools,
        reasoning_open=reasoning_open(fixture, syntax),
        specials=_markers(fixture, syntax),
    )


def truncated(fixture) -> bool:
    return "truncated" in fixture.tags


def replay(fixture, strategy=None) -> ParseResult:
    """The fixture read whole (`strategy` None) or as a stream the strategy cuts into deltas."""
    parser = parser_for(fixture)
    if strategy is None:
        parser.feed(fixture.raw_output)
    else:
        all_units, specials = units(fixture, parser)
        for group in split(all_units, strategy, special=specials):
            parser.feed_units(group)
    return result(parser.finish(truncated(fixture)))


def result(out) -> ParseResult:
    calls = tuple(ParsedToolCall(c.name, json.dumps(c.arguments, ensure_ascii=False)) for c in out.tool_calls)
    return ParseResult(content=out.content, reasoning_content=out.reasoning, tool_calls=calls)


# -- the table: each fixture's status by the suite's own checks, over every stream ------------------------------


def observe(fixture, strategies=None):
    """The suite's Observation of one fixture: the whole output and each stream."""
    from canitoolcall.chunking import DEFAULT_STRATEGIES
    from canitoolcall.results import Observation

    strategies = DEFAULT_STRATEGIES if strategies is None else strategies
    return Observation(replay(fixture), {s.id: replay(fixture, s) for s in strategies})


def status(fixture) -> str:
    """pass, soft_pass or fail, as the suite's runner judges a case (every check, every realistic stream)."""
    from canitoolcall import checks

    rows = checks.run_checks(fixture, family_for(fixture), observe(fixture))
    return checks.case_status(rows).value


# -- token ids: the Qwen fixtures on Qwen2.5's tokenizer -------------------------------------------------------

QWEN3_THINK = {151667: "<think>", 151668: "</think>"}  # Qwen3's two tokens that Qwen2.5's vocabulary lacks


class Qwen3Ids:
    """Qwen2.5's tokenizer (from its GGUF) with Qwen3's <think> and </think> ids: the vocabulary the Qwen3 and
    Qwen3-Coder fixtures' ids are of, but for those two. `shares(fixture)` says whether a fixture's ids are."""

    def __init__(self, tokenizer) -> None:
        self.base = tokenizer
        self.vocab_size = max(tokenizer.vocab_size, 151669)
        self.eos_id = tokenizer.eos_id
        self.special_tokens = {**tokenizer.special_tokens, **{text: i for i, text in QWEN3_THINK.items()}}

    def shares(self, fixture) -> bool:
        ids = fixture.output_token_ids or ()
        return bool(ids) and max(ids) < 151669 and fixture.models[0].startswith("Qwen/Qwen3-")

    def token_bytes(self, token: int) -> bytes:
        return b"" if token in QWEN3_THINK else self.base.token_bytes(token)

    def token_text(self, token: int) -> str:
        return QWEN3_THINK.get(token) or self.base.token_text(token)

    def decode(self, ids) -> str:
        texts, run = [], []
        for i in ids:
            if i in QWEN3_THINK:
                texts += [self.base.decode(run), QWEN3_THINK[i]]
                run = []
            else:
                run.append(i)
        return "".join([*texts, self.base.decode(run)])

    def encode(self, text: str) -> list[int]:
        return self.base.encode(text)


def replay_ids(fixture, tokenizer, strategy=None) -> ParseResult:
    """The fixture's own token ids, read whole or in the strategy's groups, through the stop check."""
    syntax = format_for(fixture)
    parser = OutputParser(syntax, fixture.tools, tokenizer=tokenizer, reasoning_open=reasoning_open(fixture, syntax))
    ids = list(fixture.output_token_ids)
    if strategy is None:
        parser.feed_ids(ids)
    else:
        special = set(tokenizer.special_tokens.values())
        for group in split(ids, strategy, special=special):
            parser.feed_ids(group)
    return result(parser.finish(truncated(fixture)))
