"""Idle cost: the transactions/s and CPU of a scheduler and a worker with nothing to do.

A real `flask scheduler run` and `flask worker run --workers 4` on the benchmark database with one
daily job (which does not fall due in the window). Once both have heartbeated and a warm-up has
passed, the database's committed and rolled-back transactions (`pg_stat_database`, read from the
`postgres` database so the reads are not counted) and the CPU time of each process and of the
database server processes serving them (`/proc/PID/stat`) are taken over `--idle-seconds`
(default 60). The limit is 1 transaction/s for both processes together.

PostgreSQL reports a busy backend's counts at most once a second, and an idle one's up to
PGSTAT_IDLE_INTERVAL (10 s) after its last transaction: the warm-up outlasts that, so the
start-up's transactions are not counted in the window.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import psycopg

from app.clock import utcnow
from bench import loaders
from bench.harness import BenchDatabase, Figure, children_of, flask_process, heartbeating, stop_process, wait_for

NAME = "idle"
LIMIT_TPS = 1.0
WARMUP_SECONDS = 12.0  # longer than PostgreSQL's idle stats flush (10 s)
_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children_of(current)
    return found


def _transactions(admin: psycopg.Connection, name: str) -> int:
    row = admin.execute(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (name,)
    ).fetchone()
    return int(row[0])


def _backends(admin: psycopg.Connection, name: str) -> list[int]:
    return [row[0] for row in admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,))]


def run(db: BenchDatabase, options) -> list[Figure]:
    db.reset()
    with db.connect() as conn:
        loaders.insert_job(
            conn,
            "daily",
            now=utcnow(),
            next_run_at=utcnow() + timedelta(days=1),
            schedule={"every": "24h", "start_at": "2026-01-01T00:00:00Z"},
        )
    env = db.env(LOG_LEVEL="WARNING")
    logs = Path(tempfile.mkdtemp(prefix="cronwell_bench_idle_"))
    processes = {
        "scheduler": flask_process(["scheduler", "run"], env, log_path=logs / "scheduler.log"),
        "worker": flask_process(["worker", "run", "--workers", "4"], env, log_path=logs / "worker.log"),
    }
    admin_url = db.admin_url.rsplit("/", 1)[0] + "/postgres"
    try:
        wait_for(lambda: heartbeating(db), 60, 0.2, "the scheduler and the worker to heartbeat")
        time.sleep(1.0 if getattr(options, "smoke", False) else WARMUP_SECONDS)  # a smoke run counts nothing
        with psycopg.connect(admin_url, autocommit=True) as admin:
            backends = _backends(admin, db.name)
            pids = {name: _tree(proc.pid) for name, proc in processes.items()}
            cpu_before = {name: sum(map(_cpu_seconds, tree)) for name, tree in pids.items()}
            db_before = sum(map(_cpu_seconds, backends))
            count_before, started = _transactions(admin, db.name), time.monotonic()
            time.sleep(options.idle_seconds)
            admin.execute("SELECT pg_stat_clear_snapshot()")
            count_after, seconds = _transactions(admin, db.name), time.monotonic() - started
            cpu = {name: sum(map(_cpu_seconds, tree)) - cpu_before[name] for name, tree in pids.items()}
            database_cpu = sum(map(_cpu_seconds, backends)) - db_before
        for name, proc in processes.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode} during the window (logs in {logs})")
    finally:
        for proc in processes.values():
            stop_process(proc)
    rate = (count_after - count_before) / seconds
    window = f"{seconds:.0f} s window"
    figures = [
        Figure(
            NAME,
            "transactions/s at idle (scheduler + worker)",
            round(rate, 2),
            "tx/s",
            limit_name="limit",
            limit_value=LIMIT_TPS,
            note=f"{count_after - count_before} transactions in the {window}",
        ).judge("ratio <= 1")
    ]
    for name, used in cpu.items():
        figures.append(Figure(NAME, f"{name} CPU at idle", round(100 * used / seconds, 2), "% of a core", note=window))
    figures.append(
        Figure(NAME, "database CPU at idle", round(100 * database_cpu / seconds, 2), "% of a core", note=window)
    )
    return figures
