"""The worker's turn (record results, claim, start: one transaction, on PostgreSQL one
statement) failing once, as it does when the database restarts (deterministic versions of what
test_database_outages.py provokes with a real restart).

- Recording a finished task fails: the result must be kept and recorded on the next pass, not
  dropped. Dropping it left the execution `running` until its lease expired, ran the task a
  second time, and held the worker's slot until shutdown.
- Claiming fails: nothing is claimed, so the row is claimable again at once instead of sitting
  in flight until its lease expires.
- The turn took effect but its acknowledgement was lost (the connection dropped after the
  server committed): the worker's second try is refused by the guards, and nothing runs twice.
- `worker run --once` whose database keeps failing (unreachable, or no schema yet) backs off as
  a long-running worker does, then gives up with one error line and exit 1, instead of
  retrying for ever under the script that started it.
- A bug in the loop (an AttributeError, not the database) is not retried as database trouble:
  the worker stops at once with its traceback, and the worker process exits non-zero.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from app.clock import utcnow
from app.extensions import db
from app.models import Attempt, Execution
from app.services.engine.worker import Worker
from app.services.use_cases import jobs
from app.sql import turn
from tests.factories import make_job
from tests.helpers.processes import PROJECT_ROOT

pytestmark = pytest.mark.timeout(60)


def database_gone() -> OperationalError:
    return OperationalError("COMMIT", {}, Exception("server closed the connection unexpectedly"))


def fail_first_turn(monkeypatch, *, with_results: bool, after_commit: bool = False) -> list[int]:
    """Make the first worker turn that has (or has no) results to record fail as a lost
    connection would: before the statement reached the database (nothing happened), or with
    `after_commit` once it had taken effect (only the reply was lost)."""
    calls: list[int] = []
    original = turn.record_and_claim  # the worker's turn, on its own DB-API connection

    def flaky(conn, finished, **kwargs):
        if bool(finished) == with_results:
            calls.append(1)
            if len(calls) == 1:
                if after_commit:
                    original(conn, finished, **kwargs)
                    conn.commit()  # psycopg and sqlite3 alike: COMMIT whatever BEGIN was said
                raise database_gone()
        return original(conn, finished, **kwargs)

    monkeypatch.setattr(turn, "record_and_claim", flaky)
    return calls


def settled(execution_id: int) -> tuple[Execution, list[Attempt]]:
    db.session.rollback()
    row = db.session.get(Execution, execution_id)
    attempts = list(db.session.scalars(select(Attempt).where(Attempt.execution_id == execution_id)))
    return row, attempts


def test_a_result_whose_write_failed_is_recorded_on_the_next_pass(app, monkeypatch):
    job = make_job(now=utcnow(), every="1d", name="blip-on-complete")
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    calls = fail_first_turn(monkeypatch, with_results=True)
    worker = Worker(app, worker_id="blip", slots=1)

    stats = worker.run(burst=True)

    row, attempts = settled(execution.id)
    assert len(calls) == 2  # the failed write, then the retry with the same result
    assert (row.status, row.attempts, [a.status for a in attempts]) == ("succeeded", 1, ["succeeded"])
    assert worker.running == {} and stats.succeeded == 1


def test_claims_whose_start_failed_roll_back_and_run_on_the_next_pass(app, monkeypatch):
    job = make_job(now=utcnow(), every="1d", name="blip-on-start")
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    calls = fail_first_turn(monkeypatch, with_results=False)
    seen_after_failure = []
    flaky = turn.record_and_claim

    def looking(conn, finished, **kwargs):
        if len(calls) == 1:  # the pass after the failure sees the row pending, not claimed or running
            seen_after_failure.append(
                conn.execute(f"SELECT status FROM executions WHERE id = {int(execution.id)}").fetchone()[0]
            )
        return flaky(conn, finished, **kwargs)

    monkeypatch.setattr(turn, "record_and_claim", looking)
    Worker(app, worker_id="blip", slots=1).run(burst=True)

    row, attempts = settled(execution.id)
    assert seen_after_failure[:1] == ["pending"]
    assert len(calls) >= 2  # the failed turn, then at least the one that claimed again
    assert (row.status, row.attempts, [a.status for a in attempts]) == ("succeeded", 1, ["succeeded"])


def test_a_recorded_result_whose_acknowledgement_was_lost_is_not_recorded_twice(app, monkeypatch):
    job = make_job(now=utcnow(), every="1d", name="blip-after-commit")
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    calls = fail_first_turn(monkeypatch, with_results=True, after_commit=True)
    worker = Worker(app, worker_id="blip", slots=1)

    stats = worker.run(burst=True)

    row, attempts = settled(execution.id)
    assert len(calls) == 2  # the turn that took effect, then the retry, which the guard refuses
    assert (row.status, row.attempts, [a.status for a in attempts]) == ("succeeded", 1, ["succeeded"])
    assert worker.running == {} and stats.discarded == 1 and stats.claimed == 1


def test_a_drain_whose_database_keeps_failing_gives_up_with_one_error_line(tmp_path, monkeypatch, capsys):
    from app import worker_process
    from app.services.engine import worker as worker_module

    # A database file without the schema: every statement fails ("no such table"), as a worker
    # started before `flask db upgrade` sees it.
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    monkeypatch.setenv("INSTANCE_DIR", str(tmp_path))
    naps: list[float] = []  # the back-off, without waiting it out
    monkeypatch.setattr(worker_module, "time", SimpleNamespace(monotonic=time.monotonic, sleep=naps.append))

    assert worker_process.main(["--once", "--workers", "1"]) == 1

    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, errors
    assert errors[0].startswith("Error: the database kept failing, giving up: ")
    assert "no such table" in errors[0]
    assert naps == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]  # the long-running worker's back-off, then stop


def test_a_bug_in_the_loop_stops_the_worker_with_its_traceback_instead_of_retrying(app, monkeypatch, caplog):
    job = make_job(now=utcnow(), every="1d", name="bug-in-turn")
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    calls: list[int] = []

    def broken(conn, finished, **kwargs):
        calls.append(1)
        raise AttributeError("'ForkServer' object has no attribute 'submit_within'")

    monkeypatch.setattr(turn, "record_and_claim", broken)
    worker = Worker(app, worker_id="buggy", slots=1)

    with pytest.raises(AttributeError, match="submit_within"):
        worker.run(burst=True)

    assert calls == [1]  # not retried with back-off as if the database were down
    assert "worker_gave_up" not in {getattr(record, "event", None) for record in caplog.records}
    crashed = [record for record in caplog.records if getattr(record, "event", None) == "worker_crashed"]
    assert len(crashed) == 1 and crashed[0].exc_info is not None
    row, attempts = settled(execution.id)
    assert (row.status, attempts) == ("pending", [])  # untouched, claimable by the next worker


# The worker process (`python -m app.worker_process`, what `flask worker run` becomes) with the same
# bug planted in its turn before it starts.
_BUGGY_WORKER_PROCESS = """
import sys
from app.sql import turn

