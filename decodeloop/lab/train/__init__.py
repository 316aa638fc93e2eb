"""Training for the lab models: the corpus generator and each model's trainer."""
