"""Models: everything here implements `forward(context) -> logits` (see base.py).

`load_model(name, tokenizer, ...)` is the one place that maps a model name from
the command line to an implementation; backends with heavy dependencies are
imported only when asked for. `default_servers(name)` says which bundled MCP
servers a model was written or trained against.
"""

from __future__ import annotations

from decodeloop.models.base import Model, PrefixCachedModel, common_prefix_len

MODEL_NAMES = ("table", "ngram", "transformer")


def load_model(name: str, tokenizer, *, order: int | None = None, weights: str | None = None) -> Model:
    if name == "table":
        from decodeloop.models.table import TableModel

        return TableModel(tokenizer)
    if name == "ngram":
        from decodeloop.models.ngram import DEFAULT_ORDER, NgramModel

        return NgramModel.trained(tokenizer, order or DEFAULT_ORDER)
    if name == "transformer":  # needs numpy: raises MissingDependency, naming the extra, without it
        from decodeloop.models.transformer import DEFAULT_WEIGHTS, TransformerModel

        return TransformerModel.load(weights or DEFAULT_WEIGHTS)
    raise ValueError(f"unknown model {name!r}; choose one of: {', '.join(MODEL_NAMES)}")


def default_servers(name: str) -> list[list[str]]:
    """The stdio commands of the bundled servers a model expects when no --mcp is given."""
    from decodeloop.servers import command

    if name == "table":  # the table knows one conversation, about the weather
        return [command("weather")]
    from decodeloop.train.corpus import lab_server_commands  # trained models know the lab corpus's tools

    return lab_server_commands()


__all__ = ["Model", "PrefixCachedModel", "common_prefix_len", "load_model", "default_servers", "MODEL_NAMES"]
