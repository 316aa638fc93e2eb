"""The conversion cache of .gguf files (models/gguf_cache.py) and what `hf:` reports before torch is imported.

The `smollm2` tests convert SmolLM2-135M-Instruct's .gguf for real (DECODELOOP_SMOLLM2 names it) and check
that the cached folder gives exactly the GGUF's tokenizer, chat template, stop ids and logits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import ROOT

from decodeloop.models import gguf_cache

SMOLLM2 = os.environ.get("DECODELOOP_SMOLLM2")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DECODELOOP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "hf-gguf"


# -- the hash, remembered ------------------------------------------------------------------------------


def test_the_hash_is_read_once_per_path_size_and_mtime(cache, tmp_path):
    import hashlib

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(range(256)) * 100)
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    assert gguf_cache.file_sha256(str(model)) == sha
    stat = os.stat(model)
    # the same size and mtime with other bytes: the remembered hash is answered, the file is not read
    model.write_bytes(b"GGUX" + bytes(range(256)) * 100)
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert gguf_cache.file_sha256(str(model)) == sha
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a new mtime: read again
    assert gguf_cache.file_sha256(str(model)) == hashlib.sha256(model.read_bytes()).hexdigest() != sha


def test_an_unreadable_memory_of_hashes_is_read_past(cache, tmp_path):
    import hashlib

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF data")
    cache.mkdir(parents=True)
    (cache / "hashes.json").write_text("{not json")
    assert gguf_cache.file_sha256(str(model)) == hashlib.sha256(b"GGUF data").hexdigest()
    assert str(model) in json.loads((cache / "hashes.json").read_text())


# -- the folder, written atomically --------------------------------------------------------------------


def _write(folder: str) -> None:
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write("{}")


def test_a_stored_conversion_is_found_by_its_sha(cache):
    assert gguf_cache.lookup("ab" * 32) is None
    folder = gguf_cache.store("ab" * 32, _write, {"source": "m.gguf"})
    assert folder == str(cache / ("ab" * 32)) == gguf_cache.lookup("ab" * 32)
    assert sorted(os.listdir(folder)) == ["config.json", gguf_cache.MARKER]
    assert json.loads((cache / ("ab" * 32) / gguf_cache.MARKER).read_text())["source"] == "m.gguf"
    assert sorted(os.listdir(cache)) == ["ab" * 32]  # no temporary folder left


def test_an_interrupted_conversion_leaves_nothing_that_is_used(cache):
    def interrupted(folder: str) -> None:
        _write(folder)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gguf_cache.store("cd" * 32, interrupted, {})
    assert gguf_cache.lookup("cd" * 32) is None and os.listdir(cache) == []
    (cache / ("cd" * 32)).mkdir()  # a folder copied in by hand, half there: no marker, not used
    _write(str(cache / ("cd" * 32)))
    assert gguf_cache.lookup("cd" * 32) is None


def test_old_temporary_folders_are_removed_and_recent_ones_kept(cache):
    cache.mkdir(parents=True)
    old, recent = cache / (".ef" + "0" * 62 + ".tmp-old"), cache / (".ef" + "1" * 62 + ".tmp-now")
    old.mkdir()
    recent.mkdir()
    past = time.time() - gguf_cache.STALE_SECONDS - 60
    os.utime(old, (past, past))
    gguf_cache.store("12" * 32, _write, {})
    assert not old.exists() and recent.exists()


def test_a_discarded_conversion_is_gone(cache):
    folder = gguf_cache.store("34" * 32, _write, {})
    gguf_cache.discard(folder)
    assert gguf_cache.lookup("34" * 32) is None and os.listdir(cache) == []


# -- before torch ---------------------------------------------------------------------------------------


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ROOT},
    )


def test_a_wrong_model_path_is_reported_before_torch_is_imported(tmp_path):
    missing = str(tmp_path / "no-such-model.gguf")
    p = _python(f"""
import sys
from decodeloop.registry import load_model
for spec in ("hf:{missing}", "hf:{tmp_path}"):
    try:
        load_model(spec)
    except (OSError, ValueError) as e:
        print(type(e).__name__, e)
print("torch" in sys.modules, "transformers" in sys.modules)
""")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("FileNotFoundError no model at ") and missing in lines[0]
    assert lines[1].startswith("ValueError ") and "no config.json" in lines[1]
    assert lines[2] == "False False"


def test_a_missing_torch_names_the_cpu_build(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    p = _python(f"""
import sys
sys.modules["torch"] = None          # as if torch were not installed
from decodeloop.registry import load_model
try:
    load_model("hf:{model}")
