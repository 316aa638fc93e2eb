"""The lab: the table, n-gram and numpy transformer models, their corpus and training."""
