"""Models: everything here implements `forward(context) -> logits` (see base.py).

`load_model(name, tokenizer)` is the one place that maps a model name from the
command line to an implementation; backends with heavy dependencies are imported
only when asked for.
"""

from __future__ import annotations

from decodeloop.models.base import Model, PrefixCachedModel, common_prefix_len

MODEL_NAMES = ("table",)


def load_model(name: str, tokenizer) -> Model:
    if name == "table":
        from decodeloop.models.table import TableModel

        return TableModel(tokenizer)
    raise ValueError(f"unknown model {name!r}; choose one of: {', '.join(MODEL_NAMES)}")


__all__ = ["Model", "PrefixCachedModel", "common_prefix_len", "load_model", "MODEL_NAMES"]
