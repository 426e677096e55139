"""One-off runs in the web console, on SQLite and PostgreSQL: the executions list shows them as
"one-off" with their task and filters by task; the detail page and the dashboard's recent
activity show them without a job."""

from __future__ import annotations

from app.clock import utcnow
from app.services.use_cases import one_off_runs, runs
from tests.factories import make_job
from tests.helpers.web import WebClient, signed_in_client


def test_the_list_shows_one_off_runs_and_filters_by_task(app):
    job = make_job("nightly", task="echo", every="1h")
    of_job = runs.trigger_run(job.id, {}, now=utcnow(), actor="test")
    one_off = one_off_runs.create_run({"task": "always_succeed"}, now=utcnow(), actor="test").execution
    body = WebClient(app).get("/executions/").get_data(as_text=True)
    assert "one-off" in body and "always_succeed" in body and "nightly" in body
    filtered = WebClient(app).get("/executions/?task=always_succeed").get_data(as_text=True)
    assert f"#{one_off.id}" in filtered and f"#{of_job.id}<" not in filtered and "nightly" not in filtered
    by_job_task = WebClient(app).get("/executions/?task=echo").get_data(as_text=True)
    assert f"#{of_job.id}" in by_job_task and f"#{one_off.id}<" not in by_job_task


def test_the_detail_page_and_the_dashboard_show_a_one_off_run(app):
    one_off = one_off_runs.create_run(
        {"task": "echo", "config": {"message": "hi <there>"}}, now=utcnow(), actor="test"
    ).execution
    client = signed_in_client(app, role="operator")
    page = client.get(f"/executions/{one_off.id}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="execution-one-off"' in html and "echo" in html and "hi \\u003cthere\\u003e" in html
    dashboard = client.get("/dashboard/")
    assert dashboard.status_code == 200


def test_a_dead_lettered_one_off_run_shows_on_the_alerts_page(app):
    from app.extensions import db
    from app.services.engine.worker import Worker

    client = signed_in_client(app, role="operator")
    one_off = one_off_runs.create_run({"task": "always_fail", "max_attempts": 1}, now=utcnow(), actor="test").execution
    db.session.rollback()
    Worker(app, worker_id="w-alerts").run(burst=True)
    page = client.get("/alerts/")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert f"#{one_off.id}" in html and "one-off" in html and "deleted job" not in html
