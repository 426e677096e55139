"""A worker gives up the runs the database says it claimed but it does not hold, once it is back
after a database failure: a turn whose claim committed while the worker saw an error (its
acknowledgement lost), or, after a failover to an asynchronous replica, a run whose result was
recorded only on the old primary (tests/faults/test_failover.py). Their leases are expired so
recovery settles them at once instead of after LEASE_SECONDS, while their jobs' next runs wait
behind them."""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from app.clock import utcnow
from app.extensions import db
from app.models import Execution
from app.services.engine import recovery
from app.services.engine.worker import Worker
from app.sql import turn
from tests.factories import make_execution, make_job


def test_claims_committed_unacknowledged_are_given_up_after_the_failure(app, monkeypatch, caplog):
    now = utcnow()
    job = make_job(now=now, name="many", overlap_policy="allow", max_attempts=3)
    for _ in range(6):
        make_execution(job, "pending", now=now)
    # Claimed under the same worker id by an earlier process: not this one's to give up (two
    # processes may share an id); its lease runs out as it would.
    earlier = make_execution(
        job,
        "running",
        now=now - timedelta(hours=1),
        claimed_by="w-unheld",
        lease_expires_at=now + timedelta(minutes=5),
        attempt_rows=False,
    )
    db.session.commit()
    worker = Worker(app, worker_id="w-unheld", slots=2)
    real, orphans = turn.record_and_claim, []

    def record_and_claim(conn, *args, **kwargs):
        if orphans:
            return real(conn, *args, **kwargs)
        # The first turn's claim commits on the database, and the worker hears only an error.
        taken = real(conn, *args, **kwargs)
        cursor = conn.cursor()
        cursor.execute("COMMIT")  # a no-op (a warning) on PostgreSQL, whose one-statement turn commits
        cursor.close()
        orphans.extend(item.id for item, _ in taken.started)
        raise OperationalError("record_and_claim", {}, Exception("injected: the commit's answer was lost"))

    monkeypatch.setattr(turn, "record_and_claim", record_and_claim)
    with caplog.at_level(logging.WARNING, logger="cronwell.worker"):
        stats = worker.run(burst=True)

    assert orphans
    released = sorted(r.execution_id for r in caplog.records if getattr(r, "event", "") == "claim_released")
    assert released == sorted(orphans)
    db.session.rollback()
    rows = {e.id: e for e in db.session.scalars(select(Execution))}
    assert stats.succeeded == 6 - len(orphans)  # the rest ran here, each once
    for execution_id in orphans:
        assert rows[execution_id].status == "running" and rows[execution_id].lease_expires_at <= utcnow()
    assert rows[earlier.id].lease_expires_at > utcnow()  # untouched

    recovered = recovery.recover_expired_leases(db.engine, now=utcnow())  # the scheduler's next tick
    assert recovered.total == len(orphans)
    db.session.rollback()  # a fresh snapshot
    assert {db.session.get(Execution, i).status for i in orphans} == {"retry_scheduled"}
    assert db.session.get(Execution, earlier.id).status == "running"
