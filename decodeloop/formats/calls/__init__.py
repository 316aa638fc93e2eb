"""The call syntaxes: compact, JSON, and the shapes real models write."""
