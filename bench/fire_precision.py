"""Fire-time precision: real `flask scheduler run` + `flask worker run`, 200 interval jobs every 1-5 s.

Lateness = started_at - scheduled_for of every scheduled occurrence in the measured window (the
first 5 s after the processes start are warm-up and not counted), split into the scheduler's part
(created_at - scheduled_for: the tick writing the row) and the worker's part (started_at -
created_at: NOTIFY, claim, start). `started_at` is stamped by the worker just before it asks the
zygote to fork, so the task's own first instruction comes one fork cost (see `executor`) later.

Five runs. 200 jobs every 1-5 s (about 91 occurrences/s on average) in two phase layouts,
because the interval anchor decides how bursty the load is:
- aligned: jobs created through `create_job` without a start_at, so every interval is anchored on
  a whole second (the product's default): each second 40-200 occurrences fall due together;
- spread: the same jobs with explicit start_at offsets spread over the interval, the same average
  rate without bursts;
and a lighter load, 100 jobs every 2 s (50/s), in both layouts. Aligned, all 100 fall
due in the same instant every 2 s and 4 slots drain them at the worker's throughput, so lateness
there is the burst's queue (the k-th of the burst starts about k / throughput late), not the
wake-up precision; the spread layout measures the precision. When the offered rate is above what
the worker completes per second (see `throughput`), the note's "worker part" grows through the
run and overlap-skip records occurrences as missed.
Then, with the interval jobs disabled, manual triggers (`trigger_job`, 50-100 ms apart) timed from
the trigger's commit-time `now` to started_at.

LISTEN/NOTIFY is measured on and, with LISTEN_NOTIFY=0 for the scheduler and worker, off
(polling only). The same-run limit is the NOTIFY -> LISTEN
delivery time between two connections on this server, the floor under any wake-up.
"""

from __future__ import annotations

import random
import select
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import psycopg

from app.clock import utcnow
from bench.harness import (
    BenchDatabase,
    Figure,
    children_of,
    flask_process,
    heartbeating,
    proc_status,
    stop_process,
    summary,
    wait_for,
)

NAME = "fire"
WARMUP_SECONDS = 5.0


def _utcnow() -> datetime:
    return utcnow()


def notify_floor(url: str, samples: int = 200) -> dict:
    """Milliseconds from pg_notify's commit on one connection to its arrival on a listener."""
    listener = psycopg.connect(url, autocommit=True)
    sender = psycopg.connect(url, autocommit=True)
    listener.execute("LISTEN bench_floor")
    found = []
    try:
        for _ in range(samples):
            started = time.perf_counter()
            sender.execute("SELECT pg_notify('bench_floor', '')")
            select.select([listener.fileno()], [], [], 2.0)
            got = sum(1 for _ in listener.notifies(timeout=0))
            if got:
                found.append((time.perf_counter() - started) * 1000)
    finally:
        listener.close()
        sender.close()
    return summary(found)


def _create_jobs(app, count: int, layout: str, now: datetime, periods: tuple[int, ...] = (1, 2, 3, 4, 5)) -> datetime:
    """`count` always_succeed interval jobs, job i every periods[i % len] s; returns when the first may fire."""
    from app.extensions import db
    from app.services.use_cases.jobs import create_job

    start = now.replace(microsecond=0) + timedelta(seconds=2)
    rng = random.Random(7)
    with app.app_context():
        for i in range(count):
            every = periods[i % len(periods)]
            schedule: dict = {"every": f"{every}s"}
            if layout == "spread":
                offset = timedelta(seconds=every * rng.random())
                schedule["start_at"] = (start + offset).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            create_job(
                {
                    "name": f"fire-{layout}-{i}",
                    "task": "always_succeed",
                    "schedule_type": "interval",
                    "schedule": schedule,
                    "max_attempts": 1,
                    "alert_mode": "log_only",
                    "retention_count": 0,
                    "retention_days": 0,
                },
                now=_utcnow(),
                actor="bench",
            )
        db.session.remove()
    return start


