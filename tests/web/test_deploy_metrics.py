"""Prometheus metrics: the web's /metrics (gating, content, multiprocess under gunicorn) and what
the scheduler tick and the worker record."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest
from prometheus_client import REGISTRY

from app import metrics, metrics_exposition
from app.clock import utcnow
from app.extensions import db
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.use_cases import jobs
from tests.factories import make_due_job, make_job
from tests.helpers.processes import PROJECT_ROOT

TOKEN = "scrape-token-0123456789"


def now() -> datetime:
    return utcnow()


def sample(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture(autouse=True)
def restore_metrics_state(monkeypatch):
    """Database readings are process-wide switches: put them back after each test."""
    monkeypatch.setattr(metrics, "_readings_enabled", False)
    monkeypatch.setattr(metrics_exposition, "_scheduler_gauges", None)


@pytest.fixture
def client(app):
    return app.test_client()


def scrape(client, token: str | None = TOKEN):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get("/metrics", headers=headers)


def values(text: str) -> dict[str, float]:
    """`name{labels} value` lines of an exposition, keyed by everything before the value."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            found[key] = float(value)
    return found


# --- gating -----------------------------------------------------------------------------------------


def test_metrics_are_off_by_default(client):
    assert client.get("/metrics").status_code == 404


def test_a_token_is_required_when_configured(app, client):
    app.config.update(METRICS_ENABLED=True, METRICS_TOKEN=TOKEN)
    missing = scrape(client, token=None)
    assert missing.status_code == 401 and missing.headers["WWW-Authenticate"].startswith("Bearer")
    assert scrape(client, token="wrong").status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    ok = scrape(client)
    assert ok.status_code == 200 and ok.content_type.startswith("text/plain; version=")


def test_without_a_token_metrics_are_open(app, client):
    app.config.update(METRICS_ENABLED=True, METRICS_TOKEN=None)
    assert scrape(client, token=None).status_code == 200


# --- what the web serves ----------------------------------------------------------------------------


def test_web_metrics_count_requests_by_route_and_read_the_queue(app, client):
    app.config.update(METRICS_ENABLED=True, METRICS_TOKEN=TOKEN)
    job = make_job(now=now())
    jobs.trigger_job(job.id, now=now(), actor="test")
    jobs.trigger_job(job.id, now=now(), actor="test")
    before = sample("cronwell_http_requests_total", method="GET", endpoint="/healthz", status="200")
    assert client.get("/healthz").status_code == 200
    client.get("/no-such-page")
    body = scrape(client).get_data(as_text=True)
    found = values(body)
    key = 'cronwell_http_requests_total{endpoint="/healthz",method="GET",status="200"}'
    assert found[key] == before + 1
    assert any(k.startswith('cronwell_http_requests_total{endpoint="unmatched"') for k in found)
    assert 'cronwell_http_request_duration_seconds_bucket{endpoint="/healthz",le="0.005",method="GET"}' in found
    assert found["cronwell_queue_depth"] == 2
    assert found["cronwell_executions_in_flight"] == 0
    assert found["cronwell_queue_oldest_pending_age_seconds"] >= 0
    assert found["cronwell_database_readable"] == 1
    assert not any(k.endswith("_created") for k in found)


def test_heartbeat_ages_are_labelled_by_process(app, client):
    app.config.update(METRICS_ENABLED=True, METRICS_TOKEN=None)
    Scheduler(app, scheduler_id="sched-a").tick()
    found = values(scrape(client, token=None).get_data(as_text=True))
    age = found['cronwell_heartbeat_age_seconds{kind="scheduler",process="sched-a"}']
    assert 0 <= age < 30


def test_an_unreadable_database_is_a_gauge_not_an_error():
    class Broken:
        def connect(self):
            raise RuntimeError("database down")

    gauges = metrics_exposition.DatabaseGauges(Broken())
    families = {family.name: family for family in gauges.collect()}
    assert families["cronwell_database_readable"].samples[0].value == 0
    assert "cronwell_queue_depth" not in families


def test_gunicorn_workers_are_summed_through_the_multiprocess_directory(tmp_path):
    """Two processes record requests; one scrape (any worker) sees both."""
    script = textwrap.dedent("""
        import multiprocessing, sys
        from app import metrics, metrics_exposition

        def serve_one(endpoint):
            metrics.observe_request("GET", endpoint, 200, 0.01)

        if __name__ == "__main__":
            ctx = multiprocessing.get_context("fork")
            for endpoint in ("/a", "/a", "/b"):
                child = ctx.Process(target=serve_one, args=(endpoint,))
                child.start(); child.join()
            body, _ = metrics_exposition.render_web_metrics(metrics_exposition.DatabaseGauges())
            sys.stdout.write(body.decode())
    """)
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    found = values(result.stdout)
    assert found['cronwell_http_requests_total{endpoint="/a",method="GET",status="200"}'] == 2
    assert found['cronwell_http_requests_total{endpoint="/b",method="GET",status="200"}'] == 1


# --- what the scheduler and worker record ------------------------------------------------------------


