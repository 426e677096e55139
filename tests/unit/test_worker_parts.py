"""The worker engine stays in parts a reader can hold: the loop (app/services/engine/worker.py) and
each module it ties together is under 500 lines and opens with a docstring that says what it owns
and what it never does. Parsed, not imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "app" / "services" / "engine"
PARTS = (
    "worker",  # the loop
    "turns",  # claim -> start -> record
    "run_book",  # what is in flight
    "recorder",  # results, retries, dead letters
    "upkeep",  # heartbeats, leases, cancels
    "waits",  # when it sleeps and what wakes it
    "task_requests",
    "kept_connection",
    "code_reload",
)
MAX_LINES = 500


@pytest.mark.parametrize("name", PARTS)
def test_each_part_of_the_worker_is_small_and_says_what_it_owns_and_never_does(name):
    text = (ENGINE / f"{name}.py").read_text()
    assert len(text.splitlines()) < MAX_LINES, f"{name}.py has grown past {MAX_LINES} lines: split it"
    docstring = ast.get_docstring(ast.parse(text)) or ""
    assert docstring, f"{name}.py opens with no docstring"
    assert "never" in docstring, f"{name}.py's docstring does not say what it must never do"


def test_the_worker_keeps_the_interface_its_callers_use():
    from app.services.engine.worker import Worker, WorkerStats

    for method in ("run", "run_once", "shutdown", "start", "request_stop", "request_reload"):
        assert callable(getattr(Worker, method)), method
    assert isinstance(Worker.executor, property) and isinstance(Worker.tasks, property)
    assert WorkerStats().line().startswith("worker claimed=0")
