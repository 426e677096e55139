"""Run-limit arithmetic (app/domain/run_limits.py) with literal instants: no clock, no database."""

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.run_limits import (
    RunLimits,
    bound,
    end_at_reason,
    first_run,
    is_limit_reason,
    max_runs_reason,
    queued_deadline,
    result_expired,
    window_problem,
)

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def every_second(instant: datetime) -> datetime:
    """An interval schedule of 1 s anchored at T0: the first tick strictly after `instant`."""
    elapsed = (instant - T0) // timedelta(seconds=1)
    return T0 + timedelta(seconds=elapsed + 1)


def test_runs_left():
    assert RunLimits().runs_left is None
    assert RunLimits(max_runs=3).runs_left == 3
    assert RunLimits(max_runs=3, runs_created=2).runs_left == 1
    assert RunLimits(max_runs=3, runs_created=5).runs_left == 0  # lowered below what ran


def test_max_runs_three_on_a_one_second_interval_gives_three_runs_then_stops():
    """What the scheduler does tick by tick: each tick plans the due occurrence, the limits bound it."""
    limits = RunLimits(max_runs=3)
    created: list[datetime] = []
    next_run_at: datetime | None = at(1)
    reason = None
    for tick in range(1, 8):
        if next_run_at is None or next_run_at > at(tick):
            continue
        outcome = bound([(next_run_at, True)], every_second(next_run_at), limits)
        created += [next_run_at] * outcome.keep
        limits = RunLimits(limits.max_runs, limits.runs_created + outcome.runs_added)
        next_run_at, reason = outcome.next_run_at, outcome.reason or reason
    assert created == [at(1), at(2), at(3)]
    assert limits.runs_created == 3
    assert next_run_at is None
    assert reason == "max_runs reached: 3 scheduled runs created"


def test_the_last_run_is_kept_and_the_limit_is_known_in_the_same_tick():
    outcome = bound([(at(3), True)], at(4), RunLimits(max_runs=3, runs_created=2))
    assert (outcome.keep, outcome.runs_added, outcome.next_run_at) == (1, 1, None)
    assert outcome.reason == max_runs_reason(3)
    assert outcome.stopped_at == at(4)


def test_a_catch_up_backlog_is_cut_at_the_limit():
    planned = [(at(s), True) for s in range(1, 11)]
    outcome = bound(planned, at(11), RunLimits(max_runs=5, runs_created=1))
    assert (outcome.keep, outcome.runs_added, outcome.stopped_at) == (4, 4, at(5))
    assert outcome.reason == max_runs_reason(5)


def test_missed_rows_do_not_count_towards_max_runs():
    planned = [(at(1), False), (at(2), False), (at(3), True), (at(4), False), (at(5), True)]
    outcome = bound(planned, at(6), RunLimits(max_runs=2))
    assert (outcome.keep, outcome.runs_added) == (5, 2)
    assert outcome.reason == max_runs_reason(2)
    # one run left: the missed rows before it stay, the second run and what follows go
    outcome = bound(planned, at(6), RunLimits(max_runs=2, runs_created=1))
    assert (outcome.keep, outcome.runs_added, outcome.stopped_at) == (4, 1, at(5))


def test_end_at_drops_what_falls_after_it():
    limits = RunLimits(end_at=at(3))
    outcome = bound([(at(1), True), (at(2), True), (at(3), True), (at(4), True)], at(5), limits)
    assert (outcome.keep, outcome.next_run_at, outcome.stopped_at) == (3, None, at(4))
    assert outcome.reason == end_at_reason(at(3)) == "end_at reached: no run after 2026-06-01T12:00:03Z"


def test_end_at_is_reached_when_the_next_run_would_fall_after_it():
    outcome = bound(
        [(at(3), True)],
        at(4),
        RunLimits(
            end_at=at(
                3,
            )
        ),
    )
    assert (outcome.keep, outcome.next_run_at, outcome.reason) == (1, None, end_at_reason(at(3)))
    outcome = bound([(at(2), True)], at(3), RunLimits(end_at=at(3)))
    assert (outcome.keep, outcome.next_run_at, outcome.reason) == (1, at(3), None)


def test_no_limits_change_nothing():
    outcome = bound([(at(1), True), (at(2), False)], at(3), RunLimits())
    assert (outcome.keep, outcome.runs_added, outcome.next_run_at, outcome.reason) == (2, 1, at(3), None)


def test_an_exhausted_schedule_with_runs_left_is_not_a_limit():
    outcome = bound([(at(1), True)], None, RunLimits(max_runs=5))
    assert (outcome.next_run_at, outcome.reason) == (None, None)


@pytest.mark.parametrize(
    "now, start_at, expected",
    [
        (at(0.5), None, at(1)),  # no start: the next occurrence after now
        (at(0.5), at(10), at(10)),  # start_at is itself an occurrence: it is the first run
        (at(0.5), at(9.5), at(10)),  # otherwise the first occurrence after it
        (at(20), at(10), at(21)),  # start_at in the past: from now
    ],
)
def test_first_run_respects_start_at(now, start_at, expected):
    assert first_run(every_second, now=now, start_at=start_at) == expected


@pytest.mark.parametrize(
    "start_at, end_at, one_time_at, problem",
    [
        (None, None, None, None),
        (at(0), at(10), None, None),
        (at(10), at(10), None, ("end_at", "must be after start_at")),
        (at(10), at(5), None, ("end_at", "must be after start_at")),
        (at(10), None, at(5), ("start_at", "is after the one-time run_at, so the job would never run")),
        (None, at(10), at(50), ("end_at", "is before the one-time run_at, so the job would never run")),
        (at(0), at(10), at(5), None),
    ],
)
def test_window_problems(start_at, end_at, one_time_at, problem):
    assert window_problem(start_at, end_at, one_time_at=one_time_at) == problem


@pytest.mark.parametrize(
    "succeeded, finished, success_ttl, failure_ttl, expired",
    [
        (True, at(0), -1, 0, False),  # -1 keeps it (retention_count/days still apply)
        (True, at(0), 0, -1, True),  # 0: the next retention pass removes it
        (True, at(0), 60, -1, False),  # 59 s later: kept
        (True, at(-60), 60, -1, True),  # 60 s after it finished: goes
        (False, at(-60), 60, -1, False),  # a failure follows the failure TTL
        (False, at(-60), -1, 30, True),
    ],
)
def test_result_ttl(succeeded, finished, success_ttl, failure_ttl, expired):
    assert (
        result_expired(
            succeeded=succeeded,
            finished_at=finished,
            now=at(0),
            success_ttl_seconds=success_ttl,
            failure_ttl_seconds=failure_ttl,
        )
        is expired
    )


def test_queued_deadline():
    assert queued_deadline(at(0), None) is None
    assert queued_deadline(at(0), 90) == at(90)


def test_limit_reasons_are_told_apart_from_other_reasons():
    assert is_limit_reason(max_runs_reason(3)) and is_limit_reason(end_at_reason(at(0)))
    assert not is_limit_reason("auto-paused after 3 consecutive failures") and not is_limit_reason(None)
