"""Cron bursts: many jobs due in the same instant, drained by a real scheduler and worker.

Two scenarios, each with a real `flask scheduler run` and `flask worker run` on PostgreSQL, three
rounds each (`--rounds`), interleaved with the same-run fork limit:
- 100 interval jobs (overlap policy skip, the default) all due at the same instant, every 10 s,
  1 worker x 4 slots. Targets: lateness p50 <= 1.2 x (50 / F + 10 ms) and
  p99 <= 1.2 x (100 / F + 20 ms), F = the fork limit with 4 in flight;
- 1,000 `* * * * *` cron jobs, 1 worker x 8 slots: every occurrence of the minute starts within
  1.5 x 1,000 / F (F with 8 in flight), i.e. max lateness / (1,000 / F) <= 1.5.
Lateness = started_at - scheduled_for (started_at is stamped just before the fork; the task's
first instruction is one fork start cost later, see `executor`). The fork limit is fork + exit +
waitpid in an interpreter the zygote's size (`bench.child fork`, as `throughput` measures it),
measured between the bursts while the scheduler and worker are idle. Each scenario runs with the
lead time (SCHEDULER_LEAD_MS, default 2000) and, for comparison, without it (`--burst-leads`).
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from app.clock import utcnow
from bench import loaders
from bench.harness import (
    BenchDatabase,
    Figure,
    flask_process,
    heartbeating,
    run_children,
    stop_process,
    summary,
    wait_for,
)

NAME = "burst"
PERIOD = 10  # seconds between the 100-job bursts


def _fork_limit(env: dict, slots: int, count: int) -> float:
    go, reports = run_children([["fork", "--slots", str(slots), "--count", str(count)]], env)
    return count / max(1e-6, reports[0]["end"] - go)


def _create_jobs(db: BenchDatabase, count: int, *, cron: bool, first: datetime) -> None:
    with db.connect() as conn:
        for i in range(count):
            if cron:
                schedule, stype = {"expression": "* * * * *"}, "cron"
            else:
                schedule = {"every": f"{PERIOD}s", "start_at": first.strftime("%Y-%m-%dT%H:%M:%SZ")}
                stype = "interval"
            loaders.insert_job(
                conn,
                f"burst-{i}",
                now=utcnow(),
                overlap_policy="skip",
                next_run_at=first,
                schedule=schedule,
                schedule_type=stype,
            )
        conn.execute("VACUUM ANALYZE jobs")


def _lateness(db: BenchDatabase, at: datetime) -> tuple[list[float], dict]:
    with db.connect() as conn:
        rows = conn.execute(
            """SELECT status, extract(epoch FROM started_at - scheduled_for) * 1000,
                      extract(epoch FROM created_at - scheduled_for) * 1000,
                      extract(epoch FROM finished_at - scheduled_for) * 1000, id
               FROM executions WHERE trigger = 'schedule' AND scheduled_for = %s""",
            (at,),
        ).fetchall()
    by_status: dict[str, int] = {}
    for row in rows:
        by_status[row[0]] = by_status.get(row[0], 0) + 1
    written = [float(r[2]) for r in rows]
    late = [float(r[1]) for r in rows if r[1] is not None]
    # Every occurrence (ms after the instant), by start: where the tail comes from.
    occurrences = sorted(
        ([r[4], float(r[2]), float(r[1]), None if r[3] is None else float(r[3])] for r in rows if r[1] is not None),
        key=lambda o: o[2],
    )
    starts = [o[2] for o in occurrences]
    gaps = [(b - a, a) for a, b in zip(starts, starts[1:])]
    # The tick's share: when the first row started, and when the last row was written (relative
    # to the instant; negative = before it). With the lead every row exists before the instant.
    return late, {
        "by_status": by_status,
        "written_ms_before": -min(written) if written else None,
        "last_written_ms": max(written) if written else None,
        "first_start_ms": min(late) if late else None,
        "started_by_fraction": {
            f"{q:g}": starts[min(len(starts) - 1, int(q * len(starts)))] for q in (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
        }
        if starts
        else {},
        "longest_gaps": [[round(g, 1), round(a, 1)] for g, a in sorted(gaps, reverse=True)[:5]],
        "occurrences": occurrences,  # [execution id, created, started, finished] ms after the instant
    }


def _all_done(db: BenchDatabase, at: datetime, count: int) -> bool:
    with db.connect() as conn:
        return (
            conn.execute(
                "SELECT count(*) FROM executions WHERE scheduled_for = %s AND finished_at IS NOT NULL", (at,)
            ).fetchone()[0]
            >= count
        )


def _sleep_until(at: datetime) -> None:
    while (left := (at - utcnow()).total_seconds()) > 0:
        time.sleep(min(left, 0.5))


def scenario(db: BenchDatabase, options, *, jobs: int, slots: int, cron: bool, lead_ms: int) -> dict:
    """One scenario: `rounds` bursts, each followed by a fork-limit measurement. The first burst
    is set once the scheduler and worker are up (their heartbeats), so start-up is not measured."""
    db.reset()
    parked = utcnow() + timedelta(days=1)
    _create_jobs(db, jobs, cron=cron, first=parked)
    env = db.env(SCHEDULER_LEAD_MS=str(lead_ms), WORKER_POLL_SECONDS="1")
    logs = Path(tempfile.mkdtemp(prefix=f"cronwell_bench_burst_{jobs}_{lead_ms}_"))
    scheduler = flask_process(["scheduler", "run"], env, log_path=logs / "scheduler.log")
    worker = flask_process(["worker", "run", "--workers", str(slots)], env, log_path=logs / "worker.log")
    rounds = []
    try:
        wait_for(lambda: heartbeating(db), 120, what="the scheduler and worker to start")
        now = utcnow()
        if cron:
            first = (now + timedelta(minutes=1)).replace(second=0, microsecond=0)
            if (first - now).total_seconds() < 5:
                first += timedelta(minutes=1)
            step = timedelta(minutes=1)
        else:
            first = now.replace(microsecond=0) + timedelta(seconds=5)
            step = timedelta(seconds=PERIOD)
        with db.connect() as conn:  # every job due at `first`; the scheduler is told at once
            conn.execute("UPDATE jobs SET next_run_at = %s WHERE name LIKE 'burst-%%'", (first,))
            if not cron:
                conn.execute(
                    "UPDATE jobs SET schedule = jsonb_set(schedule, '{start_at}', to_jsonb(%s::text))"
                    " WHERE name LIKE 'burst-%%'",
                    (first.strftime("%Y-%m-%dT%H:%M:%SZ"),),
                )
            conn.execute("SELECT pg_notify('cronwell_jobs', '')")
        for k in range(options.rounds):
            at = first + k * step
            _sleep_until(at)
            wait_for(lambda at=at: _all_done(db, at, jobs), 120, what=f"the burst at {at} to finish")
            if scheduler.poll() is not None or worker.poll() is not None:
                raise RuntimeError(f"scheduler or worker exited early; logs in {logs}")
            late, facts = _lateness(db, at)
            fork = _fork_limit(db.env(), slots, options.burst_fork_count)
            rounds.append({"at": at.isoformat(), "lateness": summary(late), "fork_limit": fork, **facts})
            print(
                f"  {jobs} jobs x {slots} slots, lead {lead_ms} ms, round {k + 1}: "
                f"p50 {summary(late)['p50']:.1f} / p99 {summary(late)['p99']:.1f} / max {summary(late)['max']:.1f} ms, "
                f"fork limit {fork:.0f}/s, {facts['by_status']}, load {os.getloadavg()[0]:.1f}; first start"
                f" {facts['first_start_ms']:.1f} ms, last row written {facts['last_written_ms']:.1f} ms;"
                f" started by fraction {facts['started_by_fraction']}; longest gaps (ms, at) {facts['longest_gaps']}",
                flush=True,
            )
            rounds[-1]["loadavg"] = os.getloadavg()
    finally:
        stop_process(worker)
        stop_process(scheduler)
    return {"rounds": rounds, "logs": str(logs), "lead_ms": lead_ms, "slots": slots, "jobs": jobs}


def _figures(result: dict) -> list[Figure]:
    jobs, slots, lead = result["jobs"], result["slots"], result["lead_ms"]
    figures = []
    for k, rnd in enumerate(result["rounds"], 1):
        fork, late = rnd["fork_limit"], rnd["lateness"]
        where = f"{jobs} jobs x {slots} slots, lead {lead} ms, round {k}"
        note = (
            f"fork limit {fork:.0f}/s; {rnd['by_status']}; written {rnd['written_ms_before'] or 0:.0f} ms ahead;"
            f" first start {rnd['first_start_ms'] or 0:.1f} ms; last row written {rnd['last_written_ms'] or 0:.1f} ms"
        )
        if jobs <= 100:
            figures += [
                Figure(
                    NAME, f"lateness p50, {where}", late["p50"], "ms", "50 / F + 10 ms", 50_000 / fork + 10, note=note
                ).judge("ratio <= 1.2"),
                Figure(NAME, f"lateness p99, {where}", late["p99"], "ms", "100 / F + 20 ms", 100_000 / fork + 20).judge(
                    "ratio <= 1.2"
                ),
                Figure(NAME, f"lateness max, {where}", late["max"], "ms", "100 / F + 20 ms", 100_000 / fork + 20),
            ]
        else:
            figures.append(
                Figure(
                    NAME,
                    f"lateness max (all started), {where}",
                    late["max"],
                    "ms",
                    "N / F",
                    jobs * 1000 / fork,
                    note=note,
                ).judge("ratio <= 1.5")
            )
            figures.append(Figure(NAME, f"lateness p50, {where}", late["p50"], "ms", "N / F", jobs * 1000 / fork))
    return figures


def run(db: BenchDatabase, options) -> list[Figure]:
    results = []
    scenarios = getattr(options, "burst_scenarios", ["100", "cron"])
    hundred = 10 if options.smoke else 100  # the smoke run's burst is a tenth of it
    for lead in options.burst_leads if "100" in scenarios else []:
        results.append(scenario(db, options, jobs=hundred, slots=4, cron=False, lead_ms=lead))
    for lead in options.burst_leads if "cron" in scenarios else []:
        results.append(scenario(db, options, jobs=options.burst_jobs, slots=8, cron=True, lead_ms=lead))
    figures = [figure for result in results for figure in _figures(result)]
    if figures:
        figures[0].extra = {"scenarios": results}
    return figures
