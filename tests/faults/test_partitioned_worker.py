"""A worker host is cut off from the database while its task runs; the other host carries on.

Three simulated hosts (tests/helpers/hosts.py), each reaching the private PostgreSQL through its own
loopback proxy: hosts `a` and `b` run a worker each, host `c` the scheduler. A 20 s task with no
timeout starts on one of the workers under a 4 s lease (LEASE_SECONDS=4, renewed with the
heartbeat); then that worker's host is partitioned (new connections hang, open ones go silent).
The scheduler recovers the expired lease and the other worker runs the retry. When the host is
healed its late result is refused by the guards and logged, and the ledger is clean.

The overlap window (two copies of the task running at once) is measured from the process table
(tests/helpers/hosts.py TaskSampler, 20 ms samples): zero with the lease watchdog, which stops
the cut-off task before its lease can expire; without it (LEASE_WATCHDOG=0) the cut-off copy runs
on until its host is healed and its worker finds the lease lost.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from tests.factories import make_job
from tests.helpers.hosts import TaskSampler
from tests.helpers.processes import wait_for
from tests.helpers.scenario import assert_alive, check_ledger, log_events, rows, scalar, stop_gracefully, utcnow

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(110)]

LEASE_SECONDS = 4
TASK_SECONDS = 20
ENV = {"LEASE_SECONDS": str(LEASE_SECONDS), "LEASE_BUFFER_SECONDS": "0", "WORKER_POLL_SECONDS": "1"}


def beating(process_id: str) -> bool:
    return bool(scalar("SELECT count(*) FROM heartbeats WHERE id = :id", id=process_id))


def attempts_of(execution_id: int) -> list:
    return rows(
        "SELECT number, worker_id, status, error FROM attempts WHERE execution_id = :id ORDER BY number",
        id=execution_id,
    )


def run_partition(hosts, *, watchdog: bool) -> dict:
    env = {**ENV, "LEASE_WATCHDOG": "1" if watchdog else "0"}
    a, b, c = hosts.add("a"), hosts.add("b"), hosts.add("c")
    workers = {
        "a": hosts.start_worker(a, "--workers", "2", env=env),
        "b": hosts.start_worker(b, "--workers", "2", env=env),
    }
    scheduler = hosts.start_scheduler(c, "--tick-seconds", "1", env=env)
    wait_for(
        lambda: all(beating(f"worker-{name}") for name in workers) and beating("scheduler-c"),
        within=30,
        what=lambda: "both workers and the scheduler\n" + hosts.processes.outputs()[-4000:],
    )
    sampler = TaskSampler(workers)
    try:
        job = make_job(
            name="long-no-timeout",
            now=utcnow() - timedelta(hours=1) + timedelta(seconds=1),  # first occurrence in about a second
            every="1h",
            task="sleep_for_seconds",
            config={"seconds": TASK_SECONDS},
            timeout_seconds="none",  # no limit
            max_attempts=2,
            retry_backoff_seconds=1,
        )
        [(execution_id, owner)] = wait_for(
            lambda: rows("SELECT id, claimed_by FROM executions WHERE job_id = :j AND status = 'running'", j=job.id),
            within=20,
            what="a worker to start the task",
        )
        # The host whose worker took the run is cut off; the other carries on.
        victim = owner.removeprefix("worker-")
        survivor = "b" if victim == "a" else "a"
        cut_host, cut_worker = hosts.hosts[victim], workers[victim]
        wait_for(lambda: sampler.busy(victim), within=10, what="the task process")
        first_lease = scalar("SELECT lease_expires_at FROM executions WHERE id = :id", id=execution_id)
        wait_for(  # renewed while healthy: the run outlives the lease its claim gave
            lambda: (
                (scalar("SELECT lease_expires_at FROM executions WHERE id = :id", id=execution_id) or first_lease)
                >= first_lease + timedelta(seconds=LEASE_SECONDS / 2)
            ),
            within=LEASE_SECONDS * 2,
            what=lambda: f"the lease to be renewed {attempts_of(execution_id)}\n" + cut_worker.describe()[-4000:],
        )
        assert attempts_of(execution_id) == [(1, owner, "running", "")]

        cut_host.proxy.partition()
        cut_at = time.monotonic()
        wait_for(
            lambda: scalar("SELECT count(*) FROM attempts WHERE execution_id = :id AND number = 2", id=execution_id),
            within=30,
            what=lambda: "the retry to start elsewhere\n" + hosts.processes.outputs()[-6000:],
        )
        other_started = wait_for(  # as the sampler saw it (its samples, not a direct look)
            lambda: sampler.first_busy_after(survivor, cut_at), within=10, what="the retry's task process"
        )
        time.sleep(1.5)  # the partition lasts past the retry's start: without the watchdog both copies run
        cut_stopped = sampler.last_busy(victim)
        cut_host.proxy.heal()
        healed_at = time.monotonic()

        wait_for(
            lambda: log_events(cut_worker, "result_discarded"),
            within=40,
            what=lambda: "the late result to be refused\n" + cut_worker.describe()[-6000:],
        )
        wait_for(
            lambda: scalar("SELECT status FROM executions WHERE id = :id", id=execution_id) == "succeeded",
            within=TASK_SECONDS + 20,
            what=lambda: "the retry to succeed\n" + hosts.processes.outputs()[-6000:],
        )
    finally:
        sampler.stop()
    everyone = [*workers.values(), scheduler]
    assert_alive(*everyone)
    stop_gracefully(*everyone)

    if not watchdog:
        cut_stopped = sampler.last_busy(victim)
    figures = {
        "overlap_s": round(sampler.overlap_seconds(), 2),
        "cut_task_stopped_after_cut_s": round(cut_stopped - cut_at, 2),
        "retry_started_after_cut_s": round(other_started - cut_at, 2),
        "healed_after_cut_s": round(healed_at - cut_at, 2),
        "watchdog_stops": len(log_events(cut_worker, "lease_watchdog_stop")),
        "leases_lost": len(log_events(cut_worker, "lease_lost")),
        "results_discarded": len(log_events(cut_worker, "result_discarded")),
        "attempts": [(number, worker, status) for number, worker, status, _ in attempts_of(execution_id)],
        "owner": owner,
    }
    check_ledger(f"partitioned worker, watchdog {'on' if watchdog else 'off'}")
    verify = hosts.start(hosts.hosts["c"], "verify")  # the operator's check, from a healed host
    assert verify.wait_exit(60) == 0, verify.describe()
    print(
        f"\n[partitioned worker, watchdog {'on' if watchdog else 'off'}] "
        + " ".join(f"{key}={value}" for key, value in figures.items())
    )
    return figures


def test_a_cut_off_worker_stops_its_task_before_another_host_runs_it(hosts, fault_app):
    figures = run_partition(hosts, watchdog=True)
    assert figures["overlap_s"] == 0, figures
    assert figures["watchdog_stops"] >= 1
    # Stopped before its lease could end (a lease renewed at most 0.8 s before the cut ends by cut + 4 s) ...
    assert figures["cut_task_stopped_after_cut_s"] < LEASE_SECONDS, figures
    # ... and only then recovered and run elsewhere.
    assert figures["retry_started_after_cut_s"] > figures["cut_task_stopped_after_cut_s"], figures
    [first, second] = figures["attempts"]
    assert first == (1, figures["owner"], "abandoned"), first  # settled by the scheduler's recovery
    assert second[0] == 2 and second[1] != figures["owner"] and second[2] == "succeeded", second
    assert figures["results_discarded"] == 1


def test_without_the_watchdog_the_cut_off_copy_runs_on(hosts, fault_app):
    """The measurement that motivates the watchdog: the same partition with LEASE_WATCHDOG=0."""
    figures = run_partition(hosts, watchdog=False)
    assert figures["watchdog_stops"] == 0
    assert figures["overlap_s"] >= 1.0, figures  # both copies ran until a was healed
    assert figures["leases_lost"] >= 1  # healed, a finds its lease gone and stops its copy
    assert figures["results_discarded"] == 1
