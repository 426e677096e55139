"""Schedules built from stored JSON: validation messages, normal forms, next_after and preview."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from app.scheduling import (
    CronSchedule,
    IntervalSchedule,
    OneTimeSchedule,
    PreviewItem,
    ScheduleError,
    occurrences_between,
    parse_schedule,
    preview,
    schedule_value_from_options,
)

UTC = UTC


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- one_time ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run_at", "zone", "stored"),
    [
        ("2026-01-01T12:00:00Z", "UTC", "2026-01-01T12:00:00Z"),
        ("2026-01-01T12:00:00+00:00", "UTC", "2026-01-01T12:00:00Z"),
        ("2026-01-01T12:00:00+05:30", "UTC", "2026-01-01T06:30:00Z"),
        ("2026-01-01T12:00:00-05:00", "Europe/London", "2026-01-01T17:00:00Z"),  # offset wins
        ("2026-01-01T12:00:00", "UTC", "2026-01-01T12:00:00Z"),
        ("2026-01-01T12:00:00", "America/New_York", "2026-01-01T17:00:00Z"),  # naive = job zone
        ("2026-07-01T12:00:00", "America/New_York", "2026-07-01T16:00:00Z"),
        ("2026-01-01 12:00", "Asia/Kolkata", "2026-01-01T06:30:00Z"),
        ("2026-03-08T02:30:00", "America/New_York", "2026-03-08T07:00:00Z"),  # gap: after it
        ("2026-11-01T01:30:00", "America/New_York", "2026-11-01T05:30:00Z"),  # fold: first
        ("2026-01-01T12:00:00.250Z", "UTC", "2026-01-01T12:00:00.250000Z"),
    ],
)
def test_one_time_run_at_is_normalised_to_utc(run_at, zone, stored):
    schedule = parse_schedule("one_time", {"run_at": run_at}, zone)
    assert isinstance(schedule, OneTimeSchedule)
    assert schedule.to_json() == {"run_at": stored}
    assert parse_schedule("one_time", schedule.to_json(), zone) == schedule


def test_one_time_fires_once():
    schedule = parse_schedule("one_time", '{"run_at": "2026-01-01T12:00:00Z"}')
    assert schedule.next_after(utc("2025-12-31T00:00:00Z")) == utc("2026-01-01T12:00:00Z")
    assert schedule.next_after(utc("2026-01-01T11:59:59Z")) == utc("2026-01-01T12:00:00Z")
    assert schedule.next_after(utc("2026-01-01T12:00:00Z")) is None
    assert schedule.next_after(utc("2027-01-01T00:00:00Z")) is None


def test_one_time_describe():
    schedule = parse_schedule("one_time", {"run_at": "2026-01-01T12:00:00Z"}, "America/New_York")
    assert schedule.describe() == ("once at 2026-01-01T12:00:00Z (2026-01-01 07:00 EST, America/New_York)")
    assert parse_schedule("one_time", {"run_at": "2026-01-01T12:00:00Z"}).describe() == ("once at 2026-01-01T12:00:00Z")


# --- interval ---------------------------------------------------------------------------------


def test_interval_with_start_at_is_anchored_without_drift():
    schedule = parse_schedule("interval", {"every": "30s", "start_at": "2026-01-01T00:00:00Z"})
    assert isinstance(schedule, IntervalSchedule)
    assert schedule.to_json() == {"every": "30s", "start_at": "2026-01-01T00:00:00Z"}
    assert schedule.next_after(utc("2025-06-01T00:00:00Z")) == utc("2026-01-01T00:00:00Z")
    assert schedule.next_after(utc("2026-01-01T00:00:00Z")) == utc("2026-01-01T00:00:30Z")
    assert schedule.next_after(utc("2026-01-01T00:00:29.999Z")) == utc("2026-01-01T00:00:30Z")
    # Far after the anchor: arithmetic, not iteration, and still on the grid.
    assert schedule.next_after(utc("2035-06-01T12:00:10Z")) == utc("2035-06-01T12:00:30Z")


def test_interval_without_start_at_starts_one_interval_after_the_anchor():
    schedule = parse_schedule("interval", {"every": {"minutes": 5}}, anchor=utc("2026-01-01T10:02:00Z"))
    assert schedule.to_json() == {"every": "5m", "start_at": "2026-01-01T10:07:00Z"}
    assert schedule.next_after(utc("2026-01-01T10:02:00Z")) == utc("2026-01-01T10:07:00Z")
    assert schedule.describe() == "every 5m from 2026-01-01T10:07:00Z"


def test_interval_follows_elapsed_time_across_dst():
    schedule = parse_schedule("interval", {"every": "1h", "start_at": "2026-11-01T04:00:00Z"}, "America/New_York")
    assert occurrences_between(schedule, utc("2026-11-01T04:00:00Z"), utc("2026-11-01T08:00:00Z")) == [
        utc("2026-11-01T05:00:00Z"),
        utc("2026-11-01T06:00:00Z"),
        utc("2026-11-01T07:00:00Z"),
        utc("2026-11-01T08:00:00Z"),
    ]


def test_interval_start_at_without_offset_is_local():
    schedule = parse_schedule("interval", {"every": "1d", "start_at": "2026-01-01T09:00:00"}, "Europe/Paris")
    assert schedule.to_json() == {"every": "1d", "start_at": "2026-01-01T08:00:00Z"}


@pytest.mark.parametrize("every", [30, "30", "30s", {"seconds": 30}, "0.5m"])
def test_interval_every_forms_normalise_alike(every):
    schedule = parse_schedule("interval", {"every": every, "start_at": "2026-01-01T00:00:00Z"})
    assert schedule.to_json()["every"] == "30s"


# --- cron -------------------------------------------------------------------------------------


def test_cron_schedule_round_trips():
    schedule = parse_schedule("cron", {"expression": " 0  9 * * 1-5 "}, "Europe/London")
    assert isinstance(schedule, CronSchedule)
    assert schedule.to_json() == {"expression": "0 9 * * 1-5"}
    assert schedule.timezone == "Europe/London"
    assert schedule.describe() == "cron '0 9 * * 1-5' in Europe/London (fixed hour DST rule)"
    assert parse_schedule("cron", json.dumps(schedule.to_json()), "Europe/London") == schedule
    # 2026-07-03 is a Friday; 09:00 BST is 08:00Z.
    assert schedule.next_after(utc("2026-07-03T08:00:00Z")) == utc("2026-07-06T08:00:00Z")


def test_cron_describe_wildcard():
    schedule = parse_schedule("cron", {"expression": "*/5 * * * *"})
    assert schedule.describe() == "cron '*/5 * * * *' in UTC (elapsed time DST rule)"


# --- validation messages ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule_type", "value", "zone", "message"),
    [
        ("weekly", {}, "UTC", "unknown schedule type 'weekly'; use one_time, interval or cron"),
        ("cron", {"expression": "0 9 * * *"}, "Mars/Base", "unknown timezone 'Mars/Base'"),
        ("cron", {"expression": "0 9 * * *"}, "", "timezone must be an IANA name like 'Europe/London', got ''"),
        ("cron", {"expression": "0 9 * * *"}, "../etc/passwd", "unknown timezone '../etc/passwd'"),
        ("cron", {}, "UTC", "cron schedule needs 'expression'"),
        ("one_time", {}, "UTC", "one_time schedule needs 'run_at'"),
        ("interval", {"start_at": "2026-01-01T00:00:00Z"}, "UTC", "interval schedule needs 'every'"),
        (
            "cron",
            {"expression": "0 9 * * *", "timezone": "UTC"},
            "UTC",
            "unknown key 'timezone' in cron schedule; allowed: expression",
        ),
        (
            "interval",
            {"every": "5m", "cron": "x", "at": 1},
            "UTC",
            "unknown keys 'at', 'cron' in interval schedule; allowed: every, start_at",
        ),
        ("interval", {"every": "5m"}, "UTC", "interval schedule needs 'start_at' (or an anchor when it is created)"),
        ("interval", {"every": "0s", "start_at": "2026-01-01T00:00:00Z"}, "UTC", 'interval must be positive, got "0s"'),
        (
            "cron",
            {"expression": "0 0 0 * * *"},
            "UTC",
            "cron expressions have 5 fields (minute hour day month weekday); got 6 "
            "— seconds and years are not supported",
        ),
        (
            "cron",
            {"expression": "0 0 0 * * * 2026"},
            "UTC",
            "cron expressions have 5 fields (minute hour day month weekday); got 7 "
            "— seconds and years are not supported",
        ),
        (
            "cron",
            {"expression": "0 0 30 2 *"},
            "UTC",
            "cron expression '0 0 30 2 *' can never fire: day 30 never occurs in February",
        ),
        ("cron", {"expression": "0 25 * * *"}, "UTC", "invalid hour field '25': 25 is out of range 0-23"),
        ("cron", {"expression": 5}, "UTC", "cron expression must be a string, got int"),
        (
            "one_time",
            {"run_at": "tomorrow"},
            "UTC",
            'run_at must be an ISO 8601 date-time like "2026-01-01T12:00:00Z", got "tomorrow"',
        ),
        ("one_time", {"run_at": 5}, "UTC", 'run_at must be an ISO 8601 date-time like "2026-01-01T12:00:00Z", got 5'),
        (
            "cron",
            "{not json",
            "UTC",
            "schedule value is not valid JSON: Expecting property name enclosed in double quotes (at character 1)",
        ),
        ("cron", "[1, 2]", "UTC", "schedule value must be a JSON object, got list"),
    ],
)
def test_parse_schedule_refusals(schedule_type, value, zone, message):
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(schedule_type, value, zone)
    assert str(caught.value) == message


def test_naive_instants_are_refused_everywhere():
    schedules = [
        parse_schedule("one_time", {"run_at": "2026-01-01T12:00:00Z"}),
        parse_schedule("interval", {"every": "1m", "start_at": "2026-01-01T12:00:00Z"}),
        parse_schedule("cron", {"expression": "* * * * *"}),
    ]
    for schedule in schedules:
        with pytest.raises(ValueError, match="timezone-aware"):
            schedule.next_after(datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_schedule("interval", {"every": "1m"}, anchor=datetime(2026, 1, 1))


# --- options from the CLI / web form ----------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule_type", "options", "value"),
    [
        ("interval", {"every": "30s"}, {"every": "30s"}),
        ("cron", {"cron": "0 9 * * *"}, {"expression": "0 9 * * *"}),
        ("one_time", {"run_at": "2026-01-01T12:00:00Z"}, {"run_at": "2026-01-01T12:00:00Z"}),
        ("cron", {"schedule_value": '{"expression": "@daily"}'}, {"expression": "@daily"}),
        ("interval", {"schedule_value": {"every": {"minutes": 5}}}, {"every": {"minutes": 5}}),
    ],
)
def test_schedule_value_from_options(schedule_type, options, value):
    assert schedule_value_from_options(schedule_type, **options) == value


@pytest.mark.parametrize(
    ("schedule_type", "options", "message"),
    [
        ("interval", {"cron": "0 9 * * *"}, "--cron is only valid for cron schedules"),
        ("cron", {"every": "5m"}, "--every is only valid for interval schedules"),
        ("cron", {"run_at": "2026-01-01T00:00:00Z"}, "--run-at is only valid for one_time schedules"),
        ("interval", {"every": "5m", "cron": "0 9 * * *"}, "--cron is only valid for cron schedules"),
        ("interval", {}, "interval schedules need --every (or --schedule-value)"),
        ("cron", {}, "cron schedules need --cron (or --schedule-value)"),
        ("one_time", {}, "one_time schedules need --run-at (or --schedule-value)"),
        (
            "cron",
            {"cron": "0 9 * * *", "schedule_value": {"expression": "@daily"}},
            "--schedule-value cannot be combined with --cron",
        ),
        ("weekly", {"every": "5m"}, "unknown schedule type 'weekly'; use one_time, interval or cron"),
        ("cron", {"schedule_value": "nope"}, "schedule value is not valid JSON: Expecting value (at character 0)"),
    ],
)
def test_schedule_value_from_options_refusals(schedule_type, options, message):
    with pytest.raises(ScheduleError) as caught:
        schedule_value_from_options(schedule_type, **options)
    assert str(caught.value) == message


# --- occurrences_between and preview ----------------------------------------------------------


def test_occurrences_between_is_exclusive_then_inclusive_and_limited():
    schedule = parse_schedule("cron", {"expression": "0 * * * *"})
    after, until = utc("2026-01-01T00:00:00Z"), utc("2026-01-01T03:00:00Z")
    assert occurrences_between(schedule, after, until) == [
        utc("2026-01-01T01:00:00Z"),
        utc("2026-01-01T02:00:00Z"),
        utc("2026-01-01T03:00:00Z"),
    ]
    assert occurrences_between(schedule, after, until, limit=2) == [
        utc("2026-01-01T01:00:00Z"),
        utc("2026-01-01T02:00:00Z"),
    ]
    assert occurrences_between(schedule, until, after) == []


def test_occurrences_between_stops_when_the_schedule_ends():
    schedule = parse_schedule("one_time", {"run_at": "2026-01-01T12:00:00Z"})
    assert occurrences_between(schedule, utc("2026-01-01T00:00:00Z"), utc("2030-01-01T00:00:00Z")) == [
        utc("2026-01-01T12:00:00Z")
    ]


def test_preview_marks_the_spring_gap():
    schedule = parse_schedule("cron", {"expression": "30 2 * * *"}, "America/New_York")
    items = preview(schedule, utc("2026-03-07T00:00:00Z"), 3)
    assert [item.to_json() for item in items] == [
        {"utc": "2026-03-07T07:30:00Z", "local": "2026-03-07T02:30:00-05:00", "note": None},
        {
            "utc": "2026-03-08T07:00:00Z",
            "local": "2026-03-08T03:00:00-04:00",
            "note": "DST gap: 02:30 does not exist, runs at 03:00",
        },
        {"utc": "2026-03-09T06:30:00Z", "local": "2026-03-09T02:30:00-04:00", "note": None},
    ]


def test_preview_marks_the_fall_fold_for_fixed_and_wildcard_hours():
    fixed = parse_schedule("cron", {"expression": "30 1 * * *"}, "America/New_York")
    assert [item.to_json() for item in preview(fixed, utc("2026-10-31T12:00:00Z"), 2)] == [
        {
            "utc": "2026-11-01T05:30:00Z",
            "local": "2026-11-01T01:30:00-04:00",
            "note": "DST fold: 01:30 occurs twice, runs at the first (EDT)",
        },
        {"utc": "2026-11-02T06:30:00Z", "local": "2026-11-02T01:30:00-05:00", "note": None},
    ]
    hourly = parse_schedule("cron", {"expression": "30 * * * *"}, "America/New_York")
    assert [item.to_json() for item in preview(hourly, utc("2026-11-01T05:00:00Z"), 3)] == [
        {"utc": "2026-11-01T05:30:00Z", "local": "2026-11-01T01:30:00-04:00", "note": None},
        {
            "utc": "2026-11-01T06:30:00Z",
            "local": "2026-11-01T01:30:00-05:00",
            "note": "DST fold: second 01:30 (EST)",
        },
        {"utc": "2026-11-01T07:30:00Z", "local": "2026-11-01T02:30:00-05:00", "note": None},
    ]


def test_preview_items_carry_aware_datetimes():
    schedule = parse_schedule("cron", {"expression": "0 12 * * *"}, "Australia/Lord_Howe")
    (item,) = preview(schedule, utc("2026-01-01T00:00:00Z"), 1)
    assert item == PreviewItem(utc=utc("2026-01-01T01:00:00Z"), local=item.local, note=None)
    assert item.utc.tzinfo is UTC
    assert item.local.isoformat() == "2026-01-01T12:00:00+11:00"


def test_preview_stops_when_the_schedule_ends_and_counts_are_bounded():
    one_time = parse_schedule("one_time", {"run_at": "2026-01-01T12:00:00Z"})
    assert len(preview(one_time, utc("2025-01-01T00:00:00Z"), 10)) == 1
    interval = parse_schedule("interval", {"every": "1s", "start_at": "2026-01-01T00:00:00Z"})
    items = preview(interval, utc("2026-01-01T00:00:00Z"), 1000)
    assert items[-1].utc == utc("2026-01-01T00:00:00Z") + timedelta(seconds=1000)
    for count, message in [
        (0, "preview count must be between 1 and 1000, got 0"),
        (1001, "preview count must be between 1 and 1000, got 1001"),
        (True, "preview count must be a whole number, got True"),
        ("5", "preview count must be a whole number, got '5'"),
    ]:
        with pytest.raises(ScheduleError) as caught:
            preview(interval, utc("2026-01-01T00:00:00Z"), count)
        assert str(caught.value) == message
