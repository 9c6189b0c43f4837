"""Comparing runs (pure): the per-size comparison and its summary (comparison) and the CI gate
of `compare --fail-if-slower` (gate)."""
