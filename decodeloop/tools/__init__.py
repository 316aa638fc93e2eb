"""From a call's text to its result: dispatch, the router and its servers' config."""
