"""--model gguf:PATH: llama.cpp in this process, the harness's own sampling: the llama.cpp tier.

Runs only when llama-cpp-python is importable here and DECODELOOP_SMOLLM2 names SmolLM2-135M-Instruct's
.gguf (`.ci/llamacpp` installs the one and fetches the other).
"""

from __future__ import annotations

import importlib.util
import os

import pytest
from conftest import WEATHER

SMOLLM2 = os.environ.get("DECODELOOP_SMOLLM2")
HAVE_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None


def tier(test):
    """The llama.cpp tier's tests: llama-cpp-python and the model, or skipped."""
    return pytest.mark.llamacpp(
        pytest.mark.skipif(
            not SMOLLM2 or not HAVE_LLAMA_CPP,
            reason="needs llama-cpp-python (the llamacpp extra) and DECODELOOP_SMOLLM2; .ci/llamacpp sets both up",
        )(test)
    )


QUESTION = "What's the weather in Polson, MT?"


@pytest.mark.skipif(HAVE_LLAMA_CPP, reason="llama-cpp-python is installed here")
def test_without_llama_cpp_the_error_names_the_extra_and_the_build(tmp_path):
    from decodeloop.errors import MissingDependency
    from decodeloop.registry import load_model

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(MissingDependency, match=r"pip install -e '\.\[llamacpp\]'.*compiles llama\.cpp.*17-20 minutes"):
        load_model("gguf:" + str(gguf))


@pytest.fixture(scope="module")
def smol():
    from decodeloop.registry import load_model

    return load_model("gguf:" + SMOLLM2)


@tier
def test_greedy_tokens_equal_llama_cpp_s_own_greedy_generation(smol):
    import llama_cpp

    from decodeloop.decode.engine import LocalEngine
    from decodeloop.sampling import Sampler

    prompt = [t for ids, _ in smol.chat.start([], QUESTION) for t in ids]
    smol.model.reset()
    engine, context = LocalEngine(smol.model, Sampler()), list(prompt)
    for _ in range(30):
        context.append(engine.step(context, None).token)
    ours = context[len(prompt) :]
    reference = llama_cpp.Llama(model_path=SMOLLM2, n_ctx=4096, verbose=False)
    theirs = []
    for token in reference.generate(prompt, top_k=1, temp=0.0):
        theirs.append(token)
        if len(theirs) == 30 or token == reference.token_eos():
            break
    assert ours[: len(theirs)] == theirs


@tier
def test_after_a_tool_call_only_the_inserted_span_is_computed(smol, events):
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import ClientOptions, start_stdio_servers

    smol.model.reset()
    with start_stdio_servers([WEATHER], events, options=ClientOptions(timeout=30)) as router:
        # the call grammar opens the turn with a call (SmolLM2-135M writes none of its own)
        result = Harness(smol, Sampler(), router, events, config=TurnConfig(max_tokens=80, constrain="required")).run(
            QUESTION
        )
    [call] = events.of("tool_call")
    assert call.name == "get_weather"
    assert events.of("tool_result")
    [inject] = events.of("inject")
    [after] = [t for t in events.of("token") if t.context == inject.context + 1]
    # llama.cpp's cache kept every evaluated position: the forward computed the inserted span and the one
    # token sampled before it (sampled, not yet evaluated), nothing else
    assert (after.computed, after.cached) == (inject.tokens + 1, inject.context - inject.tokens - 1)
    assert result.tokens > 0


@tier
def test_a_load_leaves_stderr_quiet_and_keeps_what_python_wrote_meanwhile(capfd):
    """llama.cpp logs the load in C into a silenced stderr; Python's lines of the same moment come out after it,
    and llama-cpp-python's own logger is back afterwards: a context made later logs nothing either."""
    import sys

    import llama_cpp

    from decodeloop.models.llamacpp import _logging_in_c, load_gguf

    load_gguf(SMOLLM2, n_ctx=512)
    assert capfd.readouterr().err == ""  # the context's own lines (llama_context: n_ctx = ...) went nowhere
    with _logging_in_c(llama_cpp):
        print("said while loading", file=sys.stderr)
        os.write(2, b"llama.cpp's C logger writes here\n")
        assert capfd.readouterr().err == ""
    assert capfd.readouterr().err == "said while loading\n"
    llama_cpp.Llama(model_path=SMOLLM2, n_ctx=256, verbose=False)  # a context outside the block
    assert capfd.readouterr().err == ""
