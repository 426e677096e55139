"""Fixtures for the web and CLI tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def cli(app):
    """Run `flask ARGS...` in-process with Click's runner; stdout and stderr come apart."""
    runner = app.test_cli_runner()

    def invoke(*args, **kwargs):
        return runner.invoke(args=[str(a) for a in args], **kwargs)

    return invoke
