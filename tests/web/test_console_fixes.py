"""What a first-time user tripped over in the console, fixed and kept fixed, on both databases."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from app.extensions import db
from app.models import Attempt, DeadLetter
from app.services.errors import ValidationFailed
from app.services.use_cases import jobs
from tests.factories import make_execution, make_job, utc
from tests.helpers.web import signed_in_client

NOW = utc(2026, 6, 1, 12)


@pytest.fixture
def operator(app):
    return signed_in_client(app, "operator")


def _dead_letter(job, status: str) -> None:
    execution = make_execution(job, status, attempts=job.max_attempts)
    db.session.add(DeadLetter(execution_id=execution.id, job_id=job.id, reason="attempts exhausted", created_at=NOW))
    db.session.commit()


def test_dead_letters_are_one_figure_on_the_dashboard_and_the_health_page(app, operator):
    job = make_job("flaky", max_attempts=2)
    _dead_letter(job, "failed")
    _dead_letter(job, "timed_out")
    _dead_letter(job, "dead_lettered")
    make_execution(job, "failed")  # failed with attempts left to nobody: not a dead letter

    for path in ("/dashboard/", "/health/"):
        body = operator.get(path).get_data(as_text=True)
        attention = re.search(r'id="needs-attention".*?</d[dl]>', body, re.S).group(0)
        assert "3 dead letters" in attention, path
        # The status of the same name is not counted beside it as a second, smaller figure.
        counts = body.split('id="needs-attention"', 1)[1].split("</section>", 1)[0]
        assert "status-dead_lettered" not in counts, path


def test_the_execution_page_explains_the_dead_lettered_status(app, operator):
    job = make_job("lost", max_attempts=1)
    execution = make_execution(job, "dead_lettered")
    body = operator.get(f"/executions/{execution.id}").get_data(as_text=True)
    assert "lease expired" in body


def test_a_retried_execution_shows_its_first_start_total_time_and_attempts(app, operator):
    job = make_job("retried", max_attempts=3)
    execution = make_execution(job, "succeeded", now=NOW, attempts=3, seconds=2)
    first = db.session.query(Attempt).filter_by(execution_id=execution.id, number=1).one()
    first.started_at = NOW - timedelta(minutes=5)
    db.session.commit()

    listing = operator.get("/executions/").get_data(as_text=True)
    assert "2026-06-01 11:55:00" in listing  # the first attempt's start, not the last one's
    assert "5 m 00 s" in listing and "3/3" in listing
    page = operator.get(f"/executions/{execution.id}").get_data(as_text=True)
    assert "First started" in page and "2026-06-01 11:55:00 UTC" in page
    assert "Total time" in page and "5 m 00 s" in page and "last attempt 2.00 s" in page


def test_a_disabled_job_shows_no_countdown(app, operator):
    job = make_job("resting", every="1h")
    jobs.disable_job(job.id, now=NOW, actor="test")
    body = operator.get(f"/jobs/{job.id}").get_data(as_text=True)
    next_run = re.search(r'id="job-next-run">(.*?)</dd>', body, re.S).group(1)
    assert "none while disabled" in next_run and " ago" not in next_run and "in " not in next_run.split("(")[0]


def test_resolving_nothing_says_so_without_a_field_name(app, operator):
    body = operator.post("/alerts/resolve", {}, follow_redirects=True).get_data(as_text=True)
    assert "select at least one alert" in body and "alert_ids" not in body.split("<main", 1)[1].split("<form", 1)[0]


def test_the_new_job_form_does_not_preselect_a_task(app, operator):
    body = operator.get("/jobs/new").get_data(as_text=True)
    select = re.search(r'<select[^>]*name="task".*?</select>', body, re.S).group(0)
    assert select.split("<option", 2)[1].startswith(' value="">')  # a blank first choice
    assert "selected" not in select


def test_choosing_a_task_shows_its_config_keys_and_an_example(app, operator):
    body = operator.get("/jobs/new").get_data(as_text=True)
    block = re.search(r'data-task-help="sleep_for_seconds".*?</div>', body, re.S).group(0)
    assert "<code>seconds</code>" in block and "required" in block and '{"seconds": 1}' in block


def test_job_names_differing_only_in_case_are_the_same_name(app):
    make_job("Nightly Report", now=NOW)
    with pytest.raises(ValidationFailed) as refused:
        make_job("nightly report", now=NOW)
    assert "already exists" in refused.value.errors["name"]


def test_the_job_page_and_the_form_give_the_same_backoff_formula(app, operator):
    job = make_job("backoff", max_attempts=3, retry_backoff_seconds=10)
    assert "2^(n-1)" in operator.get(f"/jobs/{job.id}").get_data(as_text=True)


def test_an_empty_schedule_preview_is_a_hint_not_an_error(app, operator):
    body = operator.get("/jobs/preview?schedule_type=interval&every=", htmx=True).get_data(as_text=True)
    assert "Type an interval" in body and "error-text" not in body and 'role="alert"' not in body


def test_a_schedule_error_is_shown_once_after_a_failed_submit(app, operator):
    body = operator.post(
        "/jobs/new", {"name": "bad", "task": "always_succeed", "schedule_type": "cron", "cron": "61 * * * *"}
    ).get_data(as_text=True)
    assert 'id="cron-error"' in body
    preview = re.search(r'<div id="schedule-preview".*?>', body, re.S).group(0)
    assert "load" not in preview  # the preview does not fetch the same error again on page load
