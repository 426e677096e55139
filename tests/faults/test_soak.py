"""Load: 2,000 jobs every 10 s for 5 minutes with two schedulers and two workers (marker `soak`,
excluded by default; run by hand):

    .venv/bin/pytest tests/faults/test_soak.py -m soak -s -p no:cacheprovider

CRONWELL_SOAK_JOBS, CRONWELL_SOAK_SECONDS and CRONWELL_SOAK_WORKER_SLOTS change the size. The
jobs are spread over the 10-second period (a tenth of them per second), as real schedules would
be. What must hold whatever the machine: the ledger is clean (every occurrence once, none lost;
when the workers fall behind, the overlap policy records occurrences as missed rather than
piling them up). What is reported, not asserted: how late the scheduler wrote each occurrence
and how late a worker started it, and how many runs a second went through.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest

from tests.helpers.processes import wait_for
from tests.helpers.scenario import (
    assert_alive,
    check_ledger,
    clone_jobs,
    lateness_seconds,
    rows,
    scalar,
    status_counts,
    stop_gracefully,
    utcnow,
)

JOBS = int(os.environ.get("CRONWELL_SOAK_JOBS", "2000"))
SECONDS = float(os.environ.get("CRONWELL_SOAK_SECONDS", "300"))
SLOTS = os.environ.get("CRONWELL_SOAK_WORKER_SLOTS", "16")
PHASES = 10  # one group of jobs per second of the 10 s period

pytestmark = [pytest.mark.soak, pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(SECONDS + 600)]


def scheduler_lateness() -> dict[str, float]:
    [row] = rows(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s), percentile_cont(0.95) WITHIN GROUP (ORDER BY s), "
        "percentile_cont(0.99) WITHIN GROUP (ORDER BY s), max(s) FROM (SELECT extract(epoch FROM created_at - "
        "scheduled_for) AS s FROM executions WHERE trigger = 'schedule') AS late"
    )
    return dict(zip(("p50", "p95", "p99", "max"), (float(v or 0) for v in row)))


def test_two_thousand_jobs_every_ten_seconds_for_five_minutes(fault_app, processes):
    start = utcnow().replace(microsecond=0) + timedelta(seconds=20)
    for phase in range(PHASES):
        # Created 10 s before their first run, so phase p first fires at start + p seconds.
        clone_jobs(count=JOBS // PHASES, now=start + timedelta(seconds=phase - 10), prefix=f"soak-{phase}", every="10s")
    assert scalar("SELECT count(*) FROM jobs") == JOBS
    schedulers = [processes.start("scheduler", "run", "--scheduler-id", f"soak-scheduler-{n}") for n in range(2)]
    workers = [processes.start_worker("--workers", SLOTS, "--worker-id", f"soak-worker-{n}") for n in range(2)]
    everyone = schedulers + workers

    wait_for(lambda: utcnow() >= start, within=60, what="the first occurrence", interval=0.5)
    began = time.monotonic()
    samples = []

    def soaked():
        assert_alive(*everyone)
        if len(samples) < int((time.monotonic() - began) // 30):
            samples.append((round(time.monotonic() - began), status_counts()))
            print(f"\n[soak] t={samples[-1][0]}s {samples[-1][1]}", flush=True)
        return time.monotonic() - began >= SECONDS

    wait_for(soaked, within=SECONDS + 30, what="the soak to last", interval=1.0)
    stop_gracefully(*everyone, within=90)

    counts = status_counts()
    runs = counts.get("succeeded", 0)
    started = lateness_seconds()
    written = scheduler_lateness()
    print(
        f"\n[soak {JOBS} jobs every 10 s, {SECONDS:g} s, 2 schedulers, 2 workers x {SLOTS} slots]\n"
        f"  statuses: {counts}\n  runs/s: {runs / SECONDS:.1f} (due: {JOBS / 10:.0f}/s)\n"
        f"  scheduler lateness (created - scheduled), s: {written}\n"
        f"  start lateness (started - scheduled), s: {started}",
        flush=True,
    )
    check_ledger(f"soak {JOBS} jobs")
    assert counts.get("claimed", 0) == counts.get("running", 0) == 0
