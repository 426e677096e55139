"""Schedule lint: one warning per suspicious schedule, none for ordinary ones."""

from datetime import UTC, datetime

import pytest

from app.scheduling import parse_schedule
from app.scheduling.lint import lint_json, lint_schedule

NOW = datetime(2026, 1, 10, 12, tzinfo=UTC)


def codes(schedule_type, value, zone="UTC", timeout=30, now=NOW):
    warnings = lint_schedule(parse_schedule(schedule_type, value, zone), now=now, timeout_seconds=timeout)
    return [w.code for w in warnings], warnings


def test_uneven_minute_step():
    found, warnings = codes("cron", {"expression": "*/7 * * * *"})
    assert found == ["uneven_step"]
    assert "*/7" in warnings[0].message and "4 minutes" in warnings[0].message


def test_uneven_hour_step():
    assert codes("cron", {"expression": "0 */5 * * *"})[0] == ["uneven_step"]


def test_fixed_time_in_a_dst_gap():
    found, warnings = codes("cron", {"expression": "30 2 * * *"}, "America/New_York")
    assert found == ["dst_gap"]
    assert "2026-03-08" in warnings[0].message and "03:00" in warnings[0].message


def test_fixed_time_in_a_dst_fold():
    found, warnings = codes("cron", {"expression": "30 1 * * *"}, "America/New_York")
    assert found == ["dst_fold"]
    assert "2026-11-01" in warnings[0].message


def test_dst_in_a_half_hour_zone():
    # Lord Howe moves by 30 minutes at 02:00 local in October (gap 02:00-02:30).
    assert "dst_gap" in codes("cron", {"expression": "15 2 * * *"}, "Australia/Lord_Howe")[0]


def test_denser_than_timeout_cron_and_interval():
    assert codes("cron", {"expression": "* * * * *"}, timeout=300)[0] == ["denser_than_timeout"]
    found, warnings = codes("interval", {"every": "1m", "start_at": "2026-01-01T00:00:00Z"}, timeout=120)
    assert found == ["denser_than_timeout"] and warnings[0].field == "timeout_seconds"


def test_rarely_fires_on_feb_29():
    found, warnings = codes("cron", {"expression": "0 0 29 2 *"})
    assert found == ["rare"]
    assert "2028-02-29" in warnings[0].message and "2032-02-29" in warnings[0].message


def test_one_time_in_the_past():
    assert codes("one_time", {"run_at": "2025-01-01T00:00:00Z"})[0] == ["one_time_past"]


@pytest.mark.parametrize(
    ("schedule_type", "value", "zone"),
    [
        ("cron", {"expression": "0 9 * * 1-5"}, "America/New_York"),
        ("cron", {"expression": "0 * * * *"}, "America/New_York"),
        ("cron", {"expression": "*/15 * * * *"}, "Europe/Paris"),
        ("cron", {"expression": "*/10 * * * *"}, "UTC"),
        ("cron", {"expression": "0 0 1 * *"}, "America/Santiago"),
        ("cron", {"expression": "@yearly"}, "UTC"),
        ("cron", {"expression": "0 4 * * *"}, "Europe/London"),
        ("interval", {"every": "30s", "start_at": "2026-01-01T00:00:00Z"}, "UTC"),
        ("interval", {"every": "7m", "start_at": "2026-01-01T00:00:00Z"}, "UTC"),
        ("one_time", {"run_at": "2027-01-01T00:00:00Z"}, "UTC"),
    ],
)
def test_ordinary_schedules_have_no_warnings(schedule_type, value, zone):
    assert codes(schedule_type, value, zone)[0] == []


def test_json_shape():
    _, warnings = codes("cron", {"expression": "*/7 * * * *"})
    assert lint_json(warnings) == [{"code": "uneven_step", "field": "schedule", "message": warnings[0].message}]
