"""Who answers what a server asks of the client: a sampling request by the local model (sampling.py), an
elicitation by the user at a terminal (elicitation.py, form.py). What a run offers is in mcp/client_features.py."""
