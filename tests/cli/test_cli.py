"""The lab script and the CLI as a user runs them: real subprocesses, real weather server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import FAULTY, ROOT

from decodeloop.servers.weather import get_weather

WEATHER_TEXT = get_weather("Polson", "MT")[0]
ANSWER = "It's 33°F and overcast in Polson, MT right now, with 53% humidity and a 21 mph wind from the SE."


def run(*args: str, stdin: str = "", no_site: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    flags = ["-S"] if no_site else []
    return subprocess.run(
        [sys.executable, *flags, *args], input=stdin, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout
    )


def test_decode_loop_runs_without_site_packages():
    p = run("decode_loop.py")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "Traceback" not in out + p.stderr
    # the four steps of a token, and the prefill after the injection
    assert "fwd +1 (" in out and "check eos,call,cap" in out
    assert "prefill" in out
    # the call, the JSON-RPC request and response, the result, the answer
    assert "⚙ parsed [call get_weather city=Polson state=MT]" in out
    assert (
        '"method": "tools/call", "params": {"name": "get_weather", "arguments": {"city": "Polson", "state": "MT"}'
        in out
    )
    assert f'"text": "{WEATHER_TEXT}"' in out
    assert "the next forward computes 60 positions" in out
    assert out.rstrip().endswith("answer: " + ANSWER)
    # tools/list was rendered into the system prompt
    assert '"method": "tools/list"' in out and "get_weather: Current weather" in out


def test_no_color_when_not_a_terminal():
    assert "\x1b[" not in run("decode_loop.py").stdout


def test_json_lines_event_stream():
    p = run("-m", "decodeloop", "run", "--json", "What's the weather in Polson, MT?")
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[-1] == "done" and events[-1]["answer"] == ANSWER
    [call] = [e for e in events if e["event"] == "tool_call"]
    assert call["name"] == "get_weather" and call["arguments"] == {"city": "Polson", "state": "MT"}
    [result] = [e for e in events if e["event"] == "tool_result"]
    assert result["content"] == [{"type": "text", "text": WEATHER_TEXT}] and result["is_error"] is False
    assert [e["reason"] for e in events if e["event"] == "stop"] == ["tool_call", "eos"]
    tokens = [e for e in events if e["event"] == "token"]
    assert "".join(t["delta"] for t in tokens).strip() == ANSWER
    assert all({"text", "id", "prob", "top", "computed", "cached", "context"} <= t.keys() for t in tokens)
    # order: server ready, prompt, tokens, call, result, inject, tokens, done
    assert (
        kinds.index("server")
        < kinds.index("prompt")
        < kinds.index("token")
        < kinds.index("tool_call")
        < kinds.index("tool_result")
        < kinds.index("inject")
    )


def test_quiet_prints_only_the_answer():
    p = run("-m", "decodeloop", "run", "-q", "What's the weather in Polson, MT?")
    assert (p.returncode, p.stdout, p.stderr) == (0, ANSWER + "\n", "")


def test_step_mode_through_a_pipe():
    # two frames by Enter, then run to the end
    p = run("decode_loop.py", "--step", stdin="\n\nc\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("[Enter] next frame") == 3
    assert (
        "1 forward  computed 886 position(s)" in p.stdout
        and "4 stop     checked eos, tool_call, max_tokens" in p.stdout
    )
    assert p.stdout.rstrip().endswith(ANSWER)


def test_step_mode_runs_to_the_end_at_eof():
    p = run("decode_loop.py", "--step", stdin="")
    assert p.returncode == 0 and p.stdout.rstrip().endswith(ANSWER)


def test_step_mode_quits_cleanly():
    p = run("decode_loop.py", "--step", stdin="\nq\n")
    assert p.returncode == 0 and p.stdout.rstrip().endswith("quit.") and "Traceback" not in p.stderr


def test_step_mode_frames_the_call_sequence():
    p = run("decode_loop.py", "--step", stdin="\n" * 400)
    frames = p.stdout.split("[Enter] next frame")
    # every part of parse -> call -> inject gets its own frame
    for marker in ("■ stop: tool_call", "⚙ parsed", "→ weather {", "← weather {", "✓ result:", "⇢ inject"):
        assert sum(marker in f for f in frames) >= 1, marker
    assert p.stdout.rstrip().endswith(ANSWER)


def test_stop_and_max_tokens_flags():
    p = run("-m", "decodeloop", "run", "-q", "--stop", "overcast", "What's the weather in Polson, MT?")
    assert p.stdout == "It's 33°F and\n"
    p = run("-m", "decodeloop", "run", "--json", "--max-tokens", "5", "What's the weather in Polson, MT?")
    stops = [json.loads(line)["reason"] for line in p.stdout.splitlines() if '"event": "stop"' in line]
    assert stops == ["max_tokens"]


def test_unknown_question_gets_the_table_fallback():
    p = run("-m", "decodeloop", "run", "-q", "hello")
    assert p.stdout.startswith("Sorry, I only know")


def test_sampling_is_reproducible_for_a_seed():
    outs = {run("-m", "decodeloop", "run", "-q", "--temperature", "1", "--seed", "5", "hello").stdout for _ in range(2)}
    assert len(outs) == 1


def test_bad_server_command_is_a_clean_error():
    p = run("-m", "decodeloop", "run", "--mcp", "no-such-server-binary", "hi")
    assert p.returncode == 1 and "cannot start" in p.stderr and "Traceback" not in p.stderr


def test_gave_up_exit_code_and_message():
    # the faulty server has no get_weather: the table's call is an unknown tool every time
    p = run(
        "-m",
        "decodeloop",
        "run",
        "-q",
        "--mcp",
        " ".join(FAULTY),
        "--max-retries",
        "1",
        "What's the weather in Polson, MT?",
    )
    assert p.returncode == 3
    assert 'unknown tool "get_weather"' in p.stderr and "gave up after 1" in p.stderr


def test_usage_errors():
    for args in (["--temperature", "-1"], ["--top-p", "0"], ["--max-tokens", "0"], ["--stop", ""]):
        p = run("-m", "decodeloop", "run", *args, "hi")
        assert p.returncode == 2 and "error:" in p.stderr, args


def test_help_has_examples():
    p = run("-m", "decodeloop", "run", "--help")
    assert p.returncode == 0 and "examples:" in p.stdout and "--mcp" in p.stdout


def test_server_stderr_only_with_verbose():
    quiet = run("-m", "decodeloop", "run", "-q", "What's the weather in Polson, MT?")
    assert quiet.stderr == ""
    verbose = run("-m", "decodeloop", "run", "-q", "--verbose", "What's the weather in Polson, MT?")
    assert "[weather stderr] weather server ready" in verbose.stderr and verbose.stdout == ANSWER + "\n"


def test_console_script_is_installed_with_the_package():
    script = os.path.join(os.path.dirname(sys.executable), "decodeloop")
    if not os.path.exists(script):
        import pytest

        pytest.skip("decodeloop is not installed in this environment (./run-tests installs it)")
    p = subprocess.run(
        [script, "run", "-q", "What's the weather in Polson, MT?"], capture_output=True, text=True, timeout=30
    )
    assert p.stdout == ANSWER + "\n"


def test_chat_reads_a_pipe_one_turn_per_line():
    """`decodeloop chat` over a pipe: each line a user turn of one conversation, /commands between."""
    lines = [
        "What's the weather in Polson, MT?",
        "/tools",
        "",
        "/reset",
        "What's the weather in Polson, MT?",
        "/nonsense",
        "/quit",
        "never read",
    ]
    p = run("-m", "decodeloop", "chat", stdin="\n".join(lines) + "\n")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    out = p.stdout
    assert out.count("assistant> " + ANSWER) == 2
    assert 'get_weather({"city": "Polson", "state": "MT"}) on weather' in out
    assert "✓ " + json.dumps(WEATHER_TEXT, ensure_ascii=False) in out
    assert "get_forecast (weather):" in out and "(new conversation)" in out
    assert "unknown command '/nonsense'" in out and "never read" not in out


def test_chat_continues_the_conversation_in_json_lines():
    lines = ["What's the weather in Polson, MT?", "How about tomorrow?"]
    p = run("-m", "decodeloop", "chat", "--json", stdin="\n".join(lines) + "\n")
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    prompts = [e for e in events if e["event"] == "prompt"]
    done = [e for e in events if e["event"] == "done"]
    assert len(prompts) == 2 and len(done) == 2
    # the second turn appends to the first: only its own tokens, after the whole first turn
    assert prompts[1]["text"] == "<|user|>How about tomorrow?<|assistant|>"  # the model's <|eos|> closed turn 1
    assert prompts[1]["context"] > prompts[0]["context"] and prompts[1]["spans"][0][0] > prompts[0]["tokens"]
    assert done[0]["answer"] == ANSWER
    assert done[1]["answer"] == "Sorry, I only know how to look up the weather in Polson, MT."


# -- what a learner trips over ----------------------------------------------------------------------------


def _pauses(stdout: str) -> list[str]:
    """The transcript cut at each step-mode prompt: what was shown before each pause, then the rest."""
    return stdout.split("[Enter] next frame")


def test_step_mode_skips_the_start_up_frames_to_the_models_first_token():
    p = run("decode_loop.py", "--step", stdin="m\nc\n")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    first, after_m, rest = _pauses(p.stdout)
    # the first frame is the start-up's first JSON-RPC message; m runs past the rest of them to token 1
    assert "server/discover" in first and "── token" not in first
    assert "tools/list" in after_m and after_m.count("── token ") == 1 and "── token 1 " in after_m
    assert "> c" in rest and "■ stop: eos" in rest


def test_step_mode_runs_to_the_next_tool_call_and_the_next_stop():
    p = run("decode_loop.py", "--step", stdin="t\ns\nc\n")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    shown = _pauses(p.stdout)
    assert len(shown) == 4  # the first frame, then a pause after t, after s; c ends
    help_line = shown[1].splitlines()[0]
    for key in (
        "m: to the model's next token",
        "t: to the next tool call",
        "s: to the next stop",
        "c: to the end",
        "q: quit",
    ):
        assert key in help_line
    # t: every token of the call, its stop, and the pause on the parsed call
    before_call = shown[1].rstrip().splitlines()
    assert before_call[-4] == "■ stop: tool_call" and before_call[-2].startswith("⚙ parsed [call get_weather")
    # between them, the policy's decision: the bundled server is trusted and its tool is read-only
    assert before_call[-3] == (
        "⛨ policy allow get_weather on weather (read-only): trusted server weather annotates it readOnlyHint"
    )
    # and under the call, where its values occur in the context (the system prompt's example, the question)
    assert before_call[-1] == "  values from: city ← system, user; state ← system, user"
    assert shown[1].count("── token ") == 39
    # s: the round trip, the answer's tokens, and the pause on the next stop
    assert "✓ result:" in shown[2] and shown[2].rstrip().endswith("■ stop: eos")
    assert p.stdout.rstrip().endswith(ANSWER)


def test_step_mode_with_stdin_closed_runs_to_the_end():
    p = subprocess.run(
        ["sh", "-c", 'exec "$0" -S decode_loop.py --step <&-', sys.executable],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
    )
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "(end of input: running to the end)" in p.stdout and p.stdout.rstrip().endswith(ANSWER)


def test_the_trace_says_once_what_byte_tokens_are():
    lines = run("decode_loop.py").stdout.splitlines()
    [at] = [i for i, line in enumerate(lines) if "↳" in line]
    assert "'\\xc2'" in lines[at - 2] and "'\\xb0'" in lines[at - 1]  # the token lines keep their columns
    assert lines[at - 1].index("│ ctx") == lines[at - 2].index("│ ctx") == lines[at - 3].index("│ ctx")
    assert lines[at].strip() == (
        "↳ '\\xc2' '\\xb0': bytes, not characters: ° is 2 bytes in UTF-8 (c2 b0), "
        "split across these tokens; the text shows ° once its last byte is in"
    )


def test_byte_legend_for_other_tokenizers_and_broken_characters():
    from decodeloop.ui.legend import ByteLegend

    legend = ByteLegend()  # byte-level BPE: a token with text and a partial character
    assert legend("Hello") is None and legend(" \\xe2\\x80") is None
    assert legend("\\x99s").startswith(
        "↳ ' \\xe2\\x80' '\\x99s': bytes, not characters: ’ is 3 bytes in UTF-8 (e2 80 99)"
    )
    assert legend("\\xc2") is None  # once only
    broken = ByteLegend()
    assert broken("\\xc2") is None and "U+FFFD" in broken("a")
    assert ByteLegend()("\\n") is None and ByteLegend()("\\x7f") is None  # ASCII controls are whole characters


def test_script_help_shows_the_script_and_its_own_defaults():
    p = run("decode_loop.py", "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage: decode_loop.py [-h]"), p.stdout[:200]
    assert "decode_loop.py run" not in p.stdout and "t to the next tool call" in " ".join(p.stdout.split())
    # the usage it shows works as written
    p = run("decode_loop.py", "-q", "--max-tokens", "300", "What's the weather in Polson, MT?")
    assert (p.returncode, p.stdout) == (0, ANSWER + "\n")
    p = run("decode_loop_ngram.py", "--help")
    text = " ".join(p.stdout.split())
    assert p.stdout.startswith("usage: decode_loop_ngram.py [-h]")
    assert "0 is greedy (default: 0.7)" in text and "seed of the random generators (default: 2)" in text
    assert "(default: ngram)" in text


def test_usage_errors_show_the_commands_usage():
    for args, usage in (
        (["-m", "decodeloop", "run", "--max-tokens", "0", "hi"], "usage: decodeloop run [-h]"),
        (["-m", "decodeloop", "run", "--no-such-option", "hi"], "usage: decodeloop run [-h]"),
        (["-m", "decodeloop", "eval", "--episodes", "0"], "usage: decodeloop eval [-h]"),
        (["decode_loop.py", "--max-tokens", "0"], "usage: decode_loop.py [-h]"),
        (["decode_loop.py", "--no-such-option"], "usage: decode_loop.py [-h]"),
    ):
        p = run(*args)
        assert p.returncode == 2 and p.stderr.startswith(usage), (args, p.stderr[:200])
    assert "error: unknown option --no-such-option (see decode_loop.py --help)" in p.stderr


def test_a_token_cap_that_leaves_no_answer_is_exit_status_4():
    # the cap inside the call: no call is run and there is no answer
    p = run("-m", "decodeloop", "run", "-q", "--max-tokens", "20", "What's the weather in Polson, MT?")
    assert (p.returncode, p.stdout) == (4, "\n")
    assert p.stderr == "decodeloop: no answer: the token cap (--max-tokens 20) ended the turn inside a call\n"
    p = run("decode_loop.py", "--max-tokens", "20")
    assert p.returncode == 4 and "■ stop: max_tokens" in p.stdout
    # the cap inside the answer: an answer, cut short (exit status 0; --quiet says so on stderr)
    p = run("-m", "decodeloop", "run", "-q", "--max-tokens", "60", "What's the weather in Polson, MT?")
    assert p.returncode == 0 and ANSWER.startswith(p.stdout.rstrip("\n")) and len(p.stdout) > 5
    assert p.stderr == "decodeloop: the token cap (--max-tokens 60) cut the answer short\n"


def test_a_reader_that_goes_away_is_exit_status_141_without_a_traceback():
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -0`: the first write finds no reader
    try:
        p = subprocess.run(
            [sys.executable, "-S", "decode_loop.py"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=30,
        )
    finally:
        os.close(write_end)
    assert p.returncode == 141 and p.stderr == ""


@pytest.mark.parametrize("args", [["--temprature", "0.7", "hello"], ["--temprature=0.7"], ["hello", "--temprature"]])
def test_a_mistyped_option_is_named_with_what_it_may_mean(args):
    # its value would otherwise be read as the prompt, or the prompt reported missing
    p = run("-m", "decodeloop", "run", *args)
    assert p.returncode == 2 and p.stdout == ""
    assert (
        p.stderr.splitlines()[-1] == "decodeloop run: error: unknown option --temprature (did you mean --temperature?)"
    )


def test_an_unquoted_prompt_and_an_abbreviated_option():
    p = run("-m", "decodeloop", "run", "What's", "the", "weather")
    assert p.returncode == 2 and p.stderr.splitlines()[-1].endswith(
        "unrecognized arguments: the weather (a prompt with spaces needs quotes)"
    )
    p = run("-m", "decodeloop", "run", "--temp", "0", "-q", "What's the weather in Polson, MT?")
    assert p.returncode == 0 and p.stdout.strip() == ANSWER


def test_html_says_where_it_wrote(tmp_path):
    page = tmp_path / "turn.html"
    p = run("-m", "decodeloop", "run", "-q", "--html", str(page), "What's the weather in Polson, MT?")
    assert p.returncode == 0 and p.stdout.strip() == ANSWER and page.stat().st_size > 0
    assert p.stderr.startswith(f"decodeloop: wrote the viewer page {page} (")


def test_ctrl_c_at_the_policys_question_ends_its_line_and_the_turn():
    # a real terminal (a pty): the question is asked only there; ^C at it interrupts the turn
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: the malicious server's demo, whose injected send_email the policy asks about
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a shell's background job starts with ^C ignored
        os.chdir(ROOT)
        os.execv(
            sys.executable,
            [
                sys.executable,
                "-m",
                "decodeloop",
                "run",
                "--mcp",
                f"{sys.executable} -m decodeloop.servers.malicious",
                "Summarize my latest email.",
            ],
        )
    out, sent = b"", False
    while True:
        ready, _, _ = select.select([fd], [], [], 120)  # a guard against a hang, not a measure
        assert ready, out[-2000:]
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
        if not sent and b"[y/N] " in out:
            os.write(fd, b"\x03")
            sent = True
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert sent and os.waitstatus_to_exitcode(status) == 130 and "Traceback" not in text
    assert "[y/N] ^C\r\n" in text, text[text.find("[y/N]") :][:200]
    assert text.rstrip().endswith("interrupted.")
