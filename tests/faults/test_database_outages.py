"""The database goes away under a running scheduler, worker and web process (a private cluster,
see conftest.py), and comes back.

- restarted (fast shutdown, back within a second), twice: both processes reconnect by
  themselves, without exiting (no crash loop for a supervisor to notice), without dropping the
  result of a task that finished while the database was gone, and the ledger stays clean;
- unreachable for 30 s (CRONWELL_FAULT_OUTAGE_SECONDS): the processes log the failure and retry
  with a growing backoff, `/readyz` answers 503 naming the database while `/healthz` stays 200,
  and everything resumes when the server is back;
- restarted while both processes sleep: they LISTEN again at once, so a job created right after
  still fires on time (the scheduler is not left deaf until its next tick).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest

from tests.factories import make_job
from tests.helpers.pg import plain_url
from tests.helpers.processes import wait_for
from tests.helpers.scenario import (
    assert_alive,
    check_ledger,
    log_events,
    readyz,
    rows,
    scalar,
    start_web,
    status_counts,
    stop_gracefully,
    utcnow,
)
from tests.helpers.servers import free_port

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

OUTAGE_SECONDS = float(os.environ.get("CRONWELL_FAULT_OUTAGE_SECONDS", "30"))
FAILURE_EVENTS = ("tick_failed", "worker_loop_failed")


def create_jobs(now) -> None:
    for n in range(10):
        make_job(now=now, every="1s", name=f"fast-{n}", overlap_policy="queue")
    for n in range(3):  # still running when the database goes: their results arrive during the outage
        make_job(now=now, every="2s", name=f"busy-{n}", task="sleep_for_seconds", config={"seconds": 1.5})


def succeeded_since(moment) -> int:
    return scalar("SELECT count(*) FROM executions WHERE status = 'succeeded' AND finished_at > :t", t=moment)


def failures(process) -> list[dict]:
    return [r for r in log_events(process) if r.get("event") in FAILURE_EVENTS]


def running_now() -> int:
    return scalar("SELECT count(*) FROM executions WHERE status = 'running'")


def assert_no_result_was_dropped() -> None:
    """A task that finished while the database was down is recorded once it is back, not abandoned."""
    counts = status_counts()
    unsuccessful = rows("SELECT execution_id, number, status, error FROM attempts WHERE status <> 'succeeded'")
    assert unsuccessful == [] and set(counts) <= {"succeeded", "pending", "missed"}, (counts, unsuccessful)


@pytest.mark.timeout(150)
def test_database_restarts_under_a_running_scheduler_and_worker(fault_app, private_pg, processes):
    create_jobs(utcnow())
    scheduler = processes.start("scheduler", "run", "--tick-seconds", "1", "--scheduler-id", "restart-scheduler")
    worker = processes.start_worker("--workers", "4", "--worker-id", "restart-worker")

    def progress(since, count):
        def check():
            assert_alive(scheduler, worker)
            return succeeded_since(since) >= count

        return check

    wait_for(
        progress(utcnow().replace(year=2000), 20),
        within=60,
        interval=0.2,
        what=lambda: "20 successful runs before the restart\n" + processes.outputs()[-6000:],
    )
    for restart in (1, 2):
        # Restart while a task is running, so its result comes back to a worker without a database.
        wait_for(lambda: running_now() > 0, within=20, what="a running task", interval=0.05)
        private_pg.restart()
        restarted_at = utcnow()
        wait_for(
            progress(restarted_at, 20),
            within=60,
            interval=0.2,
            what=lambda: f"20 successful runs after restart {restart}\n" + processes.outputs()[-6000:],
        )

    stop_gracefully(scheduler, worker)
    print(
        f"\n[database restarted twice] failures logged: scheduler={len(failures(scheduler))} "
        f"worker={len(failures(worker))} statuses={status_counts()}"
    )
    # Each restart may fail a step or two (the pool's pre-ping replaces most dead connections
    # first); a crash loop would be dozens.
    assert len(failures(scheduler)) <= 6 and len(failures(worker)) <= 6
    assert_no_result_was_dropped()
    check_ledger("database restarted twice")


@pytest.mark.timeout(150 + 2 * OUTAGE_SECONDS)
def test_database_unreachable_then_back(fault_app, fault_env, private_pg, processes):
    create_jobs(utcnow())
    scheduler = processes.start("scheduler", "run", "--tick-seconds", "1", "--scheduler-id", "outage-scheduler")
    worker = processes.start_worker("--workers", "4", "--worker-id", "outage-worker")
    port = free_port()
    web = start_web(processes, port)
    base = f"http://127.0.0.1:{port}"
    everyone = (scheduler, worker, web)

    def progress(since, count):
        def check():
            assert_alive(*everyone)
            return succeeded_since(since) >= count

        return check

    wait_for(
        progress(utcnow().replace(year=2000), 20),
        within=60,
        interval=0.2,
        what=lambda: "20 successful runs before the outage\n" + processes.outputs()[-6000:],
    )
    assert readyz(base)[0] == 200

    wait_for(lambda: running_now() > 0, within=20, what="a running task", interval=0.05)
    private_pg.stop()
    down_at = time.monotonic()
    answers: list[tuple[int, dict]] = []
    while time.monotonic() - down_at < OUTAGE_SECONDS:
        assert_alive(*everyone)
        answers.append(readyz(base))
        time.sleep(1)  # the outage is a span of time: sample it, do not wait for a condition
    private_pg.start()
    back_at = utcnow()

    assert answers and all(status == 503 for status, _ in answers), answers[:5]
    assert all(body["checks"]["database"]["ok"] is False for _, body in answers)
    wait_for(lambda: readyz(base)[0] == 200, within=30, what="/readyz to recover", interval=0.25)
    wait_for(
        progress(back_at, 20),
        within=60,
        interval=0.2,
        what=lambda: "20 successful runs after the outage\n" + processes.outputs()[-6000:],
    )
    stop_gracefully(scheduler, worker)

    for process in (scheduler, worker):
        delays = [record["retry_in"] for record in failures(process)]
        print(f"\n[database unreachable {OUTAGE_SECONDS:g} s] {process.args[0]} retried after {delays}")
        # Backoff, not a hot loop: a handful of attempts that wait longer and longer.
        assert 2 <= len(delays) <= 12, delays
        assert delays == sorted(delays) and delays[-1] >= 4, delays
    assert_no_result_was_dropped()
    check_ledger(f"database unreachable {OUTAGE_SECONDS:g} s")


def listening(url: str) -> set[str]:
    """The LISTEN statements of the sessions connected to this database (one per session)."""
    import psycopg

    with psycopg.connect(plain_url(url), autocommit=True) as conn:
        return {
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT query FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'"
            )
        }


@pytest.mark.timeout(120)
def test_wake_ups_resume_after_a_restart(fault_app, fault_db, private_pg, processes):
    # the scheduler, its alert delivery thread and the worker
    listeners = {"LISTEN cronwell_jobs", "LISTEN cronwell_alerts", "LISTEN cronwell_work; LISTEN cronwell_control"}
    # A long tick: only a NOTIFY (or the earliest next run) can wake this scheduler in time.
    scheduler = processes.start("scheduler", "run", "--tick-seconds", "120", "--scheduler-id", "sleepy-scheduler")
    worker = processes.start_worker("--workers", "2", "--worker-id", "sleepy-worker")
    wait_for(lambda: listening(fault_db) == listeners, within=30, what=lambda: "both to LISTEN\n" + processes.outputs())
    private_pg.restart()
    wait_for(
        lambda: listening(fault_db) == listeners,
        within=15,
        interval=0.2,
        what=lambda: f"both to LISTEN again after the restart (now {listening(fault_db)})\n" + processes.outputs(),
    )

    run_at = (utcnow() + timedelta(seconds=3)).replace(microsecond=0)
    job = make_job(
        now=utcnow(),
        name="right-after-restart",
        schedule_type="one_time",
        schedule={"run_at": run_at.isoformat().replace("+00:00", "Z")},
    )
    wait_for(
        lambda: scalar("SELECT count(*) FROM executions WHERE job_id = :j AND status = 'succeeded'", j=job.id),
        within=30,
        interval=0.2,
        what=lambda: "the one-time job to run\n" + processes.outputs()[-4000:],
    )
    late = scalar("SELECT extract(epoch FROM created_at - scheduled_for) FROM executions WHERE job_id = :j", j=job.id)
    print(f"\n[wake-ups after a restart] one-time job written {float(late):.2f} s after its time")
    assert float(late) < 1.5
    stop_gracefully(scheduler, worker)
    check_ledger("wake-ups after a restart")
