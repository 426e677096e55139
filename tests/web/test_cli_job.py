"""`flask job add|edit|list|catalog|preview|trigger|enable|disable|delete`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db as database
from app.models import Execution, Job
from app.tasks import all_tasks
from tests.factories import make_execution, make_job, make_queue
from tests.helpers.cli import assert_error, assert_usage_error, cli_events, ok, ok_json, row_counts


def job_named(name: str) -> Job | None:
    database.session.expire_all()
    return database.session.scalar(select(Job).where(Job.name == name))


def parse_z(text: str) -> datetime:
    assert text.endswith("Z"), text
    return datetime.fromisoformat(text[:-1] + "+00:00")


# --- add ----------------------------------------------------------------------------------------


def test_add_creates_the_job_and_audits_it(cli):
    out = ok(cli("job", "add", "Every minute", "always_succeed", "interval", "--every", "60s"))
    job = job_named("Every minute")
    assert job is not None and job.enabled and job.schedule["every"] == "1m"
    assert f"Created job {job.id} 'Every minute'" in out and "Next run:" in out
    [event] = cli_events("job_created")
    assert event.job_id == job.id and event.payload["task"] == "always_succeed"


def test_add_json_prints_the_created_job(cli):
    doc = ok_json(
        cli(
            "job",
            "add",
            "nightly",
            "generate_report",
            "cron",
            "--cron",
            "30 1 * * *",
            "--timezone",
            "America/New_York",
            "--config",
            '{"hours": 12}',
            "--json",
        )
    )
    job = job_named("nightly")
    assert doc["id"] == job.id and doc["name"] == "nightly" and doc["task"] == "generate_report"
    assert doc["schedule_type"] == "cron" and doc["schedule"] == {"expression": "30 1 * * *"}
    assert doc["config"] == {"hours": 12} and doc["timezone"] == "America/New_York" and doc["enabled"] is True
    assert parse_z(doc["next_run_at"]) == job.next_run_at
    assert parse_z(doc["created_at"]) == job.created_at


def test_add_takes_every_policy_option(cli):
    make_queue("reports")
    ok(
        cli(
            "job",
            "add",
            "tuned",
            "sleep_for_seconds",
            "interval",
            "--every",
            "5m",
            "--config",
            '{"seconds": 1}',
            "--description",
            "a tuned job",
            "--overlap-policy",
            "queue",
            "--misfire-policy",
            "catch_up",
            "--misfire-grace-seconds",
            "15",
            "--max-attempts",
            "5",
            "--retry-backoff-seconds",
            "7",
            "--timeout-seconds",
            "90",
            "--alert-mode",
            "log_only",
            "--queue",
            "reports",
            "--priority",
            "-3",
            "--retention-count",
            "20",
            "--retention-days",
            "0",
            "--disabled",
        )
    )
    job = job_named("tuned")
    assert (
        job.description,
        job.overlap_policy,
        job.misfire_policy,
        job.misfire_grace_seconds,
        job.max_attempts,
        job.retry_backoff_seconds,
        job.timeout_seconds,
        job.alert_mode,
        job.queue,
        job.priority,
        job.retention_count,
        job.retention_days,
        job.enabled,
    ) == ("a tuned job", "queue", "catch_up", 15, 5, 7, 90, "log_only", "reports", -3, 20, 0, False)


def test_add_one_time_reads_a_naive_run_at_in_the_job_timezone(cli):
    ok(
        cli(
            "job",
            "add",
            "once",
            "always_succeed",
            "one_time",
            "--run-at",
            "2099-07-01T09:00:00",
            "--timezone",
            "Europe/Paris",
        )
    )
    assert job_named("once").next_run_at == datetime(2099, 7, 1, 7, 0, tzinfo=UTC)


def test_add_accepts_a_schedule_value_instead_of_the_shortcuts(cli):
    doc = ok_json(
        cli("job", "add", "sv", "always_succeed", "interval", "--schedule-value", '{"every": {"minutes": 5}}', "--json")
    )
    assert doc["schedule"]["every"] == "5m"
    assert parse_z(doc["next_run_at"]) - utcnow() <= timedelta(minutes=5)


ADD_ERRORS = [
    (["bad", "not_a_task", "interval", "--every", "30s"], "unknown task 'not_a_task'"),
    (["bad", "always_succeed", "cron", "--cron", "61 * * * *"], "schedule: "),
    (["bad", "always_succeed", "cron", "--cron", "0 0 30 2 *"], "can never fire"),
    (["bad", "always_succeed", "cron", "--cron", "0 0 * * * *"], "5 fields"),
    (["bad", "always_succeed", "cron", "--cron", "@daily", "--timezone", "Mars/Base"], "unknown timezone 'Mars/Base'"),
    (["bad", "always_succeed", "interval", "--every", "0s"], "interval must be positive"),
    (["bad", "always_succeed", "interval", "--every", "soon"], "interval"),
    (["bad", "always_succeed", "interval", "--every", "30s", "--config", "{nope"], "config is not valid JSON"),
    (["bad", "always_succeed", "interval", "--every", "30s", "--config", "[1]"], "must be a JSON object"),
    (["bad", "always_succeed", "interval", "--schedule-value", '{"every": '], "schedule value is not valid JSON"),
    (
        ["bad", "sleep_for_seconds", "interval", "--every", "30s", "--config", '{"seconds": -1}'],
        "invalid config for task 'sleep_for_seconds'",
    ),
    (["bad", "sleep_for_seconds", "interval", "--every", "30s"], "'seconds' is required"),
    (["bad", "always_succeed", "interval", "--every", "30s", "--config", '{"colour": 1}'], "unknown key(s) 'colour'"),
    (["bad", "always_succeed", "interval", "--cron", "* * * * *"], "--cron is only valid for cron schedules"),
    (["bad", "always_succeed", "interval"], "interval schedules need --every"),
    (
        ["bad", "always_succeed", "interval", "--every", "5m", "--schedule-value", '{"every": "5m"}'],
        "--schedule-value cannot be combined with --every",
    ),
    (["bad", "always_succeed", "one_time", "--run-at", "2001-01-01T00:00:00Z"], "is in the past"),
    (["bad", "always_succeed", "one_time", "--run-at", "tomorrow"], "ISO 8601"),
    (["bad", "always_succeed", "interval", "--every", "30s", "--max-attempts", "0"], "max_attempts: must be between"),
    (["bad", "always_succeed", "interval", "--every", "30s", "--queue", "Bad Queue"], "queue: "),
    (["  ", "always_succeed", "interval", "--every", "30s"], "name"),
]


@pytest.mark.parametrize("args,message", ADD_ERRORS, ids=[m for _, m in ADD_ERRORS])
def test_add_refuses_bad_input_with_one_line_and_writes_nothing(cli, args, message):
    before = row_counts()
    assert_error(cli("job", "add", *args), message)
    assert row_counts() == before


def test_add_refuses_a_duplicate_name(cli):
    make_job("taken")
    before = row_counts()
    assert_error(
        cli("job", "add", "taken", "always_succeed", "interval", "--every", "30s"), "a job named 'taken' already exists"
    )
    assert row_counts() == before


@pytest.mark.parametrize(
    "args,message",
    [
        ([], "Missing argument 'NAME'"),
        (["x", "always_succeed"], "Missing argument"),
        (["x", "always_succeed", "weekly"], "'weekly' is not one of"),
        (["x", "always_succeed", "interval", "--every", "1m", "--overlap-policy", "maybe"], "'maybe' is not one of"),
        (
            ["x", "always_succeed", "interval", "--every", "1m", "--max-attempts", "many"],
            "'many' is not a valid integer",
        ),
    ],
)
def test_add_usage_errors_exit_2(cli, args, message):
    before = row_counts()
    assert_usage_error(cli("job", "add", *args), message)
    assert row_counts() == before


# --- edit ---------------------------------------------------------------------------------------


def test_edit_changes_the_schedule_and_recomputes_the_next_run(cli):
    job = make_job("ed", schedule={"every": "1h"})
    old_next = job.next_run_at
    out = ok(cli("job", "edit", job.id, "--every", "5m", "--priority", "4"))
    assert "Updated job" in out and "schedule" in out and "priority" in out
    job = job_named("ed")
    assert job.schedule["every"] == "5m" and job.priority == 4 and job.next_run_at < old_next
    [event] = cli_events("job_updated")
    assert event.job_id == job.id and {"schedule", "priority"} <= set(event.payload["fields"])


def test_edit_json_prints_the_job(cli):
    job = make_job("ed")
    doc = ok_json(
        cli(
            "job",
            "edit",
            job.id,
            "--name",
            "renamed",
            "--schedule-type",
            "cron",
            "--cron",
            "0 9 * * 1-5",
            "--timezone",
            "Asia/Tokyo",
            "--json",
        )
    )
    assert doc["id"] == job.id and doc["name"] == "renamed" and doc["schedule_type"] == "cron"
    assert doc["schedule"] == {"expression": "0 9 * * 1-5"} and doc["timezone"] == "Asia/Tokyo"
    local = parse_z(doc["next_run_at"]).astimezone(__import__("zoneinfo").ZoneInfo("Asia/Tokyo"))
    assert (local.hour, local.minute) == (9, 0) and local.weekday() < 5


def test_edit_task_revalidates_the_stored_config(cli):
    job = make_job("ed", task="always_succeed", config={"message": "hi"})
    before = row_counts()
    assert_error(
        cli("job", "edit", job.id, "--task", "sleep_for_seconds"), "invalid config for task 'sleep_for_seconds'"
    )
    assert row_counts() == before and job_named("ed").task == "always_succeed"
    ok(cli("job", "edit", job.id, "--task", "always_fail"))
    assert job_named("ed").task == "always_fail"
    ok(cli("job", "edit", job.id, "--task", "sleep_for_seconds", "--config", '{"seconds": 2}'))
    assert job_named("ed").config == {"seconds": 2}


def test_edit_disabled_cancels_queued_runs_and_enabled_resumes(cli):
    job = make_job("ed")
    pending = make_execution(job, "pending")
    ok(cli("job", "edit", job.id, "--disabled"))
    database.session.expire_all()
    assert job_named("ed").enabled is False
    assert database.session.get(Execution, pending.id).status == "cancelled"
    ok(cli("job", "edit", job.id, "--enabled"))
    assert job_named("ed").enabled is True
    assert [e.type for e in cli_events()] == ["job_disabled", "job_updated", "job_enabled", "job_updated"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--enabled", "--disabled"], "--enabled and --disabled cannot be used together"),
        ([], "nothing to change"),
        (["--cron", "0 * * * *"], "--cron is only valid for cron schedules"),
        (["--schedule-type", "cron"], "changing the schedule type needs a new schedule value"),
        (["--timezone", "Nowhere/Else"], "unknown timezone"),
        (["--config", '{"seconds": 1}'], "unknown key(s) 'seconds'"),
        (["--name", "other"], "a job named 'other' already exists"),
        (["--every", "-5m"], "interval"),
    ],
)
def test_edit_refuses_bad_input_and_changes_nothing(cli, args, message):
    job = make_job("ed")
    make_job("other")
    snapshot = (job.name, job.schedule, job.timezone, job.config, job.enabled, job.next_run_at)
    before = row_counts()
    assert_error(cli("job", "edit", job.id, *args), message)
    assert row_counts() == before
    job = job_named("ed")
    assert (job.name, job.schedule, job.timezone, job.config, job.enabled, job.next_run_at) == snapshot


def test_edit_of_a_missing_job(cli):
    assert_error(cli("job", "edit", "99", "--every", "1m"), "job 99 does not exist")


# --- list and catalog ---------------------------------------------------------------------------


def test_list_shows_utc_and_local_next_runs(cli):
    assert "No jobs yet" in ok(cli("job", "list"))
    make_job("a-job")
    make_job(
        "ny",
        task="generate_report",
        schedule_type="cron",
        schedule={"expression": "0 9 * * *"},
        timezone="America/New_York",
    )
    lines = ok(cli("job", "list")).splitlines()
    assert lines[0].split() == [
        "ID",
        "NAME",
        "TASK",
        "SCHEDULE",
        "TIMEZONE",
        "ENABLED",
        "NEXT",
        "RUN",
        "(UTC)",
        "NEXT",
        "RUN",
        "(LOCAL)",
    ]
    assert "a-job" in lines[1] and "every 1m" in lines[1]
    assert "cron 0 9 * * *" in lines[2] and "09:00:00 E" in lines[2]  # EST or EDT
    # columns line up: every row starts its NAME column at the same offset
    assert {line.index(name) for line, name in zip(lines[1:], ("a-job", "ny"))} == {lines[0].index("NAME")}


def test_list_json(cli):
    assert ok_json(cli("job", "list", "--json")) == []
    job = make_job("a-job")
    [doc] = ok_json(cli("job", "list", "--json"))
    assert doc["id"] == job.id and doc["name"] == "a-job" and doc["next_run_at"].endswith("Z")


def test_catalog_lists_every_task_with_its_config(cli):
    out = ok(cli("job", "catalog"))
    for spec in all_tasks():
        assert f"\n{spec.name}\n" in f"\n{out}"
    assert "seconds (number, required)" in out
    docs = ok_json(cli("job", "catalog", "--json"))
    assert [d["name"] for d in docs] == [spec.name for spec in all_tasks()]
    assert all(d["description"] and d["schema"]["type"] == "object" for d in docs)


# --- preview --------------------------------------------------------------------------------------


def test_preview_marks_the_dst_fold(cli):
    job = make_job("ny", schedule_type="cron", schedule={"expression": "30 1 * * *"}, timezone="America/New_York")
    out = ok(cli("job", "preview", job.id, "--after", "2026-10-30T12:00:00", "--count", "3"))
    assert "cron '30 1 * * *' in America/New_York" in out
    assert "2026-11-01 05:30:00Z  2026-11-01 01:30:00 EDT" in out and "DST fold" in out
    assert len(out.splitlines()) == 5  # title, header, three rows


def test_preview_json(cli):
    job = make_job("ny", schedule_type="cron", schedule={"expression": "30 2 * * *"}, timezone="America/New_York")
    items = ok_json(cli("job", "preview", job.id, "--after", "2026-03-07T12:00:00Z", "--count", "2", "--json"))
    assert items == [
        {"utc": "2026-03-08T07:00:00Z", "local": "2026-03-08T03:00:00-04:00", "note": items[0]["note"]},
        {"utc": "2026-03-09T06:30:00Z", "local": "2026-03-09T02:30:00-04:00", "note": None},
    ]
    assert "DST gap" in items[0]["note"]


def test_preview_errors(cli):
    assert_error(cli("job", "preview", "42"), "job 42 does not exist")
    job = make_job()
    assert_error(cli("job", "preview", job.id, "--after", "yesterday"), "--after must be an ISO 8601")
    assert_usage_error(cli("job", "preview", job.id, "--count", "0"), "0 is not in the range")


# --- trigger, enable, disable, delete ---------------------------------------------------------------


def test_trigger_creates_a_manual_execution(cli):
    job = make_job()
    out = ok(cli("job", "trigger", job.id))
    [execution] = database.session.scalars(select(Execution)).all()
    assert f"execution {execution.id} is pending" in out
    assert (execution.trigger, execution.status) == ("manual", "pending")
    doc = ok_json(cli("job", "trigger", job.id, "--json"))
    assert doc["job_id"] == job.id and doc["trigger"] == "manual" and doc["status"] == "pending"
    assert doc["scheduled_for"].endswith("Z") and doc["attempts"] == 0
    assert [e.execution_id for e in cli_events("job_triggered")] == [execution.id, doc["id"]]


def test_trigger_refuses_a_disabled_or_missing_job(cli):
    job = make_job(enabled=False)
    before = row_counts()
    assert_error(cli("job", "trigger", job.id), "is disabled; enable it before triggering")
    assert_error(cli("job", "trigger", "77"), "job 77 does not exist")
    assert row_counts() == before


def test_disable_cancels_queued_runs_keeps_next_run_and_enable_resumes(cli):
    job = make_job()
    next_run = job.next_run_at
    queued = [make_execution(job, "pending"), make_execution(job, "retry_scheduled", attempts=1)]
    running = make_execution(job, "running", attempts=1)
    out = ok(cli("job", "disable", job.id))
    assert "disabled; cancelled 2 queued execution(s)" in out
    database.session.expire_all()
    assert [database.session.get(Execution, e.id).status for e in queued] == ["cancelled", "cancelled"]
    assert database.session.get(Execution, running.id).status == "running"
    assert job_named(job.name).next_run_at == next_run
    assert "was already disabled" in ok(cli("job", "disable", job.id))
    doc = ok_json(cli("job", "enable", job.id, "--json"))
    assert doc["enabled"] is True and doc["next_run_at"].endswith("Z")
    assert "was already enabled" in ok(cli("job", "enable", job.id))
    assert [e.type for e in cli_events()] == ["job_disabled", "job_enabled"]


def test_enable_and_disable_errors(cli):
    assert_error(cli("job", "enable", "5"), "job 5 does not exist")
    assert_error(cli("job", "disable", "5"), "job 5 does not exist")
    fired = make_job("fired", schedule_type="one_time", schedule={"run_at": "2099-01-01T00:00:00Z"}, enabled=False)
    fired.next_run_at = None  # as after the scheduler fired it
    database.session.commit()
    before = row_counts()
    assert_error(cli("job", "enable", fired.id), "has already fired")
    assert row_counts() == before


def test_delete_needs_yes(cli):
    job = make_job("keep-me")
    make_execution(job, "succeeded", attempts=1)
    before = row_counts()
    assert_error(cli("job", "delete", job.id), "add --yes to confirm")
    assert row_counts() == before
    assert_error(cli("job", "delete", "404", "--yes"), "job 404 does not exist")
    assert row_counts() == before
    assert "Deleted job" in ok(cli("job", "delete", job.id, "--yes"))
    assert job_named("keep-me") is None
    assert database.session.scalars(select(Execution)).all() == []
    [event] = cli_events("job_deleted")
    assert event.job_id == job.id and event.payload["name"] == "keep-me"
