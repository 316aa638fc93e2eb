"""Calls a server runs as tasks, through the whole loop: the table model calls tools of a real server process
that runs them as tasks (tests/servers/tasks.py), on both wires; the harness follows each task to its end,
says its status, injects its result as any other (the server's text, admitted and marked as the tool's),
runs the tasks of one message together, turns a task past its bound into an error the model reads, and
on Ctrl-C cancels what still runs on the server."""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading

import pytest
from conftest import ROOT, WEATHER, WIRES

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import ASSISTANT, EOS, USER, CharTokenizer
from decodeloop.harness import Harness, TurnConfig
from decodeloop.lab.table import TableModel
from decodeloop.sampling import Sampler
from decodeloop.tools.startup import ClientOptions, start_stdio_servers
from decodeloop.trust.policy import Policy

TASKS = [sys.executable, os.path.join(ROOT, "tests", "servers", "tasks.py")]


def turn(events, table, question, wire, servers=(TASKS,), cancels=0, **config):
    """One turn of the table model against the servers; what the tasks server wrote to stderr, once it has
    said `cancels` cancels (its stderr is read on a thread of its own: waited for, up to 10 s)."""
    stderr: list[str] = []
    options = ClientOptions(
        timeout=20, protocol=wire, verbose=True, stderr=stderr.append, task_timeout=config.pop("task_timeout", 600)
    )
    with start_stdio_servers(list(servers), events, options=options) as router:
        tokenizer = CharTokenizer()
        bundle = lab_bundle(TableModel(tokenizer, table), tokenizer)
        harness = Harness(bundle, Sampler(), router, events, config=TurnConfig(**config), policy=Policy.off())
        result = harness.run(question)
        heard = threading.Event()
        for _ in range(200):
            if sum("] cancelled by the client: " in line for line in stderr) >= cancels:
                break
            heard.wait(0.05)
        return result, harness, stderr


@pytest.fixture
def ctrl_c():
    """Python's own SIGINT handler for the test's length, whatever disposition the process inherited (a job
    started in the background has SIGINT ignored, and then a simulated Ctrl-C does nothing)."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, inherited)


def ctrl_c_once_working(events):
    """An emit that records, and sends Ctrl-C (as a terminal does) 0.2 s after the first task is working."""
    sent = threading.Event()

    def emit(event):
        events(event)
        if event.kind == "task" and event.status == "working" and not sent.is_set():
            sent.set()
            threading.Timer(0.2, _thread.interrupt_main).start()

    return emit


@pytest.mark.parametrize("wire", WIRES)
def test_two_tasks_of_one_message_run_together_and_the_model_answers_from_both(events, wire):
    table = {
        USER + "Both, please." + ASSISTANT: "[call slow seconds=0.4][call slow seconds=0.3]",
        "slow: worked 0.3s" + ASSISTANT: "Both done." + EOS,
    }
    result, harness, _ = turn(events, table, "Both, please.", wire, collect_calls=True)
    assert (result.reason, result.answer) == ("eos", "Both done.")
    updates = [(e.task_id, e.status) for e in events.of("task")]
    first, second = dict.fromkeys(task for task, _ in updates)
    # both were working before either completed: the server ran them at once
    done = min(updates.index((first, "completed")), updates.index((second, "completed")))
    assert updates.index((first, "working")) < done and updates.index((second, "working")) < done
    assert [e.text for e in events.of("tool_result")] == ["slow: worked 0.4s", "slow: worked 0.3s"]
    sources = [span.source for span in harness.context.spans()]
    assert sources.count("tool:tasks/slow") == 2  # the server's text, marked as such


@pytest.mark.parametrize("wire", WIRES)
def test_a_task_past_its_bound_is_an_error_the_model_reads(events, wire):
    table = {
        USER + "Wait forever." + ASSISTANT: "[call forever]",
        "(--task-timeout); it was cancelled)" + ASSISTANT: "It took too long." + EOS,
    }
    result, _, stderr = turn(events, table, "Wait forever.", wire, cancels=1, task_timeout=0.5)
    assert (result.reason, result.answer) == ("eos", "It took too long.")
    [error] = events.of("tool_error")
    assert error.stage == "call" and "did not finish in 0.5s" in error.message
    assert any("] cancelled by the client: forever " in line for line in stderr)


@pytest.mark.parametrize("wire", WIRES)
def test_ctrl_c_while_tasks_run_cancels_them_on_the_server_and_ends_the_turn(events, wire, ctrl_c):
    table = {USER + "Wait." + ASSISTANT: "[call forever][call forever]"}
    result, _, stderr = turn(
        ctrl_c_once_working(events), table, "Wait.", wire, cancels=2, collect_calls=True, task_timeout=60
    )
    assert result.reason == "interrupted"
    assert sum("] cancelled by the client: forever " in line for line in stderr) == 2


@pytest.mark.parametrize("wire", WIRES)
def test_ctrl_c_reaches_the_tasks_of_every_server(events, wire, ctrl_c):
    """Calls to two servers run on threads: Ctrl-C on the main thread still cancels the task on the other."""
    table = {USER + "Wait." + ASSISTANT: "[call forever][call get_weather city=Polson state=MT]"}
    result, _, stderr = turn(
        ctrl_c_once_working(events),
        table,
        "Wait.",
        wire,
        servers=(TASKS, WEATHER),
        cancels=1,
        collect_calls=True,
        task_timeout=60,
    )
    assert result.reason == "interrupted"
    assert any("] cancelled by the client: forever " in line for line in stderr)
