"""Prometheus metrics for the web, the scheduler and the worker (`prometheus_client`).

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
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from app.clock import utcnow

if TYPE_CHECKING:
    from app.store import QueueStats

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


def _get(role: str):
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
    scheduler = _get("scheduler")
    scheduler.tick.observe(report.duration_ms / 1000)
    scheduler.created.labels("pending").inc(report.created)
    scheduler.created.labels("missed").inc(report.missed)
    scheduler.coalesced.inc(report.coalesced)
    if getattr(report, "expired", 0):  # queued TTL passed: terminal without running
        _get("engine").finished.labels("expired").inc(report.expired)


@_recorded
def observe_recovery(report) -> None:
    """Expired leases settled by the scheduler or an idle worker (`RecoveryReport`)."""
    engine = _get("engine")
    for outcome in ("released", "retried", "dead_lettered"):
        engine.recovered.labels(outcome).inc(getattr(report, outcome))
    engine.retries.labels("recovery").inc(report.retried)
    engine.finished.labels("dead_lettered").inc(report.dead_lettered)
    engine.dead_letters.labels("dead_lettered").inc(report.dead_lettered)


@_recorded
def observe_claim(batch_size: int) -> None:
    """A worker claim that returned at least one execution."""
    _get("worker").claim_batch.observe(batch_size)


@_recorded
def observe_task(result) -> None:
    """A task process ended (`TaskResult`): its run time and the executor's fork time."""
    worker = _get("worker")
    worker.duration.labels(result.status).observe(result.duration_seconds)
    worker.fork.observe(max(0.0, result.fork_ms) / 1000)


@_recorded
def observe_outcome(status: str, *, retried: bool) -> None:
    """The worker recorded an attempt: a retry was scheduled, or the execution ended in `status`."""
    engine = _get("engine")
    if retried:
        engine.retries.labels("worker").inc()
    else:
        engine.finished.labels(status).inc()


@_recorded
def observe_dead_letter(status: str) -> None:
    """The worker dead-lettered an execution whose attempts ran out (final status `status`)."""
    _get("engine").dead_letters.labels(status).inc()


@_recorded
def observe_cancelled() -> None:
    """A claimed execution was cancelled because its job had been disabled."""
    _get("engine").finished.labels("cancelled").inc()


@_recorded
def observe_fire_lateness(started: Sequence[tuple[str, datetime]], started_at: datetime) -> None:
    """How late first attempts started relative to their scheduled time: (trigger, scheduled_for) pairs."""
    if not started or not _readings_enabled:
        return
    worker = _get("worker")
    for trigger, scheduled_for in started:
        worker.lateness.labels(trigger).observe(max(0.0, (started_at - scheduled_for).total_seconds()))


@_recorded
def observe_request(method: str, endpoint: str, status: int, seconds: float) -> None:
    """One HTTP request served by the web process."""
    web = _get("web")
    web.requests.labels(method, endpoint, str(status)).inc()
    web.latency.labels(method, endpoint).observe(seconds)


# --- database readings: gauges ----------------------------------------------------------------


@dataclass
class Snapshot:
    """What the gauges show, read from the database at `taken_at`."""

    taken_at: datetime
    queue_depth: int = 0
    oldest_pending_age: float = 0.0
    in_flight: int = 0
    open_alerts: int = 0
    heartbeats: list[tuple[str, str, float]] = field(default_factory=list)  # (kind, process id, age)
    queues: list[QueueReading] = field(default_factory=list)


@dataclass
class QueueReading:
    """One queue's labels, pause state and statistics (`QueueStats`)."""

    project: str
    name: str
    paused: bool
    stats: QueueStats
    organization: str = "default"


