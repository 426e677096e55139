"""Metrics, the exposition half: the gauges read from the database (queue depth, oldest wait, in
flight, open alerts, heartbeat ages, per-queue statistics), the HTTP server a scheduler or worker
starts for `--metrics-port`, and the web's `/metrics` body. The instruments and the recording
calls are app/metrics.py; this module is imported only by a process that serves metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from app import metrics as recording
from app.clock import utcnow

if TYPE_CHECKING:
    from app.store import QueueStats

log = logging.getLogger("cronwell.metrics")


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


def refresh_database_gauges(engine, now: datetime) -> None:
    """Called by each scheduler tick; reads the snapshot at most every few seconds, when serving."""
    gauges = _scheduler_gauges
    if gauges is None or not recording.database_readings_enabled() or not gauges.due():
        return
    gauges.refresh(engine, now)


def serve(port: int, host: str = "127.0.0.1", *, role: str) -> None:
    """Serve this process's metrics over HTTP on a background thread (scheduler and worker)."""
    global _scheduler_gauges
    from prometheus_client import REGISTRY, start_http_server

    recording.enable_recording()
    recording.enable_database_readings()
    for name in ("engine", role):
        recording.instruments(name)  # export the role's series (at zero) from the first scrape
    if role == "scheduler" and _scheduler_gauges is None:
        _scheduler_gauges = DatabaseGauges()
        REGISTRY.register(_scheduler_gauges)
    start_http_server(port, addr=host)


def render_web_metrics(gauges: DatabaseGauges) -> tuple[bytes, str]:
    """The web's /metrics body: this (or every gunicorn) process's series plus the database gauges."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    if recording.multiprocess_dir():
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
