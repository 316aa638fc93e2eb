"""`HFTokenizer`: the harness's `Tokenizer` contract over a Hugging Face fast tokenizer.

Owns three things a Hugging Face tokenizer does not give as the harness needs them:

- **Data never becomes a control token.** `encode` runs a private copy of the
  backend in which every added token (special or not: Qwen's `<tool_call>` is a
  non-special added token) is flagged special, with special-token matching
  off, so "<|im_end|>" in a tool result is ordinary text. If an added token's id
  still comes back (the model's own merges spelled it, or an unknown character
  became `<unk>`), the text is encoded again with each occurrence broken apart
  (its first character on its own), so it becomes ordinary tokens. The check is
  one set intersection per call.
  `encode_markup` is for the chat template's own markup: the same copy with
  matching on, so there the texts of added tokens stand for their ids.
- **Exact bytes per token.** `token_bytes(id)` comes from a table built once at
  load time: byte-level BPE pieces through the inverse of GPT-2's
  `bytes_to_unicode`, SentencePiece pieces with "▁" as a space and `<0xNN>`
  byte-fallback tokens as that byte; added tokens are b"". So `StreamDecoder`
  releases text byte-exactly, and the bytes of `encode(text)` are `text`'s bytes.
- **No hidden text changes.** The copy adds no BOS/EOS, no SentencePiece dummy prefix (a message's content sits in the
  middle of a prompt, where the model never sees one), and skip normalizers that
  rewrite text (NFC, NFKC, lowercasing, ...), so what the context holds is
  exactly what the user or the tool wrote.

Whitespace-only added tokens (Gemma's "\\n", tabs and runs of spaces) are
ordinary text, as transformers treats them in chat templates: they are not
control tokens, `encode` may yield them and their bytes are their text.

The rewritten tokenizer.json (`prepared()`) can be kept and given back to
`from_prepared`, which builds the tokenizer from it in one parse.

Needs the `hf` extra (`tokenizers`, and `transformers` for `from_pretrained`);
torch is not needed.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from decodeloop.errors import MissingDependency

HF_EXTRA = "pip install -e '.[hf]'"
# PyPI's Linux torch is the CUDA build (gigabytes); PyTorch publishes the CPU build on its own index
TORCH_CPU = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
# Normalizer steps that keep text as it is (the rest rewrite it and are skipped).
_KEEP_NORMALIZERS = {"Replace", "ByteLevel"}


def install_hint() -> str:
    """The command that installs the `hf` extra here: with the CPU build of torch first when torch is not
    installed (found without importing it)."""
    import importlib.util

    try:
        have_torch = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        have_torch = False
    return HF_EXTRA if have_torch else f"{TORCH_CPU} (the CPU build), then {HF_EXTRA}"


def require(module: str):
    """Import an `hf` dependency, or raise MissingDependency naming the command that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(
            f"Hugging Face models need the {module.split('.')[0]!r} package: {install_hint()}"
        ) from e


def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's bytes_to_unicode: the character each byte is written as -> the byte."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def _types(node: Any) -> set[str]:
    """Every "type" named anywhere in a tokenizer.json component."""
    found: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            found.add(node["type"])
        for value in node.values():
            found |= _types(value)
    elif isinstance(node, list):
        for value in node:
            found |= _types(value)
    return found


def _plain_normalizer(node: dict | None) -> dict | None:
    """The normalizer without steps that rewrite text or prepend a dummy prefix."""
    if node is None:
        return None
    if node.get("type") == "Sequence":
        steps = [s for s in (_plain_normalizer(s) for s in node.get("normalizers", [])) if s is not None]
        return {"type": "Sequence", "normalizers": steps} if steps else None
    return node if node.get("type") in _KEEP_NORMALIZERS else None


def _no_prefix(node: dict | None) -> dict | None:
    """The pre-tokenizer without a dummy prefix space (Metaspace, ByteLevel)."""
    if node is None:
        return None
    node = dict(node)
    if node.get("type") == "Sequence":
        node["pretokenizers"] = [_no_prefix(s) for s in node.get("pretokenizers", [])]
    elif node.get("type") == "Metaspace":
        node["prepend_scheme"] = "never"
        node.pop("add_prefix_space", None)
    elif node.get("type") == "ByteLevel":
        node["add_prefix_space"] = False
    return node


def backend_of(hf_tokenizer: Any) -> Any:
    """The `tokenizers.Tokenizer` behind a transformers tokenizer; a ValueError when it is not a fast one."""
    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(
            f"{type(hf_tokenizer).__name__} is not a fast tokenizer (no tokenizer.json); "
            "decodeloop needs the `tokenizers` backend"
        )
    return backend


def _is_control(content: str) -> bool:
    """An added token is a control token unless it is whitespace (see the module docstring)."""
    return bool(content) and not content.isspace()


