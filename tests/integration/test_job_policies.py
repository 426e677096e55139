"""Job policies on SQLite and PostgreSQL: run limits driven by `tick(now)` with
a fake clock, retry kinds in the worker, the queued TTL ending waiting work `expired`, result TTLs
in the retention pass, and jobs with no timeout. No test sleeps: time moves by the clock."""

from datetime import timedelta

import pytest
from sqlalchemy import select, text

from app.database import write_transaction
from app.extensions import db
from app.models import Alert, Event, Execution, Job
from app.services.engine import retention
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.read.ledger import verify
from app.services.use_cases import jobs
from app.store import store_for
from tests.factories import make_execution, make_job


def tick(app, clock):
    return Scheduler(app, scheduler_id="test-scheduler", clock=clock).tick(clock())


def work(app, clock):
    return Worker(app, worker_id="test-worker", clock=clock).run(burst=True)


def fresh_job(job_id) -> Job:
    db.session.rollback()  # end the read transaction: on SQLite it pins an old snapshot
    return db.session.get(Job, job_id)


def executions_of(job_id) -> list[Execution]:
    db.session.rollback()
    return list(db.session.scalars(select(Execution).where(Execution.job_id == job_id).order_by(Execution.id)))


def events(kind: str, job_id: int) -> list[Event]:
    db.session.rollback()
    return list(db.session.scalars(select(Event).where(Event.type == kind, Event.job_id == job_id)))


# --- run limits ---------------------------------------------------------------------------------


def test_max_runs_3_on_a_one_second_job_gives_exactly_3_runs_then_disables_it_with_the_reason(app, clock):
    job = make_job(now=clock(), every="1s", max_runs=3)
    for _ in range(8):
        clock.advance(seconds=1)
        tick(app, clock)
        work(app, clock)
    runs = executions_of(job.id)
    assert [(r.status, r.trigger) for r in runs] == [("succeeded", "schedule")] * 3
    assert [r.scheduled_for for r in runs] == [job.created_at + timedelta(seconds=s) for s in (1, 2, 3)]
    job = fresh_job(job.id)
    assert (job.enabled, job.runs_created, job.next_run_at) == (False, 3, None)
    assert job.disabled_reason == "max_runs reached: 3 scheduled runs created"
    [reached] = events("run_limit_reached", job.id)
    assert reached.payload["reason"] == job.disabled_reason and reached.payload["runs_created"] == 3
    [disabled] = events("job_disabled", job.id)
    assert (disabled.actor, disabled.payload["reason"]) == ("system", job.disabled_reason)
    assert verify(now=clock()).ok  # the occurrences after the limit are not lost: the job was finished


def test_the_runs_created_before_the_limit_still_run_when_no_worker_was_there(app, clock):
    job = make_job(now=clock(), every="1s", max_runs=2, overlap_policy="allow")
    for _ in range(4):
        clock.advance(seconds=1)
        tick(app, clock)
    assert [r.status for r in executions_of(job.id)] == ["pending", "pending"]
    job = fresh_job(job.id)
    # Finished (no next run, the reason shown) but not disabled yet: a disabled job's queued runs
    # would be cancelled when a worker claims them.
    assert (job.enabled, job.next_run_at, job.disabled_reason) == (
        True,
        None,
        "max_runs reached: 2 scheduled runs created",
    )
    work(app, clock)
    tick(app, clock)
    assert [r.status for r in executions_of(job.id)] == ["succeeded", "succeeded"]
    assert fresh_job(job.id).enabled is False


