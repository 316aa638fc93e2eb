"""The decode loop's parts: the engine that makes tokens, the stops, the context."""