def _prepare(data: dict) -> dict:
    """tokenizer.json as the harness runs it: no text-rewriting normalizer, no dummy prefix, no BOS/EOS, no
    truncation or padding, and every control token flagged special. The caller's dict is left as it was."""
    data = {**data, "added_tokens": [dict(t) for t in data.get("added_tokens", [])]}
    data["normalizer"] = _plain_normalizer(data.get("normalizer"))
    data["pre_tokenizer"] = _no_prefix(data.get("pre_tokenizer"))
    data["post_processor"] = None  # the chat template places BOS/EOS
    data["truncation"] = data["padding"] = None
    for token in data["added_tokens"]:
        if _is_control(token.get("content", "")):
            token["special"] = True
    return data


class HFTokenizer:
    """The `Tokenizer` protocol over a `tokenizers.Tokenizer` (see the module docstring)."""

    def __init__(self, backend: Any, *, eos_id: int, vocab_size: int | None = None, name: str = "hf") -> None:
        """`backend`: a `tokenizers.Tokenizer`, or the parsed content of a tokenizer.json (no need to build
        a tokenizer only to serialize it again)."""
        data = _prepare(backend if isinstance(backend, dict) else json.loads(backend.to_str()))
        self._load(data, json.dumps(data), eos_id, vocab_size, name)

    @classmethod
    def from_prepared(cls, text: str, *, eos_id: int, vocab_size: int | None = None, name: str = "hf") -> HFTokenizer:
        """From the text `prepared()` gave, kept from an earlier load: one parse, nothing rewritten."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a prepared tokenizer is a JSON object")
        tokenizer = cls.__new__(cls)
        tokenizer._load(data, text, eos_id, vocab_size, name)
        return tokenizer

    def prepared(self) -> str:
        """The tokenizer.json this tokenizer was built from, rewritten as the module docstring says."""
        return self._prepared

    def _load(self, data: dict, text: str, eos_id: int, vocab_size: int | None, name: str) -> None:
        tokenizers = require("tokenizers")
        self.name = name
        self.eos_id = eos_id
        added = {t["id"]: t for t in data.get("added_tokens", [])}
        self._added: dict[int, str] = {i: t["content"] for i, t in added.items() if _is_control(t["content"])}
        self._control = frozenset(self._added)
        # One backend for data and markup: every control token is flagged special, so that
        # encode_special_tokens decides whether their texts are matched (markup) or not (data).
        try:
            self._backend = tokenizers.Tokenizer.from_str(text)
        except Exception as e:  # the Rust library raises its own exception type
            raise ValueError(f"the tokenizers package cannot build this tokenizer: {e}") from e
        self._mode = threading.Lock()  # the flag is the backend's: one encode at a time sets and uses it
        self._prepared = text
        self._specials = {text: i for i, text in self._added.items()}
        texts = sorted(self._specials, key=len, reverse=True)
        self._control_re = re.compile("|".join(map(re.escape, texts))) if texts else None
        self._table = self._byte_table(data, added)
        self.vocab_size = max(len(self._table), vocab_size or 0)
        self._replacement: list[int] | None = None

    @classmethod
    def from_transformers(
        cls, hf_tokenizer: Any, *, vocab_size: int | None = None, eos_id: int | None = None
    ) -> HFTokenizer:
        """Wrap a transformers fast tokenizer (its `backend_tokenizer`)."""
        backend = backend_of(hf_tokenizer)
        eos = hf_tokenizer.eos_token_id if eos_id is None else eos_id
        if eos is None:
            raise ValueError("the tokenizer names no end-of-sequence token")
        return cls(backend, eos_id=eos, vocab_size=vocab_size, name=getattr(hf_tokenizer, "name_or_path", "hf"))

    @classmethod
    def from_pretrained(cls, path: str, gguf_file: str | None = None, **kwargs) -> HFTokenizer:
        """Load from a local model directory (or a .gguf file in it); never touches the network."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # and local_files_only: nothing is ever downloaded
        transformers = require("transformers")
        hf = transformers.AutoTokenizer.from_pretrained(path, gguf_file=gguf_file, local_files_only=True)
        return cls.from_transformers(hf, **kwargs)

    # -- the byte table ------------------------------------------------------------------------------

    def _byte_table(self, data: dict, added: dict[int, dict]) -> list[bytes]:
        model = data.get("model") or {}
        kinds = _types(data.get("pre_tokenizer")) | _types(data.get("decoder"))
        vocab = model.get("vocab")
        if isinstance(vocab, list):  # Unigram: [[piece, score], ...] by id
            pieces = {piece: i for i, (piece, _score) in enumerate(vocab)}
        elif isinstance(vocab, dict):
            pieces = vocab
        else:
            raise ValueError(f"unsupported tokenizer model {model.get('type')!r}: no vocabulary to read")
        size = max([*pieces.values(), *added, -1]) + 1
        table = [b""] * size
        if "ByteLevel" in kinds:
            # each character of the byte alphabet to the byte it stands for (latin-1 encodes it as that byte);
            # a character outside it, below 256 too, to one that latin-1 cannot encode
            alphabet = {ord(c): chr(b) for c, b in _byte_decoder().items()}
            translation = {**{o: "\U0010ffff" for o in range(256) if o not in alphabet}, **alphabet}
            for piece, i in pieces.items():
                try:
                    table[i] = piece.translate(translation).encode("latin-1")
                except UnicodeEncodeError:  # a piece outside the byte alphabet: its own text
                    table[i] = piece.encode()
        elif kinds & {"Metaspace", "ByteFallback", "Replace"} or model.get("type") == "Unigram":
            fallback = bool(model.get("byte_fallback"))
            for piece, i in pieces.items():
                m = _BYTE_TOKEN.fullmatch(piece) if fallback else None
                table[i] = bytes((int(m.group(1), 16),)) if m else piece.replace("▁", " ").encode()
        else:
            raise ValueError(
                "unsupported tokenizer: neither byte-level BPE nor SentencePiece-style pieces, "
                "so the bytes of its tokens are not known exactly"
            )
        for i, token in added.items():
            table[i] = b"" if i in self._control else token["content"].encode()
        return table

    # -- the Tokenizer protocol ------------------------------------------------------------------------

    @property
    def special_tokens(self) -> Mapping[str, int]:
        """Text -> id of every added (control) token, special or not."""
        return dict(self._specials)

    def is_special(self, token: int) -> bool:
        return token in self._control

    def encode(self, text: str) -> list[int]:
        """Data to ids: never the id of an added token, whatever the text spells."""
        ids = self._encode(text, markup=False)
        if self._control.isdisjoint(ids):
            return ids
        return self._encode_apart(text)

    def encode_markup(self, text: str) -> list[int]:
        """Template markup to ids: the texts of added tokens stand for their ids."""
        return self._encode(text, markup=True)

    def _encode(self, text: str, markup: bool) -> list[int]:
        with self._mode:
            self._backend.encode_special_tokens = not markup
            return self._backend.encode(text, add_special_tokens=False).ids

    def _encode_apart(self, text: str) -> list[int]:
        """Encode with each occurrence of an added token's text broken after its first character."""
        out: list[int] = []
        pos = 0
        while pos < len(text):
            m = self._control_re.search(text, pos) if self._control_re else None
            end = m.start() if m else len(text)
            if end > pos:
                out += self._checked(text[pos:end])
            if m is None:
                break
            out += self._checked(text[end])
            pos = end + 1  # search again from inside the broken token: tokens may overlap
        return out

    def _checked(self, chunk: str) -> list[int]:
        ids = self._encode(chunk, markup=False)
        if self._control.isdisjoint(ids):
            return ids
        # No added token's text is here, yet one came back: the model's merges spelled it, or a character
        # it cannot encode became <unk> (no byte fallback). One character at a time, and U+FFFD for those.
        out: list[int] = []
        for ch in chunk:
            one = self._encode(ch, markup=False)
            out += one if self._control.isdisjoint(one) else self._unknown()
        return out

    def _unknown(self) -> list[int]:
        if self._replacement is None:
            for stand_in in ("\ufffd", "?", " "):
                ids = self._encode(stand_in, markup=False)
                if self._control.isdisjoint(ids):
                    self._replacement = ids
                    break
            else:
                self._replacement = []
        return self._replacement

    def token_bytes(self, token: int) -> bytes:
        """The exact bytes a token stands for; b"" for added tokens and ids the tokenizer lacks."""
        return self._table[token] if 0 <= token < len(self._table) else b""

    def token_text(self, token: int) -> str:
        """A printable label: 'Ġthe' -> ' the', incomplete UTF-8 as \\xNN, controls escaped, added tokens by text."""
        special = self._added.get(token)
        if special is not None:
            return special
        if not 0 <= token < len(self._table):
            return f"<unused {token}>"  # an embedding row past the tokenizer's vocabulary
        text = self._table[token].decode("utf-8", errors="backslashreplace")
        if text.isprintable():
            return text
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids to text for display: added tokens by name, invalid UTF-8 as U+FFFD."""
        out: list[str] = []
        run = bytearray()
        for t in ids:
            special = self._added.get(t)
            if special is None:
                run += self.token_bytes(t)
                continue
            if run:
                out.append(run.decode("utf-8", errors="replace"))
                run.clear()
            out.append(special)
        if run:
            out.append(run.decode("utf-8", errors="replace"))
        return "".join(out)
