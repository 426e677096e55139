"""Execution pages: list with filters, detail with attempts and output, retry and cancel."""