def test_an_idle_scheduler_still_finishes_a_job_whose_last_run_ended_after_the_last_upkeep(app, clock):
    job = make_job(now=clock(), every="1s", max_runs=1)
    scheduler = Scheduler(app, scheduler_id="test-scheduler", clock=clock)
    clock.advance(seconds=1)
    scheduler.tick(clock())  # the one run is created: the limit is reached, the run waits
    scheduler.seconds_until_due(clock(), 5, idle_cap=15)
    assert not scheduler.idle
    clock.advance(seconds=2)
    scheduler.tick(clock())  # an upkeep while the run waits: nothing to finish yet
    assert fresh_job(job.id).enabled is True
    work(app, clock)  # the run ends after that upkeep
    scheduler.seconds_until_due(clock(), 5, idle_cap=15)
    assert scheduler.idle  # nothing waits or runs any more
    clock.advance(seconds=2)
    scheduler.tick(clock())  # the first upkeep after the activity still runs in full
    job = fresh_job(job.id)
    assert (job.enabled, job.disabled_reason) == (False, "max_runs reached: 1 scheduled run created")


def test_missed_occurrences_do_not_count_towards_max_runs(app, clock):
    job = make_job(now=clock(), every="1s", max_runs=2, misfire_policy="skip", misfire_grace_seconds=0)
    clock.advance(seconds=3)  # the first two occurrences are late (missed), the third is on time
    tick(app, clock)
    assert [r.status for r in executions_of(job.id)] == ["missed", "missed", "pending"]
    assert fresh_job(job.id).runs_created == 1
    work(app, clock)
    for _ in range(3):
        clock.advance(seconds=1)
        tick(app, clock)
        work(app, clock)
    assert [r.status for r in executions_of(job.id)] == ["missed", "missed", "succeeded", "succeeded"]
    job = fresh_job(job.id)
    assert (job.runs_created, job.enabled) == (2, False)


def test_end_at_stops_the_job(app, clock):
    start = clock()
    job = make_job(now=start, every="1s", end_at=(start + timedelta(seconds=2)).isoformat())
    for _ in range(5):
        clock.advance(seconds=1)
        tick(app, clock)
        work(app, clock)
    assert [r.scheduled_for for r in executions_of(job.id)] == [start + timedelta(seconds=s) for s in (1, 2)]
    job = fresh_job(job.id)
    assert job.enabled is False and job.disabled_reason.startswith("end_at reached: no run after ")


def test_start_at_is_the_first_run_for_every_schedule_kind(app, clock):
    start = clock() + timedelta(hours=2)
    interval = make_job(now=clock(), every="10m", start_at=start.isoformat())
    cron = make_job(
        now=clock(), schedule_type="cron", schedule={"expression": "*/15 * * * *"}, start_at=start.isoformat()
    )
    assert interval.next_run_at == start and interval.schedule["start_at"] == "2026-06-01T14:00:00Z"
    assert cron.next_run_at == start
    clock.advance(hours=1)
    tick(app, clock)
    assert executions_of(interval.id) == [] and executions_of(cron.id) == []


def test_a_limit_window_that_leaves_no_run_is_refused(app, clock):
    from app.services.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as refused:
        make_job(now=clock(), every="1h", start_at="2026-06-02T00:00:00Z", end_at="2026-06-01T00:00:00Z")
    assert refused.value.errors == {"end_at": "must be after start_at"}


def test_raising_max_runs_lets_a_finished_job_be_enabled_again(app, clock):
    job = make_job(now=clock(), every="1s", max_runs=1)
    clock.advance(seconds=1)
    tick(app, clock)
    work(app, clock)
    clock.advance(seconds=1)
    tick(app, clock)
    assert fresh_job(job.id).enabled is False
    from app.services.errors import Conflict

    with pytest.raises(Conflict, match="raise max_runs"):
        jobs.enable_job(job.id, now=clock(), actor="test")
    db.session.rollback()
    jobs.update_job(job.id, {"max_runs": "2"}, now=clock(), actor="test")
    job = jobs.enable_job(job.id, now=clock(), actor="test")
    assert job.enabled and job.disabled_reason is None and job.next_run_at == clock() + timedelta(seconds=1)