# Per-queue gauges: (metric name, help, QueueStats attribute); a missing oldest age reads 0, like
# cronwell_queue_oldest_pending_age_seconds. Lateness has no value without recent scheduled runs:
# those samples are left out rather than shown as 0, which would read as "on time".
QUEUE_GAUGES = (
    ("cronwell_queue_pending", "Executions of the queue due now and waiting for a worker.", "pending"),
    ("cronwell_queue_scheduled_later", "Pending executions of the queue not yet due.", "scheduled_later"),
    ("cronwell_queue_retrying", "Executions of the queue waiting out a retry backoff.", "retrying"),
    ("cronwell_queue_running", "Executions of the queue running now.", "running"),
    (
        "cronwell_queue_succeeded_last_hour",
        "Executions of the queue that succeeded in the last hour.",
        "succeeded_last_hour",
    ),
    (
        "cronwell_queue_failed_last_hour",
        "Executions of the queue that failed, timed out or were dead-lettered in the last hour.",
        "failed_last_hour",
    ),
    (
        "cronwell_queue_oldest_pending_seconds",
        "How long the queue's oldest due execution has waited (0 when none waits).",
        "oldest_pending_seconds",
    ),
    (
        "cronwell_queue_throughput_per_minute",
        "Executions of the queue finished per minute, over the last 15 minutes.",
        "throughput_per_minute",
    ),
)
QUEUE_LATENESS = (("0.5", "lateness_p50_seconds"), ("0.95", "lateness_p95_seconds"))


def read_queue_readings(conn, now: datetime) -> list[QueueReading]:
    """Every queue with its statistics at `now` (the store's `queue_stats`, one call)."""
    from sqlalchemy import select  # here: the worker parent records metrics without SQLAlchemy

    from app.models import Organization, Project, Queue
    from app.store import QueueStats, store_for

    q, p, o = Queue.__table__, Project.__table__, Organization.__table__
    rows = conn.execute(
        select(q.c.id, o.c.name, p.c.name, q.c.name, q.c.paused)
        .join(p, p.c.id == q.c.project_id)
        .join(o, o.c.id == p.c.organization_id)
        .order_by(o.c.name, p.c.name, q.c.name)
    ).fetchall()
    stats = store_for(conn).queue_stats(conn, now)
    return [
        QueueReading(project, name, bool(paused), stats.get(queue_id) or QueueStats(), organization)
        for queue_id, organization, project, name, paused in rows
    ]


def read_snapshot(engine, now: datetime) -> Snapshot:
    """Queue depth, oldest due wait, in-flight count, open alerts, heartbeat ages and per-queue
    statistics, in one short read."""
    from sqlalchemy import func, select

    from app.models import Alert, Heartbeat
    from app.store import store_for

    h, a = Heartbeat.__table__, Alert.__table__
    with engine.connect() as conn:
        queue = store_for(conn).queue_counts(conn, now)
        open_alerts = conn.execute(select(func.count()).where(a.c.resolved_at.is_(None))).scalar()
        beats = conn.execute(select(h.c.kind, h.c.id, h.c.last_seen)).fetchall()
        queues = read_queue_readings(conn, now)
    return Snapshot(
        queues=queues,
        taken_at=now,
        queue_depth=queue.depth,
        oldest_pending_age=max(0.0, (now - queue.oldest_due_at).total_seconds()) if queue.oldest_due_at else 0.0,
        in_flight=queue.in_flight,
        open_alerts=open_alerts or 0,
        heartbeats=[(kind, pid, max(0.0, (now - seen).total_seconds())) for kind, pid, seen in beats],
    )


