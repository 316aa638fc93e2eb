"""Constrained calls: the logits processor and the grammar it runs."""
