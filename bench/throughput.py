"""Throughput: no-op executions completed per second, end to end, next to the two limits under it.

For 1 and 2 worker processes x 1/4/8 slots, with N pending `always_succeed` executions:
- ours: real `Worker.run(burst=True)` processes (claim, start, fork a task process, record), from
  the go signal to the last `finished_at` in the database;
- (a) the database path: the worker's turn statement (record the last batch, claim and start
  the next, one transaction) with no executor, in a tight loop (`bench.child dbpath`), same
  process count and batch size;
- (b) the fork path: fork + exit + waitpid with `slots` children in flight per process, in an
  interpreter the size of the warmed zygote (`bench.child fork`);
- (c) diagnostic: the real worker loop with an executor that completes tasks instantly.
Ours/(a) and ours/(b) are the figures to watch. The work belongs to an overlap-policy `allow` job
so the one-run-in-flight rule does not serialise it. The same is repeated on SQLite (1 x 4),
where claims serialise through the database write lock.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from app.clock import utcnow
from bench import loaders
from bench.harness import PROJECT_ROOT, VENV_BIN, BenchDatabase, Figure, run_children, summary

NAME = "throughput"
CONFIGS = [(1, 1), (1, 4), (1, 8), (2, 1), (2, 4), (2, 8)]
TARGET = (1, 4)  # the configuration the targets are for (and the only one a smoke run measures)


def _prepare_pg(db: BenchDatabase, count: int) -> None:
    db.reset()
    now = utcnow()
    with db.connect() as conn:
        job = loaders.insert_job(conn, "throughput", now=now, overlap_policy="allow")
        loaders.insert_pending(conn, job, count, now=now)
        conn.execute("VACUUM ANALYZE executions")


def _measure(db_env: dict, mode: str, procs: int, slots: int, finished_sql, extra: tuple[str, ...] = ()) -> dict:
    specs = [[mode, "--slots", str(slots), "--worker-id", f"bench-{mode}-{i}", *extra] for i in range(procs)]
    go, reports = run_children(specs, db_env, progress=lambda: finished_sql()[0])
    done, last = finished_sql()
    if mode in ("dbpath",):
        last = max(r["end"] for r in reports)
    elapsed = max(1e-6, last - go)
    fork_ms = [ms for r in reports for ms in r.get("fork_ms", [])]
    per = 1000 / max(1, done)
    cpu = {
        "parent": sum(r.get("cpu_parent_s", 0) for r in reports) * per,
        "zygote_and_tasks": sum(r.get("cpu_zygote_and_tasks_s", 0) for r in reports) * per,
        "zygote": sum(r.get("cpu_zygote_s") or 0 for r in reports) * per,
        "postgres": sum(r.get("cpu_postgres_s", 0) for r in reports) * per,
    }
    return {"rate": done / elapsed, "done": done, "seconds": elapsed, "fork_ms": summary(fork_ms), "cpu_ms": cpu}


def _fork_limit(db_env: dict, procs: int, slots: int, count: int) -> dict:
    specs = [["fork", "--slots", str(slots), "--count", str(count // procs)] for _ in range(procs)]
    go, reports = run_children(specs, db_env)
    elapsed = max(r["end"] for r in reports) - go
    return {"rate": count // procs * procs / elapsed, "rss_mb": reports[0].get("rss_mb")}


def _pg_finished(db: BenchDatabase):
    def query():
        with db.connect() as conn:
            done, last = conn.execute(
                "SELECT count(*), extract(epoch FROM max(finished_at)) FROM executions WHERE status = 'succeeded'"
            ).fetchone()
        return done, float(last or 0)

    return query


def _commits(db: BenchDatabase) -> int:
    with db.connect() as conn:
        return conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()[0]


def commit_latency(db: BenchDatabase, samples: int = 300) -> dict:
    """One-row UPDATE + COMMIT round trip, durable and with synchronous_commit=off (ms)."""
    found = {}
    with db.connect() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit_probe (id int PRIMARY KEY, n int)")
        conn.execute("INSERT INTO bench_commit_probe VALUES (1, 0) ON CONFLICT DO NOTHING")
        for setting in ("on", "off"):
            conn.execute(f"SET synchronous_commit = {setting}")
            times = []
            for _ in range(samples):
                started = time.perf_counter()
                conn.execute("UPDATE bench_commit_probe SET n = n + 1 WHERE id = 1")
                times.append((time.perf_counter() - started) * 1000)
            found[setting] = summary(times)
        conn.execute("DROP TABLE bench_commit_probe")
    return found


def run(db: BenchDatabase, options) -> list[Figure]:
    env = db.env()
    figures: list[Figure] = []
    details: dict = {}
    for procs, slots in [TARGET] if options.smoke else CONFIGS:
        label = f"{procs} proc x {slots} slot{'s' if slots > 1 else ''}"
        # The target configuration gets the full N; the others half of it, to keep the run short.
        count = options.throughput_n if (procs, slots) == TARGET else options.throughput_n // 2
        _prepare_pg(db, count)
        before = _commits(db)
        ours = _measure(env, "worker", procs, slots, _pg_finished(db))
        ours["commits_per_exec"] = (_commits(db) - before - 2) / max(1, ours["done"])
        _prepare_pg(db, count)
        limit_a = _measure(env, "dbpath", procs, slots, _pg_finished(db))
        _prepare_pg(db, count)
        loop_c = _measure(env, "nullworker", procs, slots, _pg_finished(db))
        limit_b = _fork_limit(env, procs, slots, count)
        details[label] = {"ours": ours, "db_path_a": limit_a, "null_executor_c": loop_c, "fork_b": limit_b}
        if (procs, slots) == TARGET:
            # What the task filter (a worker claims only the tasks it advertises) costs the turn:
            # (a) as the worker runs it, against the same turn without the filter, in this run.
            _prepare_pg(db, count)
            unfiltered = _measure(env, "dbpath", procs, slots, _pg_finished(db), ("--no-tasks",))
            details[label]["db_path_a_without_task_filter"] = unfiltered
            filter_cost = Figure(
                NAME,
                f"{label}: DB path (a) with the task filter vs without",
                limit_a["rate"],
                "/s",
                "(a) without the task filter",
                unfiltered["rate"],
                note="the turn as workers run it (only their advertised tasks) against the unfiltered turn",
            ).judge("ratio >= 0.9")
        cpu = ours["cpu_ms"]
        note = (
            f"{ours['done']}/{count} done; zygote fork p50 {ours['fork_ms']['p50'] or 0:.2f} ms; CPU ms per exec: "
            f"worker {cpu['parent']:.2f}, zygote {cpu['zygote']:.2f}, task processes "
            f"{cpu['zygote_and_tasks'] - cpu['zygote']:.2f}, PostgreSQL {cpu['postgres']:.2f}; "
            f"{ours['commits_per_exec']:.2f} commits per exec"
        )
        main = Figure(
            NAME, f"{label}: execs/s vs fork limit (b)", ours["rate"], "/s", "fork+wait (b)", limit_b["rate"], note=note
        )
        vs_a = Figure(
            NAME, f"{label}: execs/s vs DB path (a)", ours["rate"], "/s", "claim+start+complete (a)", limit_a["rate"]
        )
        diag = Figure(
            NAME,
            f"{label}: worker loop, no fork (c) vs (a)",
            loop_c["rate"],
            "/s",
            "claim+start+complete (a)",
            limit_a["rate"],
            note="diagnostic: the loop's cost without forks",
        )
        if (procs, slots) == TARGET:
            figures.append(
                Figure(
                    NAME, f"{label}: execs/s (target)", ours["rate"], "/s", "fork+wait (b)", limit_b["rate"], note=note
                ).judge(">= 300")
            )
            main.judge("ratio >= 0.8")  # target: 1 x 4 at 0.8 of the same-run fork limit
            vs_a.judge("ratio >= 0.5")
        figures += [main, vs_a, diag]
        if (procs, slots) == TARGET:
            figures.append(filter_cost)
    commits = commit_latency(db, samples=10 if options.smoke else 300)
    details["commit_latency_ms"] = commits
    figures.append(
        Figure(
            NAME,
            "durable commit round trip p50 (fsync)",
            commits["on"]["p50"],
            "ms",
            "synchronous_commit=off",
            commits["off"]["p50"],
            note=f"p95 {commits['on']['p95']:.2f} ms; every worker transaction pays one",
        )
    )
    if options.sqlite:
        figures += _sqlite(options.throughput_n // 2, details)
    figures[0].extra = details
    return figures


# --- SQLite -----------------------------------------------------------------------------------


def _sqlite(count: int, details: dict) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="cronwell_bench_sqlite_") as tmp:
        path = Path(tmp) / "bench.sqlite3"
        env = {**BenchDatabase().env(), "DATABASE_URL": f"sqlite:///{path}", "INSTANCE_DIR": tmp}
        subprocess.run(
            [str(VENV_BIN / "flask"), "db", "upgrade"],
            cwd=PROJECT_ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )

        def prepare() -> None:
            import sqlite3

            con = sqlite3.connect(path)
            con.executescript("DELETE FROM attempts; DELETE FROM executions; DELETE FROM events; DELETE FROM jobs;")
            con.execute("""INSERT INTO jobs (id, name, description, task, config, schedule_type, schedule, timezone,
                               enabled, overlap_policy, misfire_policy, misfire_grace_seconds, max_attempts,
                               retry_backoff_seconds, timeout_seconds, alert_mode, retention_count, retention_days,
                               queue_id, priority, created_at, updated_at, project_id)
                           VALUES (1, 'throughput', '', 'always_succeed', '{}', 'interval',
                               '{"every": "1h", "start_at": "2026-01-01T00:00:00Z"}', 'UTC', 1, 'allow', 'coalesce',
                               60, 1, 1, 30, 'log_only', 0, 0, (SELECT id FROM queues WHERE name = 'default'), 0,
                               '2026-01-01 00:00:00.000000',
                               '2026-01-01 00:00:00.000000',
                               (SELECT project_id FROM queues WHERE name = 'default'))""")
            con.execute(
                """WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
                           INSERT INTO executions (job_id, scheduled_for, trigger, idempotency_key, status, attempts,
                               max_attempts, queue_id, priority, exclusive, available_at, output, error, created_at,
                               updated_at)
                           SELECT 1, t, 'manual', 'bench:' || n, 'pending', 0, 1,
                               (SELECT id FROM queues WHERE name = 'default'), 0, 0, t, '', '', t, t
                           FROM (SELECT n, strftime('%Y-%m-%d %H:%M:%f000', 'now', '-10 seconds') AS t FROM g)""",
                (count,),
            )
            con.commit()
            con.close()

        def finished():
            import sqlite3

            con = sqlite3.connect(path)
            done, last = con.execute(
                "SELECT count(*), max(finished_at) FROM executions WHERE status = 'succeeded'"
            ).fetchone()
            con.close()
            stamp = datetime.fromisoformat(last).replace(tzinfo=UTC).timestamp() if last else 0.0
            return done, stamp

        prepare()
        ours = _measure(env, "worker", 1, 4, finished)
        prepare()
        limit_a = _measure(env, "dbpath", 1, 4, finished)
    details["sqlite 1 proc x 4 slots"] = {"ours": ours, "db_path_a": limit_a}
    return [
        Figure(
            NAME,
            "SQLite 1 proc x 4 slots: execs/s vs DB path (a)",
            ours["rate"],
            "/s",
            "claim+start+complete (a)",
            limit_a["rate"],
            note=f"{ours['done']}/{count} done",
        )
    ]
