"""The references to an execution (attempts, dead letters, alerts, retries, callbacks) keep their
integrity on both databases: SQLite through its declared foreign keys, PostgreSQL through the
set-based triggers of migration 0016 (ADR 0011). An orphan is refused, a delete cascades or sets
NULL exactly as the constraints did, and on PostgreSQL a reference inserted by one connection
while another deletes its execution never outlives the execution, whichever commits first."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError

from app.database import write_transaction
from app.extensions import db
from tests.factories import make_alert, make_execution, make_job
from tests.helpers.pg import plain_url
from tests.helpers.processes import wait_for

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)

# The referencing columns and a statement that makes each one point at execution :x.
REFERENCES = {
    "attempts.execution_id": (
        "INSERT INTO attempts (execution_id, number, worker_id, status, started_at, output, error)"
        " VALUES (:x, 9, 'w', 'running', :now, '', '')"
    ),
    "dead_letters.execution_id": (
        "INSERT INTO dead_letters (execution_id, job_id, reason, created_at) VALUES (:x, :job, 'gone', :now)"
    ),
    "alerts.execution_id": (
        "INSERT INTO alerts (execution_id, kind, message, created_at, occurrences) VALUES (:x, 'k', 'm', :now, 1)"
    ),
    "executions.retry_of_id": "UPDATE executions SET retry_of_id = :x WHERE id = :other",
    "executions.parent_id": "UPDATE executions SET parent_id = :x WHERE id = :other",
}


def _run(sql: str, **params) -> None:
    with write_transaction(db.engine) as conn:
        conn.execute(text(sql), {"now": NOW, **params})


def _rows(sql: str, **params) -> list[tuple]:
    with db.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(text(sql), params)]


def _orphans() -> list[tuple]:
    """Every reference to an execution that does not exist."""
    checks = [
        f"SELECT '{table}.{column}', {column} FROM {table} AS r WHERE {column} IS NOT NULL"
        f" AND NOT EXISTS (SELECT 1 FROM executions AS e WHERE e.id = r.{column})"
        for table, column in (ref.split(".") for ref in REFERENCES)
    ]
    return _rows(" UNION ALL ".join(checks))


@pytest.mark.parametrize("reference", sorted(REFERENCES))
def test_a_reference_to_a_missing_execution_is_refused(app, reference):
    job = make_job(now=NOW)
    other = make_execution(job, "succeeded", now=NOW)
    with pytest.raises(IntegrityError):
        _run(REFERENCES[reference], x=other.id + 1000, job=job.id, other=other.id)
    _run(REFERENCES[reference], x=other.id, job=job.id, other=other.id)  # an existing one is fine
    assert _orphans() == []


def test_moving_a_reference_to_a_missing_execution_is_refused(app):
    job = make_job(now=NOW)
    execution = make_execution(job, "failed", now=NOW)
    make_alert(job, execution, now=NOW)
    for table in ("attempts", "alerts"):
        with pytest.raises(IntegrityError):
            _run(f"UPDATE {table} SET execution_id = :x", x=execution.id + 1000)
    _run("UPDATE alerts SET execution_id = NULL")  # letting go is always allowed
    assert _rows("SELECT execution_id FROM alerts") == [(None,)]


def _history():
    """An execution with two attempts, a dead letter and an alert; its retry (with an attempt and
    an alert); a callback of the first whose retry_of_id is the retry; and an unrelated run."""
    job = make_job(now=NOW)
    first = make_execution(job, "dead_lettered", now=NOW, attempts=2)
    retry = make_execution(job, "failed", now=NOW, retry_of_id=first.id)
    callback = make_execution(job, "succeeded", now=NOW, parent_id=first.id, retry_of_id=retry.id)
    unrelated = make_execution(job, "succeeded", now=NOW)
    for execution in (first, retry, callback):
        make_alert(job, execution, now=NOW)
    ids = job.id, first.id, retry.id, callback.id, unrelated.id
    db.session.rollback()  # the session's read ends before another connection writes (SQLite)
    _run(REFERENCES["dead_letters.execution_id"], x=first.id, job=job.id)
    return ids


def _state() -> dict:
    return {
        "attempts": _rows("SELECT execution_id, number FROM attempts ORDER BY execution_id, number"),
        "dead_letters": _rows("SELECT execution_id FROM dead_letters"),
        "alerts": _rows("SELECT id, execution_id FROM alerts ORDER BY id"),
        "executions": _rows("SELECT id, retry_of_id, parent_id FROM executions ORDER BY id"),
    }


def test_deleting_executions_cascades_to_attempts_and_dead_letters_and_lets_go_of_the_rest(app):
    job, first, retry, callback, unrelated = _history()
    alerts = [row[0] for row in _rows("SELECT id FROM alerts ORDER BY id")]
    # One statement deleting an execution and its retry (whose callback refers to both).
    _run("DELETE FROM executions WHERE id IN (:a, :b)", a=first, b=retry)
    assert _state() == {
        "attempts": [(callback, 1), (unrelated, 1)],
        "dead_letters": [],
        "alerts": [(alerts[0], None), (alerts[1], None), (alerts[2], callback)],
        "executions": [(callback, None, None), (unrelated, None, None)],
    }
    # Deleting the job deletes the rest of its history through the same rules.
    _run("DELETE FROM jobs WHERE id = :job", job=job)
    assert _state() == {
        "attempts": [],
        "dead_letters": [],
        "alerts": [(alerts[0], None), (alerts[1], None), (alerts[2], None)],
        "executions": [],
    }


def test_retention_deletes_through_the_store_with_the_same_effects(app):
    from app.store import store_for

    _job, first, retry, callback, unrelated = _history()
    with write_transaction(db.engine) as conn:
        assert store_for(conn).delete_executions(conn, [retry, first, unrelated]) == 3
    state = _state()
    assert state["attempts"] == [(callback, 1)]
    assert state["dead_letters"] == []
    assert state["executions"] == [(callback, None, None)]
    assert [execution for _, execution in state["alerts"]] == [None, None, callback]


# --- PostgreSQL: what the triggers add to the constraints' rules, and concurrency ------------------


def test_an_execution_keeps_its_id_and_is_truncated_only_with_its_references(pg_app):
    job = make_job(now=NOW)
    execution = make_execution(job, "succeeded", now=NOW).id
    db.session.rollback()  # TRUNCATE waits for every other transaction on the table
    with pytest.raises(IntegrityError, match="cannot change"):
        _run("UPDATE executions SET id = id + 1000 WHERE id = :x", x=execution)
    # Refused by the trigger, or first by PostgreSQL itself for workflow_runs' real foreign key.
    with pytest.raises(DBAPIError, match="cannot truncate (executions|a table referenced in a foreign key)"):
        _run("TRUNCATE executions")
    _run("TRUNCATE executions, attempts, dead_letters, alerts CASCADE")
    assert _rows("SELECT count(*) FROM executions") == [(0,)]


@pytest.mark.parametrize("level", ["REPEATABLE READ", "SERIALIZABLE"])
def test_executions_are_deleted_at_read_committed_only(pg_app, level):
    job = make_job(now=NOW)
    execution = make_execution(job, "succeeded", now=NOW)
    with db.engine.connect().execution_options(isolation_level=level) as conn:
        with pytest.raises(DBAPIError, match="READ COMMITTED"):
            with conn.begin():
                conn.execute(text("DELETE FROM executions WHERE id = :x"), {"x": execution.id})
        with conn.begin():  # deleting nothing is harmless at any level
            conn.execute(text("DELETE FROM executions WHERE id = :x"), {"x": execution.id + 1000})
    assert _rows("SELECT count(*) FROM attempts WHERE execution_id = :x", x=execution.id) == [(1,)]


def _connections(url: str, count: int) -> list[psycopg.Connection]:
    return [psycopg.connect(plain_url(url)) for _ in range(count)]


def _waiting_on_a_lock(observer: psycopg.Connection, pid: int) -> bool:
    row = observer.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


def _in_thread(work) -> tuple[threading.Thread, dict]:
    """Run `work()` in a thread; the dict gets its `result` or its `error`."""
    out: dict = {}

    def run():
        try:
            out["result"] = work()
        except Exception as error:  # noqa: BLE001 - the test reads it
            out["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


ATTEMPT = (
    "INSERT INTO attempts (execution_id, number, worker_id, status, started_at, output, error)"
    " VALUES (%s, 2, 'w', 'running', now(), '', '')"
)


def _race(pg_url: str, execution_id: int, *, first: str, ends: str) -> Exception | None:
    """`first` ("insert" an attempt for the execution, or "delete" it) runs on one connection and
    keeps its transaction open; the other statement starts on a second connection and has to wait
    for the first's lock; then the first transaction ends (`ends`: "commit" or "rollback") and the
    second commits if its statement succeeded. Returns the second statement's error, if any."""
    statements = {
        "insert": (ATTEMPT, (execution_id,)),
        "delete": ("DELETE FROM executions WHERE id = %s", (execution_id,)),
    }
    second = "delete" if first == "insert" else "insert"
    holder, waiter, observer = _connections(pg_url, 3)
    observer.autocommit = True
    try:
        holder.execute(*statements[first])
        thread, out = _in_thread(lambda: waiter.execute(*statements[second]))
        pid = waiter.info.backend_pid
        wait_for(lambda: _waiting_on_a_lock(observer, pid), within=30, what=f"the {second} waiting for the lock")
        getattr(holder, ends)()
        thread.join(30)
        error = out.get("error")
        if error is None:
            waiter.commit()
        return error
    finally:
        for conn in (holder, waiter, observer):
            conn.close()


