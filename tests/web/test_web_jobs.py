"""Job pages: list and pagination, detail, create/edit with inline errors, the live preview, actions."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from app.extensions import db
from app.models import Execution, Job
from tests.factories import make_execution, make_job, make_queue
from tests.helpers.web import WebClient, job_form, rows, signed_in_client


def errors(body: str) -> list[str]:
    return re.findall(r'class="error-text"[^>]*>([^<]*)<', body)


@pytest.fixture
def operator(app):
    return signed_in_client(app, role="operator")


def test_job_list_paginates_at_50(app):
    for i in range(120):
        db.session.add(
            Job(
                name=f"bulk-{i:03d}",
                queue_id=make_queue("default").id,
                task="always_succeed",
                config={},
                schedule_type="cron",
                schedule={"expression": "0 * * * *"},
                timezone="UTC",
                enabled=True,
            )
        )
    db.session.commit()
    client = WebClient(app)
    first = client.get("/jobs/").get_data(as_text=True)
    assert rows(first) == 50 and "bulk-000" in first and "bulk-050" not in first
    assert "Page 1 of 3" in first and 'href="/jobs/?page=2"' in first
    third = client.get("/jobs/?page=3").get_data(as_text=True)
    assert rows(third) == 20 and "bulk-119" in third
    for bad in ("abc", "-4", "0", "99999999999999999999"):
        response = client.get(f"/jobs/?page={bad}")
        assert response.status_code == 200, bad
    assert "Page 3 of 3" in client.get("/jobs/?page=999").get_data(as_text=True)


def test_empty_job_list(app):
    body = WebClient(app).get("/jobs/").get_data(as_text=True)
    assert "No jobs yet." in body and "Page 1 of 1" in body


def test_create_form_has_labels_for_every_control(app, operator):
    body = operator.get("/jobs/new").get_data(as_text=True)
    ids = re.findall(r'<(?:input|select|textarea)[^>]*\bid="([^"]+)"', body)
    ids = [i for i in ids if i != "csrf_token"]
    assert len(ids) >= 20
    for control in ids:
        assert f'<label for="{control}"' in body, control


def test_create_job(app, operator):
    response = operator.post("/jobs/new", job_form(name="Every five", every="5m", description="hi"))
    assert response.status_code == 303
    job = db.session.query(Job).filter_by(name="Every five").one()
    assert response.headers["Location"] == f"/jobs/{job.id}"
    assert job.schedule["every"] == "5m" and job.enabled and job.next_run_at is not None
    page = operator.get(response.headers["Location"]).get_data(as_text=True)
    assert "Every five" in page and "created" in page


def test_create_disabled_cron_job_in_a_zone(app, operator):
    data = job_form(
        name="Weekdays", schedule_type="cron", every="", cron="0 9 * * 1-5", timezone="America/New_York", enabled=None
    )
    assert operator.post("/jobs/new", data).status_code == 303
    job = db.session.query(Job).filter_by(name="Weekdays").one()
    assert job.enabled is False and job.timezone == "America/New_York"
    assert job.schedule == {"expression": "0 9 * * 1-5"}


@pytest.mark.parametrize(
    "overrides,field_text",
    [
        ({"schedule_type": "cron", "cron": "61 * * * *"}, "minute"),
        ({"schedule_type": "cron", "cron": "0 0 30 2 *"}, "never"),
        ({"schedule_type": "cron", "cron": "0 0 * * * *"}, "5 fields"),
        ({"schedule_type": "cron", "cron": ""}, "cron"),
        ({"every": "five minutes"}, "interval"),
        ({"every": ""}, "every"),
        ({"schedule_type": "one_time", "run_at": "tomorrow"}, "ISO 8601"),
        ({"schedule_type": "one_time", "run_at": "2001-01-01T00:00:00Z"}, "in the past"),
        ({"timezone": "Mars/Olympus"}, "unknown timezone"),
        ({"config": "{not json"}, "not valid JSON"),
        ({"config": "[1, 2]"}, "JSON object"),
        ({"task": "sleep_for_seconds", "config": '{"seconds": "soon"}'}, "seconds"),
        ({"task": "rm -rf /"}, "Not a valid choice"),
        ({"name": ""}, "required"),
        ({"name": "x" * 201}, "200"),
        ({"max_attempts": "0"}, "between 1"),
        ({"timeout_seconds": "abc"}, "whole number"),
        ({"queue": "Bad Queue!"}, "lower-case"),
        ({"overlap_policy": "sometimes"}, "Not a valid choice"),
        ({"schedule_type": "weekly"}, "Not a valid choice"),
    ],
)
def test_invalid_job_input_is_shown_inline_never_500(app, operator, overrides, field_text):
    response = operator.post("/jobs/new", job_form(**overrides))
    assert response.status_code == 400
    body = response.get_data(as_text=True)
    assert any(field_text.lower() in e.lower() for e in errors(body)), errors(body)
    assert 'aria-invalid="true"' in body or "Not a valid choice" in body or "required" in body
    assert db.session.query(Job).count() == 0


def test_bad_cron_error_is_next_to_the_cron_input_and_input_is_kept(app, operator):
    response = operator.post("/jobs/new", job_form(name="keep me", schedule_type="cron", cron="99 * * * *"))
    body = response.get_data(as_text=True)
    assert 'id="cron-error"' in body
    assert 'value="keep me"' in body and 'value="99 * * * *"' in body


def test_duplicate_name_is_inline(app, operator):
    make_job("taken")
    body = operator.post("/jobs/new", job_form(name="taken")).get_data(as_text=True)
    assert "already exists" in body and 'id="name-error"' in body


def test_edit_form_is_prefilled(app, operator):
    job = make_job("edit me", schedule_type="cron", schedule={"expression": "*/10 * * * *"}, timezone="Europe/Paris")
    body = operator.get(f"/jobs/{job.id}/edit").get_data(as_text=True)
    assert 'value="edit me"' in body and 'value="*/10 * * * *"' in body and 'value="Europe/Paris"' in body


def test_edit_sends_only_changed_fields_and_keeps_interval_phase(app, operator):
    job = make_job("phase", schedule={"every": "1h"})
    before = (dict(job.schedule), job.next_run_at)
    data = job_form(name="phase", every="1h", description="now described")
    response = operator.post(f"/jobs/{job.id}/edit", data)
    assert response.status_code == 303
    db.session.rollback()
    job = db.session.get(Job, job.id)
    assert job.description == "now described"
    assert (job.schedule, job.next_run_at) == before


def test_edit_schedule_recomputes_next_run(app, operator):
    job = make_job("resched", schedule={"every": "1h"})
    response = operator.post(
        f"/jobs/{job.id}/edit", job_form(name="resched", schedule_type="cron", every="", cron="0 3 * * *")
    )
    assert response.status_code == 303
    db.session.rollback()
    job = db.session.get(Job, job.id)
    assert job.schedule_type == "cron" and job.next_run_at.hour == 3


def test_edit_without_changes_says_so(app, operator):
    job = make_job("same", schedule={"every": "5m"})
    response = operator.post(f"/jobs/{job.id}/edit", job_form(name="same", every="5m"))
    assert response.status_code == 303
    assert "Nothing changed." in operator.get(response.headers["Location"]).get_data(as_text=True)


def test_edit_invalid_input_is_inline(app, operator):
    job = make_job("edit-bad")
    response = operator.post(f"/jobs/{job.id}/edit", job_form(name="edit-bad", every="-5m"))
    assert response.status_code == 400
    assert 'id="every-error"' in response.get_data(as_text=True)


def test_missing_job_pages_are_404(app, operator):
    for url in ("/jobs/999", "/jobs/999/edit", "/jobs/999/delete"):
        assert operator.get(url).status_code == 404, url
    assert operator.post("/jobs/999/delete", {"confirm_name": "x"}).status_code == 404
    assert operator.get("/jobs/abc").status_code == 404


@pytest.mark.parametrize(
    "args,expected",
    [
        ("schedule_type=cron&cron=*/15+*+*+*+*", 5),
        ("schedule_type=interval&every=90s", 5),
        ("schedule_type=one_time&run_at=2099-01-01T00:00:00Z", 1),
    ],
)
def test_preview_lists_next_fire_times(app, operator, args, expected):
    response = operator.get(f"/jobs/preview?{args}&timezone=UTC", htmx=True)
    assert response.status_code == 200
    assert response.get_data(as_text=True).count("<li>") == expected


@pytest.mark.parametrize(
    "args,message",
    [
        ("schedule_type=cron&cron=61+*+*+*+*", "minute"),
        ("schedule_type=cron&cron=", "Type a cron expression"),
        ("schedule_type=interval&every=0s", "interval"),
        ("schedule_type=cron&cron=*+*+*+*+*&timezone=Nowhere/Special", "unknown timezone"),
        ("schedule_type=one_time&run_at=2001-01-01T00:00:00Z", "no future fire times"),
        ("schedule_type=bogus", "unknown schedule type"),
    ],
)
def test_preview_shows_the_error(app, operator, args, message):
    response = operator.get(f"/jobs/preview?{args}", htmx=True)
    assert response.status_code == 200
    assert message.lower() in response.get_data(as_text=True).lower()


def test_preview_marks_dst_adjustments(app, operator, monkeypatch):
    import app.jobs.routes as routes

    monkeypatch.setattr(routes, "utcnow", lambda: datetime(2027, 3, 13, 12, 0, tzinfo=UTC))
    body = operator.get(
        "/jobs/preview?schedule_type=cron&cron=30+2+*+*+*&timezone=America/New_York", htmx=True
    ).get_data(as_text=True)
    assert "2027-03-14 07:00:00 UTC" in body  # 02:30 does not exist that day: runs at 03:00 EDT
    assert 'class="dst-note"' in body


def test_job_detail_shows_metadata_stats_next_runs_and_charts(app):
    job = make_job("detailed", schedule_type="cron", schedule={"expression": "0 * * * *"}, timezone="Asia/Tokyo")
    for i, status in enumerate(["succeeded", "succeeded", "failed", "timed_out", "succeeded"]):
        make_execution(job, status, seconds=1 + i)
    body = signed_in_client(app).get(f"/jobs/{job.id}").get_data(as_text=True)
    assert "Asia/Tokyo" in body and "always_succeed" in body
    assert "60.0 %" in body  # 3 of 5 succeeded
    assert body.count('<rect class="bar status-') == 10  # duration + outcome bars
    assert "<title>#3 failed" in body
    assert "JST" in body  # next runs in local time
    assert 'role="img"' in body


def test_job_detail_executions_paginate_at_30(app):
    job = make_job("busy")
    for _ in range(65):
        make_execution(job, "succeeded")
    client = WebClient(app)
    body = client.get(f"/jobs/{job.id}").get_data(as_text=True)
    runs = body.split('id="runs-title"', 1)[1]
    assert rows(runs) == 30 and "Page 1 of 3" in runs
    assert rows(client.get(f"/jobs/{job.id}?page=3").get_data(as_text=True).split('id="runs-title"', 1)[1]) == 5


def test_disable_cancels_queued_work_and_enable_resumes(app, operator):
    job = make_job("toggle")
    pending = make_execution(job, "pending")
    response = operator.post(f"/jobs/{job.id}/disable")
    assert response.status_code == 303
    assert "1 queued execution(s) cancelled" in operator.get(response.headers["Location"]).get_data(as_text=True)
    db.session.rollback()
    assert db.session.get(Job, job.id).enabled is False
    assert db.session.get(Execution, pending.id).status == "cancelled"
    assert operator.post(f"/jobs/{job.id}/enable").status_code == 303
    db.session.rollback()
    assert db.session.get(Job, job.id).enabled is True


def test_trigger_creates_a_manual_execution(app, operator):
    job = make_job("trigger me")
    response = operator.post(f"/jobs/{job.id}/trigger")
    assert response.status_code == 303
    db.session.rollback()
    execution = db.session.query(Execution).filter_by(job_id=job.id).one()
    assert execution.trigger == "manual" and execution.status == "pending"


def test_trigger_disabled_job_is_refused_with_a_message(app, operator):
    job = make_job("off", enabled=False)
    response = operator.post(f"/jobs/{job.id}/trigger")
    assert response.status_code == 303
    assert "is disabled" in operator.get(response.headers["Location"]).get_data(as_text=True)
    assert db.session.query(Execution).count() == 0


def test_delete_needs_the_typed_name(app, operator):
    job_id = make_job("precious").id
    page = operator.get(f"/jobs/{job_id}/delete").get_data(as_text=True)
    assert 'data-confirm-name="precious"' in page
    wrong = operator.post(f"/jobs/{job_id}/delete", {"confirm_name": "PRECIOUS"})
    assert wrong.status_code == 400 and "does not match" in wrong.get_data(as_text=True)
    db.session.rollback()
    assert db.session.get(Job, job_id) is not None
    right = operator.post(f"/jobs/{job_id}/delete", {"confirm_name": "precious"})
    assert right.status_code == 303 and right.headers["Location"] == "/jobs/"
    db.session.rollback()
    assert db.session.get(Job, job_id) is None


@pytest.mark.parametrize("action", ["disable", "enable", "trigger"])
def test_actions_on_missing_job_do_not_500(app, operator, action):
    response = operator.post(f"/jobs/999/{action}")
    assert response.status_code in (303, 404)


def test_actions_are_post_only(app, operator):
    job = make_job()
    for action in ("disable", "enable", "trigger"):
        assert operator.get(f"/jobs/{job.id}/{action}").status_code == 405
