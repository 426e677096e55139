"""The retention pace (app.domain.pacing): waits computed from the times given, nothing sleeps."""

from __future__ import annotations

import pytest

from app.domain.pacing import Pace


def test_unpaced_never_waits():
    pace = Pace(started=100.0)
    pace.record(5000, began=100.0, ended=100.2)
    assert pace.wait_after(100.2) == 0.0


def test_rate_waits_until_the_rows_are_due():
    pace = Pace(started=0.0, rows_per_second=10_000)
    pace.record(5000, began=0.0, ended=0.1)
    assert pace.wait_after(0.1) == pytest.approx(0.4)  # 5,000 rows at 10,000/s end at 0.5
    pace.record(5000, began=0.5, ended=0.6)
    assert pace.wait_after(0.6) == pytest.approx(0.4)


def test_rate_makes_up_for_an_overslept_pause():
    pace = Pace(started=0.0, rows_per_second=10_000)
    pace.record(5000, began=0.0, ended=0.1)
    pace.record(5000, began=0.8, ended=0.9)  # the pause ran 0.3 s over
    assert pace.wait_after(0.9) == pytest.approx(0.1)


def test_slow_batches_are_not_held_back_by_the_rate():
    pace = Pace(started=0.0, rows_per_second=10_000)
    pace.record(5000, began=0.0, ended=2.0)  # a loaded machine: 2,500 rows/s
    assert pace.wait_after(2.0) == 0.0


def test_duty_cycle_pauses_in_proportion_to_the_work():
    pace = Pace(started=0.0, duty_cycle=0.5)
    pace.record(5000, began=0.0, ended=2.0)
    assert pace.wait_after(2.0) == pytest.approx(2.0)
    pace.record(5000, began=4.0, ended=4.5)
    assert pace.wait_after(4.5) == pytest.approx(0.5)  # 2.5 s of work in 5 s


def test_duty_cycle_counts_work_not_the_time_between_batches():
    pace = Pace(started=0.0, duty_cycle=0.25)
    pace.record(100, began=0.0, ended=1.0)
    pace.record(100, began=10.0, ended=11.0)  # a long gap already gave the machine back
    assert pace.wait_after(11.0) == 0.0


def test_the_stricter_limit_wins():
    pace = Pace(started=0.0, rows_per_second=20_000, duty_cycle=0.5)
    pace.record(5000, began=0.0, ended=0.5)
    assert pace.resume_at() == pytest.approx(1.0)  # duty: 0.5 / 0.5; the rate alone: 0.25
    pace = Pace(started=0.0, rows_per_second=5_000, duty_cycle=0.5)
    pace.record(5000, began=0.0, ended=0.1)
    assert pace.resume_at() == pytest.approx(1.0)  # rate: 5,000 / 5,000; the duty alone: 0.2


@pytest.mark.parametrize("rate, duty", [(-1, 1.0), (0, 0.0), (0, 1.5), (0, -0.5)])
def test_rejects_limits_out_of_range(rate, duty):
    with pytest.raises(ValueError):
        Pace(started=0.0, rows_per_second=rate, duty_cycle=duty)