def test_an_attempt_committed_while_its_execution_is_deleted_goes_with_it(pg_app, pg_url):
    execution = make_execution(make_job(now=NOW), "failed", now=NOW).id
    # The open insert holds the execution FOR KEY SHARE: the delete waits, then cascades to it.
    assert _race(pg_url, execution, first="insert", ends="commit") is None
    assert _rows("SELECT count(*) FROM executions WHERE id = :x", x=execution) == [(0,)]
    assert _orphans() == []


def test_an_attempt_for_an_execution_being_deleted_is_refused_once_the_delete_commits(pg_app, pg_url):
    execution = make_execution(make_job(now=NOW), "failed", now=NOW).id
    error = _race(pg_url, execution, first="delete", ends="commit")
    assert isinstance(error, psycopg.errors.ForeignKeyViolation), error
    assert _orphans() == []


def test_an_attempt_for_an_execution_whose_delete_rolls_back_is_kept(pg_app, pg_url):
    execution = make_execution(make_job(now=NOW), "failed", now=NOW).id
    assert _race(pg_url, execution, first="delete", ends="rollback") is None
    assert _rows("SELECT number FROM attempts WHERE execution_id = :x ORDER BY number", x=execution) == [(1,), (2,)]


def test_racing_inserts_and_batch_deletes_never_leave_an_orphan(pg_app, pg_url):
    """Two real connections go at the same executions at once, without any ordering from the test:
    one adds attempts one execution at a time, the other deletes them in batches, as retention does."""
    job = make_job(now=NOW)
    ids = [make_execution(job, "failed", now=NOW, attempt_rows=False).id for _ in range(300)]
    inserter, deleter = _connections(pg_url, 2)
    inserter.autocommit = deleter.autocommit = True
    outcomes = {"inserted": 0, "refused": 0}

    def insert_all():
        for execution_id in ids:
            try:
                inserter.execute(ATTEMPT, (execution_id,))
                outcomes["inserted"] += 1
            except psycopg.errors.ForeignKeyViolation:
                outcomes["refused"] += 1

    def delete_all():
        for start in range(len(ids) - 20, -20, -20):  # from the other end, so they meet midway
            deleter.execute("DELETE FROM executions WHERE id = ANY(%s)", (ids[max(0, start) : start + 20],))

    try:
        threads = [threading.Thread(target=insert_all), threading.Thread(target=delete_all)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        inserter.close()
        deleter.close()
    assert outcomes["inserted"] + outcomes["refused"] == len(ids)
    assert _rows("SELECT count(*) FROM executions") == [(0,)]
    assert _rows("SELECT count(*) FROM attempts") == [(0,)]
    assert _orphans() == []