def test_a_tick_records_its_duration_and_what_it_created(app):
    start = now().replace(microsecond=0)
    make_due_job(next_run_at=start - timedelta(seconds=5), misfire_grace_seconds=60)
    make_due_job(next_run_at=start - timedelta(minutes=10), misfire_policy="skip", misfire_grace_seconds=30)
    ticks = sample("cronwell_scheduler_tick_duration_seconds_count")
    pending = sample("cronwell_executions_created_total", status="pending")
    missed = sample("cronwell_executions_created_total", status="missed")
    Scheduler(app, scheduler_id="s1", clock=lambda: start).tick(start)
    assert sample("cronwell_scheduler_tick_duration_seconds_count") == ticks + 1
    assert sample("cronwell_executions_created_total", status="pending") >= pending + 2
    assert sample("cronwell_executions_created_total", status="missed") >= missed + 9


def test_the_scheduler_refreshes_the_queue_gauges_when_serving(app, monkeypatch):
    gauges = metrics_exposition.DatabaseGauges()
    monkeypatch.setattr(metrics_exposition, "_scheduler_gauges", gauges)
    start = now()
    make_due_job(next_run_at=start - timedelta(seconds=5), misfire_grace_seconds=60)
    Scheduler(app, scheduler_id="s1").tick(start)
    assert gauges.snapshot is None  # not serving metrics: no extra queries
    monkeypatch.setattr(metrics, "_readings_enabled", True)
    Scheduler(app, scheduler_id="s1").tick(start + timedelta(seconds=1))
    families = {family.name: family for family in gauges.collect()}
    assert families["cronwell_queue_depth"].samples[0].value == 1
    [beat] = families["cronwell_heartbeat_age_seconds"].samples
    assert beat.labels == {"kind": "scheduler", "process": "s1"}


def test_the_worker_records_outcomes_retries_dead_letters_durations_and_fork_time(app, monkeypatch):
    monkeypatch.setattr(metrics, "_readings_enabled", True)
    good = make_job(now=now(), task="always_succeed")
    bad = make_job(now=now(), task="always_fail", max_attempts=2, retry_backoff_seconds=0, alert_mode="log_only")
    before = {
        "succeeded": sample("cronwell_executions_finished_total", status="succeeded"),
        "failed": sample("cronwell_executions_finished_total", status="failed"),
        "retries": sample("cronwell_retries_scheduled_total", source="worker"),
        "dead": sample("cronwell_dead_letters_total", status="failed"),
        "tasks": sample("cronwell_task_duration_seconds_count", status="failed")
        + sample("cronwell_task_duration_seconds_count", status="succeeded"),
        "forks": sample("cronwell_executor_fork_seconds_count"),
        "claims": sample("cronwell_worker_claim_batch_size_count"),
        "late": sample("cronwell_fire_lateness_seconds_count", trigger="manual"),
    }
    jobs.trigger_job(good.id, now=now(), actor="test")
    jobs.trigger_job(bad.id, now=now(), actor="test")
    Worker(app, worker_id="w1").run(burst=True)
    assert sample("cronwell_executions_finished_total", status="succeeded") == before["succeeded"] + 1
    assert sample("cronwell_executions_finished_total", status="failed") == before["failed"] + 1
    assert sample("cronwell_retries_scheduled_total", source="worker") == before["retries"] + 1
    assert sample("cronwell_dead_letters_total", status="failed") == before["dead"] + 1
    tasks = sample("cronwell_task_duration_seconds_count", status="failed") + sample(
        "cronwell_task_duration_seconds_count", status="succeeded"
    )
    assert tasks == before["tasks"] + 3
    assert sample("cronwell_executor_fork_seconds_count") == before["forks"] + 3
    assert sample("cronwell_worker_claim_batch_size_count") >= before["claims"] + 2
    # Lateness is about first attempts only: the retry's wait is its backoff, not lateness.
    assert sample("cronwell_fire_lateness_seconds_count", trigger="manual") == before["late"] + 2


def test_a_job_disabled_before_its_run_counts_as_cancelled(app):
    job = make_job(now=now())
    jobs.trigger_job(job.id, now=now(), actor="test")
    db.session.execute(db.text("UPDATE jobs SET enabled = false WHERE id = :id"), {"id": job.id})
    db.session.commit()
    before = sample("cronwell_executions_finished_total", status="cancelled")
    Worker(app, worker_id="w1").run(burst=True)
    assert sample("cronwell_executions_finished_total", status="cancelled") == before + 1


def test_lease_recoveries_are_counted_by_outcome():
    before = {k: sample("cronwell_leases_recovered_total", outcome=k) for k in ("released", "retried", "dead_lettered")}
    dead_before = sample("cronwell_dead_letters_total", status="dead_lettered")
    metrics.observe_recovery(SimpleNamespace(released=2, retried=1, dead_lettered=3))
    assert sample("cronwell_leases_recovered_total", outcome="released") == before["released"] + 2
    assert sample("cronwell_leases_recovered_total", outcome="retried") == before["retried"] + 1
    assert sample("cronwell_leases_recovered_total", outcome="dead_lettered") == before["dead_lettered"] + 3
    assert sample("cronwell_dead_letters_total", status="dead_lettered") == dead_before + 3