# --- retry kinds --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, delays", [("fixed", [5, 5, 5]), ("linear", [5, 10, 15]), ("exponential", [5, 10, 20])])
def test_the_worker_schedules_retries_by_the_jobs_retry_kind(app, clock, kind, delays):
    job = make_job(now=clock(), task="always_fail", max_attempts=4, retry_backoff_seconds=5, retry_kind=kind)
    execution = jobs.trigger_job(job.id, now=clock(), actor="test")
    waits = []
    for _ in delays:
        work(app, clock)
        row = executions_of(job.id)[0]
        assert row.status == "retry_scheduled"
        waits.append((row.available_at - clock()).total_seconds())
        clock.now = row.available_at
    assert waits == delays
    work(app, clock)
    assert executions_of(job.id)[0].status == "failed" and execution.id == executions_of(job.id)[0].id


def test_the_retry_cap_and_jitter_bound_the_delay(app, clock):
    job = make_job(
        now=clock(),
        task="always_fail",
        max_attempts=2,
        retry_backoff_seconds=100,
        retry_max_delay_seconds=60,
        retry_jitter="0.5",
    )
    jobs.trigger_job(job.id, now=clock(), actor="test")
    work(app, clock)
    wait = (executions_of(job.id)[0].available_at - clock()).total_seconds()
    assert 50 <= wait <= 60


# --- queued TTL ---------------------------------------------------------------------------------


def test_queued_ttl_expires_work_while_no_worker_runs(app, clock):
    job = make_job(now=clock(), every="1m", queued_ttl_seconds=30, overlap_policy="allow")
    clock.advance(minutes=1)
    tick(app, clock)
    [row] = executions_of(job.id)
    assert row.status == "pending"
    clock.advance(seconds=29)
    tick(app, clock)
    assert executions_of(job.id)[0].status == "pending"
    clock.advance(seconds=1)
    report = tick(app, clock)
    [row] = executions_of(job.id)
    assert (row.status, row.finished_at, row.attempts) == ("expired", clock(), 0)
    assert row.reason == "queued TTL passed: not started within 30s of becoming available"
    assert report.expired == 1
    [event] = events("execution_expired", job.id)
    assert event.execution_id == row.id
    work(app, clock)  # nothing left to run
    assert executions_of(job.id)[0].status == "expired"
    report = verify(now=clock())
    assert report.ok and report.expired == 1


def test_each_job_expires_by_its_own_queued_ttl(app, clock):
    short = make_job(now=clock(), every="1d", queued_ttl_seconds=30)
    long = make_job(now=clock(), every="1d", queued_ttl_seconds=300)
    for job in (short, long):
        jobs.trigger_job(job.id, now=clock(), actor="test")
    clock.advance(seconds=60)
    tick(app, clock)
    assert [r.status for r in executions_of(short.id)] == ["expired"]
    assert [r.status for r in executions_of(long.id)] == ["pending"]
    clock.advance(seconds=240)
    tick(app, clock)
    assert [r.status for r in executions_of(long.id)] == ["expired"]


def test_work_started_in_time_is_not_expired(app, clock):
    job = make_job(now=clock(), queued_ttl_seconds=30)
    jobs.trigger_job(job.id, now=clock(), actor="test")
    clock.advance(seconds=10)
    work(app, clock)
    clock.advance(minutes=5)
    tick(app, clock)
    assert executions_of(job.id)[0].status == "succeeded"


def test_jobs_without_a_queued_ttl_wait_as_long_as_it_takes(app, clock):
    job = make_job(now=clock())
    jobs.trigger_job(job.id, now=clock(), actor="test")
    clock.advance(days=30)
    tick(app, clock)
    assert executions_of(job.id)[0].status == "pending"


# --- result TTLs --------------------------------------------------------------------------------


def prune(clock):
    return retention.prune_engine(db.engine, now=clock())


def test_result_ttls_remove_finished_runs_per_outcome(app, clock):
    job = make_job(now=clock(), success_ttl_seconds=60, failure_ttl_seconds=600, retention_days=0, retention_count=0)
    ok_old = make_execution(job, "succeeded", now=clock() - timedelta(seconds=61))
    ok_new = make_execution(job, "succeeded", now=clock() - timedelta(seconds=30))
    failed_mid = make_execution(job, "cancelled", now=clock() - timedelta(seconds=300))
    failed_old = make_execution(job, "cancelled", now=clock() - timedelta(seconds=601))
    waiting = make_execution(job, "pending", now=clock() - timedelta(days=3))
    expected = {ok_new.id, failed_mid.id, waiting.id}
    assert len({ok_old.id, failed_old.id} | expected) == 5
    result = prune(clock)
    assert {row.id for row in executions_of(job.id)} == expected
    assert result["deleted"] == 2


