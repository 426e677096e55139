"""Explain: every fate created by real scheduler ticks with an injected clock, on both databases."""

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from app.extensions import db
from app.models import Execution, Job
from app.services.engine.scheduler import Scheduler
from app.services.read.explain import explain_job
from app.services.use_cases import executions, jobs, queues
from tests.factories import make_heartbeat, make_job, utc

T0 = utc(2026, 6, 1, 12, 0)


def tick(app, at, scheduler_id="s1"):
    return Scheduler(app, scheduler_id=scheduler_id, clock=lambda: at).tick(at)


def fate_at(job_id, at, now):
    db.session.rollback()
    document = explain_job(job_id, at=at, now=now)
    assert document["occurrence"] is not None, document
    return document["occurrence"]


def minute(n):
    return T0 + timedelta(minutes=n)


def test_fired_with_its_execution_and_outcome(app):
    job = make_job(now=T0, every="1m", overlap_policy="allow")
    tick(app, minute(1))
    db.session.execute(
        update(Execution)
        .where(Execution.job_id == job.id)
        .values(status="succeeded", attempts=1, started_at=minute(1), finished_at=minute(1) + timedelta(seconds=2))
    )
    db.session.commit()
    fate = fate_at(job.id, minute(1), minute(2))
    assert fate["fate"] == "fired" and fate["status"] == "succeeded" and fate["execution_id"]
    assert f"execution #{fate['execution_id']} succeeded" in fate["summary"]


def test_coalesced_during_a_scheduler_outage(app):
    job = make_job(now=T0, every="1m", misfire_policy="coalesce", misfire_grace_seconds=30, overlap_policy="allow")
    tick(app, minute(1), "s1")
    tick(app, minute(2), "s1")
    # s1 dies; s2 starts eight minutes later and coalesces the backlog into one run.
    tick(app, minute(10), "s2")
    fate = fate_at(job.id, minute(5), minute(11))
    assert fate["fate"] == "coalesced"
    assert fate["details"]["late_seconds"] == 300
    assert fate["details"]["scheduler_heartbeat_then"] is False
    assert "no scheduler heartbeat" in fate["summary"]
    assert fate_at(job.id, minute(10), minute(11))["fate"] in ("waiting", "no_worker")
    assert fate_at(job.id, minute(2), minute(11))["details"]["trigger"] == "schedule"


def test_missed_by_misfire_says_how_late_and_whether_a_scheduler_was_alive(app):
    job = make_job(now=T0, every="1m", misfire_policy="skip", misfire_grace_seconds=30, overlap_policy="allow")
    tick(app, minute(5), "late")
    fate = fate_at(job.id, minute(2), minute(6))
    assert fate["fate"] == "missed_misfire"
    assert fate["details"]["late_seconds"] == 180 and fate["details"]["scheduler_heartbeat_then"] is False
    assert "3m00s late" in fate["summary"]


def test_missed_by_misfire_with_a_live_scheduler_says_it_was_behind(app):
    job = make_job(now=T0, every="1m", misfire_policy="skip", misfire_grace_seconds=30, overlap_policy="allow")
    scheduler = Scheduler(app, scheduler_id="slow", clock=lambda: T0)
    scheduler.tick(T0)  # heartbeating since T0, then a slow tick reaches the job late
    scheduler.tick(minute(3))
    fate = fate_at(job.id, minute(1), minute(4))
    assert fate["fate"] == "missed_misfire" and fate["details"]["scheduler_heartbeat_then"] is True
    assert fate["details"]["schedulers_then"] == ["slow"]


def test_skipped_for_overlap_names_the_blocking_run(app):
    job = make_job(now=T0, every="1m", overlap_policy="skip")
    tick(app, minute(1))
    tick(app, minute(2))
    db.session.rollback()
    first = db.session.scalar(select(Execution).where(Execution.job_id == job.id, Execution.scheduled_for == minute(1)))
    fate = fate_at(job.id, minute(2), minute(3))
    assert fate["fate"] == "skipped_overlap"
    assert fate["details"]["blocking_execution_id"] == first.id
    assert f"execution #{first.id}" in fate["summary"]


