"""Safe rolling deploys with real worker processes on PostgreSQL.

Two workers, only one with the deployer's task module: every run of its task lands on that one
and none fails "unknown task" on the other, which meanwhile says (explain) why the runs wait.
Then a worker reloaded while runs stream (SIGHUP, then `flask worker reload`) loses no attempt,
runs none twice, and records with each the version of the code that ran it. Every wait is a
bounded poll for a condition; what ran is read from the witness file the task processes append to.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.clock import utcnow
from app.extensions import db
from app.models import Attempt, Event, Execution, Heartbeat
from app.services.read.explain import explain_execution
from app.services.use_cases import one_off_runs
from app.tasks import load_catalog
from app.tasks.loading import task_version
from app.tasks.registry import get_task
from tests.helpers.databases import app_env_for
from tests.helpers.processes import FlaskProcesses, wait_for
from tests.helpers.task_modules import (
    RELOADABLE_MODULE,
    RELOADABLE_WITNESS,
    install_acme,
    reloadable_source,
    write_module,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

RUNS = 50
STREAMED = 300


@pytest.fixture
def processes(pg_app, pg_url, tmp_path):
    started = FlaskProcesses(app_env_for(pg_url, tmp_path / "instance"), tmp_path / "process-logs")
    try:
        yield started
    finally:
        started.cleanup()


def fresh_beat(worker_id: str) -> Heartbeat | None:
    db.session.rollback()
    return db.session.get(Heartbeat, worker_id)


def advertised(worker_id: str) -> dict[str, str] | None:
    beat = fresh_beat(worker_id)
    return beat.tasks if beat is not None and beat.tasks else None


def statuses(ids: list[int]) -> Counter:
    db.session.rollback()
    rows = db.session.execute(
        select(Execution.status, func.count()).where(Execution.id.in_(ids)).group_by(Execution.status)
    )
    return Counter(dict(rows.all()))


def attempts_of(ids: list[int]) -> list[Attempt]:
    db.session.rollback()
    return list(db.session.scalars(select(Attempt).where(Attempt.execution_id.in_(ids)).order_by(Attempt.id)))


def submit(task: str, n: int, config=None) -> list[int]:
    items = [{"task": task, "config": config or {}} for _ in range(n)]
    return [created.execution.id for created in one_off_runs.create_runs(items, now=utcnow(), actor="test")]


def on_path(directory: Path) -> str:
    return os.pathsep.join(p for p in (str(directory), os.environ.get("PYTHONPATH")) if p)


def events(output: str) -> list[dict]:
    """The JSON log lines of a process's output."""
    found = []
    for line in output.splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def test_runs_of_a_task_only_one_worker_has_all_land_on_it_and_none_fails(processes, tmp_path):
    module_dir = tmp_path / "deploy"
    acme = install_acme(module_dir)  # on this process's path too, so the runs can be created
    load_catalog(acme)
    version = task_version(get_task("acme_greet"))
    old = processes.start_worker("--workers", "4", "--worker-id", "old", env={"CRONWELL_TASK_MODULES": ""})
    wait_for(lambda: advertised("old"), within=60, what=lambda: f"the old worker's tasks\n{old.describe()}")
    assert "acme_greet" not in advertised("old") and "always_succeed" in advertised("old")

    greetings = submit("acme_greet", RUNS)
    # A built-in run after them: once the old worker has run it, its turns have passed the
    # greetings by (they come first in the claim's order) without taking one.
    [probe] = submit("always_succeed", 1)
    wait_for(lambda: statuses([probe]) == {"succeeded": 1}, within=60, what=lambda: old.describe())
    assert statuses(greetings) == {"pending": RUNS}
    fate = explain_execution(greetings[0], now=utcnow())
    assert fate["fate"] == "no_worker_for_task" and "offers task 'acme_greet'" in fate["summary"]

    new = processes.start_worker(
        "--workers",
        "4",
        "--worker-id",
        "new",
        env={"CRONWELL_TASK_MODULES": acme, "PYTHONPATH": on_path(module_dir)},
    )
    wait_for(
        lambda: statuses(greetings) == {"succeeded": RUNS},
        within=120,
        what=lambda: f"every greeting to succeed: {statuses(greetings)}\n{processes.outputs()}",
    )
    assert advertised("new")["acme_greet"] == version
    tried = attempts_of(greetings)
    assert len(tried) == RUNS and {a.status for a in tried} == {"succeeded"}  # one attempt each
    assert {a.worker_id for a in tried} == {"new"}
    db.session.rollback()
    rows = db.session.scalars(select(Execution).where(Execution.id.in_(greetings))).all()
    assert {(row.claimed_by, row.attempts, row.task_version) for row in rows} == {("new", 1, version)}
    assert old.popen.poll() is None and new.popen.poll() is None


