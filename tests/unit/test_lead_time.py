"""Writing occurrences ahead of their time (app/domain/lead_time.py): pure rules, injected times."""

from datetime import UTC, datetime, timedelta

from app.domain.lead_time import plan_ahead, wake_at, writes_ahead

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LEAD = timedelta(seconds=2)


def every(seconds: float):
    return lambda at: at + timedelta(seconds=seconds)


def test_only_on_time_jobs_inside_the_lead_are_written_ahead():
    inside = NOW + timedelta(milliseconds=1500)
    assert writes_ahead(next_run_at=inside, now=NOW, lead=LEAD, limited=False)
    assert writes_ahead(next_run_at=NOW + LEAD, now=NOW, lead=LEAD, limited=False)  # the horizon is inclusive
    assert not writes_ahead(next_run_at=NOW + LEAD + timedelta(microseconds=1), now=NOW, lead=LEAD, limited=False)
    assert not writes_ahead(next_run_at=NOW, now=NOW, lead=LEAD, limited=False)  # due: the tick's own path
    assert not writes_ahead(next_run_at=NOW - timedelta(seconds=5), now=NOW, lead=LEAD, limited=False)  # late
    assert not writes_ahead(next_run_at=inside, now=NOW, lead=timedelta(0), limited=False)  # lead off
    assert not writes_ahead(next_run_at=inside, now=NOW, lead=LEAD, limited=True)  # max_runs / end_at
    assert not writes_ahead(next_run_at=None, now=NOW, lead=LEAD, limited=False)


def test_plan_ahead_writes_every_occurrence_inside_the_lead_and_moves_the_cursor_past_them():
    plan = plan_ahead(
        next_run_at=NOW + timedelta(milliseconds=500),
        now=NOW,
        lead=LEAD,
        next_after=every(0.5),
        only_one=False,
        limit=50,
    )
    assert plan.fire == [NOW + timedelta(milliseconds=ms) for ms in (500, 1000, 1500, 2000)]
    assert plan.next_run_at == NOW + timedelta(milliseconds=2500)


def test_plan_ahead_writes_one_for_an_overlap_skip_job_and_respects_the_cap():
    one = plan_ahead(
        next_run_at=NOW + timedelta(milliseconds=500),
        now=NOW,
        lead=LEAD,
        next_after=every(0.5),
        only_one=True,
        limit=50,
    )
    assert one.fire == [NOW + timedelta(milliseconds=500)] and one.next_run_at == NOW + timedelta(seconds=1)
    capped = plan_ahead(
        next_run_at=NOW + timedelta(milliseconds=100),
        now=NOW,
        lead=LEAD,
        next_after=every(0.1),
        only_one=False,
        limit=3,
    )
    assert len(capped.fire) == 3 and capped.next_run_at == NOW + timedelta(milliseconds=400)


def test_plan_ahead_of_an_exhausted_schedule_leaves_no_next_run():
    plan = plan_ahead(
        next_run_at=NOW + timedelta(seconds=1), now=NOW, lead=LEAD, next_after=lambda at: None, only_one=False, limit=50
    )
    assert plan.fire == [NOW + timedelta(seconds=1)] and plan.next_run_at is None


def test_the_scheduler_wakes_a_lead_before_the_next_job_or_at_a_deferred_or_confirmed_time():
    beyond = NOW + timedelta(seconds=10)
    assert (
        wake_at(now=NOW, lead=LEAD, earliest_beyond=beyond, deferred=None, confirm=None, again=False) == beyond - LEAD
    )
    deferred = NOW + timedelta(seconds=1)
    assert wake_at(now=NOW, lead=LEAD, earliest_beyond=beyond, deferred=deferred, confirm=None, again=False) == deferred
    confirm = NOW + timedelta(milliseconds=300)
    assert (
        wake_at(now=NOW, lead=LEAD, earliest_beyond=beyond, deferred=deferred, confirm=confirm, again=False) == confirm
    )
    assert wake_at(now=NOW, lead=LEAD, earliest_beyond=beyond, deferred=None, confirm=None, again=True) == NOW
    assert wake_at(now=NOW, lead=LEAD, earliest_beyond=None, deferred=None, confirm=None, again=False) is None
