"""The lab corpus generator: deterministic, faithful to the harness and the servers, split cleanly."""

from conftest import Recorder

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.calls.compact import CompactSyntax
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness
from decodeloop.lab import corpus
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.schema import validate_arguments
from decodeloop.tools.startup import start_stdio_servers


def test_same_seed_same_episodes_and_different_seeds_differ():
    assert corpus.episodes(3, 50) == corpus.episodes(3, 50)
    assert corpus.episodes(3, 50) != corpus.episodes(4, 50)
    assert corpus.episodes(3, 50, "heldout") != corpus.episodes(3, 50, "train")


def test_heldout_places_never_appear_in_training():
    train = corpus.episodes(0, 1500)
    heldout = corpus.episodes(0, 300, "heldout")
    train_places = {(e.arguments["city"], e.arguments["state"]) for e in train if "city" in e.arguments}
    heldout_places = {(e.arguments["city"], e.arguments["state"]) for e in heldout if "city" in e.arguments}
    assert heldout_places and not train_places & heldout_places
    assert not {state for _, state in train_places} & corpus.HELDOUT_STATES
    assert {state for _, state in heldout_places} & corpus.HELDOUT_STATES


def test_every_tool_and_phrasing_family_occurs():
    tools = {e.tool for e in corpus.episodes(0, 300)}
    assert tools == {"get_weather", "get_forecast", "get_time_zone", "convert"}


def test_calls_parse_to_the_episode_arguments():
    syntax = CompactSyntax()
    tools = {t.name: t for t in corpus.lab_tools()}
    for e in corpus.episodes(1, 200):
        call = syntax.parse(e.call)
        assert call.name == e.tool
        assert validate_arguments(e.tool, call.arguments, tools[e.tool].input_schema) == e.arguments
        for value in e.values:
            assert value in e.result and value in e.answer


def test_system_prompt_and_results_match_the_real_servers():
    """What the corpus says the harness renders and the servers return is what they do."""
    events = Recorder()
    tokenizer = CharTokenizer()
    with start_stdio_servers(corpus.lab_server_commands(), events) as router:
        harness = Harness(lab_bundle(TableModel(tokenizer), tokenizer), Sampler(), router, events)
        assert harness.chat.system_text(harness.tools, harness.system) == corpus.system_prompt()
        for e in corpus.episodes(2, 12, "heldout"):
            assert router.call(e.tool, e.arguments).text() == e.result


def test_markup_is_the_chat_format():
    e = corpus.episodes(0, 1)[0]
    text = e.markup("SYS")
    assert text == f"<|system|>SYS<|user|>{e.user}<|assistant|>{e.call}<|tool|>{e.result}<|assistant|>{e.answer}<|eos|>"


def test_varied_training_episodes_ask_the_same_questions_with_unusual_values():
    plain, varied = corpus.episodes(4, 200), corpus.episodes(4, 200, "train", varied=0.5)
    assert [(e.user, e.call) for e in plain] == [(e.user, e.call) for e in varied]
    changed = [(a, b) for a, b in zip(plain, varied) if a.result != b.result]
    assert 60 < len(changed) < 140
    for _, e in changed:
        assert all(v in e.result and v in e.answer for v in e.copied)
        assert set(e.values) <= set(e.copied)
    assert corpus.episodes(4, 200, "train", varied=0.5) == varied


def test_ood_results_are_the_ood_servers_and_never_the_servers_own():
    from decodeloop.servers.unusual import is_ood

    for e in corpus.episodes(5, 40, "ood"):
        if e.tool == "get_weather":
            temperature, conditions = e.values
            assert is_ood("temperature", temperature[:-2]) and is_ood("word", conditions)
        elif e.tool == "convert":
            assert is_ood("decimals", e.values[0])
