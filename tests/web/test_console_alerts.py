"""Alerts that don't flood: one open alert per job and kind with its repeats
counted, resolved by the next success (configurable), mutable per job; on both databases."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.database import write_transaction
from app.extensions import db
from app.models import Alert, DeadLetter
from app.services.engine import alerting
from app.services.engine.dead_letters import dead_letter
from app.sql import alerts
from tests.factories import make_execution, make_job, utc
from tests.helpers.web import signed_in_client

NOW = utc(2026, 6, 1, 20, 42)


def _dead_letter(job, at):
    db.session.rollback()  # no stale read snapshot in the test's session (SQLite) before it writes
    execution = make_execution(job, "failed", now=at, attempts=job.max_attempts)
    with write_transaction(db.engine) as conn:
        dead_letter(
            conn,
            execution_id=execution.id,
            job_id=job.id,
            job_name=job.name,
            alert_mode=job.alert_mode,
            status="failed",
            reason="attempts exhausted",
            now=at,
        )
    return execution


def _alerts(job):
    db.session.rollback()
    return list(db.session.scalars(select(Alert).where(Alert.job_id == job.id).order_by(Alert.id)))


def test_repeats_are_counted_on_one_open_alert_per_job(app):
    job, other = make_job("flaky", max_attempts=1), make_job("other", max_attempts=1)
    for minute in range(12):
        last = _dead_letter(job, NOW + timedelta(minutes=minute))
    _dead_letter(other, NOW)
    (alert,) = _alerts(job)
    assert alert.occurrences == 12 and alert.created_at == NOW
    assert alert.last_seen_at == NOW + timedelta(minutes=11) and alert.execution_id == last.id
    assert len(_alerts(other)) == 1
    # Every dead letter is still recorded: only the alerts are grouped.
    assert db.session.query(DeadLetter).filter_by(job_id=job.id).count() == 12

    body = signed_in_client(app).get("/dashboard/").get_data(as_text=True)
    assert "12 times</strong> since" in body and 'Open alerts <span class="muted small">(2)</span>' in body


def test_the_next_success_resolves_the_alert_and_a_new_failure_opens_a_fresh_one(app):
    job = make_job("recovers", max_attempts=1)
    _dead_letter(job, NOW)
    _dead_letter(job, NOW + timedelta(minutes=1))
    settings = {"ALERT_QUEUE_BACKLOG_SECONDS": 0, "HEARTBEAT_STALE_SECONDS": 60}
    with write_transaction(db.engine) as conn:  # nothing succeeded yet: stays open
        alerting.evaluate_alerts(conn, now=NOW + timedelta(minutes=2), settings=settings)
    assert _alerts(job)[0].resolved_at is None
    db.session.rollback()
    make_execution(job, "succeeded", now=NOW + timedelta(minutes=3))
    with write_transaction(db.engine) as conn:
        alerting.evaluate_alerts(conn, now=NOW + timedelta(minutes=4), settings=settings)
    (alert,) = _alerts(job)
    assert alert.resolved_by == "system" and alert.occurrences == 2
    _dead_letter(job, NOW + timedelta(minutes=5))
    fresh = _alerts(job)[-1]
    assert len(_alerts(job)) == 2 and fresh.resolved_at is None and fresh.occurrences == 1


def test_auto_resolve_can_be_turned_off(app):
    job = make_job("stays", max_attempts=1)
    _dead_letter(job, NOW)
    db.session.rollback()
    make_execution(job, "succeeded", now=NOW + timedelta(minutes=1))
    settings = {"ALERT_RESOLVE_ON_SUCCESS": False, "ALERT_QUEUE_BACKLOG_SECONDS": 0, "HEARTBEAT_STALE_SECONDS": 60}
    with write_transaction(db.engine) as conn:
        alerting.evaluate_alerts(conn, now=NOW + timedelta(minutes=2), settings=settings)
    assert _alerts(job)[0].resolved_at is None


def test_a_muted_job_raises_nothing_until_the_mute_ends(app):
    job = make_job("noisy", max_attempts=1)
    client = signed_in_client(app, "operator")
    assert client.post(f"/alerts/jobs/{job.id}/mute", {"hours": "4"}).status_code == 303
    page = client.get(f"/jobs/{job.id}").get_data(as_text=True)
    assert "alerts muted" in page and "Unmute alerts" in page
    with write_transaction(db.engine) as conn:
        assert alerts.is_muted(conn, job.id, NOW.replace(year=2030)) is False
    db.session.rollback()
    from app.clock import utcnow

    _dead_letter(job, utcnow())
    assert _alerts(job) == []  # muted: no alert, the dead letter is still there
    assert db.session.query(DeadLetter).filter_by(job_id=job.id).count() == 1
    assert client.post(f"/alerts/jobs/{job.id}/unmute").status_code == 303
    _dead_letter(job, utcnow())
    assert len(_alerts(job)) == 1


def test_mute_needs_an_operator_csrf_and_a_sane_period(app):
    job = make_job("guarded")
    viewer = signed_in_client(app, "viewer")
    assert viewer.post(f"/alerts/jobs/{job.id}/mute", {"hours": "4"}).status_code == 403
    operator = signed_in_client(app, "operator")
    assert operator.post(f"/alerts/jobs/{job.id}/mute", {"hours": "4"}, csrf=False).status_code == 400
    body = operator.post(f"/alerts/jobs/{job.id}/mute", {"hours": "99999"}, follow_redirects=True)
    assert "whole number of hours" in body.get_data(as_text=True)
    assert operator.post("/alerts/jobs/999999/mute", {"hours": "1"}).status_code == 404
