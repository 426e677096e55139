"""Schedule lint in the adapters: CLI warnings on stderr (exit code unchanged), web beside the field."""

from __future__ import annotations

import json

from tests.helpers.cli import ok
from tests.helpers.web import job_form, signed_in_client


def test_job_add_warns_on_stderr_and_still_succeeds(cli):
    result = cli("job", "add", "uneven", "always_succeed", "cron", "--cron", "*/7 * * * *", "--json")
    out = ok(result)
    assert json.loads(out)["name"] == "uneven"
    assert "Warning: '*/7' in the minute field" in result.stderr


def test_job_edit_and_preview_warn(cli):
    ok(cli("job", "add", "daily", "always_succeed", "cron", "--cron", "0 4 * * *", "--timezone", "America/New_York"))
    result = cli("job", "edit", "1", "--cron", "30 2 * * *")
    ok(result)
    assert "DST gap" in result.stderr
    preview = cli("job", "preview", "1", "--json")
    ok(preview)
    assert "DST gap" in preview.stderr and json.loads(preview.stdout)


def test_ordinary_schedule_prints_no_warning(cli):
    result = cli("job", "add", "weekday", "always_succeed", "cron", "--cron", "0 9 * * 1-5")
    ok(result)
    assert result.stderr == ""


def test_schedule_preview_warns_on_rare_schedules(cli):
    result = cli("schedule", "preview", "--cron", "0 0 29 2 *", "--count", "2", "--json")
    assert result.exit_code == 0
    assert "fires rarely" in result.stderr and len(json.loads(result.stdout)) == 2


def test_live_preview_shows_warnings_beside_the_field(app):
    client = signed_in_client(app)
    page = client.get("/jobs/preview", query_string={"schedule_type": "cron", "cron": "*/7 * * * *"})
    assert page.status_code == 200
    assert b'data-code="uneven_step"' in page.data
    plain = client.get("/jobs/preview", query_string={"schedule_type": "cron", "cron": "*/10 * * * *"})
    assert b"lint-warning" not in plain.data


def test_web_create_flashes_the_warning(app):
    client = signed_in_client(app)
    response = client.post(
        "/jobs/new", job_form(schedule_type="cron", every="", cron="*/7 * * * *"), follow_redirects=True
    )
    assert response.status_code == 200
    assert "Warning: &#39;*/7&#39; in the minute field" in response.get_data(as_text=True)


def test_live_preview_reads_the_timeout(app):
    client = signed_in_client(app)
    args = {"schedule_type": "interval", "every": "1m", "timeout_seconds": "300"}
    page = client.get("/jobs/preview", query_string=args)
    assert b'data-code="denser_than_timeout"' in page.data
    form = client.get("/jobs/new").get_data(as_text=True)
    assert 'name="timeout_seconds"' in form and "schedule-input" in form.split('name="timeout_seconds"')[0][-300:]


def test_job_page_shows_the_warnings_beside_the_schedule(app, cli):
    ok(cli("job", "add", "rare", "always_succeed", "cron", "--cron", "0 0 29 2 *"))
    page = signed_in_client(app).get("/jobs/1")
    assert page.status_code == 200 and b'data-code="rare"' in page.data