def broken(conn, finished, **kwargs):
    raise AttributeError("'ForkServer' object has no attribute 'submit_within'")

turn.record_and_claim = broken
from app.worker_process import main
sys.exit(main(["--once", "--workers", "1", "--worker-id", "buggy-process"]))
"""


def test_a_bug_in_the_loop_ends_the_worker_process_at_once_with_exit_1_and_its_traceback(app, app_env):
    job = make_job(now=utcnow(), every="1d", name="bug-in-process")
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    started = time.monotonic()

    result = subprocess.run(
        [sys.executable, "-c", _BUGGY_WORKER_PROCESS],
        env={**os.environ, **app_env, "LOG_LEVEL": "INFO"},
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=50,
    )

    assert result.returncode == 1, result.stderr[-3000:]
    assert time.monotonic() - started < 30  # no minute of back-off (1 + 2 + 4 + 8 + 16 + 30 s)
    assert "worker stopped by an unexpected error" in result.stderr
    assert "Traceback (most recent call last)" in result.stderr and "submit_within" in result.stderr
    assert "worker loop failed; retrying" not in result.stderr
    assert "the database kept failing" not in result.stderr
    row, attempts = settled(execution.id)
    assert (row.status, attempts) == ("pending", [])  # untouched, claimable by the next worker
