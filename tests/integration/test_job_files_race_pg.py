"""Two applies of one project at the same instant on PostgreSQL: the project row's lock makes the
second wait for the first and plan against what it wrote, so the jobs end up exactly once and the
second reports them unchanged (never a duplicate name or a failed apply)."""

from __future__ import annotations

import threading

from sqlalchemy import func, select

from app.clock import utcnow
from app.extensions import db
from app.models import AuditEvent, Job
from app.services.caller import Caller
from app.services.use_cases.job_files import Source, apply_job_files

JOBS = 30


def document() -> dict:
    return {
        "project": "default/default",
        "jobs": [
            {"name": f"job-{n}", "task": "always_succeed", "schedule_type": "interval", "schedule": {"every": "1h"}}
            for n in range(JOBS)
        ],
    }


def test_two_racing_applies_leave_one_consistent_result(pg_app):
    barrier = threading.Barrier(2)
    plans, failures = [], []

    def apply_once(label: str) -> None:
        with pg_app.app_context():
            try:
                barrier.wait(10)
                plans.append(
                    apply_job_files(
                        [Source(label=label, managed_by="file:jobs.yaml", document=document())],
                        now=utcnow(),
                        actor="cli",
                        caller=Caller.cli(),
                    )
                )
            except Exception as exc:  # reported below with the test's assertion
                failures.append(repr(exc))
            finally:
                db.session.remove()

    threads = [threading.Thread(target=apply_once, args=(f"racer-{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert failures == []
    created = sorted(len(plan["created"]) for plan in plans)
    unchanged = sorted(len(plan["unchanged"]) for plan in plans)
    assert (created, unchanged) == ([0, JOBS], [0, JOBS])
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(Job)) == JOBS
    assert db.session.scalar(select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "applied")) == 2
