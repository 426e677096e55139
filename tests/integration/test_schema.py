"""The database enforces the invariants, and the migrations build exactly what the models say."""

from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.exc import IntegrityError

from app.database import write_transaction
from app.extensions import db
from tests.factories import make_job

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


def test_migrations_match_the_models(app):
    from app.models.execution import autogenerate_filter

    with db.engine.connect() as conn:
        # What `flask db migrate` compares (migrations/env.py): on PostgreSQL the foreign keys to
        # executions are triggers (migration 0016, tested in test_execution_references.py).
        opts = {"compare_type": True, "include_object": autogenerate_filter(conn.dialect.name)}
        diff = compare_metadata(MigrationContext.configure(conn, opts=opts), db.metadata)
    assert diff == []


def insert_execution(conn, job_id, **overrides):
    values = {
        "job_id": job_id,
        "scheduled_for": NOW,
        "trigger": "schedule",
        "idempotency_key": "k1",
        "status": "pending",
        "available_at": NOW,
        "created_at": NOW,
        "updated_at": NOW,
        "max_attempts": 3,
        "attempts": 0,
        "exclusive": True,
        "queue_id": 1,
        "priority": 0,
        "output": "",
        "error": "",
    }
    values.update(overrides)
    from app.models import Execution

    conn.execute(Execution.__table__.insert().values(**values))


def test_one_execution_per_scheduled_occurrence(app):
    job = make_job(now=NOW)
    with write_transaction(db.engine) as conn:
        insert_execution(conn, job.id)
    with pytest.raises(IntegrityError):
        with write_transaction(db.engine) as conn:
            insert_execution(conn, job.id, idempotency_key="another-key")


def test_idempotency_keys_are_unique(app):
    job = make_job(now=NOW)
    with write_transaction(db.engine) as conn:
        insert_execution(conn, job.id, trigger="manual")
    with pytest.raises(IntegrityError):
        with write_transaction(db.engine) as conn:
            insert_execution(conn, job.id, trigger="manual", scheduled_for=NOW.replace(hour=13))


def test_at_most_one_run_in_flight_for_an_exclusive_job(app):
    job = make_job(now=NOW)
    with write_transaction(db.engine) as conn:
        insert_execution(conn, job.id, status="running", idempotency_key="a", trigger="manual")
    with pytest.raises(IntegrityError):
        with write_transaction(db.engine) as conn:
            insert_execution(conn, job.id, status="claimed", idempotency_key="b", trigger="manual")
    with write_transaction(db.engine) as conn:  # non-exclusive (overlap allow) rows may run together
        insert_execution(conn, job.id, status="running", idempotency_key="c", trigger="manual", exclusive=False)


@pytest.mark.parametrize("column,value", [("status", "exploded"), ("trigger", "cosmic_ray")])
def test_status_and_trigger_vocabularies_are_checked(app, column, value):
    job = make_job(now=NOW)
    with pytest.raises(IntegrityError):
        with write_transaction(db.engine) as conn:
            insert_execution(conn, job.id, **{column: value})


def test_finished_at_only_on_terminal_statuses(app):
    job = make_job(now=NOW)
    with pytest.raises(IntegrityError):
        with write_transaction(db.engine) as conn:
            insert_execution(conn, job.id, status="pending", finished_at=NOW)
    with write_transaction(db.engine) as conn:
        insert_execution(conn, job.id, status="missed", finished_at=NOW)


@pytest.mark.parametrize(
    "column,value",
    [("overlap_policy", "sometimes"), ("misfire_policy", "panic"), ("max_attempts", 0), ("timeout_seconds", 0)],
)
def test_job_policies_are_checked(app, column, value):
    job = make_job(now=NOW)
    with pytest.raises(IntegrityError):
        with write_transaction(db.engine) as conn:
            conn.execute(db.text(f"UPDATE jobs SET {column} = :v WHERE id = :id"), {"v": value, "id": job.id})


def test_the_due_and_claim_queries_use_their_indexes(pg_app):
    plans = []
    with db.engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        for sql in (
            "SELECT id FROM jobs WHERE enabled AND next_run_at <= now() ORDER BY next_run_at LIMIT 10",
            "SELECT id FROM executions WHERE status IN ('pending', 'retry_scheduled') AND available_at <= now() "
            "ORDER BY priority, available_at, id LIMIT 10",
        ):
            plans.append("\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + sql)))
    assert "ix_jobs_due" in plans[0]
    assert "ix_executions_claimable" in plans[1]


def test_the_schema_head_the_code_expects_is_the_newest_migration():
    # The readiness check compares the database with SCHEMA_HEAD instead of asking Alembic
    # (which would load Alembic into every web process); a new migration must move it.
    from alembic.script import ScriptDirectory

    from app.extensions import MIGRATIONS_DIR, SCHEMA_HEAD

    assert ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head() == SCHEMA_HEAD


def test_readiness_says_when_the_database_is_behind_the_code(app):
    from app.extensions import SCHEMA_HEAD
    from app.services.read.health import readiness

    assert readiness()["checks"]["migrations"] == {"ok": True}
    with write_transaction(db.engine) as conn:
        conn.execute(db.text("UPDATE alembic_version SET version_num = '0001'"))
    try:
        report = readiness()
        assert not report["ready"]
        assert report["checks"]["migrations"]["error"] == (
            f"database at revision 0001, code expects {SCHEMA_HEAD}; run `flask db upgrade`"
        )
    finally:
        with write_transaction(db.engine) as conn:
            conn.execute(db.text("UPDATE alembic_version SET version_num = :head"), {"head": SCHEMA_HEAD})
