"""`flask job explain` and the job page's explain panel."""

from __future__ import annotations

import json
from datetime import timedelta

from app.clock import utcnow
from app.services.engine.scheduler import Scheduler
from tests.factories import make_job
from tests.helpers.cli import assert_error, assert_usage_error, ok
from tests.helpers.web import signed_in_client


def _ticked_job(app):
    now = utcnow().replace(microsecond=0)
    job = make_job(now=now - timedelta(minutes=10), every="1m", misfire_policy="coalesce", misfire_grace_seconds=30)
    Scheduler(app, scheduler_id="cli-test", clock=lambda: now).tick(now)
    return job, now


def test_explain_window_json_and_text(cli, app):
    job, now = _ticked_job(app)
    start, end = (now - timedelta(minutes=5)).isoformat(), now.isoformat()
    doc = json.loads(ok(cli("job", "explain", job.id, "--from", start, "--to", end, "--json")))
    fates = [o["fate"] for o in doc["occurrences"]]
    assert fates[:-1] == ["coalesced"] * 5 and fates[-1] in ("no_worker", "waiting")
    text = ok(cli("job", "explain", job.id, "--from", start, "--to", end))
    assert "coalesced" in text and "6 expected occurrence(s)" in text


def test_explain_at_an_instant_without_occurrence_shows_the_nearest(cli, app):
    job, now = _ticked_job(app)
    at = (now - timedelta(seconds=90)).isoformat()
    doc = json.loads(ok(cli("job", "explain", job.id, "--at", at, "--json")))
    assert doc["occurrence"] is None and doc["nearest"]["before"] and doc["nearest"]["after"]
    assert "before:" in ok(cli("job", "explain", job.id, "--at", at))


def test_explain_refuses_bad_input(cli, app):
    job, _ = _ticked_job(app)
    assert_usage_error(cli("job", "explain", job.id), "--at")
    assert_usage_error(cli("job", "explain", job.id, "--at", "2026-01-01T00:00Z", "--from", "2026-01-01T00:00Z"))
    assert_error(cli("job", "explain", job.id, "--at", "yesterday"), "--at")
    assert_error(cli("job", "explain", 999, "--at", "2026-01-01T00:00Z"), "job 999 does not exist")
    assert_error(
        cli("job", "explain", job.id, "--from", "2026-01-02T00:00Z", "--to", "2026-01-01T00:00Z"), "ends before"
    )


def test_explain_panel_on_the_job_page(app):
    job, now = _ticked_job(app)
    client = signed_in_client(app, role="viewer")
    page = client.get(f"/jobs/{job.id}")
    assert page.status_code == 200 and b'id="explain"' in page.data
    fragment = client.get(f"/jobs/{job.id}/explain", htmx=True)
    assert fragment.status_code == 200 and b"fate-coalesced" in fragment.data
    full = client.get(f"/jobs/{job.id}/explain", query_string={"at": (now - timedelta(minutes=2)).isoformat()})
    assert full.status_code == 200 and b"coalesced" in full.data
    bad = client.get(f"/jobs/{job.id}/explain", query_string={"at": "<script>"}, htmx=True)
    assert bad.status_code == 400 and b"<script>" not in bad.data and b"error-text" in bad.data