except ImportError as e:
    print(type(e).__name__, e)
print("transformers" in sys.modules)
""")
    assert p.returncode == 0, p.stderr
    error, imported = p.stdout.splitlines()
    assert error == (
        "MissingDependency Hugging Face models need the 'torch' package: pip install torch==2.13.0 "
        "--index-url https://download.pytorch.org/whl/cpu (the CPU build), then pip install -e '.[hf]'"
    )
    assert imported == "False"


def test_the_command_line_reports_a_wrong_path_in_one_line(tmp_path):
    missing = str(tmp_path / "nope.gguf")
    p = subprocess.run(
        [sys.executable, "-m", "decodeloop", "run", "--model", "hf:" + missing, "Hi"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert p.returncode == 78 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and f"no model at {missing!r}" in p.stderr


# -- SmolLM2, converted for real ------------------------------------------------------------------------


def smollm2(test):
    """The slow tier's tests: SmolLM2's .gguf, or skipped."""
    return pytest.mark.smollm2(
        pytest.mark.skipif(not SMOLLM2, reason="set DECODELOOP_SMOLLM2 to SmolLM2-135M-Instruct's .gguf file")(test)
    )


STRINGS = [
    "What's the weather in Polson, MT?",
    '<|im_end|> <tool_call>{"a": 1}</tool_call>',
    "Café naïve — 温度 🌧️\n\tindented  twice\r\n",
    "",
]


def _tool():
    from decodeloop.mcp.client import Tool

    return Tool(
        "get_weather",
        "Current weather.",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "state": {"type": "string"}},
            "required": ["city"],
        },
    )


def _same_tokenizer_and_chat(a, b) -> None:
    """Two bundles (or tokenizer-only bundles) read the same tokenizer, chat template and stops."""
    ta, tb = a.tokenizer, b.tokenizer
    assert ta.vocab_size == tb.vocab_size and ta.special_tokens == tb.special_tokens and ta.eos_id == tb.eos_id
    assert all(ta.token_bytes(i) == tb.token_bytes(i) for i in range(ta.vocab_size))
    for text in STRINGS:
        assert ta.encode(text) == tb.encode(text) and ta.encode_markup(text) == tb.encode_markup(text)
    assert a.chat.stop_ids == b.chat.stop_ids and (a.opener_id, a.closer_id) == (b.opener_id, b.closer_id)
    from decodeloop.formats.chat import ToolReply

    for tools in ([], [_tool()]):
        assert a.chat.start(tools, STRINGS[0]) == b.chat.start(tools, STRINGS[0])
        reply = [ToolReply("get_weather", "weather", "Polson, MT: 33°F, overcast <|im_end|>")]
        assert a.chat.tool_results(reply, ended=False) == b.chat.tool_results(reply, ended=False)
        assert a.chat.user_turn(STRINGS[2], ended=True) == b.chat.user_turn(STRINGS[2], ended=True)


@smollm2
def test_the_cached_conversion_equals_the_gguf(cache):
    import torch

    from decodeloop.models.hf import load_hf, load_tokenizer

    tokenizer_from_gguf = load_tokenizer(SMOLLM2)  # nothing cached yet: read from the file
    assert "tokenizer" not in tokenizer_from_gguf.info
    cold = load_hf(SMOLLM2)
    sha = gguf_cache.file_sha256(SMOLLM2)
    assert cold.info["weights"] == f"converted from GGUF and cached at {cache / sha}"
    warm = load_hf(SMOLLM2)
    assert warm.info["weights"] == f"loaded from the conversion cache {cache / sha}"
    _same_tokenizer_and_chat(cold, warm)
    prompt = [t for ids, _ in cold.chat.start([_tool()], STRINGS[0]) for t in ids]
    torch.testing.assert_close(warm.model.forward(prompt), cold.model.forward(prompt), atol=1e-5, rtol=1e-5)

    tokenizer_from_cache = load_tokenizer(SMOLLM2)
    assert tokenizer_from_cache.info["tokenizer"] == f"loaded from the conversion cache {cache / sha}"
    _same_tokenizer_and_chat(tokenizer_from_gguf, tokenizer_from_cache)
    _same_tokenizer_and_chat(tokenizer_from_cache, warm)

    os.remove(cache / sha / "model.safetensors")  # a damaged conversion is converted again
    again = load_hf(SMOLLM2)
    assert again.info["weights"] == f"converted from GGUF and cached at {cache / sha}"
    assert os.path.exists(cache / sha / "model.safetensors")


@smollm2
def test_a_tokenizer_read_from_a_gguf_is_kept_and_read_back_the_same(cache):
    # gguf: and openai: load the tokenizer alone: the first load reads the GGUF and keeps the tokenizer,
    # config and the harness's facts (SHA-tokenizer), the next reads those small files, and both give the
    # same tokens and chat
    from decodeloop.models.hf import load_tokenizer
    from decodeloop.models.tokenizer_cache import FACTS, TOKENIZER_ONLY, read

    sha = gguf_cache.file_sha256(SMOLLM2)
    assert gguf_cache.lookup(sha + TOKENIZER_ONLY) is None
    from_gguf = load_tokenizer(SMOLLM2)
    kept = gguf_cache.lookup(sha + TOKENIZER_ONLY)
    assert kept == str(cache / (sha + TOKENIZER_ONLY)) and os.path.isfile(os.path.join(kept, "tokenizer.json"))
    found = read(kept)
    assert found is not None
    facts, prepared = found
    assert facts["eos_id"] == from_gguf.tokenizer.eos_id and "<|im_start|>" in facts["added"]
    assert prepared == from_gguf.tokenizer.prepared()
    assert gguf_cache.lookup(sha) is None  # no weights: never taken for a whole conversion by hf:
    from_cache = load_tokenizer(SMOLLM2)
    _same_tokenizer_and_chat(from_gguf, from_cache)
    assert [from_cache.tokenizer.token_bytes(i) for i in range(from_cache.tokenizer.vocab_size)] == [
        from_gguf.tokenizer.token_bytes(i) for i in range(from_gguf.tokenizer.vocab_size)
    ]

    # damaged facts, or a prepared tokenizer that does not build, are read past: transformers reads the
    # kept tokenizer and they are written again
    for damage in ({"eos_id": "two"}, {"prepared": '{"model": {"type": "NoSuchModel"}}'}):
        with open(os.path.join(kept, FACTS), "w") as f:
            json.dump({**facts, "prepared": prepared, **damage}, f)
        again = load_tokenizer(SMOLLM2)
        _same_tokenizer_and_chat(from_gguf, again)
        assert read(kept) == (facts, prepared)


@smollm2
def test_a_kept_tokenizer_loads_without_importing_transformers(cache):
    # the second load of gguf:/openai: reads the facts and tokenizer.json with `tokenizers` alone: importing
    # transformers costs seconds (it imports torch)
    from decodeloop.models.hf import load_tokenizer

    load_tokenizer(SMOLLM2)
    script = (
        "import sys; from decodeloop.models.hf import load_tokenizer; "
        f"b = load_tokenizer({SMOLLM2!r}); "
        "print(sorted(m for m in ('transformers', 'torch') if m in sys.modules), b.tokenizer.encode('Polson, MT'))"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("]", 1)[0] == "["
    assert out.stdout.strip().endswith(str(load_tokenizer(SMOLLM2).tokenizer.encode("Polson, MT")))


@smollm2
def test_runs_cold_and_warm_print_only_their_own_output(tmp_path):
    env = {**os.environ, "DECODELOOP_CACHE": str(tmp_path), "PYTHONPATH": ROOT, "HF_HUB_OFFLINE": "1"}
    notices = []
    for _ in ("cold", "warm"):
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "decodeloop",
                "run",
                "--json",
                "--max-tokens",
                "3",
                "--model",
                "hf:" + SMOLLM2,
                "What's the weather in Polson, MT?",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=900,
            stdin=subprocess.DEVNULL,
        )
        assert p.returncode in (0, 4) and p.stderr == ""  # 4: the cap of 3 tokens ended the turn
        events = [json.loads(line) for line in p.stdout.splitlines()]
        notices.append(events[0]["message"])
    assert "weights converted from GGUF and cached at " in notices[0]
    assert "weights loaded from the conversion cache " in notices[1]
    p = subprocess.run(
        [sys.executable, "-m", "decodeloop", "chat", "--max-tokens", "3", "--model", "hf:" + SMOLLM2],
        input="Hi\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=900,
    )
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "assistant>" in p.stdout and "Loading" not in p.stdout
