"""`flask worker run` hands over to `python -m app.worker_process` (ADR 0012), on SQLite
and PostgreSQL.

The worker parent used to hold Flask, SQLAlchemy and the models for its whole life; the memory
target (a worker parent under 51 MB, Celery's main process) needs it without them. These tests run the real command line and look
inside the process that actually claims and runs: a `sitecustomize` module on PYTHONPATH (which
every interpreter imports at start, the exec'd one too) writes, as that interpreter exits, its
pid, its argv and the modules it held, and so does the `flask` process just before it execs
(an audit hook on `os.exec`). The exec keeps the pid, so the records whose pid is the `flask`
process's are the command line before the hand-over and the worker that drained the run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.clock import utcnow
from app.extensions import db
from app.models import Execution
from app.services.use_cases import jobs
from tests.factories import make_job

pytestmark = pytest.mark.timeout(120)

_SITECUSTOMIZE = """
import atexit, json, os, sys

def _record(moment):
    path = os.path.join(os.environ["CRONWELL_PROBE_DIR"], f"{moment}-{os.getpid()}.json")
    with open(path, "w") as out:
        json.dump({"pid": os.getpid(), "argv": sys.argv, "modules": sorted(sys.modules)}, out)

def _before_exec(event, args):
    if event == "os.exec":
        _record("exec")

atexit.register(_record, "exit")
sys.addaudithook(_before_exec)
"""

# What the exec'd worker parent must not hold: the ORM, the web framework, the models and the
# store built on them (the turn, leases and events it needs are text in app/sql).
HEAVY = ("sqlalchemy", "flask", "flask_sqlalchemy", "flask_migrate", "alembic", "app.models", "app.store")


def _probe_env(tmp_path) -> dict[str, str]:
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    (probe_dir / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    return {"PYTHONPATH": str(probe_dir), "CRONWELL_PROBE_DIR": str(probe_dir)}


def _record(env: dict[str, str], pid: int, moment: str = "exit") -> dict:
    records = [json.loads(p.read_text()) for p in sorted(Path(env["CRONWELL_PROBE_DIR"]).glob(f"{moment}-*.json"))]
    mine = [r for r in records if r["pid"] == pid]
    assert len(mine) == 1, f"expected one exit record for pid {pid}, got {[(r['pid'], r['argv']) for r in records]}"
    return mine[0]


def _heavy(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_worker_run_execs_a_parent_without_sqlalchemy_or_flask_and_drains(app, flask_processes, tmp_path):
    job = make_job(now=utcnow(), every="1d", name="lean", task="always_succeed")
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    env = _probe_env(tmp_path)

    worker = flask_processes.start_worker("--workers", "2", "--once", env=env)
    assert worker.wait_exit(within=60) == 0, worker.describe()

    db.session.rollback()  # a fresh read: the worker wrote in another process
    assert db.session.get(Execution, execution.id).status == "succeeded", worker.describe()
    record = _record(env, worker.pid)
    assert record["argv"][0].endswith("app/worker_process.py"), record["argv"]
    assert record["argv"][1:] == ["--workers", "2", "--metrics-host", "127.0.0.1", "--once"]
    assert "app.services.engine.worker" in record["modules"]
    assert "app.sql.turn" in record["modules"]
    assert _heavy(record["modules"]) == []
    # Nor did the `flask` process before it handed over (the worker app kind has no database and
    # registers `worker run` alone): the process's peak over its whole life is the lean one's.
    before = _record(env, worker.pid, "exec")
    assert before["argv"][1:3] == ["worker", "run"]
    assert "flask" in before["modules"]
    assert [m for m in _heavy(before["modules"]) if m.split(".")[0] != "flask"] == []


def test_the_probe_sees_sqlalchemy_and_flask_in_a_command_that_stays(app, flask_processes, tmp_path):
    """The same probe on `flask job list` finds the heavy modules: the check above can fail."""
    env = _probe_env(tmp_path)
    listing = flask_processes.start("job", "list", env=env)
    assert listing.wait_exit(within=60) == 0, listing.describe()
    record = _record(env, listing.pid)
    assert {"sqlalchemy", "flask", "app.models"} <= set(_heavy(record["modules"]))
