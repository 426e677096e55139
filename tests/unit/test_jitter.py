"""Jitter: a deterministic offset per job within its window."""

from datetime import timedelta

from app.domain.jitter import jitter_offset


def test_no_window_no_offset():
    assert jitter_offset(7, 0) == timedelta(0)


def test_offset_is_deterministic_and_inside_the_window():
    for job_id in range(1, 500):
        offset = jitter_offset(job_id, 60)
        assert timedelta(0) <= offset < timedelta(seconds=60)
        assert offset == jitter_offset(job_id, 60)


def test_a_thousand_jobs_spread_over_the_window():
    offsets = [jitter_offset(job_id, 60).total_seconds() for job_id in range(1, 1001)]
    per_ten_seconds = [sum(1 for o in offsets if k * 10 <= o < (k + 1) * 10) for k in range(6)]
    assert all(120 < count < 215 for count in per_ten_seconds), per_ten_seconds
    assert len(set(offsets)) > 900
