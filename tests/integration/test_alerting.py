"""The alert pass with an injected clock: overdue (dead-man's switch), consecutive failures,
auto-pause, queue backlog and lost workers; deduplicated while open, resolved when it clears."""

from datetime import timedelta

from sqlalchemy import select

from app.extensions import db
from app.models import Alert, Event, Execution, Job
from app.services.engine.scheduler import Scheduler
from tests.factories import make_execution, make_heartbeat, make_job, utc

NOW = utc(2026, 6, 1, 12, 0)


def open_alerts(kind=None):
    db.session.rollback()
    query = select(Alert).where(Alert.resolved_at.is_(None)).order_by(Alert.id)
    if kind:
        query = query.where(Alert.kind == kind)
    return db.session.scalars(query).all()


def all_alerts(kind):
    db.session.rollback()
    return db.session.scalars(select(Alert).where(Alert.kind == kind).order_by(Alert.id)).all()


def evaluate(app, now):
    return Scheduler(app, scheduler_id="alerts-test", clock=lambda: now).evaluate_alerts(now)


def test_overdue_raised_once_and_resolved_by_the_next_success(app):
    job = make_job(now=NOW, every="1h", expect_success_within_seconds=600)
    assert evaluate(app, NOW + timedelta(minutes=5)).raised == []
    report = evaluate(app, NOW + timedelta(minutes=11))
    assert report.raised == [f"overdue:job:{job.id}"]
    evaluate(app, NOW + timedelta(minutes=20))  # still overdue: still one alert
    [alert] = open_alerts("overdue")
    assert alert.job_id == job.id and "overdue" in alert.message
    make_execution(db.session.get(Job, job.id), "succeeded", now=NOW + timedelta(minutes=25))
    db.session.commit()
    report = evaluate(app, NOW + timedelta(minutes=26))
    assert report.resolved == [f"overdue:job:{job.id}"]
    assert open_alerts("overdue") == []
    [resolved] = all_alerts("overdue")
    assert resolved.resolved_by == "system"
    # Overdue again later: a new alert, the old one stays resolved.
    evaluate(app, NOW + timedelta(minutes=40))
    assert len(all_alerts("overdue")) == 2 and len(open_alerts("overdue")) == 1


def test_overdue_evaluated_by_the_scheduler_tick(app):
    job = make_job(now=NOW, every="1h", expect_success_within_seconds=60)
    later = NOW + timedelta(minutes=2)
    Scheduler(app, scheduler_id="tick", clock=lambda: later).tick(later)
    assert [a.job_id for a in open_alerts("overdue")] == [job.id]


def test_consecutive_failures_alert_and_auto_pause(app):
    job = make_job(now=NOW, every="1h", alert_after_failures=2, pause_after_failures=3)
    job = db.session.get(Job, job.id)
    make_execution(job, "succeeded", now=NOW + timedelta(minutes=1))
    make_execution(job, "failed", now=NOW + timedelta(minutes=2))
    db.session.commit()
    assert evaluate(app, NOW + timedelta(minutes=3)).raised == []
    make_execution(job, "timed_out", now=NOW + timedelta(minutes=4))
    queued = make_execution(job, "pending", now=NOW + timedelta(minutes=4))
    db.session.commit()
    report = evaluate(app, NOW + timedelta(minutes=5))
    assert report.raised == [f"consecutive_failures:job:{job.id}"] and report.paused == []
    make_execution(job, "failed", now=NOW + timedelta(minutes=6))
    db.session.commit()
    report = evaluate(app, NOW + timedelta(minutes=7))
    assert report.paused == [job.id]
    db.session.rollback()
    paused = db.session.get(Job, job.id)
    assert not paused.enabled and "3 consecutive failed runs" in paused.disabled_reason
    assert db.session.get(Execution, queued.id).status == "cancelled"
    [event] = db.session.scalars(select(Event).where(Event.type == "job_disabled", Event.job_id == job.id)).all()
    assert event.actor == "system" and "auto-paused" in event.payload["reason"]
    assert [a.kind for a in open_alerts()] == ["consecutive_failures", "auto_paused"]


