"""Metrics, the recording half: Prometheus instruments for the web, the scheduler and the worker
(`prometheus_client`), and the one call at each point in the services that records into them.
What serves them, and the gauges read from the database at scrape time, is
app/metrics_exposition.py.
Prometheus metrics for the web, the scheduler and the worker (`prometheus_client`).

Instruments are created lazily, per role, the first time a process uses them, so the web does not
export empty scheduler histograms and importing this module does nothing. Recording costs a few
dictionary updates, and happens where someone can read it: in the web (`/metrics`), in a scheduler
or worker that serves `--metrics-port`, and wherever PROMETHEUS_MULTIPROC_DIR is set (the web sums
that directory). A worker or scheduler without a port records nothing and never imports
prometheus_client (1 MB of its parent's memory, against a 51 MB budget for the worker parent). Only the readings that query the database (fire
lateness, the queue and heartbeat gauges) run when this process serves metrics
(`enable_database_readings()`, called by `--metrics-port` and by the web's `/metrics`).

Where each figure comes from:
- scheduler (`flask scheduler run --metrics-port`): tick duration, executions created by status,
  coalesced misfires, lease recoveries, and the gauges queue depth, oldest pending age, in-flight
  executions, open alerts and heartbeat age per process, refreshed by the tick;
- worker (`flask worker run --metrics-port`): claim batch sizes, fire lateness (started_at -
  scheduled_for of first attempts), task duration by attempt status, executor fork time,
  executions by final status, retries, dead letters, lease recoveries;
- web (`/metrics`, see app/metrics_routes.py): requests and latency by endpoint, plus the same
  gauges read from the database at scrape time.
- per queue (labels `organization`, `project`, `queue`), in the same snapshot as the gauges above: pending,
  scheduled later, retrying, running, succeeded/failed in the last hour, oldest pending age,
  throughput per minute, fire lateness p50/p95 over 15 minutes, paused. They come from the store's
  `queue_stats` (see app/services/read/queue_stats.py), a few index-backed reads whatever the size
  of the table. Under gunicorn set PROMETHEUS_MULTIPROC_DIR
  (gunicorn.conf.py does) so every worker's counters are summed.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Sequence
from datetime import datetime

log = logging.getLogger("cronwell.metrics")
_lock = threading.Lock()
_instruments: dict[str, object] = {}
_readings_enabled = False
_recording = False

# Buckets: a tick is milliseconds; lateness spans sub-second (healthy) to hours (backlog);
# a fork from the warmed zygote is about a millisecond, a fresh interpreter hundreds.
TICK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
LATENESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 10800)
FORK_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


def multiprocess_dir() -> str | None:
    """The gunicorn multiprocess directory, when this process writes its metrics there."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def instruments(role: str):
    """This process's instruments of `role` (engine, scheduler, worker, web), created on first use."""
    with _lock:
        if role not in _instruments:
            if not _instruments:
                from prometheus_client import disable_created_metrics

                disable_created_metrics()  # `*_created` series double the output and help no dashboard
            _instruments[role] = _BUILDERS[role]()
        return _instruments[role]


class _Engine:
    """Shared by scheduler and worker: what happened to executions."""

    def __init__(self) -> None:
        from prometheus_client import Counter

        self.finished = Counter(
            "cronwell_executions_finished_total",
            "Executions that reached a terminal status in this process, by status.",
            ["status"],
        )
        self.retries = Counter(
            "cronwell_retries_scheduled_total",
            "Retries scheduled, by who scheduled them (worker after a failed attempt, or lease recovery).",
            ["source"],
        )
        self.dead_letters = Counter(
            "cronwell_dead_letters_total",
            "Executions dead-lettered (attempts exhausted), by their final status.",
            ["status"],
        )
        self.recovered = Counter(
            "cronwell_leases_recovered_total",
            "Expired leases settled, by outcome (released, retried, dead_lettered).",
            ["outcome"],
        )


class _Scheduler:
    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        self.tick = Histogram(
            "cronwell_scheduler_tick_duration_seconds", "Duration of one scheduler tick.", buckets=TICK_BUCKETS
        )
        self.created = Counter(
            "cronwell_executions_created_total",
            "Occurrence rows written by the scheduler, by status (pending or missed).",
            ["status"],
        )
        self.coalesced = Counter(
            "cronwell_misfires_coalesced_total",
            "Missed occurrences collapsed into one run by the coalesce misfire policy.",
        )


