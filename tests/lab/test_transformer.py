"""The numpy transformer: gradients against numerical ones, the KV cache against full
recompute, the training data, the weight file, and the shipped weights through the harness."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from conftest import ROOT

transformer = pytest.importorskip("decodeloop.lab.transformer")
np = transformer.np

from decodeloop.decode.bundle import lab_bundle
from decodeloop.formats.lab import CharTokenizer
from decodeloop.lab.train import backprop
from decodeloop.lab.transformer import Config, TransformerModel, init_params, load_weights, save_weights
from decodeloop.tools.startup import ClientOptions

TINY = Config(n_layer=2, n_head=2, d_model=8, window=5, lookback=4)


def noisy_params(config, seed=0, scale=0.3):
    """Random float64 weights far from the init, so no gradient is trivially zero."""
    rng = np.random.default_rng(seed)
    return {k: v + rng.normal(0, scale, v.shape) for k, v in init_params(config, rng, np.float64).items()}


def tiny_batch(seed=1, prefix_len=13, rows=3, length=9):
    rng = np.random.default_rng(seed)
    prefix = rng.integers(0, 261, prefix_len)
    suffixes = rng.integers(0, 261, (rows, length))
    targets = rng.integers(0, 261, (rows, length))
    weights = (rng.random((rows, length)) < 0.6).astype(np.float64)
    weights[0, 0] = 1.0
    return prefix, suffixes, targets, weights


# -- backward pass ------------------------------------------------------------------------


@pytest.mark.parametrize("config", [TINY, replace(TINY, lookback=16)], ids=["lookback 4", "lookback past the prefix"])
def test_every_gradient_matches_numerical_differences(monkeypatch, config):
    # small query chunks so the chunked attention and its backward are exercised
    monkeypatch.setattr(backprop, "QUERY_CHUNK", 3)
    p = noisy_params(config)
    batch = tiny_batch()  # a 13-token prefix
    _loss, grads = backprop.loss_and_grads(p, config, *batch)
    assert set(grads) == set(p)

    def loss_at(name, value):
        return backprop.loss_and_grads({**p, name: value}, config, *batch)[0]

    rng = np.random.default_rng(2)
    eps = 1e-6
    for name, value in p.items():
        # along a random direction: every element of the gradient takes part
        direction = rng.normal(size=value.shape)
        numerical = (loss_at(name, value + eps * direction) - loss_at(name, value - eps * direction)) / (2 * eps)
        analytic = float((grads[name] * direction).sum())
        assert abs(numerical - analytic) <= 1e-6 * max(1.0, abs(numerical)), name
        # and a few single elements
        for flat in rng.choice(value.size, size=min(3, value.size), replace=False):
            bump = np.zeros(value.size)
            bump[flat] = eps
            bump = bump.reshape(value.shape)
            numerical = (loss_at(name, value + bump) - loss_at(name, value - bump)) / (2 * eps)
            assert abs(numerical - grads[name].flat[flat]) <= 1e-6 * max(1.0, abs(numerical)), (name, flat)


def test_a_wrong_gradient_would_be_caught(monkeypatch):
    # the check above can fail: break the GELU derivative and the gradient of c_fc is off
    monkeypatch.setattr(backprop, "gelu_backward", lambda dy, x, t: dy)
    p = noisy_params(TINY)
    batch = tiny_batch()
    _, grads = backprop.loss_and_grads(p, TINY, *batch)
    name, eps = "blocks.0.mlp.c_fc.w", 1e-6
    direction = np.random.default_rng(3).normal(size=p[name].shape)
    numerical = (
        backprop.loss_and_grads({**p, name: p[name] + eps * direction}, TINY, *batch)[0]
        - backprop.loss_and_grads({**p, name: p[name] - eps * direction}, TINY, *batch)[0]
    ) / (2 * eps)
    assert abs(numerical - float((grads[name] * direction).sum())) > 1e-4


def test_splitting_the_batch_between_threads_changes_nothing():
    p = noisy_params(TINY)
    batch = tiny_batch(rows=5)
    loss, grads = backprop.loss_and_grads(p, TINY, *batch)
    with ThreadPoolExecutor(2) as pool:
        loss2, grads2 = backprop.loss_and_grads(p, TINY, *batch, parts=2, run=pool.map)
    assert loss2 == pytest.approx(loss, abs=1e-12)
    assert max(float(np.abs(grads[k] - grads2[k]).max()) for k in grads) < 1e-12


def test_training_logits_are_the_cached_models_logits(monkeypatch):
    # shared prefix (cut to its pyramid) + suffix rows, against the model decoding the full context
    monkeypatch.setattr(backprop, "QUERY_CHUNK", 4)
    p = noisy_params(TINY)
    prefix, suffixes, _, _ = tiny_batch(prefix_len=20)
    keep = [(TINY.n_layer - 1 - i) * (TINY.window - 1) for i in range(TINY.n_layer)]
    _, tape = backprop.segment_forward(p, TINY, prefix[None], 0, keep=keep)
    x, _ = backprop.segment_forward(p, TINY, suffixes, len(prefix), tape.past(TINY), before=prefix[-TINY.lookback :])
    logits = backprop.head_logits(p, x)  # [B, T, vocab]
    for row in range(len(suffixes)):
        model = TransformerModel(p, TINY, np.float64)
        context = list(prefix)
        for t, token in enumerate(suffixes[row]):
            context.append(int(token))
            assert np.abs(model.forward(context) - logits[row, t]).max() < 1e-9


# -- KV cache -----------------------------------------------------------------------------

SMALL = Config(n_layer=2, n_head=2, d_model=16, window=16, lookback=4)


def recompute(params, config, context):
    return TransformerModel(params, config, np.float64).forward(list(context))


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(transformer, "CHUNK", 7)  # prefills span several chunks


@pytest.mark.parametrize("seed", range(3))
def test_token_by_token_decoding_matches_full_recompute(small_chunks, seed):
    p = noisy_params(SMALL, seed)
    rng = np.random.default_rng(seed)
    context = [int(t) for t in rng.integers(0, 261, 10)]
    model = TransformerModel(p, SMALL, np.float64)
    model.forward(context)
    for _ in range(40):  # well past the window of 16
        context.append(int(rng.integers(0, 261)))
        logits = model.forward(context)
        assert model.last_computed == 1
        assert np.abs(logits - recompute(p, SMALL, context)).max() < 1e-5


@pytest.mark.parametrize("k", [1, 5, 23, 40])
def test_injected_span_prefill_matches_full_recompute(small_chunks, k):
    p = noisy_params(SMALL, 4)
    rng = np.random.default_rng(k)
    model = TransformerModel(p, SMALL, np.float64)
    context = [int(t) for t in rng.integers(0, 261, 30)]
    model.forward(context)
    context.append(int(rng.integers(0, 261)))  # the sampled token the model has not run yet
    context += [int(t) for t in rng.integers(0, 261, k)]  # the tool message the harness injects
    logits = model.forward(context)
    assert model.last_computed == k + 1
    assert np.abs(logits - recompute(p, SMALL, context)).max() < 1e-5
    context.append(int(rng.integers(0, 261)))
    assert np.abs(model.forward(context) - recompute(p, SMALL, context)).max() < 1e-5


@pytest.mark.parametrize("keep", [0, 3, 20, 44])
def test_a_diverging_context_truncates_the_cache(small_chunks, keep):
    p = noisy_params(SMALL, 5)
    rng = np.random.default_rng(keep)
    model = TransformerModel(p, SMALL, np.float64)
    first = [int(t) for t in rng.integers(0, 261, 45)]
    model.forward(first)
    second = first[:keep] + [(first[keep] + 1) % 261] + [int(t) for t in rng.integers(0, 261, 12)]
    logits = model.forward(second)
    assert model.last_computed == len(second) - keep
    assert np.abs(logits - recompute(p, SMALL, second)).max() < 1e-5
    # and decoding carries on from the truncated cache
    second.append(7)
    assert model.forward(second) is not None and model.last_computed == 1
    assert np.abs(model.forward(second) - recompute(p, SMALL, second)).max() < 1e-5


def test_the_window_is_real():
    # a token more than `window` positions back cannot change the logits; one inside it can
    p = noisy_params(SMALL, 6)
    rng = np.random.default_rng(6)
    context = [int(t) for t in rng.integers(0, 261, 60)]
    base = recompute(p, SMALL, context)
    far = list(context)
    reach = SMALL.n_layer * (SMALL.window - 1) + SMALL.lookback  # window on window, and wte_prev
    far[59 - reach - 1] ^= 1
    near = list(context)
    near[59 - reach] ^= 1
    assert np.abs(recompute(p, SMALL, far) - base).max() == 0
    assert np.abs(recompute(p, SMALL, near) - base).max() > 1e-9


# -- data and weight file -----------------------------------------------------------------


def test_loss_weights_cover_exactly_what_the_assistant_writes():
    from decodeloop.lab.corpus import episodes, system_prompt
    from decodeloop.lab.train.transformer import assistant_weights

    tokenizer = CharTokenizer()
    episode = episodes(0, 1)[0]
    ids = tokenizer.encode_markup(episode.markup(system_prompt()))
    weights = assistant_weights(ids, tokenizer)
    weighted = tokenizer.decode(t for t, w in zip(ids, weights) if w)
    assert weighted == episode.call + "<|tool|>" + episode.answer + "<|eos|>"
    heavier = assistant_weights(ids, tokenizer, call_weight=3.0)
    assert tokenizer.decode(t for t, w in zip(ids, heavier) if w == 3.0) == episode.call + "<|tool|>"
    assert tokenizer.decode(t for t, w in zip(ids, heavier) if w == 1.0) == episode.answer + "<|eos|>"


def test_value_weights_cover_exactly_what_the_answer_copies_from_the_result():
    from decodeloop.lab.corpus import episodes, system_prompt
    from decodeloop.lab.train.transformer import encode

    tokenizer, system = CharTokenizer(), system_prompt()
    chosen = [e for e in episodes(2, 40, "train", varied=1.0) if e.tool == "get_weather"][:3]
    data = encode(chosen, system, Config(), call_weight=3.0, value_weight=2.0)
    for episode, (_, targets, weights) in zip(chosen, data.suffixes):
        copied = tokenizer.decode(int(t) for t, w in zip(targets, weights) if w == 2.0)
        temperature, conditions = episode.values
        humidity, wind, direction = episode.copied[2:]
        assert copied == temperature + conditions + humidity + wind + direction
        assert tokenizer.decode(int(t) for t, w in zip(targets, weights) if w == 3.0) == episode.call + "<|tool|>"


def test_stop_weights_cover_where_each_copy_ends_and_where_a_forecast_goes_on_or_stops():
    # and in the call, where each value starts and ends
    from decodeloop.lab.corpus import episodes, system_prompt
    from decodeloop.lab.train.transformer import encode

    tokenizer, system = CharTokenizer(), system_prompt()
    chosen = episodes(4, 16, "train", varied=0.5, forecasts=0.4)
    chosen.append(next(e for e in episodes(4, 400, "train") if " " in e.arguments.get("city", "")))  # quoted
    assert {e.tool for e in chosen} == {"get_weather", "get_forecast", "get_time_zone", "convert"}
    data = encode(chosen, system, Config(), call_weight=3.0, stop_weight=5.0, bounds_weight=5.0)
    for episode, (_, targets, weights) in zip(chosen, data.suffixes):
        # in the call (3 x 5): each value's first character (or its opening quote), then the space or "]" after it
        values = [str(v) for v in episode.arguments.values()]
        bounds = "".join(
            ('"' if " " in value else value[0]) + after
            for value, after in zip(values, [" "] * (len(values) - 1) + ["]"])
        )
        assert tokenizer.decode(int(t) for t, w in zip(targets, weights) if w == 15.0) == bounds
        answer = episode.answer
        after = set()  # indices in the answer of each copied piece's next character
        for piece in episode.copied:
            at = answer.rfind(piece) if len(piece) == 1 else answer.find(piece)
            while at >= 0:
                after.add(at + len(piece))
                at = -1 if len(piece) == 1 else answer.find(piece, at + 1)
        if episode.tool == "get_forecast":  # each later line's break and day, then the end
            for at in [i for i, c in enumerate(answer) if c == "\n"][1:]:
                after.update(range(at, at + 4))
        expected = "".join(answer[i] if i < len(answer) else "<|eos|>" for i in sorted(after))
        if episode.tool == "get_forecast" and len(answer) not in after:
            expected += "<|eos|>"
        assert tokenizer.decode(int(t) for t, w in zip(targets, weights) if w == 5.0) == expected, episode.answer


def test_the_forecast_share_changes_training_only():
    from decodeloop.lab.corpus import episodes

    share = sum(e.tool == "get_forecast" for e in episodes(0, 2000, "train", forecasts=0.5)) / 2000
    default = sum(e.tool == "get_forecast" for e in episodes(0, 2000, "train")) / 2000
    assert 0.45 < share < 0.55 and 0.17 < default < 0.23
    assert episodes(0, 40, "heldout", forecasts=0.9) == episodes(0, 40, "heldout")


def test_repeated_conditions_make_two_days_alike_in_the_result_and_the_answer():
    import random

    from decodeloop.lab.corpus import episodes
    from decodeloop.lab.train.transformer import repeated_conditions

    rng = random.Random(0)
    chosen = episodes(5, 80, "train", varied=0.5)
    forecasts = [e for e in chosen if e.tool == "get_forecast"]
    assert len(forecasts) >= 8
    for episode in forecasts:
        alike = repeated_conditions(episode, rng)
        conditions = [line.split(", ", 1)[1] for line in alike.result.splitlines()]
        days = [line.split()[0] for line in alike.result.splitlines()]
        assert days == [line.split()[0] for line in episode.result.splitlines()]
        assert len(set(conditions)) < len(conditions)  # two days alike
        assert alike.answer.endswith(":\n" + alike.result)  # the answer still quotes the result
        assert alike.values == episode.values and alike.copied == [*episode.values, *conditions]
    other = next(e for e in chosen if e.tool != "get_forecast")
    assert repeated_conditions(other, rng) is other


def test_made_up_places_are_consistent_and_never_held_out():
    import random

    from decodeloop.formats.calls.compact import CompactSyntax
    from decodeloop.lab.corpus import HELDOUT_STATES, episodes
    from decodeloop.lab.train.transformer import PLACE_WORDS, REAL_CITIES, made_up_place

    rng = random.Random(0)
    moved, names = 0, []
    for episode in episodes(0, 600):
        new = made_up_place(episode, rng)
        if new is episode:
            continue
        moved += 1
        city, state = new.arguments["city"], new.arguments["state"]
        assert city not in REAL_CITIES and state not in HELDOUT_STATES
        place = f"{city}, {state}"
        assert place in new.user and place in new.answer
        assert episode.arguments["city"] not in new.user
        parsed = CompactSyntax().parse(new.call)
        assert (parsed.name, parsed.arguments["city"], parsed.arguments["state"]) == (new.tool, city, state)
        assert new.values == episode.values
        names.append(city)
    assert moved > 300
    # some one-word names are long, some longer names end in a word real names end in (Iowa City)
    # (without the long ones, about 11% of one-word names have 10 letters or more; with them, about 29%)
    one_word = [name for name in names if " " not in name]
    assert sum(len(name) >= 10 for name in one_word) / len(one_word) > 0.2
    assert any(" " in name and name.split()[-1] in PLACE_WORDS for name in names)


def test_weight_file_round_trip(tmp_path):
    p = init_params(TINY, np.random.default_rng(0))
    path = str(tmp_path / "w.npz")
    save_weights(path, p, TINY, {"seed": 3})
    loaded, config, meta = load_weights(path)
    assert config == TINY and meta == {"seed": 3} and set(loaded) == set(p)
    assert all(np.abs(loaded[k].astype(np.float32) - p[k]).max() < 1e-3 for k in p)


def test_training_is_deterministic_whatever_the_thread_count(tmp_path):
    from dataclasses import replace

    from decodeloop.lab.train.transformer import TrainConfig, train

    config = Config(n_layer=1, n_head=2, d_model=8, window=8)
    tc = TrainConfig(steps=3, batch_size=4, warmup=1, seed=5, threads=2)
    a, meta = train(config, tc)
    b, _ = train(config, tc)
    c, _ = train(config, TrainConfig(steps=3, batch_size=4, warmup=1, seed=6, threads=2))
    one_thread, _ = train(config, replace(tc, threads=1))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert all(np.array_equal(a[k], one_thread[k]) for k in a)
    assert not all(np.array_equal(a[k], c[k]) for k in a)
    assert meta["train"]["seed"] == 5 and meta["final_loss"] > 0


def test_progress_is_a_line_every_n_steps_off_a_terminal():
    import io

    from decodeloop.lab.train.transformer import Progress

    stream = io.StringIO()
    progress = Progress(5, stream, every=2)
    for step in range(5):
        progress(step, 1.0 / (step + 1))
    lines = stream.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == ["2/5", "4/5", "5/5"]
    assert "loss 0.2000" in lines[-1] and "\r" not in stream.getvalue()


# -- the shipped weights ------------------------------------------------------------------

WEIGHTS = transformer.DEFAULT_WEIGHTS


def test_shipped_weights_are_small_and_record_their_training():
    assert os.path.getsize(WEIGHTS) <= 5_000_000
    _, config, meta = load_weights(WEIGHTS)
    assert meta["train"]["seed"] == 0 and meta["train"]["steps"] > 0
    assert config.vocab_size == CharTokenizer.vocab_size


def test_shipped_weights_cache_matches_recompute_on_a_real_transcript():
    from decodeloop.lab.corpus import episodes, system_prompt

    tokenizer = CharTokenizer()
    params, config, _ = load_weights(WEIGHTS)
    episode = episodes(7, 1, "heldout")[0]
    ids = tokenizer.encode_markup(episode.markup(system_prompt()))
    cut = ids.index(tokenizer.special("<|tool|>"))
    model = TransformerModel(params, config, np.float64)
    model.forward(ids[:cut])
    for n in (cut + 1, len(ids) - 2, len(ids) - 1):  # a token, the rest of the tool message, a token
        logits = model.forward(ids[:n])
        assert np.abs(logits - recompute(params, config, ids[:n])).max() < 1e-5


@pytest.mark.slow
def test_shipped_weights_call_and_answer_a_held_out_question(events):
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.lab.corpus import episodes, lab_server_commands
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import ClientOptions, start_stdio_servers

    tokenizer = CharTokenizer()
    model = TransformerModel.load()
    held_out = [e for e in episodes(11, 20, "heldout") if e.tool == "get_weather"][:2]
    with start_stdio_servers(lab_server_commands(), events, options=ClientOptions(timeout=20)) as router:
        harness = Harness(lab_bundle(model, tokenizer), Sampler(), router, events, config=TurnConfig(max_tokens=300))
        for episode in held_out:
            events.clear()
            harness.reset()
            result = harness.run(episode.user)
            [call] = events.of("tool_call")
            assert (call.name, call.arguments) == (episode.tool, episode.arguments)
            [tool_result] = events.of("tool_result")
            assert tool_result.text == episode.result  # the real server's answer
            [inject] = events.of("inject")
            after = events.of("token")[[t.stop for t in events.of("token")].index("tool_call") + 1]
            assert after.computed == inject.tokens + 1  # only the injected span (and the call's "]")
            assert result.reason == "eos"
            assert all(value in result.answer for value in episode.values), (result.answer, episode.values)


@pytest.mark.slow
def test_shipped_weights_copy_values_no_training_transcript_holds(events):
    # the ood split: the servers started with --ood answer with values from the side of unusual.py
    # that training never draws from (negative or three-digit temperatures, made-up condition words)
    from decodeloop.harness import Harness, TurnConfig
    from decodeloop.lab.corpus import episodes, lab_server_commands
    from decodeloop.sampling import Sampler
    from decodeloop.tools.startup import start_stdio_servers

    model = TransformerModel.load()
    ood = [e for e in episodes(11, 40, "ood") if e.tool in ("get_weather", "get_time_zone")][:4]
    with start_stdio_servers(lab_server_commands(ood=True), events, options=ClientOptions(timeout=20)) as router:
        harness = Harness(
            lab_bundle(model, CharTokenizer()), Sampler(), router, events, config=TurnConfig(max_tokens=300)
        )
        for episode in ood:
            events.clear()
            harness.reset()
            result = harness.run(episode.user)
            [tool_result] = events.of("tool_result")
            assert tool_result.text == episode.result
            assert result.reason == "eos"
            assert all(value in result.answer for value in episode.values), (result.answer, episode.values)


def test_without_numpy_the_cli_names_the_extra():
    # python -S leaves site-packages, and so numpy, out
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-S", "-c", "import numpy"], capture_output=True, env=env)
    if done.returncode == 0:
        pytest.skip("numpy importable without site-packages here")
    done = subprocess.run(
        [sys.executable, "-S", "-m", "decodeloop", "run", "--model", "transformer", "--quiet", "hi"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 78  # a missing extra: the model cannot load here (docs/cli.md)
    # the package is on no registry: the hint is the one that works from a clone
    assert "pip install -e '.[lab]'" in done.stderr and "Traceback" not in done.stderr


def test_no_install_hint_names_a_package_that_is_on_no_registry():
    """`pip install 'decodeloop[...]'` fails (decodeloop is not on PyPI); hints say `pip install -e '.[...]'`."""
    import re

    paths = ["README.md", "decode_loop.py", "decode_loop_ngram.py", "decode_loop_transformer.py", "attention_peek.py"]
    paths += [os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md")]
    for folder, _, files in os.walk(os.path.join(ROOT, "decodeloop")):
        paths += [os.path.relpath(os.path.join(folder, f), ROOT) for f in files if f.endswith(".py")]
    for path in paths:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
        assert not re.search(r"pip install ['\"]?decodeloop\[", text), path


def test_a_bad_weights_file_is_one_line_of_error(tmp_path):
    not_npz = tmp_path / "notes.npz"
    not_npz.write_text("not weights")
    misfit = tmp_path / "misfit.npz"
    params, config, meta = load_weights(WEIGHTS)
    save_weights(str(misfit), {**params, "wte": params["wte"][:10]}, config, meta)
    for path, why in (
        (not_npz, "not an .npz file"),
        (misfit, "do not fit its config (wte)"),
        (tmp_path, "no such file"),
    ):
        done = subprocess.run(
            [sys.executable, "decode_loop_transformer.py", "--weights", str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert done.returncode == 78 and done.stdout == "", done.stderr  # a configuration error (docs/cli.md)
        assert done.stderr.count("\n") == 1 and why in done.stderr, done.stderr
        assert done.stderr.startswith("decode_loop_transformer.py: error: --weights: ")
    done = subprocess.run(
        [sys.executable, "attention_peek.py", "--weights", str(not_npz)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 78 and done.stderr.count("\n") == 1 and "not an .npz file" in done.stderr


def _shipped_weights_elsewhere(monkeypatch, tmp_path):
    """Stand-in shipped weights in tmp_path/ship (the real ones are never at risk in these tests)."""
    from decodeloop.lab.train import transformer as trainer

    ship = tmp_path / "ship"
    ship.mkdir()
    shipped = ship / "transformer.npz"
    shipped.write_bytes(b"the shipped weights")
    monkeypatch.setattr(trainer, "DEFAULT_WEIGHTS", str(shipped))
    monkeypatch.setattr(transformer, "DEFAULT_WEIGHTS", str(shipped))
    return shipped


TRAIN = ["train", "transformer", "--steps", "1", "--batch-size", "2", "--threads", "1"]


def test_training_by_default_writes_here_not_over_the_shipped_weights(monkeypatch, tmp_path, capsys):
    from decodeloop.cli import main

    shipped = _shipped_weights_elsewhere(monkeypatch, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(TRAIN) == 0
    assert shipped.read_bytes() == b"the shipped weights"
    _, _config, meta = load_weights(str(work / "transformer.npz"))
    assert meta["train"]["steps"] == 1
    assert "--weights transformer.npz" in capsys.readouterr().err  # how to run what was trained


def test_training_replaces_the_shipped_weights_only_when_named(monkeypatch, tmp_path, capsys):
    from decodeloop.cli import main

    shipped = _shipped_weights_elsewhere(monkeypatch, tmp_path)
    monkeypatch.chdir(shipped.parent)  # the default file name here is the shipped file: refused, untouched
    assert main(TRAIN) == 2
    assert shipped.read_bytes() == b"the shipped weights"
    assert f"--out {shipped}" in capsys.readouterr().err
    assert main([*TRAIN, "--out", str(shipped)]) == 0  # asked for by name
    assert load_weights(str(shipped))[2]["train"]["steps"] == 1


def test_attention_peek_into_a_closed_pipe_is_exit_status_141(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "attention_peek.py", "--episodes", "1", "--svg", ""],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == ""
