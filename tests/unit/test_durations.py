"""Interval durations: every accepted form and every refusal, with its exact message."""

from datetime import timedelta

import pytest

from app.scheduling import ScheduleError, format_interval, parse_interval


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (30, timedelta(seconds=30)),
        (1, timedelta(seconds=1)),
        (90.0, timedelta(seconds=90)),
        ("30", timedelta(seconds=30)),
        (" 30 ", timedelta(seconds=30)),
        ("45s", timedelta(seconds=45)),
        ("2m", timedelta(minutes=2)),
        ("1h", timedelta(hours=1)),
        ("1d", timedelta(days=1)),
        ("2w", timedelta(weeks=2)),
        ("1 week", timedelta(weeks=1)),
        ({"weeks": 1, "days": 1}, timedelta(days=8)),
        ("90 seconds", timedelta(seconds=90)),
        ("5 minutes", timedelta(minutes=5)),
        ("1 minute", timedelta(minutes=1)),
        ("2 hours", timedelta(hours=2)),
        ("3 days", timedelta(days=3)),
        ("10 sec", timedelta(seconds=10)),
        ("5 MIN", timedelta(minutes=5)),
        ("1.5h", timedelta(minutes=90)),
        ("0.1h", timedelta(minutes=6)),
        (".5m", timedelta(seconds=30)),
        ("1h30m", timedelta(minutes=90)),
        ("1h 30m", timedelta(minutes=90)),
        ("1d2h3m4s", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        ({"minutes": 5}, timedelta(minutes=5)),
        ({"seconds": 10, "minutes": 1}, timedelta(seconds=70)),
        ({"hours": 1.5}, timedelta(minutes=90)),
        ({"days": 1, "hours": 0}, timedelta(days=1)),
        ("3650d", timedelta(days=3650)),
    ],
)
def test_parse_interval_accepts(value, expected):
    assert parse_interval(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "interval must be positive, got 0"),
        ("0s", 'interval must be positive, got "0s"'),
        ("0", 'interval must be positive, got "0"'),
        ({"minutes": 0}, 'interval must be positive, got {"minutes": 0}'),
        (-5, "interval must be positive, got -5"),
        ("-5s", 'interval must be positive, got "-5s"'),
        ("", "interval is empty"),
        ("   ", "interval is empty"),
        ({}, "interval is empty"),
        (None, "interval is empty"),
        (True, 'interval must be a duration such as "30s" or {"minutes": 5}, got the boolean true'),
        (False, 'interval must be a duration such as "30s" or {"minutes": 5}, got the boolean false'),
        ({"minutes": True}, "interval minutes must be a number, got true"),
        ({"minutes": "5"}, 'interval minutes must be a number, got "5"'),
        ({"minutes": -1}, "interval minutes must not be negative, got -1"),
        ({"fortnights": 1}, "unknown interval key 'fortnights'; use seconds, minutes, hours, days or weeks"),
        (
            {"months": 1, "fortnights": 2},
            "unknown interval keys 'fortnights', 'months'; use seconds, minutes, hours, days or weeks",
        ),
        (
            "5x",
            'unknown interval unit "x" in "5x"; use s, m, h, d or w (or seconds, minutes, hours, days, weeks)',
        ),
        (
            "2 months",
            'unknown interval unit "months" in "2 months"; use s, m, h, d or w (or seconds, minutes, hours, days, weeks)',
        ),
        ("h", 'interval "h" is not a duration; write e.g. "30s", "5m", "1h30m" or "2 days"'),
        (
            "every 5m",
            'interval "every 5m" is not a duration; write e.g. "30s", "5m", "1h30m" or "2 days"',
        ),
        ("5m!", 'interval "5m!" is not a duration; write e.g. "30s", "5m", "1h30m" or "2 days"'),
        ("1h1h", 'interval "1h1h" gives hours more than once'),
        (float("inf"), "interval must be a finite duration, got Infinity"),
        (float("nan"), "interval must be a finite duration, got NaN"),
        ("inf", 'interval must be a finite duration, got "inf"'),
        ("nan", 'interval must be a finite duration, got "nan"'),
        ({"seconds": float("inf")}, "interval seconds must be a finite number, got Infinity"),
        ("1.5s", 'interval must be a whole number of seconds, got "1.5s"'),
        (0.5, "interval must be a whole number of seconds, got 0.5"),
        (1e-120, "interval must be a whole number of seconds, got 1e-120"),
        ("3651d", 'interval must be at most 3650 days, got "3651d"'),
        (10**15, "interval must be at most 3650 days, got 1000000000000000"),
        (
            [30],
            'interval must be a number of seconds, a string like "30s" or a mapping like {"minutes": 5}, got list',
        ),
    ],
)
def test_parse_interval_refuses_with_exact_message(value, message):
    with pytest.raises(ScheduleError) as caught:
        parse_interval(value)
    assert str(caught.value) == message


def test_schedule_error_is_a_value_error():
    with pytest.raises(ValueError):
        parse_interval("0s")


@pytest.mark.parametrize(
    ("interval", "text"),
    [
        (timedelta(seconds=30), "30s"),
        (timedelta(minutes=1), "1m"),
        (timedelta(minutes=90), "1h30m"),
        (timedelta(hours=1, seconds=5), "1h5s"),
        (timedelta(days=2), "2d"),
        (timedelta(days=1, hours=2, minutes=3, seconds=4), "1d2h3m4s"),
        (timedelta(weeks=2), "2w"),
        (timedelta(days=9), "1w2d"),
        (timedelta(seconds=1.5), "1.5s"),
        (timedelta(0), "0s"),
    ],
)
def test_format_interval(interval, text):
    assert format_interval(interval) == text


@pytest.mark.parametrize("value", ["30s", "90m", "1h30m", "25h", "1d1s", {"seconds": 86461}])
def test_format_then_parse_round_trips(value):
    interval = parse_interval(value)
    assert parse_interval(format_interval(interval)) == interval
