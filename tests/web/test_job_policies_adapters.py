"""Job policies through the adapters: the `flask job add|edit|list` options and
`--json`, and the web form's fields with their errors inline."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.extensions import db as database
from app.models import Job
from tests.factories import make_execution, make_job
from tests.helpers.cli import assert_error, assert_usage_error, ok, ok_json
from tests.helpers.web import job_form, signed_in_client


def job_named(name: str) -> Job | None:
    database.session.expire_all()
    return database.session.scalar(select(Job).where(Job.name == name))


def errors(body: str) -> list[str]:
    return re.findall(r'class="error-text"[^>]*>([^<]*)<', body)


# --- the CLI ------------------------------------------------------------------------------------


def test_add_takes_every_policy_option_and_json_shows_them(cli):
    doc = ok_json(
        cli(
            "job", "add", "limited", "always_succeed", "interval", "--every", "2w",
            "--max-runs", "3", "--start-at", "2030-01-01T09:00:00Z", "--end-at", "2030-06-01T00:00:00Z",
            "--retry-kind", "linear", "--retry-backoff-seconds", "5", "--retry-max-delay-seconds", "60",
            "--retry-jitter", "0.25", "--timeout-seconds", "none", "--success-ttl-seconds", "3600",
            "--failure-ttl-seconds", "0", "--queued-ttl-seconds", "120", "--json",
        )
    )  # fmt: skip
    assert doc["max_runs"] == 3 and doc["runs_created"] == 0 and doc["disabled_reason"] is None
    assert (doc["start_at"], doc["end_at"]) == ("2030-01-01T09:00:00Z", "2030-06-01T00:00:00Z")
    assert (doc["retry_kind"], doc["retry_backoff_seconds"], doc["retry_max_delay_seconds"]) == ("linear", 5, 60)
    assert doc["retry_jitter"] == 0.25 and doc["timeout_seconds"] is None
    assert (doc["success_ttl_seconds"], doc["failure_ttl_seconds"], doc["queued_ttl_seconds"]) == (3600, 0, 120)
    # start_at anchors the interval: it is the first run
    assert doc["next_run_at"] == "2030-01-01T09:00:00Z" and doc["schedule"]["every"] == "2w"
    job = job_named("limited")
    assert job.timeout_seconds is None and job.retry_jitter == 0.25


def test_defaults_without_the_options(cli):
    doc = ok_json(cli("job", "add", "plain", "always_succeed", "interval", "--every", "1m", "--json"))
    assert (doc["max_runs"], doc["start_at"], doc["end_at"], doc["queued_ttl_seconds"]) == (None, None, None, None)
    assert (doc["retry_kind"], doc["retry_jitter"], doc["retry_max_delay_seconds"]) == ("exponential", 0.0, None)
    assert (doc["timeout_seconds"], doc["success_ttl_seconds"], doc["failure_ttl_seconds"]) == (30, -1, -1)


@pytest.mark.parametrize(
    "options, fragment",
    [
        (["--max-runs", "0"], "max_runs: must be between 1 and 1000000000, got 0"),
        (["--timeout-seconds", "never"], "timeout_seconds: must be a whole number, got 'never'"),
        (["--retry-jitter", "1.5"], "retry_jitter: must be between 0 and 1, got 1.5"),
        (["--retry-jitter", "lots"], "retry_jitter: must be a number between 0 and 1, got 'lots'"),
        (["--success-ttl-seconds", "-2"], "success_ttl_seconds: must be between -1 and"),
        (["--queued-ttl-seconds", "0"], "queued_ttl_seconds: must be between 1 and"),
        (["--start-at", "tomorrow"], "start_at: must be an ISO 8601 date and time"),
        (
            ["--start-at", "2030-01-02T00:00:00Z", "--end-at", "2030-01-01T00:00:00Z"],
            "end_at: must be after start_at",
        ),
    ],
)
def test_bad_policy_values_are_one_line_errors_and_store_nothing(cli, options, fragment):
    assert_error(cli("job", "add", "bad", "always_succeed", "interval", "--every", "1m", *options), fragment)
    assert job_named("bad") is None


def test_an_unknown_retry_kind_is_a_usage_error(cli):
    assert_usage_error(
        cli("job", "add", "bad", "always_succeed", "interval", "--every", "1m", "--retry-kind", "quadratic"),
        "quadratic",
    )


def test_edit_sets_and_clears_policies(cli):
    job = make_job("edited", timeout_seconds=30)
    doc = ok_json(cli("job", "edit", job.id, "--timeout-seconds", "none", "--max-runs", "5", "--json"))
    assert (doc["timeout_seconds"], doc["max_runs"]) == (None, 5)
    doc = ok_json(cli("job", "edit", job.id, "--timeout-seconds", "45", "--max-runs", "none", "--json"))
    assert (doc["timeout_seconds"], doc["max_runs"]) == (45, None)


def test_list_says_why_the_system_disabled_a_job(cli):
    job = make_job("finished")
    database.session.execute(
        Job.__table__.update()
        .where(Job.id == job.id)
        .values(enabled=False, disabled_reason="max_runs reached: 3 scheduled runs created")
    )
    database.session.commit()
    out = ok(cli("job", "list"))
    assert f"Job {job.id} 'finished' disabled: max_runs reached: 3 scheduled runs created" in out
    [doc] = ok_json(cli("job", "list", "--json"))
    assert doc["disabled_reason"] == "max_runs reached: 3 scheduled runs created" and doc["enabled"] is False


def test_execution_list_filters_expired(cli):
    job = make_job("ttl")
    expired = make_execution(job, "expired")
    make_execution(job, "succeeded")
    docs = ok_json(cli("execution", "list", "--status", "expired", "--json"))
    assert [doc["id"] for doc in docs] == [expired.id] and docs[0]["status"] == "expired"


# --- the web form -------------------------------------------------------------------------------


@pytest.fixture
def operator(app):
    return signed_in_client(app, role="operator")


def test_the_form_creates_a_job_with_policies_and_an_empty_timeout_is_no_limit(app, operator):
    response = operator.post(
        "/jobs/new",
        job_form(
            name="web-limited",
            timeout_seconds="",
            max_runs="4",
            end_at="2031-01-01T00:00:00Z",
            retry_kind="fixed",
            retry_jitter="0.1",
            queued_ttl_seconds="600",
            success_ttl_seconds="0",
        ),
    )
    assert response.status_code == 303, errors(response.get_data(as_text=True))
    job = job_named("web-limited")
    assert (job.timeout_seconds, job.max_runs, job.retry_kind, job.retry_jitter) == (None, 4, "fixed", 0.1)
    assert (job.queued_ttl_seconds, job.success_ttl_seconds) == (600, 0)
    page = operator.get(f"/jobs/{job.id}").get_data(as_text=True)
    assert "no limit" in page and "0 of 4 runs created" in page and "expires if not started within 600 s" in page
    edit = operator.get(f"/jobs/{job.id}/edit").get_data(as_text=True)
    assert (
        re.search(r'name="timeout_seconds"[^>]*value=""', edit) or 'name="timeout_seconds" type="text" value=""' in edit
    )


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("retry_jitter", "2", "must be between 0 and 1, got 2.0"),
        ("max_runs", "abc", "must be a whole number, got 'abc'"),
        ("start_at", "next week", "must be an ISO 8601 date and time, e.g. 2026-01-01T12:00:00Z, got 'next week'"),
        ("failure_ttl_seconds", "-5", "must be between -1 and 315360000, got -5"),
    ],
)
def test_bad_policy_values_are_shown_inline(app, operator, field, value, message):
    response = operator.post("/jobs/new", job_form(name="web-bad", **{field: value}))
    assert response.status_code == 400
    body = response.get_data(as_text=True)
    assert message in [e.replace("&#39;", "'") for e in errors(body)]
    assert job_named("web-bad") is None


def test_the_executions_list_filters_expired_runs_with_their_badge(app, operator):
    job = make_job("ttl-web")
    expired = make_execution(job, "expired", reason="queued TTL passed: not started within 30s of becoming available")
    make_execution(job, "succeeded")
    body = operator.get("/executions/?status=expired").get_data(as_text=True)
    assert f"/executions/{expired.id}" in body and "status-expired" in body
    assert body.count("status-succeeded") == 0


def test_the_job_page_says_a_finished_job_is_running_its_last_runs(app, operator):
    job = make_job("finishing")
    database.session.execute(
        Job.__table__.update()
        .where(Job.id == job.id)
        .values(next_run_at=None, disabled_reason="end_at reached: no run after 2030-01-01T00:00:00Z")
    )
    database.session.commit()
    body = operator.get(f"/jobs/{job.id}").get_data(as_text=True)
    assert "Finished: end_at reached: no run after 2030-01-01T00:00:00Z" in body
    assert "end_at reached" in operator.get("/jobs/").get_data(as_text=True)