def _lateness(db: BenchDatabase, since: datetime, until: datetime) -> dict:
    with db.connect() as conn:
        rows = conn.execute(
            """SELECT status, extract(epoch FROM started_at - scheduled_for) * 1000,
                      extract(epoch FROM created_at - scheduled_for) * 1000,
                      extract(epoch FROM started_at - created_at) * 1000
               FROM executions WHERE trigger IN ('schedule', 'catch_up')
                 AND scheduled_for >= %s AND scheduled_for < %s""",
            (since, until),
        ).fetchall()
        expected = conn.execute(
            """SELECT coalesce(sum(floor(extract(epoch FROM %(until)s::timestamptz - %(since)s::timestamptz)
                                         / extract(epoch FROM (schedule->>'every')::interval))), 0)
               FROM jobs WHERE name LIKE 'fire-%%'""",
            {"since": since, "until": until},
        ).fetchone()[0]
    started = [r for r in rows if r[1] is not None]
    by_status: dict[str, int] = {}
    for row in rows:
        by_status[row[0]] = by_status.get(row[0], 0) + 1
    return {
        "total": summary([float(r[1]) for r in started]),
        "scheduler": summary([float(r[2]) for r in rows]),
        "worker": summary([float(r[3]) for r in started]),
        "rows": len(rows),
        "by_status": by_status,
        "expected_about": int(expected),
    }


