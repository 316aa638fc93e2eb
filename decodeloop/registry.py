"""The model registry: a model spec to a `ModelBundle`, the one place that maps a name to code.

    table, ngram, transformer    the lab models (char tokenizer, lab chat format, compact calls)
    hf:PATH                      Hugging Face transformers from a local directory or a .gguf file
                                 (extra `hf`; never touches the network)
    gguf:PATH                    llama.cpp in this process over a .gguf file; the harness samples
                                 (extras `llamacpp` and `hf`)
    openai:URL                   an OpenAI-compatible /v1/completions server samples; the chat format
                                 and tokenizer come from local files (`tokenizer=PATH`, extra `hf`)

It stands above both the engines (models/) and the lab's models (lab/), so
neither imports the other. Every bundle's tokenizer is checked when it is
loaded (`check_tokenizer`): a tokenizer whose `encode` can yield a special id
is refused. Backends with heavy dependencies are imported only when asked for.
`default_servers(spec)` says which bundled MCP servers a model expects when
none is given.
"""

from __future__ import annotations

from decodeloop.decode.bundle import ModelBundle, lab_bundle
from decodeloop.decode.model import Model

LAB_MODELS = ("table", "ngram", "transformer")


def load_model(
    spec: str,
    *,
    order: int | None = None,
    weights: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    syntax: str | None = None,
    **remote,
) -> ModelBundle:
    """The bundle for a model spec (see the module docstring); raises ValueError for an unknown spec."""
    from decodeloop.formats.tokenizer import check_tokenizer

    if spec in LAB_MODELS:
        bundle = _lab_bundle(spec, order, weights, syntax)
    elif spec.startswith("hf:"):
        from decodeloop.models.hf import load_hf  # needs the `hf` extra: MissingDependency names it

        bundle = load_hf(spec[3:], device=device, dtype=dtype, syntax=syntax)
    elif spec.startswith("gguf:"):
        from decodeloop.models.llamacpp import load_gguf  # needs the `llamacpp` extra: MissingDependency names it

        bundle = load_gguf(spec[len("gguf:") :], syntax=syntax)
    elif spec.startswith("openai:"):
        from decodeloop.models.openai import load_openai  # the tokenizer needs the `hf` extra

        bundle = load_openai(spec[len("openai:") :], syntax=syntax, **remote)
    else:
        raise ValueError(
            f"unknown model {spec!r}; choose one of: {', '.join(LAB_MODELS)}, or hf:PATH "
            "(a local Hugging Face model directory or .gguf file)"
        )
    check_tokenizer(bundle.tokenizer)
    return bundle


def _lab_bundle(name: str, order: int | None, weights: str | None, syntax: str | None) -> ModelBundle:
    from decodeloop.formats.lab import CharTokenizer

    if syntax not in (None, "compact"):
        raise ValueError(f"the lab models write compact calls only, not {syntax!r} ones")
    tokenizer = CharTokenizer()
    if name == "table":
        from decodeloop.lab.table import TableModel

        model: Model = TableModel(tokenizer)
    elif name == "ngram":
        from decodeloop.lab.ngram import DEFAULT_ORDER, NgramModel

        model = NgramModel.trained(tokenizer, DEFAULT_ORDER if order is None else order)  # 0 is refused, not 8
    else:  # needs numpy: raises MissingDependency, naming the extra, without it
        from decodeloop.lab.transformer import DEFAULT_WEIGHTS, TransformerModel

        model = TransformerModel.load(weights or DEFAULT_WEIGHTS)
    return lab_bundle(model, tokenizer, name)


def default_servers(spec: str, ood: bool = False) -> list[list[str]]:
    """The stdio commands of the bundled servers a model expects when no server is given (`ood`: started
    with --ood, answering with values no training transcript holds)."""
    from decodeloop.servers import command

    if spec == "table":  # the table knows one conversation, about the weather
        return [command("weather") + (["--ood"] if ood else [])]
    from decodeloop.lab.corpus import lab_server_commands  # the lab corpus's tools: weather, time zones, units

    return lab_server_commands(ood)


__all__ = ["LAB_MODELS", "default_servers", "load_model"]
