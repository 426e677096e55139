"""Cron expression parsing: fields, macros, refusals and the fixed/wildcard-hour classification."""

from datetime import UTC, datetime

import pytest

from app.scheduling import CronExpression, ScheduleError

UTC = UTC


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def fires(expression: str, after: str, count: int, zone: str = "UTC") -> list[str]:
    cron = CronExpression.parse(expression)
    found, current = [], utc(after)
    for _ in range(count):
        current = cron.next_after(current, zone)
        found.append(current.isoformat().replace("+00:00", "Z"))
    return found


@pytest.mark.parametrize(
    ("expression", "fixed_hour"),
    [
        ("0 9 * * *", True),
        ("30 1 * * *", True),
        ("0 1-3 * * *", True),
        ("0 9,17 * * 1-5", True),
        ("0 0 1 1 *", True),
        ("0 * * * *", False),
        ("*/30 * * * *", False),
        ("0 */2 * * *", False),
        ("* * * * *", False),
        ("@hourly", False),
        ("@daily", True),
        ("@midnight", True),
        ("@weekly", True),
        ("@monthly", True),
        ("@yearly", True),
        ("@annually", True),
    ],
)
def test_fixed_hour_classification(expression, fixed_hour):
    assert CronExpression.parse(expression).fixed_hour is fixed_hour


