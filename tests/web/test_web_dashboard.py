"""Dashboard and health page: panels, polling fragments, heartbeats, the first 25 jobs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.clock import utcnow
from app.extensions import db
from app.models import Heartbeat
from tests.factories import make_alert, make_execution, make_heartbeat, make_job
from tests.helpers.web import signed_in_client

PANELS = ("summary", "queue", "upcoming", "activity", "alerts", "heartbeats", "jobs")


@pytest.fixture
def client(app):
    return signed_in_client(app)


def _beat(kind: str, process_id: str, seconds_ago: float) -> None:
    now = utcnow()
    db.session.add(
        Heartbeat(
            id=process_id,
            kind=kind,
            host="host-1",
            pid=123,
            started_at=now - timedelta(hours=1),
            last_seen=now - timedelta(seconds=seconds_ago),
            info={},
        )
    )
    db.session.commit()


def test_dashboard_has_every_panel_polling(app, client):
    body = client.get("/dashboard/").get_data(as_text=True)
    for name in PANELS:
        assert f'id="panel-{name}"' in body, name
        assert f'hx-get="/dashboard/panels/{name}"' in body, name
    assert body.count('hx-trigger="every 5s, cronwell:resume"') == len(PANELS)
    assert body.count("data-poll") == len(PANELS)


@pytest.mark.parametrize("name", PANELS)
def test_each_panel_is_a_fragment(app, client, name):
    response = client.get(f"/dashboard/panels/{name}", htmx=True)
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert body.lstrip().startswith(f'<section class="panel" id="panel-{name}"') and "<html" not in body


def test_unknown_panel_is_404(app, client):
    assert client.get("/dashboard/panels/secrets", htmx=True).status_code == 404


def test_dashboard_content(app, client):
    job = make_job("visible job")
    make_execution(job, "failed", output="x")
    make_execution(job, "pending")
    make_alert(job, message="disk is full")
    _beat("scheduler", "scheduler-a", 2)
    _beat("worker", "worker-old", 3600)
    body = client.get("/dashboard/").get_data(as_text=True)
    assert "visible job" in body and "disk is full" in body
    assert "scheduler-a" in body and "worker-old" in body
    assert "alive" in body and "stale" in body
    assert "Due now (queue depth)" in body
    assert "Upcoming runs" in body and "Resolve alert" in body


def test_a_worker_that_stopped_reads_stopped_not_stale(app, client):
    beat = make_heartbeat("worker-gone", "worker", age_seconds=3600)
    beat.info = {"state": "stopped", "busy": 0}
    make_heartbeat("worker-hung", "worker", age_seconds=3600)
    db.session.commit()
    body = client.get("/dashboard/panels/heartbeats", htmx=True).get_data(as_text=True)
    gone, hung = body.split("worker-gone")[1].split("</tr>")[0], body.split("worker-hung")[1].split("</tr>")[0]
    assert "stopped" in gone and "stale" not in gone
    assert "stale" in hung and "stopped" not in hung


def test_missing_heartbeats_are_called_out(app, client):
    body = client.get("/dashboard/panels/heartbeats", htmx=True).get_data(as_text=True)
    assert "No scheduler heartbeat" in body and "No worker heartbeat" in body


def test_dashboard_lists_first_25_jobs_with_link_to_all(app, client):
    for i in range(30):
        make_job(f"dash-{i:02d}")
    body = client.get("/dashboard/panels/jobs", htmx=True).get_data(as_text=True)
    assert "dash-24" in body and "dash-25" not in body
    assert "All jobs (30)" in body and 'href="/jobs/"' in body


def test_summary_counts_and_queue(app, client):
    job = make_job("counted")
    make_execution(job, "succeeded")
    make_execution(job, "pending")
    summary = client.get("/dashboard/panels/summary", htmx=True).get_data(as_text=True)
    assert "succeeded" in summary and "Executions" in summary
    queue = client.get("/dashboard/panels/queue", htmx=True).get_data(as_text=True)
    assert "<dd>1</dd>" in queue


def test_health_page(app, client):
    _beat("worker", "worker-1", 1)
    body = client.get("/health/").get_data(as_text=True)
    assert "Readiness checks" in body and "database" in body and "worker-1" in body
    assert "in-process" in body


def test_healthz_and_readyz_stay_json(app):
    from tests.helpers.web import WebClient

    client = WebClient(app)
    assert client.get("/healthz").get_json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["ready"] is True