def _witnessed(path: Path) -> list[tuple[int, int, str]]:
    """(execution, attempt, code) of every task process that ran."""
    if not path.exists():
        return []
    return [(int(e), int(a), code) for e, a, _, code in (line.split() for line in path.read_text().splitlines())]


def _deploy(module_dir: Path, code: str) -> str:
    """Write version `code` of the reloadable module; its file hash, as the worker computes it."""
    import hashlib

    path = write_module(module_dir, RELOADABLE_MODULE, reloadable_source(code))
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def _reloadable_worker(processes: FlaskProcesses, module_dir: Path, witness: Path, worker_id: str, *, slots: int):
    """A worker process running the reloadable module from `module_dir` (the test process knows
    its task too, to submit runs of it), logging JSON."""
    sys.path.insert(0, str(module_dir))
    try:
        load_catalog(RELOADABLE_MODULE)
    finally:
        sys.path.remove(str(module_dir))
    return processes.start_worker(
        "--workers",
        str(slots),
        "--worker-id",
        worker_id,
        env={
            "CRONWELL_TASK_MODULES": RELOADABLE_MODULE,
            "PYTHONPATH": on_path(module_dir),
            RELOADABLE_WITNESS: str(witness),
            "LOG_FORMAT": "json",
            "LOG_LEVEL": "INFO",
        },
    )


def test_a_worker_reloaded_under_load_loses_no_attempt_and_runs_none_twice(processes, tmp_path):
    module_dir, witness = tmp_path / "deploy", tmp_path / "witness.log"
    # Codes of different lengths: Python's bytecode cache tells a changed file by mtime and size,
    # and two versions written within one second with the same size would look the same to it.
    versions = {code: _deploy(module_dir, code) for code in ("v1",)}
    worker = _reloadable_worker(processes, module_dir, witness, "reloader", slots=4)
    wait_for(lambda: advertised("reloader"), within=60, what=lambda: worker.describe())
    assert advertised("reloader")["reloadable_witness"] == versions["v1"]
    ids = submit("reloadable_witness", STREAMED)

    def done() -> int:
        return statuses(ids).get("succeeded", 0)

    # Reload by SIGHUP while runs stream, then by the operator's command.
    wait_for(lambda: done() >= 50, within=120, what=lambda: f"50 runs done: {statuses(ids)}\n{worker.describe()}")
    versions["v22"] = _deploy(module_dir, "v22")
    worker.signal(signal.SIGHUP)
    wait_for(
        lambda: (advertised("reloader") or {}).get("reloadable_witness") == versions["v22"],
        within=120,
        what=lambda: f"the reloaded code to be advertised\n{worker.describe()}",
    )
    at_first_reload = done()
    assert at_first_reload < len(ids), "the runs did not stream through the reload"
    # A second wave of slower runs, the operator's reload while it streams, then a last wave.
    ids += submit("reloadable_witness", STREAMED, {"seconds": 0.1})
    versions["v333"] = _deploy(module_dir, "v333")
    command = processes.start("worker", "reload", "--worker-id", "reloader")
    assert command.wait_exit(within=60) == 0, command.describe()
    assert "Worker reloader told to reload" in command.output()
    wait_for(
        lambda: (advertised("reloader") or {}).get("reloadable_witness") == versions["v333"],
        within=120,
        what=lambda: f"the second reload\n{worker.describe()}",
    )
    assert done() < len(ids), "the runs did not stream through the second reload"
    ids += submit("reloadable_witness", 20)
    wait_for(
        lambda: done() == len(ids),
        within=180,
        what=lambda: f"every run to succeed: {statuses(ids)}\n{worker.describe()}",
    )

    # Nothing lost, nothing twice: one attempt per run, one task process per attempt.
    ran = _witnessed(witness)
    assert sorted(execution for execution, _, _ in ran) == sorted(ids)
    assert {attempt for _, attempt, _ in ran} == {1}
    tried = attempts_of(ids)
    assert len(tried) == len(ids) and {a.status for a in tried} == {"succeeded"}
    # Each run records the version of the code that ran it, and the three codes all ran.
    code_of = {execution: code for execution, _, code in ran}
    db.session.rollback()
    rows = db.session.scalars(select(Execution).where(Execution.id.in_(ids))).all()
    assert all(row.task_version == versions[code_of[row.id]] for row in rows)
    assert all(json.loads(row.result) == code_of[row.id] for row in rows)
    assert set(code_of.values()) == {"v1", "v22", "v333"}
    # Told, then reloaded: logged, and in the event log with how it was asked.
    logged = [line.get("event") for line in events(worker.output())]
    assert logged.count("worker_reload_received") == 2 and logged.count("worker_reloaded") == 2
    db.session.rollback()
    reloaded = db.session.scalars(select(Event).where(Event.type == "worker_reloaded").order_by(Event.id)).all()
    assert [(e.payload["worker_id"], e.payload["how"]) for e in reloaded] == [
        ("reloader", "SIGHUP"),
        ("reloader", "command"),
    ]
    assert reloaded[0].payload["changed"] == {"reloadable_witness": [versions["v1"], versions["v22"]]}
    requested = db.session.scalars(select(Event).where(Event.type == "worker_reload_requested")).all()
    assert [e.payload["worker_id"] for e in requested] == ["reloader"]
    assert worker.popen.poll() is None


