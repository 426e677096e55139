"""Three schedulers and three workers side by side on frequent jobs, for a while (default 30 s,
CRONWELL_FAULT_HA_SECONDS to change it).

Proves the at-most-once guarantee under a realistic mix, not a single race: every scheduler
ticks on the same due jobs, every worker claims from the same queue, jobs overlap (skip and
queue policies), fail once and retry, and fire on interval and cron schedules at once. After a
graceful stop the ledger must be clean: each occurrence once, nothing lost, nothing left in
flight, no attempt beyond max_attempts. (The tight three-scheduler race over one backlog and the
four-worker claim race are in tests/integration/test_concurrency_pg.py.)
"""

from __future__ import annotations

import os
import time

import pytest

from tests.factories import make_job
from tests.helpers.processes import wait_for
from tests.helpers.scenario import (
    assert_alive,
    check_ledger,
    lateness_seconds,
    scalar,
    status_counts,
    stop_gracefully,
    utcnow,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(240)]

RUN_SECONDS = float(os.environ.get("CRONWELL_FAULT_HA_SECONDS", "30"))


def create_mix(now) -> None:
    for n in range(24):
        make_job(now=now, every="2s", name=f"tick-{n:02d}")
    for n in range(6):  # longer than their interval: overlap skip records `missed` rows
        make_job(now=now, every="3s", name=f"slow-{n}", task="sleep_for_seconds", config={"seconds": 4})
    for n in range(2):  # overlap queue: runs wait their turn, FIFO, one at a time
        make_job(
            now=now,
            every="3s",
            name=f"queued-{n}",
            task="sleep_for_seconds",
            config={"seconds": 1},
            overlap_policy="queue",
        )
    for n in range(4):  # each occurrence fails once, then its retry succeeds
        make_job(
            now=now,
            every="5s",
            name=f"flaky-{n}",
            task="fail_once_then_succeed",
            max_attempts=2,
            retry_backoff_seconds=1,
        )
    for n in range(4):
        make_job(now=now, name=f"cron-{n}", schedule_type="cron", schedule={"expression": "* * * * *"})


def test_three_schedulers_and_three_workers_keep_the_ledger_clean(fault_app, processes):
    create_mix(utcnow())
    schedulers = [
        processes.start("scheduler", "run", "--tick-seconds", "1", "--scheduler-id", f"ha-scheduler-{n}")
        for n in range(3)
    ]
    workers = [processes.start_worker("--workers", "4", "--worker-id", f"ha-worker-{n}") for n in range(3)]
    everyone = schedulers + workers

    def all_beating():
        assert_alive(*everyone)
        return scalar("SELECT count(*) FROM heartbeats") == 6

    wait_for(all_beating, within=60, what=lambda: "six heartbeats\n" + processes.outputs()[-6000:], interval=0.25)
    until = time.monotonic() + RUN_SECONDS

    def ran_long_enough():
        assert_alive(*everyone)
        return time.monotonic() >= until

    wait_for(ran_long_enough, within=RUN_SECONDS + 5, what="the run to last", interval=0.5)
    stop_gracefully(*everyone)

    counts = status_counts()
    lateness = lateness_seconds()
    workers_used = scalar("SELECT count(DISTINCT worker_id) FROM attempts")
    print(
        f"\n[three schedulers, three workers, {RUN_SECONDS:g} s] statuses={counts} workers_used={workers_used} "
        f"lateness_s={lateness}"
    )
    figures = check_ledger("three schedulers, three workers")
    assert counts.get("claimed", 0) == counts.get("running", 0) == 0, "a graceful stop left work in flight"
    assert counts.get("succeeded", 0) >= 8 * RUN_SECONDS, counts  # about 15 runs a second are due
    assert counts.get("missed", 0) > 0 and scalar("SELECT count(*) FROM attempts WHERE number = 2") > 0
    assert workers_used == 3
    assert figures.in_flight == 0
