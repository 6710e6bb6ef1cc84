"""Targets: where agent outputs come from (uploaded, an HTTP endpoint, a Python callable)."""
