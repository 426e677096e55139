"""Batch pages: the list and one batch (status, counts, items, its on-complete run, cancel)."""
