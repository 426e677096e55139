"""kill -9 the scheduler in the middle of a tick, twice, then let a fresh one finish the work.

A tick locks a batch of due jobs, writes their occurrences and advances their cursors in one
transaction. Killing the process while that transaction is open must leave nothing half done:
the batch rolls back (its jobs stay due), the batches committed before it stand, and the next
scheduler picks up exactly where the cursors are. The ledger must then show every occurrence
once: no duplicate, none lost. (A killed *worker* is covered by
tests/integration/test_worker_processes.py.)
"""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest

from tests.helpers.processes import wait_for
from tests.helpers.scenario import check_ledger, clone_jobs, scalar, stop_gracefully, utcnow, write_transactions_open

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(180)]

JOBS_PER_POLICY = 1000  # two policies: 2,000 due jobs, four batches of 500 per tick
LATE_MINUTES = 6  # each catch_up job owes six one-minute occurrences; each coalesce job owes one run


def due_jobs() -> int:
    return scalar("SELECT count(*) FROM jobs WHERE enabled AND next_run_at <= now()")


def executions() -> int:
    return scalar("SELECT count(*) FROM executions")


def test_a_scheduler_killed_mid_tick_loses_and_duplicates_nothing(fault_app, fault_db, processes):
    created = utcnow() - timedelta(minutes=LATE_MINUTES, seconds=30)
    for policy in ("catch_up", "coalesce"):
        clone_jobs(
            count=JOBS_PER_POLICY, now=created, prefix=policy, every="1m", misfire_policy=policy, overlap_policy="allow"
        )
    assert due_jobs() == 2 * JOBS_PER_POLICY

    committed = 0
    for round_ in (1, 2):
        scheduler = processes.start("scheduler", "run", "--tick-seconds", "1", "--scheduler-id", f"doomed-{round_}")
        # Mid-tick: at least one more batch committed than before, and the next batch's
        # transaction open with rows written but not committed.
        seen = committed

        def mid_tick():
            assert scheduler.popen.poll() is None, scheduler.describe()
            return executions() > seen and write_transactions_open(fault_db) > 0

        wait_for(
            mid_tick,
            within=60,
            what=lambda: f"scheduler {round_} to be inside a tick\n{scheduler.describe()}",
            interval=0.02,
        )
        scheduler.signal(signal.SIGKILL)
        assert scheduler.wait_exit(within=10) == -signal.SIGKILL
        # The server notices the dead client and rolls its open batch back.
        wait_for(
            lambda: write_transactions_open(fault_db) == 0,
            within=20,
            what="the killed scheduler's transaction to be rolled back",
        )
        committed = executions()
        remaining = due_jobs()
        print(f"\n[scheduler killed mid-tick #{round_}] executions committed={committed} jobs still due={remaining}")
        assert 0 < remaining < 2 * JOBS_PER_POLICY, "the kill did not land in the middle of the work"

    survivor = processes.start("scheduler", "run", "--tick-seconds", "1", "--scheduler-id", "survivor")
    wait_for(
        lambda: due_jobs() == 0,
        within=90,
        what=lambda: f"the fresh scheduler to finish\n{survivor.describe()}",
        interval=0.2,
    )
    stop_gracefully(survivor)

    figures = check_ledger("scheduler killed mid-tick")
    assert figures.executions == JOBS_PER_POLICY * (LATE_MINUTES + 1)
    # catch_up: every late occurrence has its own row; coalesce: one row + one event per job.
    assert scalar("SELECT count(*) FROM events WHERE type = 'misfire_coalesced'") == JOBS_PER_POLICY
