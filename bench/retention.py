"""Retention at scale: old history deleted in batches while a worker claims, at `--rows` executions.

History is `bench.loaders.history_for` (reused with `--database`). Its queues are paused so the
claims take only this benchmark's work: `CLAIM_ROWS` pending executions of one job in the queue
`retention-claims`, claimed by `bench.child claimloop` (the worker's turn on a kept connection,
4 slots, no executor: the database side of claiming, where deletes could slow it down).

Every history job keeps 1 day (`retention_days = 1`) and retention runs with an injected `now`
one day plus `--retention-rows` seconds after the oldest finished row, so exactly the oldest
`--retention-rows` rows (one per second) are past the cutoff: the run can never delete more than
that from a shared `--database`. Those rows get their Attempt first, so each delete cascades as in
real history. Each round (3 x `--rounds`, 9 by default) has three phases of `SECONDS`, in an order that rotates between rounds so
drift hits all alike: claims alone; claims while `retention.prune_engine` runs at full speed
(unpaced); claims while it runs at the default pace (RETENTION_ROWS_PER_SECOND and
RETENTION_DUTY_PERCENT, `app.domain.pacing`). Retention runs in a thread of this process on its
own connection. Each retention phase may take up to `--retention-rows` / (2 x rounds) rows, which
must be more than 5 s at full speed deletes (about 100,000 at 10M: pass `--retention-rows
2400000`), or a phase runs out of history and its claims run partly alone. The claims figures are
the median of the rounds' ratios (each round's phases ran next to each other).

Targets: paced retention >= 10,000 rows/s with claims >= 0.8 of claims alone (<= 20 % slower);
the full-speed phase is the reference for what pacing costs and buys.
The plans of the scheduler's due query and of the turn's candidate search are recorded (EXPLAIN
ANALYZE, BUFFERS) to compare 1M with 10M.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from datetime import timedelta
from pathlib import Path

from app.clock import utcnow
from bench import loaders
from bench.dashboard import JOBS
from bench.harness import BenchDatabase, Figure, run_children

NAME = "retention"
SECONDS = 5.0
CLAIM_ROWS = 150_000
QUEUE = "retention-claims"


def _prepare_claims(db: BenchDatabase, count: int) -> None:
    with db.connect() as conn:
        conn.execute(
            "UPDATE queues SET paused = true, paused_at = now(), paused_by = 'bench' WHERE name <> %s", (QUEUE,)
        )
        loaders.ensure_queues(conn, [QUEUE])
        conn.execute("UPDATE queues SET paused = false WHERE name = %s", (QUEUE,))
        # What earlier rounds or runs left of the claim workload goes first (it is not history).
        conn.execute("DELETE FROM executions WHERE queue_id = (SELECT id FROM queues WHERE name = %s)", (QUEUE,))
        job = conn.execute("SELECT id FROM jobs WHERE name = 'retention-claims'").fetchone()
        job_id = job[0] if job else loaders.insert_job(conn, "retention-claims", now=utcnow(), queue=QUEUE)
        loaders.insert_pending(conn, job_id, count, now=utcnow(), key_prefix=f"retention-{time.time_ns()}")
        conn.execute("VACUUM ANALYZE executions")


def _prepare_history(db: BenchDatabase, doomed_rows: int):
    """Retention of 1 day on the history jobs, Attempts for the oldest `doomed_rows` rows; returns
    the `now` that puts exactly those rows past the cutoff."""
    with db.connect() as conn:
        oldest, first_id = conn.execute(
            "SELECT finished_at, id FROM executions WHERE finished_at IS NOT NULL AND status <> 'dead_lettered'"
            " ORDER BY id LIMIT 1"  # dead-lettered rows stay: the oldest row retention may take
        ).fetchone()
        conn.execute("UPDATE jobs SET retention_days = 1, retention_count = 0 WHERE name LIKE 'history-%%'")
        # What autovacuum would do soon after (this server runs without it): with statistics that
        # still say no job keeps days, the age axis's plan walks every job's rows instead of the
        # oldest rows in id order (minutes instead of ~0.1 s per batch at 10M).
        conn.execute("ANALYZE jobs")
        conn.execute(
            """INSERT INTO attempts (execution_id, number, worker_id, pid, status, started_at, finished_at, exit_code,
                                     output, error)
               SELECT e.id, 1, 'bench-worker', 4242,
                      CASE WHEN e.status IN ('succeeded', 'failed', 'timed_out') THEN e.status ELSE 'failed' END,
                      e.started_at, e.finished_at, e.exit_code, e.output, e.error
               FROM executions AS e
               WHERE e.id BETWEEN %(first)s AND %(first)s + %(n)s AND e.attempts > 0 AND e.started_at IS NOT NULL
                 AND e.finished_at IS NOT NULL  -- a short history reaches its running rows: not history yet
                 AND NOT EXISTS (SELECT 1 FROM attempts AS a WHERE a.execution_id = e.id)""",
            {"first": first_id, "n": doomed_rows + 10_000},
        )
        conn.execute("VACUUM ANALYZE attempts")
    return oldest + timedelta(days=1, seconds=doomed_rows)


def _claims(db: BenchDatabase, seconds: float, before_go=None) -> dict:
    spec = ["claimloop", "--slots", "4", "--seconds", str(seconds), "--windows", str(seconds)]
    go, reports = run_children([spec], db.env(), before_go=before_go, timeout=seconds + 300)
    report = reports[0]
    claimed = sum(report["counts"])
    return {"claimed": claimed, "rate": claimed / seconds, "batch_ms_p50": report["batch_ms_p50"]}


def _retention_thread(db: BenchDatabase, prune_now, seconds: float, out: dict, pace: dict) -> threading.Thread:
    from sqlalchemy import create_engine

    from app.database import configure_engine
    from app.services.engine import retention

    def work():
        # One kept connection (the scheduler's pool keeps its too), so its server backend's CPU
        # time can be read: rows per CPU second say what a quiet machine would do.
        engine = create_engine(
            db.url.replace("postgresql://", "postgresql+psycopg://"), pool_size=1, max_overflow=0, pool_pre_ping=False
        )
        configure_engine(engine)
        try:
            with engine.connect() as conn:
                backend = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            server_before, python_before = _process_cpu(backend), time.thread_time()
            began = time.perf_counter()
            result = retention.prune_engine(engine, now=prune_now, max_seconds=seconds, **pace)
            out.update(
                result,
                seconds=time.perf_counter() - began,
                cpu_server_s=_process_cpu(backend) - server_before,
                cpu_python_s=time.thread_time() - python_before,
            )
        finally:
            engine.dispose()

    return threading.Thread(target=work, name="retention", daemon=True)


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process on this host (the server backend), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _plans(db: BenchDatabase) -> dict:
    """EXPLAIN (ANALYZE, BUFFERS) of the scheduler's due query and of the turn's candidate search
    (both read-only here: the candidates without FOR UPDATE), with their execution times."""
    from app.store.common import CANDIDATE_ORDER, CANDIDATE_WHERE

    candidates = (
        "SELECT e.id, e.queue_id FROM executions AS e, queues AS q WHERE "
        + CANDIDATE_WHERE.format(queue_filter="", task_filter="").replace(":now", "now()")
        + f" ORDER BY {CANDIDATE_ORDER} LIMIT 4"
    )
    due = "SELECT * FROM jobs WHERE enabled AND next_run_at <= now() ORDER BY next_run_at LIMIT 500"
    found = {}
    with db.connect() as conn:
        for name, sql in (("due query", due), ("turn candidates", candidates)):
            for _ in range(3):  # warm
                conn.execute(sql).fetchall()
            plan = [row[0] for row in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql).fetchall()]
            found[name] = {"plan": plan, "ms": _execution_ms(plan)}
    return found


def _execution_ms(plan: list[str]) -> float | None:
    for line in plan:
        if line.startswith("Execution Time:"):
            return float(line.split()[2])
    return None


def _paces() -> dict[str, dict]:
    """Full speed and the default pace; BENCH_RETENTION_PACE="rows_per_second,duty_cycle" (e.g.
    "11000,0.75") replaces the default pace, to try another before changing the defaults."""
    from app.services.engine import retention

    rate, duty = retention.ROWS_PER_SECOND, retention.DUTY_CYCLE
    if os.environ.get("BENCH_RETENTION_PACE"):
        rate, duty = (float(part) for part in os.environ["BENCH_RETENTION_PACE"].split(","))
    return {"full speed": {}, "paced": {"rows_per_second": rate, "duty_cycle": duty}}


def run(db: BenchDatabase, options) -> list[Figure]:
    # Short phases and many rounds: the claim rate drifts over a run (dead entries gather at the
    # head of the claimable index; other load comes and goes), so each round's neighbours compare.
    rounds = 1 if options.quick else 3 * options.rounds
    seconds = 0.5 if options.smoke else 3.0 if options.quick else SECONDS
    per_phase = options.retention_rows // (2 * rounds)
    loaded = loaders.history_for(db, options, JOBS, now=utcnow())
    plans = _plans(db)
    _prepare_claims(db, 500 if options.smoke else CLAIM_ROWS // 4 if options.quick else CLAIM_ROWS)
    paces = _paces()
    alone: list[dict] = []
    together: dict[str, list[dict]] = {name: [] for name in paces}
    deletes: dict[str, list[dict]] = {name: [] for name in paces}
    phases = ["alone", *paces]
    cut = 0
    try:
        # Discarded: right after the VACUUM the claimable index is clean and the first phase
        # claimed 3x what any later one did (the bench server runs without autovacuum).
        if not options.smoke:
            _claims(db, seconds)
        for number in range(rounds):
            for phase in phases[number % 3 :] + phases[: number % 3]:
                if phase == "alone":
                    alone.append(_claims(db, seconds))
                    continue
                cut += 1
                prune_now = _prepare_history(db, per_phase * cut)
                out: dict = {}
                thread = _retention_thread(db, prune_now, seconds, out, paces[phase])
                together[phase].append(_claims(db, seconds, before_go=thread.start))
                thread.join()
                if "deleted" not in out:
                    raise RuntimeError("the retention thread failed (see its traceback above)")
                deletes[phase].append(out)
    finally:
        with db.connect() as conn:
            # The claim workload is not history: a backlog left behind would weigh on the next
            # benchmark's queue statistics.
            conn.execute("DELETE FROM executions WHERE queue_id = (SELECT id FROM queues WHERE name = %s)", (QUEUE,))
            conn.execute(
                "UPDATE queues SET paused = false, paused_at = NULL, paused_by = NULL WHERE name <> %s", (QUEUE,)
            )
            conn.execute("UPDATE jobs SET retention_days = 0 WHERE name LIKE 'history-%%'")
            conn.execute("VACUUM ANALYZE executions")
    rows = loaded["rows"]
    alone_rate = statistics.median(a["rate"] for a in alone)
    figures = []
    for phase in paces:
        done = deletes[phase]
        rates = [d["deleted"] / d["seconds"] for d in done]
        cpu_rates = [d["deleted"] / max(1e-9, d["cpu_server_s"] + d["cpu_python_s"]) for d in done]
        cpu_share = [(d["cpu_server_s"] + d["cpu_python_s"]) / d["seconds"] for d in done]
        ratios = [t["rate"] / a["rate"] for a, t in zip(alone, together[phase], strict=True)]
        figures += [
            Figure(
                NAME,
                f"retention {phase} at {rows:,} rows, rows/s while claims run",
                statistics.median(rates),
                "/s",
                note=(
                    f"rounds {' / '.join(f'{r:,.0f}' for r in rates)}; "
                    f"{sum(d['deleted'] for d in done):,} rows in {sum(d['batches'] for d in done)} batches; "
                    f"CPU (backend + Python) per wall second {' / '.join(format(c, '.2f') for c in cpu_share)}; "
                    f"paused {' / '.join(format(d.get('paused', 0.0), '.1f') for d in done)} s of each {seconds:g} s"
                ),
            ).judge(">= 10000"),
            Figure(
                NAME,
                f"retention {phase}, rows per CPU second (server backend + Python)",
                statistics.median(cpu_rates),
                "/s",
                note=f"rounds {' / '.join(f'{r:,.0f}' for r in cpu_rates)}",
            ),
            Figure(
                NAME,
                f"claims while retention runs {phase} / claims alone, median of {len(ratios)} rounds",
                statistics.median(ratios),
                "x",
                note=(
                    f"round ratios {' / '.join(f'{r:.2f}' for r in ratios)}; claims/s median "
                    f"{statistics.median(t['rate'] for t in together[phase]):.0f} vs {alone_rate:.0f} alone; "
                    f"1 claim loop x 4 slots; pace {paces[phase] or 'none'}"
                ),
            ).judge(">= 0.8"),
        ]
    figures += [
        Figure(NAME, f"due query at {rows:,} rows (EXPLAIN ANALYZE)", plans["due query"]["ms"], "ms"),
        Figure(NAME, f"turn candidates at {rows:,} rows (EXPLAIN ANALYZE)", plans["turn candidates"]["ms"], "ms"),
    ]
    figures[0].extra = {
        "rows": rows,
        "reused": loaded.get("reused"),
        "alone": alone,
        "together": together,
        "deletes": deletes,
        "paces": paces,
        "plans": plans,
    }
    return figures