def test_not_created_because_the_job_was_disabled(app):
    job = make_job(now=T0, every="1m")
    jobs.disable_job(job.id, now=T0 + timedelta(seconds=30), actor="alice")
    tick(app, minute(5))
    fate = fate_at(job.id, minute(2), minute(5))
    assert fate["fate"] == "disabled"
    assert fate["details"]["disabled_by"] == "alice" and "alice" in fate["summary"]


def test_waiting_because_the_queue_is_paused(app):
    job = make_job(now=T0, every="1m")
    queues.pause_queue("default", now=T0, actor="bob", reason="maintenance")
    tick(app, minute(1))
    fate = fate_at(job.id, minute(1), minute(3))
    assert fate["fate"] == "queue_paused" and "bob" in fate["summary"] and "maintenance" in fate["summary"]


def test_waiting_because_no_live_worker_serves_the_queue(app):
    job = make_job(now=T0, every="1m")
    tick(app, minute(1))
    make_heartbeat("old-worker", "worker", age_seconds=3600, now=minute(3))
    fate = fate_at(job.id, minute(1), minute(3))
    assert fate["fate"] == "no_worker" and "'default'" in fate["summary"]
    make_heartbeat("live-worker", "worker", age_seconds=1, now=minute(3))
    assert fate_at(job.id, minute(1), minute(3))["fate"] == "waiting"


def test_waiting_because_no_live_worker_offers_the_task(app):
    from app.services.read.explain import explain_execution

    job = make_job(now=T0, every="1m", task="echo", config={"message": "hi"})
    tick(app, minute(1))
    old = make_heartbeat("old-release", "worker", age_seconds=1, now=minute(3))
    old.tasks = {"always_succeed": "sha256:aaaaaaaaaaaa"}
    db.session.commit()
    fate = fate_at(job.id, minute(1), minute(3))
    assert fate["fate"] == "no_worker_for_task" and fate["details"]["task"] == "echo"
    assert "no live worker serving queue 'default' offers task 'echo'" in fate["summary"]
    db.session.rollback()
    row = db.session.scalar(select(Execution).where(Execution.job_id == job.id))
    assert explain_execution(row.id, now=minute(3))["fate"] == "no_worker_for_task"
    # A worker that advertises nothing (a release before advertising) claims every task.
    make_heartbeat("older-release", "worker", age_seconds=1, now=minute(3))
    assert fate_at(job.id, minute(1), minute(3))["fate"] == "waiting"
    db.session.delete(db.session.get(type(old), "older-release"))
    new = make_heartbeat("new-release", "worker", age_seconds=1, now=minute(3))
    new.tasks = {"echo": "sha256:bbbbbbbbbbbb"}
    db.session.commit()
    assert fate_at(job.id, minute(1), minute(3))["fate"] == "waiting"


def test_cancelled_by_whom(app):
    job = make_job(now=T0, every="1m")
    tick(app, minute(1))
    db.session.rollback()
    row = db.session.scalar(select(Execution).where(Execution.job_id == job.id))
    executions.cancel_execution(row.id, now=minute(1) + timedelta(seconds=5), actor="carol", reason="wrong config")
    fate = fate_at(job.id, minute(1), minute(2))
    assert fate["fate"] == "cancelled" and fate["details"]["cancelled_by"] == "carol"
    assert "wrong config" in fate["summary"]


def test_expired_after_the_queued_ttl(app):
    if not hasattr(Job, "queued_ttl_seconds"):
        pytest.skip("queued TTL not in this build")
    job = make_job(now=T0, every="1h", queued_ttl_seconds=60)
    tick(app, T0 + timedelta(hours=1))
    tick(app, T0 + timedelta(hours=1, minutes=5))
    fate = fate_at(job.id, T0 + timedelta(hours=1), T0 + timedelta(hours=1, minutes=6))
    assert fate["fate"] == "expired", fate


