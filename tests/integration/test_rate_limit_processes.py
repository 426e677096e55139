"""A queue's rate limit proved with real processes on the real PostgreSQL: four `flask worker
run` processes with four slots each serve one queue limited to 10/second and drain 50 short runs.
Judged afterwards from what the database recorded (each attempt's `started_at`, the claim's own
instant): no window of one second, sliding or calendar-aligned, holds more than 10 starts, and
the drain took as long as the limit demands, so the limit was what paced it."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.database import write_transaction
from app.extensions import db
from app.models import Attempt, Execution
from app.store import store_for
from tests.factories import make_job, make_queue
from tests.helpers.pg import starting_gate
from tests.helpers.processes import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(180)]

RATE = 10
RUNS = 50
WORKERS = 4
SLOTS = 4


@pytest.fixture
def backend() -> str:
    """PostgreSQL only: the point is several processes racing on the queue row's lock."""
    return "postgres"


def statuses(ids: list[int]) -> set[str]:
    db.session.rollback()
    return set(db.session.scalars(select(Execution.status).where(Execution.id.in_(ids))))


def test_10_per_second_holds_across_4_worker_processes(app, app_env, flask_processes):
    make_queue("paced", rate_limit=f"{RATE}/second")
    job = make_job(now=utcnow(), every="1d", name="paced-job", queue="paced", overlap_policy="allow")
    with write_transaction(db.engine) as conn:
        ids = [store_for(conn).insert_manual(conn, job, now=utcnow()) for _ in range(RUNS)]
    db.session.rollback()

    with starting_gate(app_env["DATABASE_URL"]) as gate:
        workers = [
            flask_processes.start_worker("--workers", str(SLOTS), "--queues", "paced", "--worker-id", f"paced-{n}")
            for n in range(WORKERS)
        ]
        gate.wait_for_waiters(WORKERS, within=60, describe=flask_processes.outputs)
        gate.open()
        wait_for(
            lambda: statuses(ids) == {"succeeded"},
            within=90,
            what=lambda: f"all runs to succeed: {statuses(ids)}\n{flask_processes.outputs()}",
        )
    for worker in workers:
        worker.signal(signal.SIGTERM)
    assert flask_processes.wait_all(within=30) == [0] * WORKERS, flask_processes.outputs()

    db.session.rollback()
    starts = sorted(db.session.scalars(select(Attempt.started_at).where(Attempt.execution_id.in_(ids))))
    owners = set(db.session.scalars(select(Attempt.worker_id).where(Attempt.execution_id.in_(ids))))
    assert len(starts) == RUNS  # one attempt each: nothing failed or was retried
    second = timedelta(seconds=1)
    busiest = max(sum(1 for other in starts if at <= other < at + second) for at in starts)
    assert busiest <= RATE, f"{busiest} starts within one second"
    per_second: dict[int, int] = {}
    for at in starts:
        per_second[int(at.timestamp())] = per_second.get(int(at.timestamp()), 0) + 1
    assert max(per_second.values()) <= RATE, per_second
    # 50 starts at 10 per sliding second: the last is at least 4 s after the first.
    assert starts[-1] - starts[0] >= 4 * second
    assert len(owners) >= 2, owners  # the workers shared the work, so the limit held across them
    print(
        f"rate limit: {RUNS} starts over {(starts[-1] - starts[0]).total_seconds():.2f} s, "
        f"busiest second {busiest}, per calendar second {sorted(per_second.values())}, workers {len(owners)}"
    )