def test_text_is_normalised_and_compared_by_text():
    assert CronExpression.parse("  0   9 * *  MON-FRI ").text == "0 9 * * MON-FRI"
    assert CronExpression.parse("@Daily").text == "@daily"
    assert CronExpression.parse("0 9 * * 1") == CronExpression.parse("0  9 * * 1")


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("0 0 29 2 *", "2026-01-01T00:00:00Z", ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"]),
        ("@yearly", "2026-06-01T00:00:00Z", ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
        ("@annually", "2026-01-01T00:00:00Z", ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
        ("@monthly", "2026-01-31T12:00:00Z", ["2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"]),
        # 2026-01-01 is a Thursday; @weekly is Sunday midnight.
        ("@weekly", "2026-01-01T00:00:00Z", ["2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"]),
        ("@daily", "2026-01-01T00:00:00Z", ["2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"]),
        ("@hourly", "2026-01-01T00:30:00Z", ["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"]),
        ("0 9 * * mon-fri", "2026-01-02T10:00:00Z", ["2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z"]),
        ("0 0 * * 7", "2026-01-01T00:00:00Z", ["2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"]),
        ("0 0 1 jan *", "2026-01-01T00:00:00Z", ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
        ("5/20 0 1 1 *", "2026-01-01T00:00:00Z", ["2026-01-01T00:05:00Z", "2026-01-01T00:25:00Z"]),
        # Day and weekday both restricted: either matches (Vixie rule). 2026-01-13 is a Tuesday.
        (
            "0 0 13 * 5",
            "2026-01-01T00:00:00Z",
            ["2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z", "2026-01-16T00:00:00Z"],
        ),
        # A full weekday list with a restricted day still means "every day" under the OR rule.
        ("0 0 13 * 0-6", "2026-01-01T00:00:00Z", ["2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"]),
        ("0 0 31 * *", "2026-01-31T00:00:00Z", ["2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"]),
        # Sub-minute instants: the next fire is still strictly later.
        ("* * * * *", "2026-01-01T00:00:30Z", ["2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"]),
    ],
)
def test_next_fires_in_utc(expression, after, expected):
    assert fires(expression, after, len(expected)) == expected


def test_leap_day_in_a_zone():
    assert fires("0 0 29 2 *", "2026-01-01T00:00:00Z", 1, "America/New_York") == ["2028-02-29T05:00:00Z"]


def test_yearly_in_a_zone_and_kolkata_without_dst():
    assert fires("@yearly", "2026-06-01T00:00:00Z", 1, "America/New_York") == ["2027-01-01T05:00:00Z"]
    assert fires("30 9 * * *", "2026-03-08T00:00:00Z", 2, "Asia/Kolkata") == [
        "2026-03-08T04:00:00Z",
        "2026-03-09T04:00:00Z",
    ]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "0 0 * * * *",
            "cron expressions have 5 fields (minute hour day month weekday); got 6 "
            "— seconds and years are not supported",
        ),
        (
            "0 0 12 * * ? 2026",
            "cron expressions have 5 fields (minute hour day month weekday); got 7 "
            "— seconds and years are not supported",
        ),
        ("0 0 *", "cron expressions have 5 fields (minute hour day month weekday); got 3"),
        ("", "cron expression is empty"),
        ("   ", "cron expression is empty"),
        ("0 0 30 2 *", "cron expression '0 0 30 2 *' can never fire: day 30 never occurs in February"),
        ("0 0 31 4 *", "cron expression '0 0 31 4 *' can never fire: day 31 never occurs in April"),
        (
            "0 0 31 4,6,9,11 *",
            "cron expression '0 0 31 4,6,9,11 *' can never fire: "
            "day 31 never occurs in April, June, September or November",
        ),
        (
            "0 0 30,31 feb *",
            "cron expression '0 0 30,31 feb *' can never fire: days 30 and 31 never occur in February",
        ),
        ("61 * * * *", "invalid minute field '61': 61 is out of range 0-59"),
        ("0 24 * * *", "invalid hour field '24': 24 is out of range 0-23"),
        ("0 0 0 * *", "invalid day field '0': 0 is out of range 1-31"),
        ("0 0 32 * *", "invalid day field '32': 32 is out of range 1-31"),
        ("0 0 * 13 *", "invalid month field '13': 13 is out of range 1-12"),
        ("0 0 * * 8", "invalid weekday field '8': 8 is out of range 0-7"),
        ("x * * * *", "invalid minute field 'x': 'x' is not a number"),
        ("0 0 * foo *", "invalid month field 'foo': 'foo' is not a number or a name (jan..dec)"),
        ("0 0 * * mon-xyz", "invalid weekday field 'mon-xyz': 'xyz' is not a number or a name (sun..sat)"),
        ("0 5-2 * * *", "invalid hour field '5-2': range 5-2 runs backwards; list both parts instead"),
        ("*/0 * * * *", "invalid minute field '*/0': step must be at least 1, got 0"),
        ("0 0 L * *", "invalid day field 'L': 'L' is not supported (standard 5-field cron only)"),
        ("0 0 15W * *", "invalid day field '15W': 'W' is not supported (standard 5-field cron only)"),
        ("0 0 * * 1#2", "invalid weekday field '1#2': '#' is not supported (standard 5-field cron only)"),
        ("H * * * *", "invalid minute field 'H': 'H' is not supported (standard 5-field cron only)"),
        ("0 0 ? * *", "invalid day field '?': '?' is not supported (standard 5-field cron only)"),
        ("1,,2 * * * *", "invalid minute field '1,,2': empty list item"),
        ("*-5 * * * *", "invalid minute field '*-5': cannot read '*-5'"),
        (
            "@reboot",
            "unknown cron macro '@reboot'; supported: "
            "@hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually",
        ),
    ],
)
def test_refusals_say_what_is_wrong(expression, message):
    with pytest.raises(ScheduleError) as caught:
        CronExpression.parse(expression)
    assert str(caught.value) == message


def test_naive_instants_are_refused():
    cron = CronExpression.parse("0 9 * * *")
    with pytest.raises(ValueError, match="timezone-aware"):
        cron.next_after(datetime(2026, 1, 1), "UTC")


def test_unknown_timezone_is_refused():
    cron = CronExpression.parse("0 9 * * *")
    with pytest.raises(ScheduleError, match="unknown timezone 'Mars/Base'"):
        cron.next_after(datetime(2026, 1, 1, tzinfo=UTC), "Mars/Base")


def test_result_is_utc():
    found = CronExpression.parse("0 9 * * *").next_after(datetime(2026, 1, 1, tzinfo=UTC), "Europe/London")
    assert found.tzinfo is UTC


@pytest.mark.parametrize("zone", ["UTC", "Australia/Lord_Howe", "America/New_York"])
def test_no_fire_after_year_9999_is_none_not_an_error(zone):
    cron = CronExpression.parse("0 0 1 1 *")
    assert cron.next_after(datetime(9999, 6, 1, tzinfo=UTC), zone) is None
    assert cron.next_after(datetime(9999, 12, 31, 23, 30, tzinfo=UTC), zone) is None