class _Worker:
    def __init__(self) -> None:
        from prometheus_client import Histogram

        self.claim_batch = Histogram(
            "cronwell_worker_claim_batch_size", "Executions claimed per non-empty claim.", buckets=BATCH_BUCKETS
        )
        self.lateness = Histogram(
            "cronwell_fire_lateness_seconds",
            "started_at - scheduled_for of first attempts, by trigger.",
            ["trigger"],
            buckets=LATENESS_BUCKETS,
        )
        self.duration = Histogram(
            "cronwell_task_duration_seconds",
            "Task process run time, by attempt status.",
            ["status"],
            buckets=DURATION_BUCKETS,
        )
        self.fork = Histogram(
            "cronwell_executor_fork_seconds",
            "Time from the fork server receiving a request to the child being ready.",
            buckets=FORK_BUCKETS,
        )


class _Web:
    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        self.requests = Counter(
            "cronwell_http_requests_total",
            "HTTP requests, by method, endpoint and status.",
            ["method", "endpoint", "status"],
        )
        self.latency = Histogram(
            "cronwell_http_request_duration_seconds",
            "HTTP request latency, by endpoint.",
            ["method", "endpoint"],
            buckets=HTTP_BUCKETS,
        )


_BUILDERS = {"engine": _Engine, "scheduler": _Scheduler, "worker": _Worker, "web": _Web}


def enable_recording() -> None:
    """Record from now on: this process's instruments are read (the web, or a served port)."""
    global _recording
    _recording = True


def _recorded(observe):
    """An observation that is skipped when nothing can read this process's instruments."""

    @functools.wraps(observe)
    def record_when_read(*args, **kwargs) -> None:
        if _recording or multiprocess_dir():
            observe(*args, **kwargs)

    return record_when_read


# --- recording: one call at each point in the services ----------------------------------------


@_recorded
def observe_tick(report) -> None:
    """A finished scheduler tick (`TickReport`)."""
    scheduler = instruments("scheduler")
    scheduler.tick.observe(report.duration_ms / 1000)
    scheduler.created.labels("pending").inc(report.created)
    scheduler.created.labels("missed").inc(report.missed)
    scheduler.coalesced.inc(report.coalesced)
    if getattr(report, "expired", 0):  # queued TTL passed: terminal without running
        instruments("engine").finished.labels("expired").inc(report.expired)


@_recorded
def observe_recovery(report) -> None:
    """Expired leases settled by the scheduler or an idle worker (`RecoveryReport`)."""
    engine = instruments("engine")
    for outcome in ("released", "retried", "dead_lettered"):
        engine.recovered.labels(outcome).inc(getattr(report, outcome))
    engine.retries.labels("recovery").inc(report.retried)
    engine.finished.labels("dead_lettered").inc(report.dead_lettered)
    engine.dead_letters.labels("dead_lettered").inc(report.dead_lettered)


@_recorded
def observe_claim(batch_size: int) -> None:
    """A worker claim that returned at least one execution."""
    instruments("worker").claim_batch.observe(batch_size)


@_recorded
def observe_task(result) -> None:
    """A task process ended (`TaskResult`): its run time and the executor's fork time."""
    worker = instruments("worker")
    worker.duration.labels(result.status).observe(result.duration_seconds)
    worker.fork.observe(max(0.0, result.fork_ms) / 1000)


@_recorded
def observe_outcome(status: str, *, retried: bool) -> None:
    """The worker recorded an attempt: a retry was scheduled, or the execution ended in `status`."""
    engine = instruments("engine")
    if retried:
        engine.retries.labels("worker").inc()
    else:
        engine.finished.labels(status).inc()


@_recorded
def observe_dead_letter(status: str) -> None:
    """The worker dead-lettered an execution whose attempts ran out (final status `status`)."""
    instruments("engine").dead_letters.labels(status).inc()


@_recorded
def observe_cancelled() -> None:
    """A claimed execution was cancelled because its job had been disabled."""
    instruments("engine").finished.labels("cancelled").inc()


@_recorded
def observe_fire_lateness(started: Sequence[tuple[str, datetime]], started_at: datetime) -> None:
    """How late first attempts started relative to their scheduled time: (trigger, scheduled_for) pairs."""
    if not started or not _readings_enabled:
        return
    worker = instruments("worker")
    for trigger, scheduled_for in started:
        worker.lateness.labels(trigger).observe(max(0.0, (started_at - scheduled_for).total_seconds()))


@_recorded
def observe_request(method: str, endpoint: str, status: int, seconds: float) -> None:
    """One HTTP request served by the web process."""
    web = instruments("web")
    web.requests.labels(method, endpoint, str(status)).inc()
    web.latency.labels(method, endpoint).observe(seconds)


def enable_database_readings() -> None:
    """Let fire lateness and the scheduler's gauges query the database (this process serves metrics)."""
    global _readings_enabled
    _readings_enabled = True


def database_readings_enabled() -> bool:
    return _readings_enabled
