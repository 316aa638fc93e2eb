"""llama.cpp in-process: `LlamaCppModel` (forward with llama.cpp's KV cache) and `load_gguf` (the bundle).

`LlamaCppModel` is a `PrefixCachedModel` over a `llama_cpp.Llama`: llama.cpp
keeps the KV cache; `_truncate(n)` moves its position back to n (the next
evaluation drops the cells past it), `_compute(start)` evaluates positions
start.. in batches (an injected tool message is one prefill) and returns the
logits after the last one as a float32 numpy array (a copy: llama.cpp reuses
its buffer). The harness samples from those logits itself (LocalEngine), so
every logits processor, --constrain included, works as with any local model.

`load_gguf(path)` takes the tokenizer and chat template from the same .gguf
through the hf loader (`load_tokenizer`: transformers reads the file's
tokenizer the first time, the `tokenizers` package alone reads what was kept of
it after that; the weights are never loaded by torch) and the weights through
llama.cpp, on a thread of their own meanwhile. For the length of that load,
llama.cpp logs through its own C logger into a silenced stderr
(`_logging_in_c`): llama-cpp-python's Python callback takes the GIL for each of
the ~2,000 lines a load logs, so with it the two loads ran one after the other.

Needs the `llamacpp` extra (and `hf` for the tokenizer): pip install -e '.[hf,llamacpp]'.
llama-cpp-python compiles llama.cpp from source when installed: about 17-20
minutes on 2 cores.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

from decodeloop.decode.model import PrefixCachedModel
from decodeloop.errors import MissingDependency

LLAMACPP_EXTRA = (
    "gguf: needs llama-cpp-python: pip install -e '.[llamacpp]' (it compiles llama.cpp from source "
    "when installed: about 17-20 minutes on 2 idle cores)"
)


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError as e:
        raise MissingDependency(f"{LLAMACPP_EXTRA}; import failed: {e}") from None
    return llama_cpp


@contextlib.contextmanager
def _logging_in_c(lib: Any) -> Iterator[None]:
    """llama.cpp's own C logger, writing to a stderr pointed at /dev/null, in place of llama-cpp-python's
    Python callback, until the block ends.

    The callback takes the GIL for every line llama.cpp logs (about 2,000 for a load), so a load on one thread
    waits, line after line, on C code that holds the GIL on another (reading the tokenizer): 1.6 s for the
    1.5B's two loads side by side, 1.0 s with the lines written in C. With `verbose=False` llama-cpp-python
    silences that stderr itself, but only around part of the load. What Python writes to stderr meanwhile is
    kept and written once the block ends.
    """
    python_logger = getattr(getattr(lib, "_logger", None), "llama_log_callback", None)
    if python_logger is None:  # a llama-cpp-python laid out otherwise: its own logging, as it is
        yield
        return
    sys.stderr.flush()
    saved_fd, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    saved_stderr, held = sys.stderr, io.StringIO()
    os.dup2(devnull, 2)
    sys.stderr = held
    lib.llama_log_set(lib.llama_log_callback(), ctypes.c_void_p(0))  # a NULL callback: llama.cpp logs in C
    try:
        yield
    finally:
        lib.llama_log_set(python_logger, ctypes.c_void_p(0))
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        os.close(devnull)
        sys.stderr = saved_stderr
        if held.getvalue():
            saved_stderr.write(held.getvalue())
            saved_stderr.flush()


class LlamaCppModel(PrefixCachedModel):
    """A llama.cpp context behind the prefix-cache contract."""

    def __init__(self, llama: Any, name: str = "gguf") -> None:
        super().__init__()
        import numpy

        self._np = numpy
        self._lib = _llama_cpp()
        self.llama = llama
        self.name = name
        self.vocab_size = llama.n_vocab()
        self.n_ctx = llama.n_ctx()

    def _truncate(self, n: int) -> None:
        if n < self.llama.n_tokens:
            self.llama.n_tokens = n  # eval() removes the cache cells from here on before it decodes

    def _compute(self, start: int):
        if len(self.cached_tokens) > self.n_ctx:
            raise ValueError(f"the context ({len(self.cached_tokens)} tokens) exceeds llama.cpp's n_ctx ({self.n_ctx})")
        llama = self.llama
        llama.n_tokens = start
        try:
            llama.eval(self.cached_tokens[start:])
        except BaseException:
            llama.n_tokens = start  # some batches may have gone in: forget them
            raise
        row = self._lib.llama_get_logits_ith(llama.ctx, -1)
        return self._np.ctypeslib.as_array(row, shape=(self.vocab_size,)).copy()  # (vocab,) float32


def load_gguf(path: str, syntax: str | None = None, n_ctx: int = 4096, threads: int | None = None):
    """The `ModelBundle` of a .gguf file run by llama.cpp in this process (see the module docstring)."""
    from decodeloop.models.hf import check_call_format, load_tokenizer

    path = os.path.expanduser(path)
    if not (os.path.isfile(path) and path.endswith(".gguf")):
        raise ValueError(f"gguf:PATH takes a .gguf file; {path!r} is not one")
    check_call_format(syntax)  # a bad name is reported before anything loads
    lib = _llama_cpp()
    # llama.cpp maps the weights on a thread of its own (ctypes lets go of the GIL) while the tokenizer
    # loads here: the two take about as long, and a start is one of them, not both (see _logging_in_c)
    loaded: dict[str, Any] = {}

    def load_weights() -> None:
        try:
            loaded["llama"] = lib.Llama(
                model_path=path,
                n_ctx=n_ctx,
                logits_all=False,
                verbose=False,
                **({"n_threads": threads} if threads else {}),
            )
        except BaseException as e:  # given to the caller's thread below
            loaded["error"] = e

    with _logging_in_c(lib):
        weights = threading.Thread(target=load_weights, name="llama.cpp load", daemon=True)
        weights.start()
        try:
            bundle = load_tokenizer(path, syntax=syntax)
        finally:
            weights.join()
    error = loaded.get("error")
    if isinstance(error, (OSError, ValueError, RuntimeError)):
        raise ValueError(f"llama.cpp cannot load {path!r}: {error}") from error
    if error is not None:
        raise error
    llama = loaded["llama"]
    name = os.path.basename(path)
    bundle.model = LlamaCppModel(llama, name)
    bundle.name = f"gguf:{name}"
    bundle.context_length = llama.n_ctx()
    bundle.info = {
        "path": os.path.abspath(path),
        "call format": bundle.info.get("call format"),
        "n_ctx": llama.n_ctx(),
        "vocab": bundle.tokenizer.vocab_size,
        "llama.cpp": getattr(lib, "__version__", "?"),
        "template tools": bundle.info.get("template tools"),
    }
    return bundle


__all__ = ["LLAMACPP_EXTRA", "LlamaCppModel", "load_gguf"]
