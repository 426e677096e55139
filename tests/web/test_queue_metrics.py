"""Per-queue Prometheus gauges: labelled by project and queue, served by the web's /metrics and by
the scheduler's metrics port, read from the same queue statistics as `flask queue stats`."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app import metrics, metrics_exposition
from app.clock import utcnow
from app.services.engine.scheduler import Scheduler
from app.services.use_cases import jobs, queues
from tests.factories import make_due_job, make_execution, make_job, make_queue


@pytest.fixture(autouse=True)
def restore_metrics_state(monkeypatch):
    """Database readings are process-wide switches: put them back after each test."""
    monkeypatch.setattr(metrics, "_readings_enabled", False)
    monkeypatch.setattr(metrics_exposition, "_scheduler_gauges", None)


def scraped(app) -> dict[str, float]:
    """The web's /metrics as {`name{labels}`: value} (metrics enabled, no token)."""
    app.config.update(METRICS_ENABLED=True, METRICS_TOKEN=None)
    found = {}
    for line in app.test_client().get("/metrics").get_data(as_text=True).splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            found[key] = float(value)
    return found


def labelled(name: str, queue: str, **extra) -> str:
    """The exposition key of a per-queue series (labels in the exposition's alphabetical order)."""
    labels = {"organization": "default", "project": "default", "queue": queue, **extra}
    return name + "{" + ",".join(f'{key}="{labels[key]}"' for key in sorted(labels)) + "}"


def test_the_web_serves_each_queues_statistics_labelled_by_queue(app):
    now = utcnow()
    make_queue("reports", concurrency_limit=2)
    job = make_job(now=now, queue="reports", overlap_policy="allow")
    jobs.trigger_job(job.id, now=now, actor="test")
    jobs.trigger_job(job.id, now=now, actor="test")
    make_execution(job, "pending", now=now, available_at=now + timedelta(hours=1))
    make_execution(job, "retry_scheduled", now=now, available_at=now + timedelta(minutes=5))
    make_execution(job, "running", now=now)
    # Scheduled a minute before `now`, started 1.5 s before it: 58.5 s late.
    make_execution(job, "succeeded", now=now, trigger="schedule")
    make_execution(job, "failed", now=now)
    queues.pause_queue("default", now=now, actor="test", reason="maintenance")

    found = scraped(app)

    assert found[labelled("cronwell_queue_pending", "reports")] == 2
    assert found[labelled("cronwell_queue_scheduled_later", "reports")] == 1
    assert found[labelled("cronwell_queue_retrying", "reports")] == 1
    assert found[labelled("cronwell_queue_running", "reports")] == 1
    assert found[labelled("cronwell_queue_succeeded_last_hour", "reports")] == 1
    assert found[labelled("cronwell_queue_failed_last_hour", "reports")] == 1
    assert found[labelled("cronwell_queue_throughput_per_minute", "reports")] == pytest.approx(2 / 15)
    assert found[labelled("cronwell_queue_oldest_pending_seconds", "reports")] >= 0
    for quantile in ("0.5", "0.95"):
        late = found[labelled("cronwell_queue_fire_lateness_seconds", "reports", quantile=quantile)]
        assert late == pytest.approx(58.5, abs=0.01)
    assert found[labelled("cronwell_queue_paused", "reports")] == 0
    # The default queue is listed with zeros, paused, and without lateness (no scheduled runs).
    assert found[labelled("cronwell_queue_pending", "default")] == 0
    assert found[labelled("cronwell_queue_oldest_pending_seconds", "default")] == 0
    assert found[labelled("cronwell_queue_paused", "default")] == 1
    assert labelled("cronwell_queue_fire_lateness_seconds", "default", quantile="0.5") not in found


def test_the_scheduler_refreshes_the_per_queue_gauges_when_serving(app, monkeypatch):
    gauges = metrics_exposition.DatabaseGauges()
    monkeypatch.setattr(metrics_exposition, "_scheduler_gauges", gauges)
    monkeypatch.setattr(metrics, "_readings_enabled", True)
    start = utcnow()
    make_queue("reports")
    make_due_job(next_run_at=start - timedelta(seconds=5), misfire_grace_seconds=60, queue="reports")
    Scheduler(app, scheduler_id="s1").tick(start)
    families = {family.name: family for family in gauges.collect()}
    pending = {sample.labels["queue"]: sample.value for sample in families["cronwell_queue_pending"].samples}
    assert pending == {"default": 0, "reports": 1}
    assert {sample.labels["project"] for sample in families["cronwell_queue_running"].samples} == {"default"}
