"""The rate-limit rule (app/domain/rate_limits.py): the spelling, and a sliding window of N starts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.rate_limits import RateLimit, RateLimitError, allowance, parse_rate_limit, record_starts


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("10/minute", RateLimit(10, "minute")),
        (" 3 / seconds ", RateLimit(3, "second")),
        ("1/hour", RateLimit(1, "hour")),
    ],
)
def test_a_rate_limit_is_n_per_second_minute_or_hour(text, limit):
    assert parse_rate_limit(text) == limit
    assert str(parse_rate_limit(text)) == f"{limit.count}/{limit.period}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("10/day", "must be N/second, N/minute or N/hour (e.g. 10/minute), got '10/day'"),
        ("ten/minute", "must be N/second, N/minute or N/hour (e.g. 10/minute), got 'ten/minute'"),
        ("0/second", "the count must be between 1 and 10000, got 0"),
        ("10001/hour", "the count must be between 1 and 10000, got 10001"),
    ],
)
def test_anything_else_is_refused_with_what_is_wrong(text, message):
    with pytest.raises(RateLimitError) as refused:
        parse_rate_limit(text)
    assert str(refused.value) == message


def test_the_window_slides_and_starts_ahead_of_now_count_inside_it():
    limit = RateLimit(3, "second")
    assert allowance(limit, [], 100.0) == 3
    starts = record_starts(limit, [], 100.0, 2)
    assert starts == [100.0, 100.0] and allowance(limit, starts, 100.5) == 1
    starts = record_starts(limit, starts, 100.5, 1)
    assert allowance(limit, starts, 100.99) == 0
    assert allowance(limit, starts, 101.0) == 2  # the two at 100.0 left the window (100.0, 101.0]
    assert allowance(limit, [100.2], 100.1) == 2  # another worker's clock a little ahead: still counted


@given(st.lists(st.tuples(st.floats(0, 0.5), st.integers(0, 5)), max_size=60), st.integers(1, 6))
def test_whatever_the_pace_no_window_of_the_period_holds_more_than_n_starts(steps, count):
    limit = RateLimit(count, "second")
    now, starts, every = 0.0, [], []
    for gap, wanted in steps:
        now += gap
        started = min(wanted, allowance(limit, starts, now))
        starts = record_starts(limit, starts, now, started)
        every += [now] * started
    for at in every:
        assert sum(1 for other in every if at <= other < at + 1) <= count
