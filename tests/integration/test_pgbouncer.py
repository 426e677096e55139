"""Cronwell behind PgBouncer in transaction-pooling mode (docs/deployment.md, "Behind PgBouncer").

A scheduler and two workers reach PostgreSQL through a private PgBouncer whose pool has two
server sessions, so every process shares them transaction by transaction, with
DATABASE_TRANSACTION_POOLING=1 (no prepared statements, no session settings) and
DATABASE_LISTEN_URL straight to PostgreSQL for LISTEN. They must run a backlog and a scheduled
job without a single error, keep the ledger clean, and a trigger made through the pooler must
wake an idle worker over the direct LISTEN connection long before its 30 s poll.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text

from app.database import configure_engine
from app.extensions import db
from config import normalise_database_url
from tests.factories import make_job
from tests.helpers.databases import app_env_for
from tests.helpers.pgbouncer import PgBouncer
from tests.helpers.processes import PROJECT_ROOT, FlaskProcesses, flask_env, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BACKLOG = 60


def _count(status: str) -> int:
    """Rows in `status` whose time has come (the scheduler's lead time writes rows ahead of it)."""
    with db.engine.connect() as conn:
        return conn.execute(
            text("SELECT count(*) FROM executions WHERE status = :s AND available_at <= now()"), {"s": status}
        ).scalar_one()


def _flask(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flask", *args],
        cwd=PROJECT_ROOT,
        env=flask_env(env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_engine_for_a_transaction_pooler_never_prepares(pg_url):
    with PgBouncer() as bouncer:
        engine = create_engine(normalise_database_url(bouncer.url(pg_url.rsplit("/", 1)[1])))
        configure_engine(engine, transaction_pooling=True)
        try:
            with engine.connect() as conn:
                assert conn.connection.dbapi_connection.prepare_threshold is None
                for _ in range(10):  # psycopg would prepare this on its fifth use
                    assert conn.execute(text("SELECT count(*) FROM jobs WHERE id > :n"), {"n": 0}).scalar_one() >= 0
        finally:
            engine.dispose()


def test_scheduler_and_workers_run_behind_pgbouncer_in_transaction_mode(pg_app, pg_url, tmp_path):
    database = pg_url.rsplit("/", 1)[1]
    job = make_job("behind-the-pooler", every="1s", overlap_policy="allow")
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO executions (job_id, scheduled_for, trigger, idempotency_key, status, attempts,"
                " max_attempts, queue_id, holds_slot, priority, exclusive, available_at, output, error,"
                " created_at, updated_at)"
                " SELECT :job, now(), 'manual', 'backlog-' || g, 'pending', 0, 1, j.queue_id, false, 0, false,"
                " now(), '', '', now(), now() FROM generate_series(1, :n) AS g, jobs AS j WHERE j.id = :job"
            ),
            {"job": job.id, "n": BACKLOG},
        )
    with PgBouncer(pool_size=2) as bouncer:
        env = {
            **app_env_for(bouncer.url(database), tmp_path / "instance"),
            "DATABASE_TRANSACTION_POOLING": "1",
            "DATABASE_LISTEN_URL": pg_url,
            "WORKER_POLL_SECONDS": "30",
            "LOG_LEVEL": "INFO",
        }
        processes = FlaskProcesses(env, tmp_path / "logs")
        try:
            processes.start("scheduler", "run", "--scheduler-id", "pooled-scheduler")
            processes.start_worker("--worker-id", "pooled-a", "--workers", "2")
            processes.start_worker("--worker-id", "pooled-b", "--workers", "2")
            wait_for(lambda: _count("succeeded") >= BACKLOG + 3, within=90, what=processes.outputs)

            # Every process shared the pool's two server sessions.
            clients = [c for c in bouncer.show("CLIENTS") if c["database"] == database]
            servers = [s for s in bouncer.show("SERVERS") if s["database"] == database]
            assert len(clients) > len(servers) and len(servers) <= 2, (clients, servers)

            # Idle workers (polling every 30 s) hear a trigger made through the pooler.
            wait_for(lambda: _count("pending") == 0 and _count("running") == 0, within=30, what="an idle moment")
            wait_for(lambda: _listening(database) >= 2, within=10, what="both workers' LISTEN sessions")
            trigger_job = make_job("woken", every="1h")
            result = _flask(env, "job", "trigger", str(trigger_job.id))
            assert result.returncode == 0, result.stderr
            wait_for(
                lambda: _succeeded_of(trigger_job.id),
                within=40,
                what=lambda: "the triggered run\n" + processes.outputs(),
            )
            # From the trigger's commit to its start, on the database's rows (CLI start-up excluded).
            waited = _wait_of(trigger_job.id)
            assert waited < 10, f"the trigger waited {waited:.1f} s for a worker: LISTEN did not wake one"

            verify = _flask(env, "verify")
            assert verify.returncode == 0, verify.stdout + verify.stderr
        finally:
            processes.cleanup()
        logs = processes.outputs()
    assert _count("failed") == 0 and _count("abandoned") == 0
    for broken in ("prepared statement", "Traceback", "unsupported startup parameter"):
        assert broken not in logs, logs
    assert "listen_disabled" not in logs


def _listening(database: str) -> int:
    """Sessions that LISTEN for work, straight to PostgreSQL (never through the pooler's sessions)."""
    with db.engine.connect() as conn:
        return conn.execute(
            text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d AND query LIKE 'LISTEN%%cronwell_work%%'"),
            {"d": database},
        ).scalar_one()


def _wait_of(job_id: int) -> float:
    with db.engine.connect() as conn:
        return conn.execute(
            text("SELECT extract(epoch FROM started_at - created_at) FROM executions WHERE job_id = :j"), {"j": job_id}
        ).scalar_one()


def _succeeded_of(job_id: int) -> bool:
    with db.engine.connect() as conn:
        return bool(
            conn.execute(
                text("SELECT count(*) FROM executions WHERE job_id = :j AND status = 'succeeded'"), {"j": job_id}
            ).scalar_one()
        )


def test_without_a_listen_url_a_pooled_process_polls_and_says_so(pg_app, pg_url, tmp_path):
    from app import create_app
    from app.services.engine import wakeups

    with PgBouncer() as bouncer:
        env = {
            **app_env_for(bouncer.url(pg_url.rsplit("/", 1)[1]), tmp_path / "i2"),
            "DATABASE_TRANSACTION_POOLING": "1",
        }
        application = create_app({"TESTING": True}, env=env)
        with application.app_context():
            listener = wakeups.Listener.open(db.engine, [wakeups.WORK_CHANNEL])
            assert not listener.active
            db.engine.dispose()