class DatabaseGauges:
    """A collector for the snapshot gauges: pushed by the scheduler tick, or pulled on scrape (web)."""

    def __init__(self, engine=None, *, max_age_seconds: float = 5.0) -> None:
        self.engine = engine  # set: read on scrape (web); None: wait for `refresh` (scheduler)
        self.max_age_seconds = max_age_seconds
        self.snapshot: Snapshot | None = None
        self.readable = True
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def due(self) -> bool:
        return time.monotonic() - self._read_at >= self.max_age_seconds

    def refresh(self, engine, now: datetime) -> None:
        """Read a new snapshot; a database error is logged and shown as cronwell_database_readable 0."""
        with self._lock:
            self._read_at = time.monotonic()
            try:
                self.snapshot, self.readable = read_snapshot(engine, now), True
            except Exception:  # metrics must never break a tick or a scrape
                self.readable = False
                log.warning(
                    "could not read the metrics snapshot", exc_info=True, extra={"event": "metrics_snapshot_failed"}
                )

    def collect(self) -> Iterable:
        from prometheus_client.core import GaugeMetricFamily

        if self.engine is not None and self.due():
            self.refresh(self.engine, utcnow())
        yield GaugeMetricFamily(
            "cronwell_database_readable",
            "1 when the last metrics snapshot read succeeded.",
            value=1 if self.readable else 0,
        )
        snap = self.snapshot
        if snap is None:
            return
        for name, doc, value in (
            (
                "cronwell_queue_depth",
                "Executions due and claimable now (pending or due retry_scheduled).",
                snap.queue_depth,
            ),
            (
                "cronwell_queue_oldest_pending_age_seconds",
                "How long the oldest due claimable execution has waited.",
                snap.oldest_pending_age,
            ),
            ("cronwell_executions_in_flight", "Executions claimed or running.", snap.in_flight),
            ("cronwell_alerts_open", "Unresolved alerts.", snap.open_alerts),
            (
                "cronwell_snapshot_timestamp_seconds",
                "When these gauges were read from the database (Unix time).",
                snap.taken_at.timestamp(),
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        beats = GaugeMetricFamily(
            "cronwell_heartbeat_age_seconds", "Seconds since each process's last heartbeat.", labels=["kind", "process"]
        )
        for kind, process_id, age in snap.heartbeats:
            beats.add_metric([kind, process_id], age)
        yield beats
        yield from _queue_families(snap.queues)


def _queue_families(readings: list[QueueReading]) -> Iterable:
    """The per-queue gauges, labelled by organization, project and queue (a queue's name is unique
    only within its project, a project's within its organization)."""
    from prometheus_client.core import GaugeMetricFamily

    labels = ["organization", "project", "queue"]
    for name, doc, attribute in QUEUE_GAUGES:
        family = GaugeMetricFamily(name, doc, labels=labels)
        for reading in readings:
            family.add_metric(
                [reading.organization, reading.project, reading.name], getattr(reading.stats, attribute) or 0
            )
        yield family
    lateness = GaugeMetricFamily(
        "cronwell_queue_fire_lateness_seconds",
        "Start minus scheduled time of the queue's scheduled runs over the last 15 minutes, by quantile.",
        labels=[*labels, "quantile"],
    )
    for reading in readings:
        for quantile, attribute in QUEUE_LATENESS:
            value = getattr(reading.stats, attribute)
            if value is not None:
                lateness.add_metric([reading.organization, reading.project, reading.name, quantile], value)
    yield lateness
    paused = GaugeMetricFamily("cronwell_queue_paused", "1 while the queue is paused.", labels=labels)
    for reading in readings:
        paused.add_metric([reading.organization, reading.project, reading.name], 1 if reading.paused else 0)
    yield paused


_scheduler_gauges: DatabaseGauges | None = None


def enable_database_readings() -> None:
    """Let fire lateness and the scheduler's gauges query the database (this process serves metrics)."""
    global _readings_enabled
    _readings_enabled = True


def refresh_database_gauges(engine, now: datetime) -> None:
    """Called by each scheduler tick; reads the snapshot at most every few seconds, when serving."""
    gauges = _scheduler_gauges
    if gauges is None or not _readings_enabled or not gauges.due():
        return
    gauges.refresh(engine, now)


def serve(port: int, host: str = "127.0.0.1", *, role: str) -> None:
    """Serve this process's metrics over HTTP on a background thread (scheduler and worker)."""
    global _scheduler_gauges
    from prometheus_client import REGISTRY, start_http_server

    enable_recording()
    enable_database_readings()
    for name in ("engine", role):
        _get(name)  # export the role's series (at zero) from the first scrape
    if role == "scheduler" and _scheduler_gauges is None:
        _scheduler_gauges = DatabaseGauges()
        REGISTRY.register(_scheduler_gauges)
    start_http_server(port, addr=host)


def render_web_metrics(gauges: DatabaseGauges) -> tuple[bytes, str]:
    """The web's /metrics body: this (or every gunicorn) process's series plus the database gauges."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    if multiprocess_dir():
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_Forward(REGISTRY))
    registry.register(gauges)
    return generate_latest(registry), CONTENT_TYPE_LATEST


class _Forward:
    """Collect from another registry (single-process mode: this process's own instruments)."""

    def __init__(self, registry) -> None:
        self.registry = registry

    def collect(self):
        return self.registry.collect()
