"""Helpers the fault scenarios share: many jobs at once, reading what the processes committed,
their JSON logs, the web process, and the ledger check with its figures printed.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime

import psycopg
import pytest
from sqlalchemy import text

from app.clock import utcnow
from app.extensions import db
from app.services.read import ledger
from tests.factories import make_job
from tests.helpers.pg import plain_url
from tests.helpers.processes import FlaskProcess, wait_for

TERMINAL = ("succeeded", "failed", "timed_out", "missed", "cancelled", "dead_lettered")
CLONED_COLUMNS = (
    "description, task, config, schedule_type, schedule, timezone, enabled, next_run_at, "
    "overlap_policy, misfire_policy, misfire_grace_seconds, max_attempts, retry_backoff_seconds, "
    "timeout_seconds, alert_mode, retention_count, retention_days, queue_id, project_id, priority, created_at, "
    "updated_at"
)


def clone_jobs(*, count: int, now: datetime, prefix: str, every: str, **fields) -> int:
    """Create one job through the service, then `count - 1` copies of it in one INSERT.

    Creating thousands of jobs one service call at a time would take most of the test's budget;
    the copies share the validated original's schedule, anchor and policies (so they are due at
    the same instants) and differ only in name. Returns the original's id.
    """
    original = make_job(now=now, every=every, name=f"{prefix}-0", **fields)
    if count > 1:
        db.session.execute(
            text(
                f"INSERT INTO jobs (name, {CLONED_COLUMNS}) "
                f"SELECT :prefix || '-' || n, {CLONED_COLUMNS} FROM jobs, generate_series(1, :copies) AS n "
                "WHERE jobs.id = :id"
            ),
            {"prefix": prefix, "copies": count - 1, "id": original.id},
        )
        db.session.commit()
    return original.id


def rows(statement: str, **params) -> list:
    """Rows as the other processes committed them, on a connection of their own (the pool's
    pre-ping replaces a connection that a database restart killed)."""
    with db.engine.connect() as conn:
        return conn.execute(text(statement), params).all()


def scalar(statement: str, **params):
    return rows(statement, **params)[0][0]


def status_counts() -> dict[str, int]:
    return dict(rows("SELECT status, count(*) FROM executions GROUP BY status"))


@dataclass
class LedgerFigures:
    jobs: int
    occurrences: int
    executions: int
    coalesced_or_skipped: int
    in_flight: int
    duplicates: int
    lost: int
    violations: list[str]

    def line(self) -> str:
        return (
            f"jobs={self.jobs} occurrences={self.occurrences} executions={self.executions} "
            f"coalesced_or_skipped={self.coalesced_or_skipped} in_flight={self.in_flight} "
            f"duplicates={self.duplicates} lost={self.lost} violations={len(self.violations)}"
        )


def check_ledger(scenario: str, *, now: datetime | None = None) -> LedgerFigures:
    """Run the ledger check (what `flask verify` runs), print its figures, and assert it is clean."""
    db.session.remove()
    report = ledger.verify(now=now or utcnow())
    db.session.remove()
    duplicates = scalar(
        "SELECT count(*) FROM (SELECT job_id, scheduled_for FROM executions "
        "WHERE trigger IN ('schedule', 'catch_up') GROUP BY 1, 2 HAVING count(*) > 1) AS d"
    )
    figures = LedgerFigures(
        jobs=report.jobs,
        occurrences=report.occurrences,
        executions=report.executions,
        coalesced_or_skipped=report.coalesced_or_skipped,
        in_flight=report.in_flight,
        duplicates=duplicates,
        lost=sum("lost" in v for v in report.violations),
        violations=report.violations,
    )
    print(f"\n[{scenario}] ledger: {figures.line()}")
    assert report.ok, "ledger violations:\n" + "\n".join(report.violations[:30])
    assert duplicates == 0
    assert report.occurrences > 0, "the scenario produced no occurrences to check"
    return figures


def lateness_seconds(task: str = "always_succeed") -> dict[str, float]:
    """How late scheduled runs of `task` started (started_at - scheduled_for), in seconds.

    Only jobs with the skip overlap policy count: a queued run waits for its predecessor by design.
    """
    [row] = rows(
        "SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY s), percentile_cont(0.95) WITHIN GROUP "
        "(ORDER BY s), percentile_cont(0.99) WITHIN GROUP (ORDER BY s), max(s) FROM (SELECT extract(epoch FROM "
        "e.started_at - e.scheduled_for) AS s FROM executions AS e JOIN jobs AS j ON j.id = e.job_id "
        "WHERE e.trigger = 'schedule' AND e.started_at IS NOT NULL AND j.task = :task "
        "AND j.overlap_policy = 'skip') AS late",
        task=task,
    )
    return {
        "runs": row[0],
        **{name: round(float(value or 0), 3) for name, value in zip(("p50", "p95", "p99", "max"), row[1:])},
    }


# --- what the processes logged --------------------------------------------------------------------


def log_events(process: FlaskProcess, event: str | None = None) -> list[dict]:
    """The JSON log records of a process (LOG_FORMAT=json), optionally only one event."""
    records = []
    for line in process.output().splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if event is None or record.get("event") == event:
            records.append(record)
    return records


def assert_alive(*processes: FlaskProcess) -> None:
    """Still the same process (no exit, so no crash loop a supervisor would have restarted)."""
    for process in processes:
        if process.popen.poll() is not None:
            pytest.fail(f"a process died during the fault:\n{process.describe()[-6000:]}")


def stop_gracefully(*processes: FlaskProcess, within: float = 40) -> None:
    """SIGTERM all, then every one must exit 0 within the (shared) deadline."""
    for process in processes:
        process.signal(signal.SIGTERM)
    deadline = time.monotonic() + within
    for process in processes:
        code = process.wait_exit(max(0.1, deadline - time.monotonic()))
        assert code == 0, f"exit {code}:\n{process.describe()[-6000:]}"


def write_transactions_open(url: str) -> int:
    """Sessions on this database (other than ours) inside a transaction that has written rows."""
    with psycopg.connect(plain_url(url), autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_xid IS NOT NULL"
        ).fetchone()[0]


# --- a web process ----------------------------------------------------------------------------------


def http_get(url: str, *, timeout: float = 5) -> tuple[int, str]:
    """(status, body); status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except OSError:
        return 0, ""


def start_web(processes, port: int, env: dict | None = None) -> FlaskProcess:
    """`flask run` on a loopback port (threaded), waited for until /healthz answers."""
    web = processes.start("run", "--host", "127.0.0.1", "--port", str(port), "--no-reload", "--no-debugger", env=env)
    base = f"http://127.0.0.1:{port}"
    wait_for(
        lambda: web.popen.poll() is None and http_get(f"{base}/healthz")[0] == 200,
        within=30,
        what=lambda: f"the web process to answer /healthz\n{web.describe()}",
        interval=0.2,
    )
    return web


def readyz(base: str) -> tuple[int, dict]:
    status, body = http_get(f"{base}/readyz")
    try:
        return status, json.loads(body)
    except ValueError:
        return status, {}
