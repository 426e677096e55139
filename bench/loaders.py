"""Bulk loaders: rows straight into PostgreSQL with set-based SQL, so setup stays out of the timings.

Every row satisfies the schema's CHECK constraints and unique indexes (terminal iff finished_at,
one occurrence per (job, scheduled_for), at most one exclusive run in flight per job), so what the
benchmarks read and claim looks like real history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta

import psycopg

_JOB_COLUMNS = """(name, description, task, config, schedule_type, schedule, timezone, enabled, next_run_at,
                   overlap_policy, misfire_policy, misfire_grace_seconds, max_attempts, retry_backoff_seconds,
                   timeout_seconds, alert_mode, retention_count, retention_days, queue_id, priority, created_at,
                   updated_at, project_id)"""


def insert_job(
    conn: psycopg.Connection,
    name: str,
    *,
    now: datetime,
    overlap_policy: str = "allow",
    next_run_at: datetime | None = None,
    task: str = "always_succeed",
    max_attempts: int = 1,
    schedule: dict | None = None,
    schedule_type: str = "interval",
    queue: str = "default",
) -> int:
    """One job in `queue` (which must exist); with next_run_at None the scheduler never fires it
    (work is inserted directly)."""
    schedule = schedule or {"every": "1h", "start_at": "2026-01-01T00:00:00Z"}
    row = conn.execute(
        f"""INSERT INTO jobs {_JOB_COLUMNS}
            VALUES (%(name)s, '', %(task)s, '{{}}'::jsonb, %(stype)s, %(schedule)s::jsonb, 'UTC', true, %(next)s,
                    %(overlap)s, 'coalesce', 60, %(max_attempts)s, 1, 30, 'log_only', 0, 0,
                    (SELECT id FROM queues WHERE name = %(queue)s), 0, %(now)s, %(now)s,
                    (SELECT project_id FROM queues WHERE name = %(queue)s))
            RETURNING id""",
        {
            "name": name,
            "task": task,
            "stype": schedule_type,
            "schedule": json.dumps(schedule),
            "next": next_run_at,
            "overlap": overlap_policy,
            "max_attempts": max_attempts,
            "now": now,
            "queue": queue,
        },
    ).fetchone()
    return row[0]


def insert_pending(
    conn: psycopg.Connection,
    job_id: int,
    count: int,
    *,
    now: datetime,
    exclusive: bool = False,
    max_attempts: int = 1,
    key_prefix: str = "bench",
) -> None:
    """`count` due pending manual executions of `job_id` (in its job's queue), oldest first."""
    conn.execute(
        """INSERT INTO executions (job_id, scheduled_for, trigger, idempotency_key, status, attempts, max_attempts,
                                   queue_id, priority, exclusive, available_at, output, error, created_at, updated_at)
           SELECT %(job)s, t, 'manual', %(prefix)s || ':' || %(job)s || ':' || g, 'pending', 0, %(max)s,
                  (SELECT queue_id FROM jobs WHERE id = %(job)s), 0, %(exclusive)s, t, '', '', t, t
           FROM generate_series(1, %(count)s) AS g,
                LATERAL (SELECT %(now)s::timestamptz - (%(count)s - g) * interval '1 millisecond'
                                - interval '1 second') AS x(t)""",
        {"job": job_id, "count": count, "now": now, "exclusive": exclusive, "max": max_attempts, "prefix": key_prefix},
    )


def insert_one_off(conn: psycopg.Connection, task: str, count: int, *, now: datetime, max_attempts: int = 1) -> None:
    """`count` due pending one-off runs of `task` (no job) in the default queue, oldest first."""
    conn.execute(
        """INSERT INTO executions (job_id, task, project_id, scheduled_for, trigger, idempotency_key, status, attempts,
                                   max_attempts, queue_id, priority, exclusive, available_at, config_override,
                                   timeout_seconds, output, error, created_at, updated_at)
           SELECT NULL, %(task)s, q.project_id, t, 'manual', 'bench-one-off:' || g, 'pending', 0, %(max)s,
                  q.id, 0, false, t, '{}'::jsonb, 30, '', '', t, t
           FROM (SELECT id, project_id FROM queues WHERE name = 'default' ORDER BY id LIMIT 1) AS q,
                generate_series(1, %(count)s) AS g,
                LATERAL (SELECT %(now)s::timestamptz - (%(count)s - g) * interval '1 millisecond'
                                - interval '1 second') AS x(t)""",
        {"task": task, "count": count, "now": now, "max": max_attempts},
    )


def insert_scheduled_jobs(conn: psycopg.Connection, total: int, due: int, *, now: datetime) -> None:
    """`total` enabled interval jobs (every 60 s), the first `due` of them due now, the rest far ahead."""
    anchor = now - timedelta(seconds=1)
    conn.execute(
        f"""INSERT INTO jobs {_JOB_COLUMNS}
            SELECT 'tick-' || g, '', 'always_succeed', '{{}}'::jsonb, 'interval',
                   jsonb_build_object('every', '1m', 'start_at', to_char(%(anchor)s::timestamptz AT TIME ZONE 'UTC',
                                                                          'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
                   'UTC', true,
                   CASE WHEN g <= %(due)s THEN %(anchor)s::timestamptz
                        ELSE %(anchor)s::timestamptz + interval '30 days' + g * interval '1 minute' END,
                   'skip', 'coalesce', 60, 3, 10, 30, 'log_only', 500, 30,
                   (SELECT id FROM queues WHERE name = 'default'), 0, %(now)s, %(now)s,
                   (SELECT project_id FROM queues WHERE name = 'default')
            FROM generate_series(1, %(total)s) AS g""",
        {"total": total, "due": due, "anchor": anchor.replace(microsecond=0), "now": now},
    )


def redue_jobs(conn: psycopg.Connection, due: int, *, now: datetime) -> None:
    """Make the first `due` jobs due again and forget what the last tick created (between timed ticks)."""
    anchor = (now - timedelta(seconds=1)).replace(microsecond=0)
    conn.execute("TRUNCATE executions, attempts, dead_letters, alerts, events RESTART IDENTITY CASCADE")
    conn.execute(
        "UPDATE jobs SET next_run_at = %(anchor)s, schedule = jsonb_set(schedule, '{start_at}', to_jsonb("
        "to_char(%(anchor)s::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'))) "
        "WHERE id <= %(due)s",
        {"anchor": anchor, "due": due},
    )


# Executions inserted per statement: a 10M load is ten statements (each its own transaction, so
# a failure late in the load keeps what came before and WAL never holds one giant transaction).
LOAD_CHUNK = 1_000_000
# The queues of a shared, reused history database (`--database`): the queues benchmark's layout,
# so that the console, API and queue statistics read one loaded table.
SHARED_QUEUES = ("default", *(f"queue-{n:02d}" for n in range(2, 21)))


# From this many rows on, `load_history` builds the executions indexes after the rows are in.
BULK_ROWS = 2_000_000


def _drop_secondary_indexes(conn: psycopg.Connection) -> list[str]:
    """Drop the executions table's indexes other than its primary key; returns the statements
    that recreate them as the migrations made them."""
    found = conn.execute(
        """SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index AS i
           WHERE i.indrelid = 'executions'::regclass AND NOT i.indisprimary
             AND NOT EXISTS (SELECT 1 FROM pg_constraint AS c WHERE c.conindid = i.indexrelid)"""
    ).fetchall()
    for name, _ in found:
        conn.execute(f'DROP INDEX "{name}"')
    return [definition for _, definition in found]


def load_history(
    conn: psycopg.Connection, rows: int, jobs: int, *, now: datetime, queues: Sequence[str] = ("default",)
) -> dict:
    """`jobs` jobs and `rows` executions of them, one per second back from now, mostly finished.

    The mix: ~98 % terminal (succeeded, with some failed, missed, timed_out, cancelled and
    dead_lettered), the newest 280 pending and due, 20 running; 50 open alerts. Job n is in
    `queues[(n - 1) % len(queues)]` (queues that exist), and its executions with it.
    """
    queue_ids = [conn.execute("SELECT id FROM queues WHERE name = %s", (name,)).fetchone()[0] for name in queues]
    conn.execute(
        f"""INSERT INTO jobs {_JOB_COLUMNS}
            SELECT 'history-' || g, 'bulk-loaded for the dashboard benchmark', 'always_succeed', '{{}}'::jsonb,
                   'interval', jsonb_build_object('every', '1h', 'start_at', '2026-01-01T00:00:00Z'), 'UTC', true,
                   %(now)s::timestamptz + g * interval '1 minute', 'skip', 'coalesce', 60, 3, 10, 30, 'web', 0, 0,
                   (%(queues)s::int[])[1 + (g - 1) %% %(n)s], 0, %(now)s, %(now)s,
                   (SELECT project_id FROM queues WHERE id = (%(queues)s::int[])[1 + (g - 1) %% %(n)s])
            FROM generate_series(1, %(jobs)s) AS g""",
        {"jobs": jobs, "now": now, "queues": queue_ids, "n": len(queue_ids)},
    )
    # A big load goes in without the executions table's secondary indexes and row triggers (its
    # rows are built valid: the foreign keys hold by construction), and the indexes are built
    # afterwards in one sort each: several times faster than maintaining 15 indexes row by row.
    rebuild = _drop_secondary_indexes(conn) if rows >= BULK_ROWS else []
    if rebuild:
        conn.execute("SET session_replication_role = replica")
    for first in range(1, rows + 1, LOAD_CHUNK):
        conn.execute(
            """INSERT INTO executions (job_id, scheduled_for, trigger, idempotency_key, status, attempts, max_attempts,
                                   queue_id, priority, exclusive, available_at, started_at, finished_at, exit_code,
                                   claimed_by, lease_expires_at, output, error, created_at, updated_at)
           SELECT job, t, 'schedule', 'job:' || job || ':at:' || g, s,
                  CASE WHEN s IN ('pending', 'missed', 'cancelled') THEN 0 WHEN s = 'dead_lettered' THEN 3 ELSE 1 END,
                  3, (%(queues)s::int[])[1 + (job - 1) %% %(n)s], 0, true, t,
                  CASE WHEN s IN ('pending', 'missed', 'cancelled') THEN NULL ELSE t + interval '10 ms' END,
                  CASE WHEN s IN ('pending', 'running') THEN NULL ELSE t + interval '60 ms' END,
                  CASE WHEN s = 'succeeded' THEN 0 WHEN s IN ('failed', 'dead_lettered') THEN 1 END,
                  CASE WHEN s = 'running' THEN 'bench-worker' END,
                  CASE WHEN s = 'running' THEN %(now)s::timestamptz + interval '1 hour' END,
                  CASE WHEN s = 'succeeded' THEN 'ok' || chr(10) ELSE '' END,
                  CASE WHEN s IN ('failed', 'dead_lettered', 'timed_out')
                       THEN 'Traceback (most recent call last):' || chr(10) || '  ...' || chr(10)
                            || 'RuntimeError: boom'
                       ELSE '' END,
                  t, t + interval '60 ms'
           FROM generate_series(%(first)s::int, %(last)s::int) AS g,
                LATERAL (SELECT (g %% %(jobs)s) + 1,
                                %(now)s::timestamptz - (%(rows)s - g + 1) * interval '1 second',
                                CASE WHEN g > %(rows)s - 20 THEN 'running'
                                     WHEN g > %(rows)s - 300 THEN 'pending'
                                     WHEN g %% 5000 = 17 THEN 'dead_lettered'
                                     WHEN g %% 2000 = 13 THEN 'cancelled'
                                     WHEN g %% 1000 = 11 THEN 'timed_out'
                                     WHEN g %% 500 = 3 THEN 'missed'
                                     WHEN g %% 200 = 7 THEN 'failed'
                                     ELSE 'succeeded' END) AS x(job, t, s)""",
            {
                "rows": rows,
                "jobs": jobs,
                "now": now,
                "queues": queue_ids,
                "n": len(queue_ids),
                "first": first,
                "last": min(rows, first + LOAD_CHUNK - 1),
            },
        )
    if rebuild:
        conn.execute("SET session_replication_role = DEFAULT")
        conn.execute("SET maintenance_work_mem = '512MB'")
        for statement in rebuild:
            conn.execute(statement)
        conn.execute("RESET maintenance_work_mem")
    conn.execute(
        """INSERT INTO alerts (job_id, execution_id, kind, message, created_at)
           SELECT job_id, id, 'dead_letter', 'dead-lettered after 3 attempts: RuntimeError: boom', finished_at
           FROM executions WHERE status = 'dead_lettered' ORDER BY id DESC LIMIT 50"""
    )
    conn.execute("VACUUM ANALYZE")
    counts = dict(conn.execute("SELECT status, count(*) FROM executions GROUP BY status").fetchall())
    return counts


def ensure_queues(conn: psycopg.Connection, names: Sequence[str]) -> None:
    """Queues of the default project by these names, those missing created without a limit."""
    for name in names:
        conn.execute(
            """INSERT INTO queues (project_id, name, description, concurrency_limit, priority, paused, slots_taken,
                                   created_at, updated_at)
               SELECT (SELECT id FROM projects WHERE name = 'default'), %(name)s::text, '', NULL, 0, false, 0, now(), now()
               WHERE NOT EXISTS (SELECT 1 FROM queues WHERE name = %(name)s::text)""",
            {"name": name},
        )


def loaded_history(conn: psycopg.Connection) -> dict | None:
    """What `history` loaded into this database before (rows, jobs, queues, loaded_at, counts), or None."""
    if conn.execute("SELECT to_regclass('bench_history')").fetchone()[0] is None:
        return None
    row = conn.execute("SELECT rows, jobs, queues, loaded_at, counts FROM bench_history").fetchone()
    if row is None:
        return None
    return dict(zip(("rows", "jobs", "queues", "loaded_at", "counts"), row, strict=True))


def history(db, rows: int, jobs: int, *, now: datetime, queues: Sequence[str] = ("default",), reuse: bool) -> dict:
    """`load_history` into `db` after emptying it, or, with `reuse`, the history a previous run
    left there when it has the same rows, jobs and queues (`--database NAME`: 10M rows load once).

    Returns the marker: `loaded_at` is the `now` the rows were generated from (pages that pick a
    date range use it, so a reused history is read as it was loaded), `counts` per status,
    `seconds` the load took (0 when reused)."""
    import time

    with db.connect() as conn:
        found = loaded_history(conn) if reuse else None
        if found and (found["rows"], found["jobs"], list(found["queues"])) == (rows, jobs, list(queues)):
            return found | {"seconds": 0.0, "reused": True}
    if reuse:
        db.create()  # afresh: a load stopped half way may have left the table without its indexes
    else:
        db.reset()
    began = time.perf_counter()
    with db.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS bench_history")
        ensure_queues(conn, queues)
        counts = load_history(conn, rows, jobs, now=now, queues=queues)
        conn.execute(
            "CREATE TABLE bench_history (rows bigint, jobs int, queues jsonb, loaded_at timestamptz, counts jsonb)"
        )
        conn.execute(
            "INSERT INTO bench_history VALUES (%s, %s, %s, %s, %s)",
            (rows, jobs, json.dumps(list(queues)), now, json.dumps(counts)),
        )
    seconds = time.perf_counter() - began
    return {
        "rows": rows,
        "jobs": jobs,
        "queues": list(queues),
        "loaded_at": now,
        "counts": counts,
        "seconds": seconds,
        "reused": False,
    }


def history_for(db, options, jobs: int, *, now: datetime, queues: Sequence[str] = ("default",)) -> dict:
    """The benchmarks' history: loaded afresh into the throw-away database, or with `--database`
    reused from (or loaded once into) that database in the shared 20-queue layout."""
    if getattr(options, "database", None):
        return history(db, options.rows, jobs, now=now, queues=SHARED_QUEUES, reuse=True)
    return history(db, options.rows, jobs, now=now, queues=queues, reuse=False)
