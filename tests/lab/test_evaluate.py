"""eval's counting, on hand-made episodes whose right answers are known, through the real harness."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import CharTokenizer
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.corpus import Episode, lab_server_commands
from decodeloop.lab.evaluate import evaluate
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.servers.weather import get_weather
from decodeloop.tools.startup import start_stdio_servers

POLSON = get_weather("Polson", "MT")[0]
FARGO = get_weather("Fargo", "ND")[0]

EPISODES = [
    # 1. right call first time, answer copies both values
    Episode(
        "Weather in Polson, MT?", "get_weather", {"city": "Polson", "state": "MT"}, "", POLSON, "", ["33°F", "overcast"]
    ),
    # 2. malformed call, then a right one; the answer misses a value
    Episode("Weather in Fargo, ND?", "get_weather", {"city": "Fargo", "state": "ND"}, "", FARGO, "", ["x-missing"]),
    # 3. the right tool with wrong arguments, then an unknown tool twice: out of retries
    Episode("Weather in Bend, OR?", "get_weather", {"city": "Bend", "state": "OR"}, "", "", "", []),
]
TABLE = {
    "<|user|>Weather in Polson, MT?<|assistant|>": "[call get_weather city=Polson state=MT]",
    f"<|tool|>{POLSON}<|assistant|>": "It is 33°F and overcast.<|eos|>",
    "<|user|>Weather in Fargo, ND?<|assistant|>": "[call get_weather city=Fargo state]",
    "<|assistant|>": "[call get_weather city=Fargo state=ND]",
    f"<|tool|>{FARGO}<|assistant|>": "Cold.<|eos|>",
    "<|user|>Weather in Bend, OR?<|assistant|>": "[call get_weather city=Bend state=ZZ]",
    "state code such as MT<|assistant|>": "[call weather_now city=Bend]",
    "Available tools: get_weather, get_forecast, get_time_zone, convert.<|assistant|>": "[call weather_now city=Bend]",
}


def test_counts_on_a_hand_made_case():
    tokenizer = CharTokenizer()
    with start_stdio_servers(lab_server_commands(), lambda e: None) as router:
        summary, outcomes = evaluate(
            lambda emit: Harness(
                lab_bundle(TableModel(tokenizer, TABLE), tokenizer),
                Sampler(),
                router,
                emit,
                config=TurnConfig(max_retries=3),
            ),
            EPISODES,
        )
    one, two, three = outcomes
    assert (one.calls, one.well_formed, one.correct_tool, one.correct_arguments, one.retries) == (1, 1, 1, 1, 0)
    assert one.answered and one.copied_values and not one.out_of_retries
    assert (two.calls, two.well_formed, two.correct_tool, two.correct_arguments, two.retries) == (2, 1, 1, 1, 1)
    assert two.answered and not two.copied_values
    # bad state (right tool, wrong arguments: an error result), unknown tool, unknown tool
    assert (three.calls, three.well_formed, three.correct_tool, three.correct_arguments, three.retries) == (
        3,
        3,
        1,
        0,
        2,
    )
    assert three.out_of_retries and not three.answered
    assert summary.episodes == 3 and summary.calls == 6
    assert summary.well_formed_rate == pytest.approx(5 / 6)
    assert summary.correct_tool_rate == pytest.approx(3 / 6)
    assert summary.correct_arguments_rate == pytest.approx(2 / 6)
    assert summary.retries_per_episode == pytest.approx(1.0)
    assert (summary.answered, summary.out_of_retries) == (2, 1)
    assert summary.ended == {"eos": 2, three.ended: 1} and three.ended in ("max_retries", "repeated_call")
    assert summary.value_copy_rate == pytest.approx(1 / 3)
    assert summary.value_copy_by_tool == {"get_weather": [1, 3]}
    assert summary.tokens_per_second > 0


def test_eval_command_json_summary():
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "decodeloop",
            "eval",
            "--model",
            "ngram",
            "--order",
            "6",
            "--episodes",
            "5",
            "--temperature",
            "0.7",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["episodes"] == 5 and summary["model"] == "ngram" and summary["order"] == 6
    for key in (
        "well_formed_rate",
        "correct_tool_rate",
        "correct_arguments_rate",
        "retries_per_episode",
        "answered",
        "out_of_retries",
        "value_copy_rate",
        "tokens_per_second",
    ):
        assert key in summary
    by_tool = summary["value_copy_by_tool"]
    assert sum(total for _, total in by_tool.values()) == 5
    assert sum(summary["ended"].values()) == 5 and summary["ended"].get("eos", 0) >= summary["answered"]
    assert set(by_tool) <= {"get_weather", "get_forecast", "get_time_zone", "convert"}
    assert p.stderr == ""  # no progress bar when stderr is not a terminal


def _table_worker(routers, barrier=None):
    """A worker factory: its own table model (its own cache), its own servers; `routers` records each worker's."""
    import contextlib
    import threading

    tokenizer = CharTokenizer()

    class Gathered(TableModel):
        """Waits at the barrier on its first forward: every worker must be inside an episode at once."""

        waited = False

        def forward(self, context):
            if barrier is not None and not self.waited:
                self.waited = True
                barrier.wait()
            return super().forward(context)

    @contextlib.contextmanager
    def worker(emit):
        with start_stdio_servers(lab_server_commands(), lambda e: None) as router:
            with threading.Lock():
                routers.append(router)
            yield Harness(
                lab_bundle(Gathered(tokenizer, TABLE), tokenizer),
                Sampler(),
                router,
                emit,
                config=TurnConfig(max_retries=3),
            )

    return worker


