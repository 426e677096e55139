"""`flask job backfill` and the backfill form (dry-run list first)."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import func, select

from app.clock import utcnow
from app.extensions import db
from app.models import Execution
from tests.factories import make_job
from tests.helpers.cli import assert_error, assert_usage_error, ok
from tests.helpers.web import signed_in_client


def _job():
    now = utcnow().replace(microsecond=0, second=0, minute=0)
    job = make_job(now=now - timedelta(hours=10), every="1h", overlap_policy="allow")
    return job, (now - timedelta(hours=5)).isoformat(), (now - timedelta(hours=1)).isoformat()


def runs(job_id):
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Execution).where(Execution.job_id == job_id))


def test_cli_dry_run_then_run_then_again(cli):
    job, start, end = _job()
    dry = json.loads(ok(cli("job", "backfill", job.id, "--from", start, "--to", end, "--dry-run", "--json")))
    assert dry["dry_run"] and dry["created"] == 5 and runs(job.id) == 0
    real = json.loads(ok(cli("job", "backfill", job.id, "--from", start, "--to", end, "--json")))
    assert [o["scheduled_for"] for o in real["occurrences"]] == [o["scheduled_for"] for o in dry["occurrences"]]
    assert real["created"] == 5 and runs(job.id) == 5
    text = ok(cli("job", "backfill", job.id, "--from", start, "--to", end))
    assert "created 0, 5 already had an execution" in text and runs(job.id) == 5


def test_cli_max_and_overlap_and_errors(cli):
    job, start, end = _job()
    doc = json.loads(
        ok(cli("job", "backfill", job.id, "--from", start, "--to", end, "--max", "2", "--overlap", "queue", "--json"))
    )
    assert doc["created"] == 2 and doc["capped"] and doc["overlap"] == "queue"
    assert_usage_error(cli("job", "backfill", job.id, "--from", start))
    assert_usage_error(cli("job", "backfill", job.id, "--from", start, "--to", end, "--overlap", "sometimes"))
    future = (utcnow() + timedelta(days=1)).isoformat()
    assert_error(cli("job", "backfill", job.id, "--from", start, "--to", future), "past")
    assert_error(cli("job", "backfill", 999, "--from", start, "--to", end), "job 999 does not exist")


def test_web_form_shows_the_dry_run_then_creates(app):
    job, start, end = _job()
    client = signed_in_client(app, role="admin")
    page = client.get(f"/jobs/{job.id}/backfill")
    assert page.status_code == 200
    form = {"start": start, "end": end, "max_runs": "", "overlap": ""}
    dry = client.post(f"/jobs/{job.id}/backfill", {**form, "action": "preview"})
    body = dry.get_data(as_text=True)
    assert dry.status_code == 200 and "Dry run: 5 to create" in body and "Create 5 runs" in body
    assert runs(job.id) == 0
    done = client.post(f"/jobs/{job.id}/backfill", {**form, "action": "run"})
    assert done.status_code == 303 and runs(job.id) == 5
    bad = client.post(f"/jobs/{job.id}/backfill", {**form, "end": "not a time", "action": "preview"})
    assert bad.status_code == 400 and "error-text" in bad.get_data(as_text=True)
    refused = client.post(f"/jobs/{job.id}/backfill", {**form, "action": "run"}, csrf=False)
    assert refused.status_code in (400, 403) and runs(job.id) == 5