def test_a_reload_whose_code_fails_to_import_keeps_the_code_that_ran(processes, tmp_path):
    """A deploy that breaks the module (here a syntax error): the reload fails, says so in the log
    and the event log with the module and the error, and the worker goes on running the code it
    had; the next good deploy reloads as usual."""
    module_dir, witness = tmp_path / "deploy", tmp_path / "witness.log"
    versions = {"v1": _deploy(module_dir, "v1")}
    worker = _reloadable_worker(processes, module_dir, witness, "broken-deploy", slots=2)
    wait_for(lambda: advertised("broken-deploy"), within=60, what=lambda: worker.describe())
    write_module(module_dir, RELOADABLE_MODULE, reloadable_source("v1") + "\ndef broken(:\n")
    worker.signal(signal.SIGHUP)

    def failures() -> list[Event]:
        db.session.rollback()
        return list(db.session.scalars(select(Event).where(Event.type == "worker_reload_failed")))

    wait_for(lambda: failures(), within=60, what=lambda: f"the reload to fail\n{worker.describe()}")
    [failed] = failures()
    assert failed.payload["worker_id"] == "broken-deploy" and failed.payload["how"] == "SIGHUP"
    assert RELOADABLE_MODULE in failed.payload["error"] and "SyntaxError" in failed.payload["error"]
    assert "worker_reload_failed" in [line.get("event") for line in events(worker.output())]
    assert advertised("broken-deploy")["reloadable_witness"] == versions["v1"]
    ids = submit("reloadable_witness", 10)
    wait_for(lambda: statuses(ids).get("succeeded", 0) == 10, within=60, what=lambda: f"{statuses(ids)}")
    assert {code for _, _, code in _witnessed(witness)} == {"v1"}

    versions["v22"] = _deploy(module_dir, "v22")
    worker.signal(signal.SIGHUP)
    wait_for(
        lambda: (advertised("broken-deploy") or {}).get("reloadable_witness") == versions["v22"],
        within=60,
        what=lambda: f"the good deploy to be advertised\n{worker.describe()}",
    )
    assert worker.popen.poll() is None