def _content(outcome):
    from dataclasses import asdict

    return {k: v for k, v in asdict(outcome).items() if k != "seconds"}


def test_concurrent_episodes_are_in_flight_together_with_their_own_servers_and_count_the_same():
    import threading

    from decodeloop.lab.evaluate import evaluate_concurrently

    episodes = EPISODES * 3
    tokenizer = CharTokenizer()
    with start_stdio_servers(lab_server_commands(), lambda e: None) as router:
        one, serial = evaluate(
            lambda emit: Harness(
                lab_bundle(TableModel(tokenizer, TABLE), tokenizer),
                Sampler(),
                router,
                emit,
                config=TurnConfig(max_retries=3),
            ),
            episodes,
        )
    routers: list = []
    # four workers each wait at the barrier inside their first episode: it passes only if all four are in flight
    many, concurrent = evaluate_concurrently(_table_worker(routers, threading.Barrier(4, timeout=120)), episodes, 4)
    assert [_content(o) for o in concurrent] == [_content(o) for o in serial]
    assert (many.calls, many.answered, many.out_of_retries) == (one.calls, one.answered, one.out_of_retries)
    assert many.concurrency == 4 and many.wall_seconds > 0
    assert len(routers) == 4
    pids = [{client.transport.pid for client in r.clients.values()} for r in routers]
    assert all(len(p) == len(lab_server_commands()) for p in pids)
    assert len(set().union(*pids)) == 4 * len(lab_server_commands())  # no server process shared


def test_a_failing_worker_stops_the_run_with_its_error():
    import contextlib

    from decodeloop.lab.evaluate import evaluate_concurrently

    @contextlib.contextmanager
    def broken(emit):
        raise RuntimeError("cannot start this worker")
        yield

    with pytest.raises(RuntimeError, match="cannot start this worker"):
        evaluate_concurrently(broken, EPISODES, 2)


def test_eval_concurrency_with_an_in_process_model_runs_serially_and_says_so():
    def run(k):
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "decodeloop",
                "eval",
                "--model",
                "ngram",
                "--order",
                "6",
                "--episodes",
                "4",
                "--temperature",
                "0.7",
                "--json",
                "--concurrency",
                str(k),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout), p.stderr

    (one, quiet), (three, notice) = run(1), run(3)
    assert quiet == ""
    assert "--concurrency 3" in notice and "not thread-safe" in notice and "one at a time" in notice
    timing = ("tokens_per_second", "wall_seconds", "concurrency")
    assert {k: v for k, v in one.items() if k not in timing} == {k: v for k, v in three.items() if k not in timing}
    assert three["concurrency"] == 1  # what really ran


def test_eval_concurrency_must_be_positive():
    p = subprocess.run(
        [sys.executable, "-m", "decodeloop", "eval", "--model", "table", "--concurrency", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "argument --concurrency: expected a whole number from 1 to 256, got '0'" in p.stderr


def test_eval_split_ood_asks_the_held_out_questions_of_the_servers_run_with_ood():
    from decodeloop.cli.options import server_specs
    from decodeloop.cli.parser import build_parser

    parser = build_parser()
    ood = server_specs(parser.parse_args(["eval", "--model", "transformer", "--split", "ood"]), parser)
    held_out = server_specs(parser.parse_args(["eval", "--model", "transformer"]), parser)
    assert [s.name for s in ood] == [s.name for s in held_out] == ["weather", "timezone", "units"]
    assert all(s.command[-1] == "--ood" and s.trusted for s in ood)
    assert not any("--ood" in s.command for s in held_out)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "decodeloop",
            "eval",
            "--model",
            "ngram",
            "--order",
            "6",
            "--episodes",
            "3",
            "--split",
            "ood",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["split"] == "ood" and summary["episodes"] == 3


def test_several_calls_in_one_message_count_one_each():
    # a message that writes two calls (collected, as eval collects them) is two calls written, not one: no rate
    # can pass 100%
    tokenizer = CharTokenizer()
    polson = EPISODES[0]
    table = {
        "<|user|>Weather in Polson, MT?<|assistant|>": "[call get_weather city=Polson state=MT]"
        "[call get_time_zone city=Polson state=MT]",
        "<|assistant|>": "It is 33°F and overcast.<|eos|>",
    }
    with start_stdio_servers(lab_server_commands(), lambda e: None) as router:
        summary, [one] = evaluate(
            lambda emit: Harness(
                lab_bundle(TableModel(tokenizer, table), tokenizer),
                Sampler(),
                router,
                emit,
                config=TurnConfig(collect_calls=True),
            ),
            [polson],
        )
    assert (one.calls, one.well_formed, one.correct_tool, one.correct_arguments, one.retries) == (2, 2, 1, 1, 0)
    assert summary.calls == 2 and summary.well_formed_rate == pytest.approx(1.0)
    assert summary.correct_tool_rate == pytest.approx(0.5) and one.answered
