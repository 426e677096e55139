"""The worker's turn (app/sql/turn.py) on a bare DB-API connection - psycopg, or sqlite3 in
autocommit mode after the caller's BEGIN IMMEDIATE, what the worker parent is to hold (ADR 0012)
- and under SQLAlchemy, on both databases: what it records, starts and cancels, and that both
connection kinds leave the same rows."""

from __future__ import annotations

import sqlite3
from contextlib import closing, contextmanager
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import psycopg
from sqlalchemy import select

from app.database import write_transaction
from app.domain.policies import lease_duration
from app.domain.states import AttemptStatus
from app.models import Attempt, Execution, Job, Queue
from app.sql import turn
from app.sql.rows import DISABLED_BEFORE_RUN, Finished, Outcome
from tests.factories import make_execution, make_job, make_queue

NOW = datetime(2026, 12, 2, 5, 30, 0, 250_001, tzinfo=UTC)
RETRY_AT = NOW + timedelta(seconds=30)
LEASE = dict(lease_seconds=60, buffer_seconds=30)


@contextmanager
def bare_transaction(db, *, commit: bool = True):
    """A bare DB-API connection inside a write transaction, as the worker parent will hold it:
    psycopg (its implicit transaction), or sqlite3 in autocommit mode with BEGIN IMMEDIATE."""
    url = db.engine.url
    if url.get_backend_name() == "postgresql":
        connection = psycopg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    else:
        connection = sqlite3.connect(url.database, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
    with closing(connection):
        yield connection
        if commit:
            connection.commit()
        else:
            connection.rollback()


def scenario(prefix: str) -> dict:
    """Two runs of a worker w-1 to record, a limited queue (limit 1) with two due runs, a due run
    of a job disabled since it was queued, and three due runs of an unlimited queue, in queues of
    their own: {role: execution id}, and the queue ids under "queues"."""
    limited = make_queue(f"{prefix}-limited", now=NOW, concurrency_limit=1)
    plain = make_queue(f"{prefix}-plain", now=NOW)
    done = make_job(name=f"{prefix}-done", now=NOW, overlap_policy="allow", queue=plain.name, max_attempts=3)
    throttled = make_job(name=f"{prefix}-throttled", now=NOW, overlap_policy="allow", queue=limited.name)
    disabled = make_job(name=f"{prefix}-disabled", now=NOW, overlap_policy="allow", queue=plain.name)
    ready = make_job(
        name=f"{prefix}-ready",
        now=NOW,
        overlap_policy="allow",
        queue=plain.name,
        task="echo",
        config={"message": "hi"},
        timeout_seconds=120,
    )
    lease = NOW + timedelta(seconds=60)
    ids = {
        "ok": make_execution(done, "running", now=NOW, claimed_by="w-1", lease_expires_at=lease).id,
        "flaky": make_execution(done, "running", now=NOW, claimed_by="w-1", lease_expires_at=lease).id,
        "limited_1": make_execution(throttled, "pending", now=NOW).id,
        "limited_2": make_execution(throttled, "pending", now=NOW).id,
        "disabled": make_execution(disabled, "pending", now=NOW).id,
        "ready_1": make_execution(ready, "pending", now=NOW).id,
        "ready_2": make_execution(ready, "pending", now=NOW).id,
        "ready_3": make_execution(ready, "pending", now=NOW).id,
    }
    # Disabled after its run was queued, so the run is still pending (disabling through the
    # service would cancel it).
    from app.extensions import db

    db.session.execute(Job.__table__.update().where(Job.id == disabled.id).values(enabled=False))
    db.session.commit()
    return {**ids, "queues": [limited.id, plain.id], "limited_queue": limited.id}


def executions_of(ids: dict) -> dict[str, int]:
    return {role: value for role, value in ids.items() if role not in {"queues", "limited_queue"}}


def finished(ids: dict) -> list[Finished]:
    return [
        Finished(ids["ok"], 1, Outcome(AttemptStatus.SUCCEEDED, 0, "fine", "", pid=41), retry_at=None),
        Finished(ids["flaky"], 1, Outcome(AttemptStatus.FAILED, 1, "", "boom", pid=42), retry_at=RETRY_AT),
    ]


def run_turn(conn, ids: dict, *, worker_id: str = "w-1", limit: int = 5, queues=None, items=None):
    return turn.record_and_claim(
        conn,
        finished(ids) if items is None else items,
        worker_id=worker_id,
        now=NOW,
        limit=limit,
        queue_ids=queues,
        **LEASE,
    )


def rows(db, ids: dict) -> dict:
    """Each role's execution and attempts as the ORM reads them, without ids or names."""
    db.session.rollback()
    found = {}
    for role, execution_id in executions_of(ids).items():
        e = db.session.get(Execution, execution_id)
        tried = db.session.scalars(select(Attempt).where(Attempt.execution_id == e.id).order_by(Attempt.number))
        found[role] = (
            (e.status, e.claimed_by, e.attempts, e.holds_slot, e.reason, e.finished_at, e.available_at),
            (e.lease_expires_at, e.exit_code, e.output, e.error),
            [(a.number, a.status, a.worker_id, a.finished_at, a.exit_code, a.pid, a.output, a.error) for a in tried],
        )
    found["slots_taken"] = db.session.get(Queue, ids["limited_queue"]).slots_taken
    return found


def described(result, ids: dict) -> dict:
    """The Turn by role, each claimed row without what differs between scenarios."""
    role_of = {execution_id: role for role, execution_id in executions_of(ids).items()}
    kept = lambda item: {  # noqa: E731
        k: v for k, v in asdict(item).items() if k not in {"id", "job_id", "job_name", "queue_id", "idempotency_key"}
    }
    return {
        "recorded": sorted(role_of[i] for i in result.recorded),
        "started": [(role_of[item.id], number, kept(item)) for item, number in result.started],
        "cancelled": [(role_of[item.id], kept(item)) for item in result.cancelled],
    }


def test_a_bare_turn_records_claims_within_the_limits_and_cancels_a_disabled_jobs_run(db):
    ids = scenario("a")

    with bare_transaction(db) as conn:
        result = run_turn(conn, ids, limit=5)

    assert result.recorded == {ids["ok"], ids["flaky"]}
    # Five candidates in claim order: the limited queue's two (one slot: one starts, the other
    # stays pending), the disabled job's run (cancelled), two of the ready job's three.
    assert [(item.id, number) for item, number in result.started] == [
        (ids["limited_1"], 1),
        (ids["ready_1"], 1),
        (ids["ready_2"], 1),
    ]
    assert [item.id for item in result.cancelled] == [ids["disabled"]]
    ready = result.started[1][0]
    assert (ready.config, ready.job_enabled, ready.attempts, ready.timeout_seconds) == ({"message": "hi"}, True, 0, 120)
    assert ready.lease_expires_at == NOW + lease_duration(120, **LEASE)
    assert ready.scheduled_for.tzinfo is not None and ready.scheduled_for == NOW - timedelta(minutes=1)

    found = rows(db, ids)
    assert found["ok"][0] == ("succeeded", "w-1", 1, False, None, NOW, found["ok"][0][6])
    assert found["ok"][1][1:] == (0, "fine", "")
    assert found["ok"][2] == [(1, "succeeded", found["ok"][2][0][2], NOW, 0, 41, "fine", "")]
    assert found["flaky"][0] == ("retry_scheduled", None, 1, False, None, None, RETRY_AT)
    assert found["flaky"][2][0][1:2] + found["flaky"][2][0][3:] == ("failed", NOW, 1, 42, "", "boom")
    assert found["limited_1"][0][:4] == ("running", "w-1", 1, True)
    assert found["limited_1"][2] == [(1, "running", "w-1", None, None, None, "", "")]
    assert found["ready_1"][0][:4] == ("running", "w-1", 1, False)
    assert found["ready_1"][1][0] == NOW + lease_duration(120, **LEASE)
    assert found["limited_2"][0][:3] == ("pending", None, 0) and found["limited_2"][2] == []
    assert found["ready_3"][0][:3] == ("pending", None, 0)
    assert found["disabled"][0][:2] == ("cancelled", None) and found["disabled"][0][4:6] == (DISABLED_BEFORE_RUN, NOW)
    assert found["slots_taken"] == 1


def test_a_second_workers_guarded_record_writes_nothing_bare(db):
    ids = scenario("b")
    before = rows(db, ids)

    with bare_transaction(db) as conn:
        result = run_turn(conn, ids, worker_id="w-2", limit=0)

    assert (result.recorded, result.started, result.cancelled) == (set(), [], [])
    assert rows(db, ids) == before
    assert before["ok"][0][:2] == ("running", "w-1") and before["ok"][2][0][1] == "running"


def test_a_bare_turn_commits_nothing_itself(db):
    ids = scenario("c")
    before = rows(db, ids)

    with bare_transaction(db, commit=False) as conn:
        result = run_turn(conn, ids)
        assert len(result.started) == 3 and len(result.recorded) == 2

    assert rows(db, ids) == before


def test_the_turn_leaves_the_same_rows_bare_and_under_sqlalchemy(db):
    """Two copies of the scenario, each in its own queues: one turn on a bare connection, the
    same turn under SQLAlchemy's write transaction; the queue filter keeps each to its own."""
    bare_ids, orm_ids = scenario("bare"), scenario("orm")

    with bare_transaction(db) as conn:
        bare = described(run_turn(conn, bare_ids, queues=bare_ids["queues"]), bare_ids)
    with write_transaction(db.engine) as conn:
        under = described(run_turn(conn, orm_ids, queues=orm_ids["queues"]), orm_ids)

    assert bare == under
    assert [role for role, _, _ in bare["started"]] == ["limited_1", "ready_1", "ready_2"]
    bare_rows, orm_rows = rows(db, bare_ids), rows(db, orm_ids)
    # The attempts' worker ids and the executions' available_at are the same too; only ids and
    # names differ, and rows() leaves those out.
    assert bare_rows == orm_rows
    assert orm_rows["ready_3"][0][0] == "pending" and orm_rows["flaky"][0][0] == "retry_scheduled"