def _triggers(app, db: BenchDatabase, count: int, *, drain_seconds: float = 1.5) -> dict:
    """Trigger an allow-overlap job `count` times with the worker idle; ms from now to started_at."""
    from app.extensions import db as sa_db
    from app.services.use_cases.jobs import create_job, trigger_job

    rng = random.Random(11)
    with db.connect() as conn:
        conn.execute("UPDATE jobs SET enabled = false WHERE name LIKE 'fire-%%'")
    ids = []
    with app.app_context():
        job = create_job(
            {
                "name": "fire-trigger",
                "task": "always_succeed",
                "schedule_type": "one_time",
                "schedule": {"run_at": (_utcnow() + timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")},
                "overlap_policy": "allow",
                "max_attempts": 1,
                "alert_mode": "log_only",
            },
            now=_utcnow(),
            actor="bench",
        )
        time.sleep(drain_seconds)  # let the in-flight interval work drain
        for _ in range(count):
            ids.append(trigger_job(job.id, now=_utcnow(), actor="bench").id)
            sa_db.session.remove()
            time.sleep(0.05 + rng.random() * 0.05)
        sa_db.session.remove()
    wait_for(lambda: _all_started(db, ids), 30, what="triggered executions to start")
    with db.connect() as conn:
        rows = conn.execute(
            "SELECT extract(epoch FROM started_at - scheduled_for) * 1000 FROM executions WHERE id = ANY(%s)", (ids,)
        ).fetchall()
    return summary([float(r[0]) for r in rows])


def _all_started(db: BenchDatabase, ids: list[int]) -> bool:
    with db.connect() as conn:
        return conn.execute(
            "SELECT count(*) FROM executions WHERE id = ANY(%s) AND started_at IS NOT NULL", (ids,)
        ).fetchone()[0] == len(ids)


def measure_layout(
    db: BenchDatabase,
    options,
    app,
    layout: str,
    *,
    jobs: int,
    periods: tuple[int, ...],
    with_triggers: bool,
    notify: bool = True,
) -> dict:
    db.reset()
    first_fire = _create_jobs(app, jobs, layout, _utcnow(), periods)
    env = db.env()
    if not notify:
        env = dict(env, LISTEN_NOTIFY="0")
    logs = Path(tempfile.mkdtemp(prefix=f"cronwell_bench_fire_{layout}_"))
    scheduler = flask_process(["scheduler", "run"], env, log_path=logs / "scheduler.log")
    worker = flask_process(["worker", "run"], env, log_path=logs / "worker.log")
    memory: dict = {}
    try:
        # The warm-up counts from when both are up: on a busy machine starting them takes seconds.
        wait_for(lambda: heartbeating(db), 120, what="the scheduler and worker to start")
        began = _utcnow()
        warmup = 1.0 if options.smoke else WARMUP_SECONDS
        since = max(began + timedelta(seconds=warmup), first_fire)
        until = since + timedelta(seconds=options.fire_seconds)
        while _utcnow() < until + timedelta(seconds=1):
            time.sleep(0.5)
            if scheduler.poll() is not None or worker.poll() is not None:
                raise RuntimeError(f"scheduler or worker exited early; logs in {logs}")
        zygotes = children_of(worker.pid)
        memory = {
            "scheduler": proc_status(scheduler.pid),
            "worker_parent": proc_status(worker.pid),
            "zygote": proc_status(zygotes[0]) if zygotes else {},
        }
        result = {
            "lateness": _lateness(db, since, until),
            "window_seconds": options.fire_seconds,
            "logs": str(logs),
            "memory": memory,
        }
        if with_triggers:
            result["trigger"] = _triggers(app, db, options.triggers, drain_seconds=0.2 if options.smoke else 1.5)
    finally:
        stop_process(worker)
        stop_process(scheduler)
    return result


def run(db: BenchDatabase, options) -> list[Figure]:
    floor = notify_floor(db.url, samples=10 if options.smoke else 200)
    jobs = options.fire_jobs
    light = jobs if options.smoke else 100  # the lighter load
    with_triggers = f"{jobs} jobs 1-5 s, aligned"
    polled = f"{light} jobs every 2 s, aligned, NOTIFY off"
    layouts = {
        with_triggers: {"layout": "aligned", "jobs": jobs, "periods": (1, 2, 3, 4, 5), "with_triggers": True},
        f"{jobs} jobs 1-5 s, spread": {"layout": "spread", "jobs": jobs, "periods": (1, 2, 3, 4, 5)},
        f"{light} jobs every 2 s, aligned": {"layout": "aligned", "jobs": light, "periods": (2,)},
        f"{light} jobs every 2 s, spread": {"layout": "spread", "jobs": light, "periods": (2,)},
        polled: {"layout": "aligned", "jobs": light, "periods": (2,), "with_triggers": True, "notify": False},
    }
    if options.smoke:  # each step once: both layouts, NOTIFY on and off, triggers with each
        spread_polled = {**layouts[polled], "layout": "spread"}
        polled = f"{light} jobs every 2 s, spread, NOTIFY off"
        layouts = {with_triggers: layouts[with_triggers], polled: spread_polled}
    app = db.app()  # one for every layout: building it costs seconds of CPU
    runs = {
        label: measure_layout(db, options, app, **{"with_triggers": False, **layout})
        for label, layout in layouts.items()
    }
    figures: list[Figure] = []
    for layout, result in runs.items():
        late = result["lateness"]
        total, sched, work = late["total"], late["scheduler"], late["worker"]
        note = (
            f"{late['rows']} occurrences (~{late['expected_about']} expected) over {options.fire_seconds:g} s, "
            f"{late['by_status']}; scheduler part p50 {sched['p50'] or 0:.1f} / p99 {sched['p99'] or 0:.1f} ms, "
            f"worker part p50 {work['p50'] or 0:.1f} / p99 {work['p99'] or 0:.1f} ms"
        )
        figures += [
            Figure(
                NAME, f"lateness p50, {layout}", total["p50"], "ms", "NOTIFY delivery p50", floor["p50"], note=note
            ).judge("<= 25"),
            Figure(NAME, f"lateness p95, {layout}", total["p95"], "ms", "NOTIFY delivery p95", floor["p95"]),
            Figure(NAME, f"lateness p99, {layout}", total["p99"], "ms", "NOTIFY delivery p99", floor["p99"]).judge(
                "<= 200"
            ),
            Figure(NAME, f"lateness max, {layout}", total["max"], "ms", "NOTIFY delivery max", floor["max"]),
        ]
    trig = runs[with_triggers]["trigger"]
    figures += [
        Figure(
            NAME,
            "manual trigger -> start p50",
            trig["p50"],
            "ms",
            "NOTIFY delivery p50",
            floor["p50"],
            note=f"{trig['n']} triggers, worker idle; LISTEN/NOTIFY on",
        ).judge("<= 10"),
        Figure(NAME, "manual trigger -> start p99", trig["p99"], "ms", "NOTIFY delivery p99", floor["p99"]),
    ]
    polling = runs[polled]["trigger"]
    figures += [
        Figure(
            NAME,
            "manual trigger -> start p50, NOTIFY off",
            polling["p50"],
            "ms",
            "with NOTIFY p50",
            trig["p50"],
            note=f"{polling['n']} triggers; LISTEN_NOTIFY=0: the worker finds work by polling (WORKER_POLL_SECONDS)",
        ),
        Figure(NAME, "manual trigger -> start p99, NOTIFY off", polling["p99"], "ms", "with NOTIFY p99", trig["p99"]),
    ]
    figures[0].extra = {"notify_floor": floor, "runs": runs}
    return figures