def test_ttl_zero_goes_at_the_next_pass_and_minus_one_keeps(app, clock):
    gone = make_job(now=clock(), success_ttl_seconds=0, retention_days=0, retention_count=0)
    kept = make_job(now=clock(), success_ttl_seconds=-1, retention_days=0, retention_count=0)
    for job in (gone, kept):
        make_execution(job, "succeeded", now=clock())
    prune(clock)
    assert executions_of(gone.id) == [] and len(executions_of(kept.id)) == 1


def test_retention_count_still_removes_first_when_the_ttl_would_keep(app, clock):
    job = make_job(now=clock(), success_ttl_seconds=3600, retention_count=1, retention_days=0)
    rows = [make_execution(job, "succeeded", now=clock() - timedelta(seconds=s)) for s in (30, 20, 10)]
    prune(clock)
    assert [row.id for row in executions_of(job.id)] == [rows[-1].id]


def test_dead_lettered_runs_stay_until_their_alert_is_resolved(app, clock):
    job = make_job(now=clock(), failure_ttl_seconds=0, retention_days=0, retention_count=0)
    dead = make_execution(job, "dead_lettered", now=clock() - timedelta(hours=1))
    prune(clock)
    assert [row.id for row in executions_of(job.id)] == [dead.id]
    with write_transaction(db.engine) as conn:
        conn.execute(
            Alert.__table__.insert().values(
                job_id=job.id, execution_id=dead.id, kind="dead_letter", message="x", created_at=clock()
            )
        )
    prune(clock)
    assert [row.id for row in executions_of(job.id)] == [dead.id]  # unresolved
    with write_transaction(db.engine) as conn:
        conn.execute(text("UPDATE alerts SET resolved_at = :now, resolved_by = 'ops'"), {"now": clock()})
    prune(clock)
    assert executions_of(job.id) == []


# --- no-limit timeouts ----------------------------------------------------------------------------


def test_a_job_may_have_no_timeout_and_its_lease_is_lease_seconds(app, clock):
    job = make_job(now=clock(), timeout_seconds="none")
    assert fresh_job(job.id).timeout_seconds is None
    execution = jobs.trigger_job(job.id, now=clock(), actor="test")
    with write_transaction(db.engine) as conn:
        turn = store_for(conn).record_and_claim(
            conn, [], worker_id="w", now=clock(), limit=1, queue_ids=None, lease_seconds=45, buffer_seconds=30
        )
    [(claimed, _)] = turn.started
    assert (claimed.id, claimed.timeout_seconds) == (execution.id, None)
    assert executions_of(job.id)[0].lease_expires_at == clock() + timedelta(seconds=45)


def test_a_job_with_no_timeout_runs_to_its_end(app, clock):
    job = make_job(now=clock(), task="sleep_for_seconds", config={"seconds": 0.2}, timeout_seconds="")
    jobs.trigger_job(job.id, now=clock(), actor="test")
    work(app, clock)
    assert executions_of(job.id)[0].status == "succeeded"


def test_the_default_timeout_is_a_setting(app, clock):
    app.config["DEFAULT_JOB_TIMEOUT_SECONDS"] = None
    app.config["DEFAULT_QUEUED_TTL_SECONDS"] = 90
    job = make_job(now=clock())
    assert (job.timeout_seconds, job.queued_ttl_seconds) == (None, 90)
    app.config["DEFAULT_JOB_TIMEOUT_SECONDS"] = 12
    assert make_job(now=clock()).timeout_seconds == 12
    assert make_job(now=clock(), timeout_seconds=7).timeout_seconds == 7
