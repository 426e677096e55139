"""Tick scaling: `Scheduler.tick(now)` with 1k, 10k and 100k enabled jobs, 1 % due and 10 due.

Jobs are bulk-inserted with SQL: interval jobs every minute, the due ones with next_run_at one
second ago, the rest 30+ days ahead. Each size is measured twice: with 1 % of the jobs due (the
tick must grow with the due jobs, so per-due-job cost is what stays flat) and with the same 10
jobs due at every size (tick(100k) / tick(1k) is then the cost of the jobs that are not due;
target <= 1.5). Between timed ticks the due jobs are made due again and the executions the tick
wrote are truncated, outside the timing. The first tick of each Scheduler is untimed: it also runs
the hourly retention pass. Shows the EXPLAIN (ANALYZE, BUFFERS) of the due query at the largest size.
"""

from __future__ import annotations

import inspect
import statistics
from datetime import datetime

from app.clock import utcnow
from bench import loaders
from bench.harness import BenchDatabase, Figure

NAME = "tick"
REPEAT = 7
FIXED_DUE = 10


def _due_query_sql(app) -> str:
    """The scheduler's own due statement, compiled with literal values, for EXPLAIN."""
    from sqlalchemy import select

    from app.extensions import db
    from app.models import Job
    from app.services.engine.scheduler import Scheduler

    jobs = Job.__table__
    now = utcnow()
    # Mirror the scheduler's statement as it is written today (its `enabled` test matters).
    enabled = (
        jobs.c.enabled.is_(True)
        if "enabled.is_(True)" in inspect.getsource(Scheduler.schedule_due_jobs)
        else jobs.c.enabled
    )
    with app.app_context():
        stmt = (
            select(jobs)
            .where(enabled, jobs.c.next_run_at <= now)
            .order_by(jobs.c.next_run_at)
            .limit(500)
            .with_for_update(skip_locked=True)
        )
        compiled = stmt.compile(dialect=db.engine.dialect)
    params = {
        k: (f"'{v.isoformat()}'::timestamptz" if isinstance(v, datetime) else repr(v))
        for k, v in compiled.params.items()
    }
    return str(compiled) % params if "%(" in str(compiled) else str(compiled)


def _measure(db: BenchDatabase, app, total: int, due: int, repeat: int = REPEAT) -> dict:
    from app.services.engine.scheduler import Scheduler

    db.reset()
    with db.connect() as conn:
        loaders.insert_scheduled_jobs(conn, total, due, now=utcnow())
        conn.execute("VACUUM ANALYZE jobs")
    samples, created = [], []
    with app.app_context():
        scheduler = Scheduler(app, scheduler_id="bench-tick")
        scheduler.tick()  # warm-up: caches, connection pool, the hourly retention pass
        for _ in range(repeat):
            with db.connect() as conn:
                loaders.redue_jobs(conn, due, now=utcnow())
            report = scheduler.tick()
            samples.append(report.duration_ms)
            created.append(report.created)
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "samples": samples, "created": created}


def _explain(db: BenchDatabase, sql: str) -> list[str]:
    with db.connect() as conn:
        conn.execute("BEGIN")
        rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql).fetchall()
        conn.execute("ROLLBACK")
    return [r[0] for r in rows]


def _execution_ms(db: BenchDatabase, sql: str, repeat: int = 5) -> float:
    """Median server-side execution time of `sql` (EXPLAIN ANALYZE), rolled back."""
    times = []
    for _ in range(repeat):
        plan = _explain(db, sql)
        times += [float(line.split(":")[1].split()[0]) for line in plan if line.startswith("Execution Time")]
    return statistics.median(times)


def run(db: BenchDatabase, options) -> list[Figure]:
    app = db.app(kind="scheduler")  # what `flask scheduler run` ticks on
    sizes = options.tick_sizes
    results: dict = {}
    repeat = 2 if options.smoke else REPEAT
    for total in sizes:
        results[total] = {
            "one_percent": _measure(db, app, total, max(1, total // 100), repeat),
            "fixed": _measure(db, app, total, FIXED_DUE, repeat),
        }
    # The database still holds the largest size with FIXED_DUE jobs due.
    due_sql = _due_query_sql(app)
    plan = _explain(db, due_sql)
    print("EXPLAIN of the due query at", f"{sizes[-1]:,} jobs ({FIXED_DUE} due):")
    for line in plan:
        print("   ", line)
    # `enabled IS true` cannot use the partial index ix_jobs_due (WHERE enabled); the plain
    # boolean test can. Timing both says what the scheduler pays for the difference.
    index_sql = due_sql.replace("jobs.enabled IS true", "jobs.enabled")
    earliest_sql = "SELECT min(jobs.next_run_at) FROM jobs WHERE " + (
        "jobs.enabled IS true" if "jobs.enabled IS true" in due_sql else "jobs.enabled"
    )
    due_ms, due_index_ms = _execution_ms(db, due_sql), _execution_ms(db, index_sql)
    earliest_ms = _execution_ms(db, earliest_sql)
    earliest_index_ms = _execution_ms(db, earliest_sql.replace("jobs.enabled IS true", "jobs.enabled"))
    index_plan = _explain(db, index_sql)
    smallest, largest = sizes[0], sizes[-1]
    base_fixed = results[smallest]["fixed"]["median_ms"]
    base_pct = results[smallest]["one_percent"]["median_ms"] / max(1, smallest // 100)
    figures: list[Figure] = []
    for total in sizes:
        pct, fixed = results[total]["one_percent"], results[total]["fixed"]
        due = max(1, total // 100)
        figures.append(
            Figure(
                NAME,
                f"tick, {total:,} jobs, {due:,} due (1%)",
                pct["median_ms"],
                "ms",
                f"per due job, vs {smallest:,}",
                None,
                note=f"{pct['median_ms'] / due:.2f} ms per due job (at {smallest:,}: {base_pct:.2f}); "
                f"created {pct['created'][-1]}",
            )
        )
        figures.append(
            Figure(
                NAME,
                f"tick, {total:,} jobs, {FIXED_DUE} due",
                fixed["median_ms"],
                "ms",
                f"tick at {smallest:,} jobs",
                base_fixed,
                note=f"min {fixed['min_ms']:.1f} ms over {repeat} ticks",
            )
        )
    figures[-1].name = f"tick({largest:,})/tick({smallest:,}), {FIXED_DUE} due each"
    figures[-1].judge("ratio <= 1.5")
    per_due = results[largest]["one_percent"]["median_ms"] / max(1, largest // 100)
    figures.append(
        Figure(
            NAME,
            f"per due job at {largest:,} (1% due) vs {smallest:,}",
            per_due,
            "ms",
            f"per due job at {smallest:,}",
            base_pct,
            note="grows with due jobs, not total jobs",
        )
    )
    figures += [
        Figure(
            NAME,
            f"due query at {largest:,} jobs (server time)",
            due_ms,
            "ms",
            "same query, index-usable form",
            due_index_ms,
            note="`enabled IS true` does not match the partial index ix_jobs_due (WHERE enabled)",
        ),
        Figure(
            NAME,
            f"earliest next_run_at at {largest:,} jobs",
            earliest_ms,
            "ms",
            "same query, index-usable form",
            earliest_index_ms,
            note="Scheduler.seconds_until_due, before every sleep",
        ),
    ]
    figures[0].extra = {"results": results, "explain_due_query": plan, "explain_index_form": index_plan}
    return figures