def test_enabling_again_clears_the_reason_and_counts_afresh(app):
    from app.services.use_cases import jobs

    job = make_job(now=NOW, every="1h", pause_after_failures=1)
    make_execution(db.session.get(Job, job.id), "failed", now=NOW + timedelta(minutes=1))
    db.session.commit()
    assert evaluate(app, NOW + timedelta(minutes=2)).paused == [job.id]
    jobs.enable_job(job.id, now=NOW + timedelta(minutes=3), actor="test")
    assert db.session.get(Job, job.id).disabled_reason is None
    assert evaluate(app, NOW + timedelta(minutes=4)).paused == []  # the old failure is before the enable


def test_queue_backlog_per_queue(app):
    job = make_job(now=NOW, every="1h")
    waiting = make_execution(db.session.get(Job, job.id), "pending", now=NOW, available_at=NOW)
    db.session.commit()
    app.config["ALERT_QUEUE_BACKLOG_SECONDS"] = 300
    assert evaluate(app, NOW + timedelta(minutes=4)).raised == []
    evaluate(app, NOW + timedelta(minutes=6))
    [alert] = open_alerts("queue_backlog")
    assert alert.queue_id == job.queue_id and "'default'" in alert.message
    db.session.get(Execution, waiting.id).status = "cancelled"
    db.session.get(Execution, waiting.id).finished_at = NOW + timedelta(minutes=7)
    db.session.commit()
    evaluate(app, NOW + timedelta(minutes=8))
    assert open_alerts("queue_backlog") == []


def lost_events(worker_id):
    db.session.rollback()
    events = db.session.scalars(select(Event).where(Event.type == "worker_lost").order_by(Event.id)).all()
    return [event for event in events if event.payload["worker_id"] == worker_id]


def test_a_lost_worker_is_one_event_until_it_comes_back_and_is_lost_again(app):
    from app.sql import heartbeats

    job = make_job(now=NOW, every="1h")
    make_heartbeat("worker-gone", "worker", age_seconds=300, now=NOW)
    make_heartbeat("worker-fresh", "worker", age_seconds=5, now=NOW)
    stopped = make_heartbeat("worker-stopped", "worker", age_seconds=300, now=NOW)
    stopped.info = {"state": "stopped"}
    make_execution(db.session.get(Job, job.id), "running", now=NOW, claimed_by="worker-gone")
    db.session.commit()
    evaluate(app, NOW)
    evaluate(app, NOW + timedelta(seconds=30))  # still stale: no second event
    assert lost_events("worker-fresh") == lost_events("worker-stopped") == []
    [event] = lost_events("worker-gone")
    assert event.payload["runs_in_flight"] == 1
    assert event.job_id is None and event.created_at == NOW

    with db.engine.begin() as conn:  # it comes back (its heartbeat rewrites the row) ...
        heartbeats.upsert(
            conn, process_id="worker-gone", kind="worker", host="host-a", pid=4242,
            started_at=NOW, now=NOW + timedelta(minutes=1), info={"busy": 0},
        )  # fmt: skip
    evaluate(app, NOW + timedelta(minutes=1, seconds=10))
    assert len(lost_events("worker-gone")) == 1
    assert len(lost_events("worker-fresh")) == 1  # 70 s without a beat by now: lost too
    evaluate(app, NOW + timedelta(minutes=10))  # ... and is lost again
    events = lost_events("worker-gone")
    assert len(events) == 2 and events[1].created_at == NOW + timedelta(minutes=10)
    assert events[1].payload["runs_in_flight"] == 1  # the running row still names it


def test_worker_lost_with_runs_in_flight(app):
    job = make_job(now=NOW, every="1h")
    make_heartbeat("worker-gone", "worker", age_seconds=300, now=NOW)
    make_heartbeat("worker-idle", "worker", age_seconds=300, now=NOW)
    make_execution(db.session.get(Job, job.id), "running", now=NOW, claimed_by="worker-gone")
    db.session.commit()
    report = evaluate(app, NOW)
    assert report.raised == ["worker_lost:worker-gone"]
    assert evaluate(app, NOW + timedelta(seconds=30)).raised == []  # deduplicated while open
