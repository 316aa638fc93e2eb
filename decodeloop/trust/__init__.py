"""The trust boundary: what server text may become, and which calls may run."""