def test_dst_day_reports_the_rule_applied(app):
    created = utc(2026, 3, 7, 12)
    job = make_job(
        now=created, schedule_type="cron", schedule={"expression": "30 2 * * *"}, timezone="America/New_York"
    )
    fires_at = utc(2026, 3, 8, 7, 0)  # 03:00 EDT: 02:30 does not exist that day
    tick(app, fires_at)
    fate = fate_at(job.id, fires_at, fires_at + timedelta(minutes=1))
    assert fate["dst"] == "DST gap: 02:30 does not exist, runs at 03:00"
    assert "Shifted by DST" in fate["summary"] and fate["execution_id"] is not None
    assert fate["local"].startswith("2026-03-08T03:00:00-04:00")


def test_a_time_with_no_occurrence_gives_the_nearest_before_and_after(app):
    job = make_job(now=T0, every="1h")
    tick(app, T0 + timedelta(hours=1))
    db.session.rollback()
    document = explain_job(job.id, at=T0 + timedelta(hours=1, minutes=20), now=T0 + timedelta(hours=1, minutes=30))
    assert document["occurrence"] is None
    assert document["nearest"]["before"]["scheduled_for"] == "2026-06-01T13:00:00Z"
    assert document["nearest"]["before"]["fate"] in ("no_worker", "waiting")
    assert document["nearest"]["after"]["scheduled_for"] == "2026-06-01T14:00:00Z"
    assert document["nearest"]["after"]["fate"] == "not_due"


def test_window_lists_each_expected_occurrence(app):
    job = make_job(now=T0, every="1m", misfire_policy="coalesce", misfire_grace_seconds=30, overlap_policy="allow")
    tick(app, minute(1))
    tick(app, minute(4))
    db.session.rollback()
    document = explain_job(job.id, start=minute(1), end=minute(6), now=minute(4))
    assert [o["fate"] for o in document["occurrences"]] == [
        "no_worker",
        "coalesced",
        "coalesced",
        "no_worker",
        "not_due",
        "not_due",
    ]


def test_not_created_yet_while_no_scheduler_runs_and_before_the_job_existed(app):
    job = make_job(now=T0, every="1m")
    tick(app, minute(1), "gone")  # one tick, then the scheduler stops
    fate = fate_at(job.id, minute(4), minute(5) + timedelta(minutes=2))
    assert fate["fate"] == "not_created_yet" and fate["details"]["scheduler_alive_now"] is False
    db.session.rollback()
    document = explain_job(job.id, start=T0 - timedelta(minutes=2), end=T0 + timedelta(seconds=30), now=minute(1))
    assert document["occurrences"] == []  # an interval job has no occurrence before its anchor
    jobs.trigger_job(job.id, now=minute(1) + timedelta(seconds=5), actor="dave")
    db.session.rollback()
    document = explain_job(job.id, start=minute(1), end=minute(2), now=minute(2))
    assert [run["trigger"] for run in document["other_runs"]] == ["manual"]


def test_unknown_job_and_bad_windows(app):
    from app.services.errors import NotFound, ValidationFailed

    job = make_job(now=T0, every="1m")
    with pytest.raises(NotFound):
        explain_job(job.id + 1000, at=T0, now=T0)
    with pytest.raises(ValidationFailed):
        explain_job(job.id, start=minute(5), end=minute(1), now=T0)
    with pytest.raises(ValidationFailed):
        explain_job(job.id, now=T0)


def test_before_the_job_existed(app):
    job = make_job(now=T0, schedule_type="cron", schedule={"expression": "* * * * *"})
    fate = fate_at(job.id, T0 - timedelta(minutes=5), T0)
    assert fate["fate"] == "before_job" and "did not exist yet" in fate["summary"]
