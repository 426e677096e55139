"""The statements of app/sql on a bare DB-API connection (psycopg, sqlite3: what the worker
parent is to hold, ADR 0012) and under a SQLAlchemy connection (everyone else) write and read
the same rows, on both databases, with the values the ORM's column types give."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing, contextmanager
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from app import clock
from app.clock import iso_z
from app.models import Alert, AlertMute, Attempt, Batch, DeadLetter, Event, Execution, Heartbeat, Queue, WorkerCommand
from app.models.types import UTCDateTime
from app.services.engine import callbacks, worker_commands
from app.services.engine.dead_letters import dead_letter
from app.services.use_cases import batches
from app.sql import alerts, control, follow_ups, heartbeats, leases, queues, recovery, waiting
from app.sql.transport import Statement, execute
from app.store import ExpiredLease
from tests.factories import make_execution, make_job, make_queue

NOW = datetime(2026, 12, 2, 5, 30, 0, 250_001, tzinfo=UTC)


@contextmanager
def bare_connection(db):
    """A DB-API connection of the driver the app uses, outside SQLAlchemy, committed on exit."""
    url = db.engine.url
    if url.get_backend_name() == "postgresql":
        connection = psycopg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    else:
        connection = sqlite3.connect(url.database)
    with closing(connection):
        yield connection
        connection.commit()


def fresh(db, model, key):
    db.session.rollback()
    return db.session.get(model, key)


def test_a_heartbeat_written_bare_reads_back_through_the_orm_as_written(db):
    info = {"state": "running", "slots": 4, "executions": [1, 2], "note": "50% busy"}
    with bare_connection(db) as conn:
        heartbeats.upsert(conn, process_id="w-1", kind="worker", host="h", pid=7, started_at=NOW, now=NOW, info=info)

    row = fresh(db, Heartbeat, "w-1")
    assert (row.kind, row.host, row.pid, row.started_at, row.last_seen, row.info) == (
        "worker",
        "h",
        7,
        NOW,
        NOW,
        info,
    )

    later = NOW + timedelta(seconds=5)
    with bare_connection(db) as conn:  # the same id again: refreshed, not a second row
        heartbeats.upsert(
            conn, process_id="w-1", kind="worker", host="h2", pid=8, started_at=NOW, now=later, info={"state": "idle"}
        )
    row = fresh(db, Heartbeat, "w-1")
    assert (row.host, row.pid, row.last_seen, row.info) == ("h2", 8, later, {"state": "idle"})
    assert db.session.query(Heartbeat).count() == 1


def test_the_same_statement_reads_alike_bare_and_under_sqlalchemy(db):
    """Rows written by the ORM (its column types) and read by the transport both ways."""
    db.session.add(Heartbeat(id="w-2", kind="worker", host="h", pid=1, started_at=NOW, last_seen=NOW, info={"a": [1]}))
    db.session.commit()
    read = Statement(
        "SELECT started_at, info FROM heartbeats WHERE id = :id", returns_datetimes=(0,), returns_documents=(1,)
    )
    with bare_connection(db) as conn:
        bare = execute(conn, read, {"id": "w-2"}).rows
    with db.engine.connect() as conn:
        under = execute(conn, read, {"id": "w-2"}).rows
    assert bare == under == [(NOW, {"a": [1]})]
    assert bare[0][0].tzinfo is UTC


def test_the_database_clock_is_read_aware_and_current(db):
    with bare_connection(db) as conn:
        bare = heartbeats.database_now(conn)
    with db.engine.connect() as conn:
        under = heartbeats.database_now(conn)
    assert bare.tzinfo is UTC and under.tzinfo is UTC
    assert abs(under - clock.host_now()) < timedelta(seconds=5)
    assert timedelta(0) <= under - bare < timedelta(seconds=5)


def test_leases_renew_bare_only_for_the_owner_and_never_shorten(db):
    job = make_job(name="leases", now=NOW, overlap_policy="allow")
    mine = make_execution(job, "running", now=NOW, claimed_by="w-1", lease_expires_at=NOW + timedelta(seconds=10))
    long_one = make_execution(job, "running", now=NOW, claimed_by="w-1", lease_expires_at=NOW + timedelta(hours=2))
    theirs = make_execution(job, "running", now=NOW, claimed_by="w-9", lease_expires_at=NOW + timedelta(seconds=10))
    done = make_execution(job, "succeeded", now=NOW, claimed_by="w-1")
    ids = [mine.id, long_one.id, theirs.id, done.id]

    with bare_connection(db) as conn:
        renewed = leases.renew_leases(conn, ids, worker_id="w-1", now=NOW, lease_seconds=60)

    assert renewed == {mine.id: NOW + timedelta(seconds=60), long_one.id: NOW + timedelta(hours=2)}
    assert fresh(db, Execution, mine.id).lease_expires_at == NOW + timedelta(seconds=60)
    assert fresh(db, Execution, theirs.id).lease_expires_at == NOW + timedelta(seconds=10)
    with db.engine.begin() as conn:  # and the same statement under SQLAlchemy, later
        again = leases.renew_leases(conn, ids, worker_id="w-1", now=NOW + timedelta(seconds=30), lease_seconds=60)
    assert again == {mine.id: NOW + timedelta(seconds=90), long_one.id: NOW + timedelta(hours=2)}
    assert leases.renew_leases(db.session.connection(), [], worker_id="w-1", now=NOW, lease_seconds=60) == {}


def test_commands_are_taken_once_and_cancel_requests_read_bare(db):
    with db.engine.begin() as conn:
        for command in ("drain", "stop"):
            worker_commands.issue(conn, worker_id="w-1", command=command, issued_by="op", now=NOW)
        worker_commands.issue(conn, worker_id="w-2", command="stop", issued_by="op", now=NOW)
    job = make_job(name="cancels", now=NOW, overlap_policy="allow")
    asked = make_execution(job, "running", now=NOW, claimed_by="w-1", cancel_requested_at=NOW, cancel_requested_by="op")
    make_execution(job, "running", now=NOW, claimed_by="w-1")  # not asked
    make_execution(job, "running", now=NOW, claimed_by="w-2", cancel_requested_at=NOW, cancel_requested_by="op")

    with bare_connection(db) as conn:
        assert control.has_unacted(conn, "w-1") and not control.has_unacted(conn, "nobody")
        assert control.cancel_requests(conn, worker_id="w-1") == {asked.id: "op"}
        assert control.take_commands(conn, worker_id="w-1", now=NOW) == ["drain", "stop"]
        assert control.take_commands(conn, worker_id="w-1", now=NOW) == []

    db.session.rollback()
    stamped = db.session.query(WorkerCommand).filter_by(worker_id="w-1").all()
    assert [c.acted_at for c in stamped] == [NOW, NOW]
    assert db.session.query(WorkerCommand).filter_by(worker_id="w-2").one().acted_at is None


def test_a_percent_sign_and_no_parameters_both_reach_the_database_as_written(db):
    with_parameter = Statement("SELECT CAST(:word AS text) || ' 100%'")
    without = Statement("SELECT '100%'")
    with bare_connection(db) as conn:
        assert execute(conn, with_parameter, {"word": "at"}).scalar() == "at 100%"
        assert execute(conn, without).scalar() == "100%"
    with db.engine.connect() as conn:
        assert execute(conn, with_parameter, {"word": "at"}).scalar() == "at 100%"
        assert execute(conn, without).scalar() == "100%"


def test_a_naive_datetime_is_refused_before_anything_is_written(db):
    with bare_connection(db) as conn:
        with pytest.raises(ValueError, match="naive datetime"):
            heartbeats.upsert(
                conn,
                process_id="w-3",
                kind="worker",
                host="h",
                pid=1,
                started_at=NOW.replace(tzinfo=None),
                now=NOW,
                info={},
            )
    assert fresh(db, Heartbeat, "w-3") is None


def test_the_earliest_claimable_time_and_queue_names_read_bare(db):
    make_queue("reports", now=NOW)
    job = make_job(name="waiting", now=NOW, overlap_policy="allow", queue="reports")
    other = make_job(name="elsewhere", now=NOW, overlap_policy="allow")
    make_execution(job, "pending", now=NOW, available_at=NOW + timedelta(seconds=30))
    make_execution(job, "retry_scheduled", now=NOW, available_at=NOW + timedelta(seconds=20))
    make_execution(other, "pending", now=NOW, available_at=NOW + timedelta(seconds=10))
    make_execution(job, "pending", now=NOW, available_at=NOW - timedelta(seconds=5))  # due already: not later

    with bare_connection(db) as conn:
        ids = queues.queue_ids(conn, ["reports", "nope"])
        assert ids == {"reports": job.queue_id}
        assert queues.queue_names(conn) == sorted(["default", "reports"])
        assert waiting.earliest_claimable(conn, after=NOW) == NOW + timedelta(seconds=10)
        assert waiting.earliest_claimable(conn, after=NOW, queue_ids=[job.queue_id]) == NOW + timedelta(seconds=20)
        assert waiting.earliest_claimable(conn, after=NOW + timedelta(seconds=30)) is None


def test_the_idle_look_reads_the_earliest_waiting_row_orders_and_expired_leases_at_once(db):
    job = make_job(name="looked-at", now=NOW, overlap_policy="allow")
    make_execution(job, "pending", now=NOW, available_at=NOW + timedelta(seconds=40))
    running = make_execution(job, "running", now=NOW, claimed_by="w-9", lease_expires_at=NOW + timedelta(seconds=60))
    with bare_connection(db) as conn:
        look = waiting.idle_look(conn, worker_id="w-9", now=NOW)
        assert (look.earliest, look.orders, look.expired_leases) == (NOW + timedelta(seconds=40), False, False)
        # A minute later that lease has run out: an idle worker's look sees recovery has work.
        assert waiting.idle_look(conn, worker_id="w-9", now=NOW + timedelta(seconds=61)).expired_leases
    db.session.execute(
        Execution.__table__.update()
        .where(Execution.id == running.id)
        .values(status="succeeded", finished_at=NOW, lease_expires_at=None)
    )
    db.session.commit()
    with bare_connection(db) as conn:
        assert not waiting.idle_look(conn, worker_id="w-9", now=NOW + timedelta(seconds=61)).expired_leases


def test_recovery_moves_an_expired_run_on_bare_and_gives_its_slot_back(db):
    make_queue("limited", now=NOW, concurrency_limit=2)
    job = make_job(name="recover", now=NOW, overlap_policy="allow", queue="limited", max_attempts=3)
    expired = NOW - timedelta(seconds=1)
    lost = make_execution(job, "running", now=NOW, claimed_by="gone", lease_expires_at=expired, holds_slot=True)
    alive = make_execution(job, "running", now=NOW, claimed_by="alive", lease_expires_at=NOW + timedelta(seconds=60))
    db.session.execute(Queue.__table__.update().where(Queue.id == job.queue_id).values(slots_taken=1))
    db.session.commit()
    retry_at = NOW + timedelta(seconds=30)

    with bare_connection(db) as conn:
        [lease] = [ExpiredLease(**row) for row in recovery.lock_expired_leases(conn, now=NOW)]
        assert (lease.id, lease.status, lease.claimed_by, lease.job_name) == (lost.id, "running", "gone", "recover")
        assert recovery.recover_execution(conn, lease, now=NOW, retry_at=retry_at, reason="worker gone") == (
            "retry_scheduled"
        )
        # The same lease again (another recoverer's stale view): lost, nothing moves twice.
        assert recovery.recover_execution(conn, lease, now=NOW, retry_at=retry_at, reason="again") is None

    row = fresh(db, Execution, lost.id)
    assert (row.status, row.claimed_by, row.lease_expires_at, row.available_at, row.reason, row.holds_slot) == (
        "retry_scheduled",
        None,
        None,
        retry_at,
        "worker gone",
        False,
    )
    assert row.finished_at is None
    [attempt] = db.session.query(Attempt).filter_by(execution_id=lost.id).all()
    assert (attempt.status, attempt.finished_at, attempt.error) == ("abandoned", NOW, "worker gone")
    assert fresh(db, Queue, job.queue_id).slots_taken == 0
    assert fresh(db, Execution, alive.id).status == "running"


def test_a_stopping_worker_gives_up_only_its_own_lease_bare(db):
    job = make_job(name="give-up", now=NOW, overlap_policy="allow")
    mine = make_execution(job, "running", now=NOW, claimed_by="w-1", lease_expires_at=NOW + timedelta(seconds=60))
    with bare_connection(db) as conn:
        assert leases.expire_lease(conn, mine.id, worker_id="w-2", now=NOW) is False
        assert leases.expire_lease(conn, mine.id, worker_id="w-1", now=NOW) is True
    assert fresh(db, Execution, mine.id).lease_expires_at == NOW - timedelta(microseconds=1)


def test_a_dead_letter_written_bare_opens_one_alert_counts_repeats_and_logs_an_event(db):
    job = make_job(name="flaky", now=NOW, overlap_policy="allow", max_attempts=1, alert_mode="web")
    first = make_execution(job, "dead_lettered", now=NOW)
    second = make_execution(job, "dead_lettered", now=NOW)
    later = NOW + timedelta(minutes=1)
    common = {"job_id": job.id, "job_name": "flaky", "alert_mode": "web", "status": "failed"}

    with bare_connection(db) as conn:
        dead_letter(conn, execution_id=first.id, reason="exit 1", now=NOW, **common)
        dead_letter(conn, execution_id=second.id, reason="exit 2", now=later, **common)

    db.session.rollback()
    letters = db.session.query(DeadLetter).order_by(DeadLetter.id).all()
    assert [(d.execution_id, d.reason, d.created_at) for d in letters] == [
        (first.id, "exit 1", NOW),
        (second.id, "exit 2", later),
    ]
    [alert] = db.session.query(Alert).all()
    assert (alert.kind, alert.dedup_key, alert.occurrences, alert.created_at, alert.last_seen_at) == (
        "dead_letter",
        f"dead_letter:job:{job.id}",
        2,
        NOW,
        later,
    )
    assert alert.execution_id == second.id and "exit 2" in alert.message
    assert alert.project_id is not None and alert.project_id == fresh(db, Queue, job.queue_id).project_id
    events = db.session.query(Event).filter_by(type="dead_lettered").order_by(Event.id).all()
    assert [(e.execution_id, e.payload, e.created_at) for e in events] == [
        (first.id, {"status": "failed", "reason": "exit 1"}, NOW),
        (second.id, {"status": "failed", "reason": "exit 2"}, later),
    ]


def test_a_muted_job_gets_no_alert_bare_and_a_second_opener_counts_a_repeat(db):
    job = make_job(name="muted", now=NOW, overlap_policy="allow")
    db.session.add(AlertMute(job_id=job.id, until=NOW + timedelta(hours=1), muted_by="op", created_at=NOW))
    db.session.commit()
    with bare_connection(db) as conn:
        assert alerts.raise_job_alert(conn, kind="dead_letter", job_id=job.id, message="m", now=NOW) == alerts.MUTED
        after = NOW + timedelta(hours=2)
        assert alerts.raise_job_alert(conn, kind="dead_letter", job_id=job.id, message="m", now=after) == alerts.OPENED
        # The insert of a second opener that lost the race changes nothing (ON CONFLICT): no row.
        params = {"job_id": job.id, "kind": "dead_letter", "key": alerts.job_key("dead_letter", job.id)}
        raced = execute(conn, alerts.OPEN_ALERT, {**params, "message": "m2", "now": after, "execution_id": None})
        assert raced.rows == []
    db.session.rollback()
    assert db.session.query(Alert).filter_by(job_id=job.id).count() == 1


def test_a_run_that_ended_gets_its_callback_once_bare(db):
    job = make_job(name="parent", now=NOW, task="echo", on_success="echo", on_success_config={"message": "hi"})
    parent = make_execution(job, "succeeded", now=NOW, exit_code=0)

    with bare_connection(db) as conn:
        created = callbacks.after_final(conn, [parent.id], now=NOW).callbacks
        assert callbacks.after_final(conn, [parent.id], now=NOW).callbacks == []  # its key exists

    db.session.rollback()  # a new snapshot (SQLite's WAL kept the one `parent.id` opened)
    [callback] = db.session.query(Execution).filter_by(parent_id=parent.id).all()
    assert created == [callback.id]
    assert (callback.trigger, callback.status, callback.callback_task, callback.max_attempts) == (
        "callback",
        "pending",
        "echo",
        1,
    )
    assert (callback.exclusive, callback.scheduled_for, callback.available_at, callback.created_at) == (
        False,
        NOW,
        NOW,
        NOW,
    )
    assert callback.config_override["message"] == "hi"
    assert callback.config_override["parent"] == {
        "id": parent.id,
        "job_id": job.id,
        "job": "parent",
        "status": "succeeded",
        "exit_code": 0,
        "error": "",
        "attempts": 1,
        "trigger": "manual",
        "finished_at": iso_z(NOW),
        "result": None,
    }
    assert db.session.query(Event).filter_by(type="callback_created", execution_id=callback.id).count() == 1


def test_a_batch_whose_last_item_ended_completes_once_with_its_callback_bare(db):
    job = make_job(name="batched", now=NOW, task="echo", every="1h", max_attempts=1)
    batch = batches.submit_batch(
        job.id,
        {"items": json.dumps([{"message": "1"}, {"message": "2"}]), "on_complete": "echo"},
        now=NOW,
        actor="test",
    )
    first, second = db.session.query(Execution).filter_by(batch_id=batch.id).order_by(Execution.id).all()
    db.session.execute(
        Execution.__table__.update().where(Execution.id == first.id).values(status="succeeded", finished_at=NOW)
    )
    db.session.commit()

    with bare_connection(db) as conn:
        assert callbacks.after_final(conn, [first.id], now=NOW).batches == []  # the second still waits
        assert follow_ups.batch_counts(conn, [batch.id]) == {batch.id: {"succeeded": 1, "pending": 1}}
        execute(
            conn,
            Statement("UPDATE executions SET status = 'failed', finished_at = :now WHERE id = :id", datetimes=("now",)),
            {"id": second.id, "now": NOW},
        )
        done = callbacks.after_final(conn, [second.id], now=NOW)
        assert done.batches == [batch.id] and len(done.callbacks) == 1
        assert callbacks.settle_batches(conn, now=NOW).batches == []  # completed once: the sweep finds none

    assert fresh(db, Batch, batch.id).completed_at == NOW
    [on_complete] = db.session.query(Execution).filter_by(batch_id=batch.id, trigger="callback").all()
    assert on_complete.config_override["parent"]["status"] == "partially_failed"
    assert on_complete.config_override["parent"]["counts"] == {"succeeded": 1, "failed": 1}


def test_the_text_inserts_convert_exactly_the_columns_the_model_types_convert():
    columns = Execution.__table__.columns
    assert follow_ups.EXECUTION_DATETIMES == {c.name for c in columns if isinstance(c.type, UTCDateTime)}
    assert follow_ups.EXECUTION_DOCUMENTS == {c.name for c in columns if "JSON" in type(c.type).__name__}
