"""`flask verify` through the command line: a job created disabled and enabled later is clean."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.extensions import db
from app.models import Event, Job
from tests.helpers.cli import ok, ok_json


def test_verify_after_a_job_created_disabled_and_enabled_minutes_later(app, cli):
    job = ok_json(
        cli("job", "add", "late-starter", "always_succeed", "cron", "--cron", "* * * * *", "--disabled", "--json")
    )
    assert job["enabled"] is False
    # The job was created twenty minutes ago: move its creation (row and events) back in time.
    earlier = timedelta(minutes=20)
    row = db.session.get(Job, job["id"])
    row.created_at, row.updated_at, row.next_run_at = (
        row.created_at - earlier,
        row.updated_at - earlier,
        row.next_run_at - earlier,
    )
    for event in db.session.scalars(select(Event).where(Event.job_id == job["id"])):
        event.created_at -= earlier
    db.session.commit()
    ok(cli("job", "enable", job["id"]))
    db.session.rollback()
    report = ok_json(cli("verify", "--json"))
    assert report["violations"] == [] and report["ok"] is True
    assert report["excused_disabled"] >= 19  # every minute for twenty minutes, before the enabling
    assert "violations=0" in ok(cli("verify"))
