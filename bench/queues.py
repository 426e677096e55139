"""Queues: statistics at 1M executions, and throughput with no concurrency limit vs with one.

- stats: `--rows` executions (default 1,000,000; `bench.loaders.load_history`: one per second
  back from now, ~98 % finished, 280 pending, 20 running) of 1,000 jobs spread over 20 queues,
  then VACUUM ANALYZE. Timed in an app context, a fresh session per call: `queue_stats(now)` for
  every queue (what `flask queue list`, the Queues page and the API read), for one queue
  (`flask queue stats NAME`), and the metrics snapshot (`app.metrics_exposition.read_snapshot`: the database
  gauges plus the per-queue gauges, what a scrape or a scheduler tick reads). Target: p95 <= 50 ms.
- throughput: 1 `Worker.run(burst=True)` process x 4 slots, `--throughput-n` pending no-op
  executions in one queue: with no limit, with limit 4 (as many as the slots: the limit never
  refuses, so the difference is the slot counter's bookkeeping) and with limit 2 (binding: half
  the slots may run). Rounds alternate the three so drift on a shared machine hits all alike;
  each figure is the median of its rounds. Commits per execution (pg_stat_database) show whether
  a limit adds round trips: the worker's turn must stay one statement.
"""

from __future__ import annotations

import statistics

from app.clock import utcnow
from bench import loaders
from bench.harness import BenchDatabase, Figure, summary, timed
from bench.throughput import _commits, _measure, _pg_finished

NAME = "queues"
QUEUES = list(loaders.SHARED_QUEUES)
JOBS = 1000
REPEAT = 30
SLOTS = 4
LIMITS = {"no limit": None, "limit 4": 4, "limit 2": 2}


def add_queue(conn, name: str, *, limit: int | None = None) -> None:
    """A queue of the default project (the table as the migration made it; no app needed)."""
    conn.execute(
        """INSERT INTO queues (project_id, name, description, concurrency_limit, priority, paused, slots_taken,
                               created_at, updated_at)
           VALUES ((SELECT id FROM projects WHERE name = 'default'), %s, '', %s, 0, false, 0, now(), now())""",
        (name, limit),
    )


# --- statistics at 1M rows --------------------------------------------------------------------


def _stats(db: BenchDatabase, options) -> tuple[list[Figure], dict]:
    rows = options.rows
    loaded = loaders.history_for(db, options, JOBS, now=utcnow(), queues=QUEUES)
    counts = loaded["counts"]
    # The statistics read the last hour and 15 minutes: of a history reused from an earlier run
    # (`--database`) they read it as at its loading, so that the windows hold as many rows.
    at = loaded["loaded_at"]
    app = db.app()
    repeat = 3 if options.smoke else REPEAT
    from app import metrics_exposition
    from app.extensions import db as sa_db
    from app.models import Queue
    from app.services.read.queue_stats import queue_stats

    with app.app_context():

        def fresh(call):
            def once():
                call()
                sa_db.session.remove()

            return once

        def one_queue():
            queue = sa_db.session.query(Queue).filter_by(name="queue-07").one()
            return queue_stats(at, [queue])

        stats = queue_stats(at)  # untimed: what the figures say, for the JSON
        sa_db.session.remove()
        timings = {
            "queue_stats, every queue": summary(timed(fresh(lambda: queue_stats(at)), repeat)),
            "queue_stats, one queue": summary(timed(fresh(one_queue), repeat)),
            "metrics snapshot (gauges + per queue)": summary(
                timed(lambda: metrics_exposition.read_snapshot(sa_db.engine, at), repeat)
            ),
        }
    totals = {
        "pending": sum(s.pending for s in stats.values()),
        "running": sum(s.running for s in stats.values()),
        "succeeded_last_hour": sum(s.succeeded_last_hour for s in stats.values()),
        "queues_with_lateness": sum(1 for s in stats.values() if s.lateness_p95_seconds is not None),
    }
    details = {"rows": rows, "queues": len(QUEUES), "loaded": counts, "stats_totals": totals, "timings_ms": timings}
    figures = []
    for label, timing in timings.items():
        figure = Figure(
            NAME,
            f"{label} at {rows:,} rows, p95",
            timing["p95"],
            "ms",
            note=f"p50 {timing['p50']:.2f} ms, max {timing['max']:.2f} ms, {len(QUEUES)} queues",
        )
        figures.append(figure.judge("<= 50"))
    return figures, details


# --- throughput with and without a limit --------------------------------------------------------


def _prepare(db: BenchDatabase, count: int, limit: int | None) -> None:
    db.reset()
    now = utcnow()
    with db.connect() as conn:
        add_queue(conn, "bench", limit=limit)
        job = loaders.insert_job(conn, "queues-throughput", now=now, overlap_policy="allow", queue="bench")
        loaders.insert_pending(conn, job, count, now=now)
        conn.execute("VACUUM ANALYZE executions")


def _throughput(db: BenchDatabase, count: int, rounds: int) -> tuple[list[Figure], dict]:
    env = db.env()
    runs: dict[str, list[dict]] = {label: [] for label in LIMITS}
    for _ in range(rounds):
        for label, limit in LIMITS.items():
            _prepare(db, count, limit)
            before = _commits(db)
            result = _measure(env, "worker", 1, SLOTS, _pg_finished(db))
            result["commits_per_exec"] = (_commits(db) - before - 2) / max(1, result["done"])
            runs[label].append(result)

    def median(label: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[label])

    base_rate, base_commits = median("no limit", "rate"), median("no limit", "commits_per_exec")
    figures = []
    for label in ("limit 4", "limit 2"):
        rates = " / ".join(f"{run['rate']:.0f}" for run in runs[label])
        base_rates = " / ".join(f"{run['rate']:.0f}" for run in runs["no limit"])
        figure = Figure(
            NAME,
            f"1 proc x {SLOTS} slots, {label}: execs/s vs no limit",
            median(label, "rate"),
            "/s",
            "no limit",
            base_rate,
            note=f"rounds {rates} vs {base_rates} /s; {sum(r['done'] for r in runs[label])} done",
        )
        figures.append(figure.judge("ratio >= 0.9") if label == "limit 4" else figure)
    for label, note in (
        ("limit 4", "the turn that frees a slot starts the successor: one statement, limited or not"),
        ("limit 2", "plus the worker's extra turn when it recorded results and kept free slots"),
    ):
        figure = Figure(
            NAME,
            f"1 proc x {SLOTS} slots, {label}: commits per execution vs no limit",
            median(label, "commits_per_exec"),
            "",
            "no limit",
            base_commits,
            note=note,
        )
        figures.append(figure.judge("ratio <= 1.1") if label == "limit 4" else figure)
    return figures, {"count": count, "rounds": rounds, "runs": runs}


def run(db: BenchDatabase, options) -> list[Figure]:
    rounds = 1 if options.quick else 3
    if getattr(options, "database", None):
        # The throughput rounds empty the database: with a shared history they would throw it away.
        throughput, throughput_details = [], {"skipped": "--database keeps its history"}
    else:
        throughput, throughput_details = _throughput(db, options.throughput_n, rounds)
    stats, stats_details = _stats(db, options)
    figures = stats + throughput
    figures[0].extra = {"stats": stats_details, "throughput": throughput_details}
    return figures
