"""Misfire planning, retry backoff and lease maths, with literal datetimes."""

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.policies import SCAN_LIMIT, lease_duration, plan_occurrences, retry_delay

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def every(**delta):
    step = timedelta(**delta)
    return lambda t: t + step


def plan(policy, *, next_run_at, grace=30, cap=50, step=None, now=NOW):
    return plan_occurrences(
        next_run_at=next_run_at,
        now=now,
        next_after=step or every(minutes=1),
        policy=policy,
        grace=timedelta(seconds=grace),
        cap=cap,
    )


def test_coalesce_collapses_the_backlog_into_one_run_at_the_latest_occurrence():
    result = plan("coalesce", next_run_at=NOW - timedelta(minutes=5))
    assert result.fire == [(NOW, "schedule")]
    assert result.coalesced == 5
    assert result.missed == []
    assert result.next_run_at == NOW + timedelta(minutes=1)


def test_catch_up_creates_each_missed_occurrence():
    result = plan("catch_up", next_run_at=NOW - timedelta(minutes=5))
    assert [at for at, _ in result.fire] == [NOW - timedelta(minutes=m) for m in (5, 4, 3, 2, 1, 0)]
    assert [trigger for _, trigger in result.fire] == ["catch_up"] * 5 + ["schedule"]
    assert result.next_run_at == NOW + timedelta(minutes=1)


def test_catch_up_respects_the_cap_and_continues_next_tick():
    result = plan("catch_up", next_run_at=NOW - timedelta(minutes=5), cap=3)
    assert [at for at, _ in result.fire] == [NOW - timedelta(minutes=m) for m in (5, 4, 3)]
    assert result.next_run_at == NOW - timedelta(minutes=2)
    rest = plan("catch_up", next_run_at=result.next_run_at, cap=3)
    assert [at for at, _ in rest.fire] == [NOW - timedelta(minutes=m) for m in (2, 1, 0)]


def test_skip_records_late_occurrences_as_missed_and_fires_the_on_time_one():
    result = plan("skip", next_run_at=NOW - timedelta(minutes=2))
    assert result.missed == [NOW - timedelta(minutes=2), NOW - timedelta(minutes=1)]
    assert result.fire == [(NOW, "schedule")]


def test_occurrences_within_grace_are_on_time_for_every_policy():
    for policy in ("coalesce", "catch_up", "skip"):
        result = plan(policy, next_run_at=NOW - timedelta(seconds=20), grace=30, step=every(minutes=10))
        assert result.fire == [(NOW - timedelta(seconds=20), "schedule")], policy
        assert result.missed == [] and result.coalesced == 0


def test_a_late_single_occurrence_under_coalesce_still_runs_once():
    result = plan("coalesce", next_run_at=NOW - timedelta(minutes=3), step=every(hours=1))
    assert result.fire == [(NOW - timedelta(minutes=3), "catch_up")]
    assert result.coalesced == 0


def test_skip_caps_missed_rows_and_counts_the_rest():
    result = plan("skip", next_run_at=NOW - timedelta(minutes=10), cap=3)
    assert len(result.missed) == 3
    assert result.unrecorded == 7
    assert result.fire == [(NOW, "schedule")]


def test_a_year_long_outage_of_a_one_second_job_is_planned_without_walking_it():
    start = NOW - timedelta(days=365)
    calls = 0

    def step(t):
        nonlocal calls
        calls += 1
        return t + timedelta(seconds=1)

    result = plan("coalesce", next_run_at=start, step=step)
    assert result.fire == [(NOW, "schedule")]
    assert result.lower_bound and result.coalesced >= SCAN_LIMIT
    assert result.next_run_at == NOW + timedelta(seconds=1)
    assert calls < 10 * SCAN_LIMIT


def test_exhausted_schedule_has_no_next_run():
    run_at = NOW - timedelta(seconds=5)
    result = plan("coalesce", next_run_at=run_at, step=lambda t: None)
    assert result.fire == [(run_at, "schedule")]
    assert result.next_run_at is None


@pytest.mark.parametrize("attempt,expected", [(1, 10), (2, 20), (3, 40), (4, 80)])
def test_retry_delay_doubles_per_attempt(attempt, expected):
    assert retry_delay(10, attempt) == timedelta(seconds=expected)


def test_retry_delay_rejects_attempt_zero():
    with pytest.raises(ValueError):
        retry_delay(10, 0)


def test_lease_covers_the_timeout_plus_buffer():
    assert lease_duration(30, 120, 30) == timedelta(seconds=120)
    assert lease_duration(600, 120, 30) == timedelta(seconds=630)


def test_skip_reports_the_span_of_unrecorded_occurrences():
    result = plan("skip", next_run_at=NOW - timedelta(minutes=10), cap=3)
    assert result.unrecorded_range == (NOW - timedelta(minutes=7), NOW)


def test_skip_after_a_long_outage_reports_a_span_up_to_the_on_time_run():
    result = plan("skip", next_run_at=NOW - timedelta(days=2), cap=3, step=every(seconds=1))
    assert result.lower_bound and result.fire == [(NOW, "schedule")]
    start, until = result.unrecorded_range
    assert start == NOW - timedelta(days=2) + timedelta(seconds=3) and until == NOW
