"""The retry delay rule (app/domain/retry.py): each kind as a table, the cap, and the jitter's bounds."""

from datetime import timedelta

import pytest

from app.domain.policies import retry_delay as default_retry_delay
from app.domain.retry import CEILING, RetryKind, RetryPolicy, base_delay_seconds, delay_bounds, retry_delay


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


@pytest.mark.parametrize(
    "kind, backoff, attempt, cap, expected",
    [
        # fixed: the backoff every time
        ("fixed", 10, 1, None, 10),
        ("fixed", 10, 2, None, 10),
        ("fixed", 10, 7, None, 10),
        # linear: backoff x attempt
        ("linear", 10, 1, None, 10),
        ("linear", 10, 2, None, 20),
        ("linear", 10, 5, None, 50),
        # exponential: backoff x 2^(attempt-1), the rule before retry kinds
        ("exponential", 10, 1, None, 10),
        ("exponential", 10, 2, None, 20),
        ("exponential", 10, 3, None, 40),
        ("exponential", 10, 6, None, 320),
        # the cap bounds every kind
        ("fixed", 10, 3, 5, 5),
        ("linear", 10, 5, 35, 35),
        ("linear", 10, 3, 35, 30),
        ("exponential", 10, 6, 60, 60),
        ("exponential", 10, 2, 60, 20),
        # zero backoff: retry at once
        ("exponential", 0, 4, None, 0),
    ],
)
def test_delay_table(kind, backoff, attempt, cap, expected):
    assert retry_delay(kind, backoff, attempt, max_delay_seconds=cap) == seconds(expected)
    assert RetryPolicy(kind, backoff, cap).delay(attempt) == seconds(expected)


def test_exponential_is_the_default_and_the_old_rule():
    assert RetryPolicy().kind == RetryKind.EXPONENTIAL
    for attempt in range(1, 12):
        assert RetryPolicy(backoff_seconds=7).delay(attempt) == seconds(7 * 2 ** (attempt - 1))
        assert default_retry_delay(7, attempt) == seconds(7 * 2 ** (attempt - 1))


@pytest.mark.parametrize("kind", list(RetryKind))
@pytest.mark.parametrize("jitter", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("attempt", [1, 2, 5])
def test_jitter_stays_within_its_fraction_of_the_delay(kind, jitter, attempt):
    base = base_delay_seconds(kind, 30, attempt)
    low, high = delay_bounds(kind, 30, attempt, jitter=jitter)
    assert low == seconds(round(base * (1 - jitter), 3))
    assert high == seconds(round(base * (1 + jitter), 3))
    for step in range(11):
        delay = retry_delay(kind, 30, attempt, jitter=jitter, spread=step / 10)
        assert low <= delay <= high
    # the middle of the spread is the delay itself
    assert retry_delay(kind, 30, attempt, jitter=jitter, spread=0.5) == seconds(base)


def test_the_cap_holds_after_the_jitter():
    for step in range(11):
        assert retry_delay("fixed", 100, 1, max_delay_seconds=110, jitter=0.5, spread=step / 10) <= seconds(110)
    assert delay_bounds("fixed", 100, 1, max_delay_seconds=110, jitter=0.5) == (seconds(50), seconds(110))


def test_a_huge_exponential_delay_stops_at_the_ceiling_instead_of_overflowing():
    assert retry_delay("exponential", 7 * 86400, 100) == CEILING
    assert retry_delay("linear", 7 * 86400, 100, jitter=1.0, spread=1.0) == CEILING


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: retry_delay("fixed", 10, 0), "attempt_number counts from 1"),
        (lambda: retry_delay("fixed", -1, 1), "backoff_seconds must not be negative"),
        (lambda: retry_delay("fixed", 10, 1, jitter=1.5), "jitter is a fraction between 0 and 1"),
        (lambda: retry_delay("fixed", 10, 1, spread=2), "spread is a draw between 0 and 1"),
        (lambda: retry_delay("quadratic", 10, 1), "'quadratic' is not a valid RetryKind"),
    ],
)
def test_bad_inputs_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
