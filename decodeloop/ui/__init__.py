"""Front ends: views of the event stream (terminal trace, step mode, JSON Lines, answer only)."""
