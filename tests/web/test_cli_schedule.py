"""`flask schedule preview`: any schedule, no job needed."""

from __future__ import annotations

import pytest

from tests.helpers.cli import assert_error, assert_usage_error, ok, ok_json, row_counts


def test_preview_cron_explains_the_spring_forward_gap(cli):
    out = ok(
        cli(
            "schedule",
            "preview",
            "--cron",
            "30 2 * * *",
            "--timezone",
            "America/New_York",
            "--after",
            "2026-03-07",
            "--count",
            "3",
        )
    )
    lines = out.splitlines()
    assert lines[0] == "Schedule: cron '30 2 * * *' in America/New_York (fixed hour DST rule)"
    assert lines[1] == "After:    2026-03-07 05:00:00Z"  # a naive --after is local to --timezone
    assert "2026-03-08 07:00:00Z  2026-03-08 03:00:00 EDT" in lines[4] and "DST gap" in lines[4]
    assert len(lines) == 6


def test_preview_json_is_a_list_of_utc_local_note(cli):
    items = ok_json(
        cli(
            "schedule",
            "preview",
            "--every",
            "90m",
            "--after",
            "2026-01-01T00:00:00Z",
            "--count",
            "2",
            "--timezone",
            "Asia/Kolkata",
            "--json",
        )
    )
    assert items == [
        {"utc": "2026-01-01T01:30:00Z", "local": "2026-01-01T07:00:00+05:30", "note": None},
        {"utc": "2026-01-01T03:00:00Z", "local": "2026-01-01T08:30:00+05:30", "note": None},
    ]


@pytest.mark.parametrize(
    "args,first_utc",
    [
        (["--schedule-value", '{"expression": "@hourly"}'], "2026-05-01T11:00:00Z"),
        (["--schedule-value", '{"every": "15m", "start_at": "2026-05-01T10:05:00Z"}'], "2026-05-01T10:35:00Z"),
        (["--schedule-value", '{"run_at": "2026-05-02T00:00:00Z"}'], "2026-05-02T00:00:00Z"),
        (["--run-at", "2026-05-01T12:00:00"], "2026-05-01T12:00:00Z"),
    ],
)
def test_preview_accepts_every_schedule_form(cli, args, first_utc):
    items = ok_json(cli("schedule", "preview", *args, "--after", "2026-05-01T10:30:00Z", "--json"))
    assert items[0]["utc"] == first_utc


def test_a_one_time_schedule_in_the_past_has_no_fire_times(cli):
    out = ok(cli("schedule", "preview", "--run-at", "2020-01-01T00:00:00Z"))
    assert "(no fire times after that instant)" in out
    assert ok_json(cli("schedule", "preview", "--run-at", "2020-01-01T00:00:00Z", "--json")) == []


@pytest.mark.parametrize(
    "args,message",
    [
        (["--cron", "0 0 31 4 *"], "can never fire"),
        (["--cron", "* * * * * *"], "5 fields"),
        (["--every", "0m"], "interval must be positive"),
        (["--every", "5m", "--timezone", "Atlantis/Capital"], "unknown timezone 'Atlantis/Capital'"),
        (["--schedule-value", "{oops"], "--schedule-value is not valid JSON"),
        (["--schedule-value", '{"when": "later"}'], '--schedule-value needs exactly one of "expression"'),
        (["--schedule-value", '{"expression": "@daily", "colour": 1}'], "unknown key 'colour'"),
        (["--every", "5m", "--after", "next week"], "--after must be an ISO 8601"),
    ],
)
def test_preview_refuses_bad_schedules_with_one_line(cli, args, message):
    before = row_counts()
    assert_error(cli("schedule", "preview", *args), message)
    assert row_counts() == before


@pytest.mark.parametrize(
    "args,message",
    [
        ([], "give exactly one of --cron, --every, --run-at or --schedule-value"),
        (["--cron", "@daily", "--every", "5m"], "(got --cron, --every)"),
        (["--every", "5m", "--count", "1001"], "1001 is not in the range"),
    ],
)
def test_preview_usage_errors(cli, args, message):
    assert_usage_error(cli("schedule", "preview", *args), message)
