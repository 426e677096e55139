"""The worker registry: every worker process the heartbeats know, as operators see it.

A worker writes its state (running | draining | stopped), slots, queues and the executions it
runs into its heartbeat (app/services/engine/worker.py); a heartbeat older than
HEARTBEAT_STALE_SECONDS that was not marked stopped reads as `stale` (killed, hung or cut off).
Stopped and stale workers stay listed until HEARTBEAT_PRUNE_SECONDS removes their rows.
Used by `flask worker list` and the workers page; `worker_to_dict` is the JSON shape of both.
Workers are the site's, shared by every organization: a caller narrowed to an organization sees
every worker but only the running executions of its own jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from flask import current_app
from sqlalchemy import select

from app.clock import iso_z
from app.domain.states import WorkerState, process_state, process_status
from app.extensions import db
from app.models import Execution, Heartbeat
from app.services import scoping
from app.services.caller import Caller
from app.services.engine import worker_commands
from app.services.errors import NotFound


@dataclass(frozen=True)
class RunningExecution:
    id: int
    job_id: int | None
    job_name: str | None
    attempt: int | None
    started_at: datetime | None


@dataclass(frozen=True)
class WorkerView:
    id: str
    host: str
    pid: int
    state: WorkerState
    queues: list[str]
    slots: int
    busy: int
    started_at: datetime
    last_seen: datetime
    age_seconds: float
    executions: list[RunningExecution] = field(default_factory=list)
    pending_command: str | None = None  # drain | stop, stored but not yet taken by the worker

    @property
    def idle(self) -> bool:
        return self.busy == 0


def worker_state(info: dict, age_seconds: float, stale_after_seconds: int) -> WorkerState:
    """Stopped when the worker said so; stale when its heartbeat is too old; else what it wrote."""
    return process_state(info.get("state"), age_seconds, stale_after_seconds)


def _instant(text: str | None) -> datetime | None:
    """An instant the worker wrote with iso_z (`...Z`) back as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _view(beat: Heartbeat, now: datetime, stale_after: int, pending: str | None) -> WorkerView:
    info = beat.info or {}
    age = max(0.0, (now - beat.last_seen).total_seconds())
    state = worker_state(info, age, stale_after)
    running = [] if state is WorkerState.STOPPED else list(info.get("executions") or [])
    if not running and state is not WorkerState.STOPPED:  # heartbeats of older releases: ids only
        running = [{"id": execution_id} for execution_id in info.get("running") or []]
    return WorkerView(
        id=beat.id,
        host=beat.host,
        pid=beat.pid,
        state=state,
        queues=list(info.get("queues") or ["*"]),
        slots=int(info.get("slots") or 0),
        busy=0 if state is WorkerState.STOPPED else int(info.get("busy") or len(running)),
        started_at=beat.started_at,
        last_seen=beat.last_seen,
        age_seconds=round(age, 3),
        executions=[
            RunningExecution(
                id=item["id"],
                job_id=item.get("job_id"),
                job_name=item.get("job_name"),
                attempt=item.get("attempt"),
                started_at=_instant(item.get("started_at")),
            )
            for item in running
        ],
        pending_command=pending if state in (WorkerState.RUNNING, WorkerState.DRAINING) else None,
    )


def _visible(views: list[WorkerView], caller: Caller | None) -> list[WorkerView]:
    """The views with only the running executions the caller may see (its jobs' runs, and the
    one-off runs of its projects)."""
    jobs = scoping.job_ids(caller)
    if jobs is None:
        return views
    mine = set(db.session.scalars(jobs))
    one_off_ids = {item.id for view in views for item in view.executions if item.job_id is None}
    visible = set()
    if one_off_ids:
        query = scoping.executions(select(Execution.id).where(Execution.id.in_(one_off_ids)), caller)
        visible = set(db.session.scalars(query))
    return [
        replace(
            view,
            executions=[
                item
                for item in view.executions
                if (item.job_id in mine if item.job_id is not None else item.id in visible)
            ],
        )
        for view in views
    ]


def list_workers(now: datetime, caller: Caller | None = None) -> list[WorkerView]:
    """Every worker with a heartbeat: live ones first (running, draining), then stale and stopped, by id."""
    stale_after = current_app.config["HEARTBEAT_STALE_SECONDS"]
    beats = list(db.session.scalars(select(Heartbeat).where(Heartbeat.kind == "worker").order_by(Heartbeat.id)))
    pending = worker_commands.unacted(db.session.connection(), [beat.id for beat in beats]) if beats else {}
    views = [_view(beat, now, stale_after, getattr(pending.get(beat.id), "value", None)) for beat in beats]
    order = [WorkerState.RUNNING, WorkerState.DRAINING, WorkerState.STALE, WorkerState.STOPPED]
    return sorted(_visible(views, caller), key=lambda view: (order.index(view.state), view.id))


def get_worker(worker_id: str, now: datetime, caller: Caller | None = None) -> WorkerView:
    """One worker of the registry; NotFound when no worker heartbeat has that id."""
    # An id no heartbeat can have is simply unknown (and never reaches the database: PostgreSQL
    # refuses NUL characters in text).
    beat = None if len(worker_id) > 200 or "\x00" in worker_id else db.session.get(Heartbeat, worker_id)
    if beat is None or beat.kind != "worker":
        raise NotFound(f"worker {worker_id} does not exist")
    pending = worker_commands.unacted(db.session.connection(), [worker_id]).get(worker_id)
    view = _view(beat, now, current_app.config["HEARTBEAT_STALE_SECONDS"], getattr(pending, "value", None))
    return _visible([view], caller)[0]


def worker_to_dict(view: WorkerView) -> dict:
    """The JSON shape of one worker (`flask worker list --json`, the workers page)."""
    return {
        "id": view.id,
        "host": view.host,
        "pid": view.pid,
        "state": view.state.value,
        "status": process_status(view.state).value,
        "busy": view.busy,
        "idle": view.idle,
        "slots": view.slots,
        "queues": view.queues,
        "started_at": iso_z(view.started_at),
        "last_seen": iso_z(view.last_seen),
        "age_seconds": view.age_seconds,
        "pending_command": view.pending_command,
        "executions": [
            {
                "id": item.id,
                "job_id": item.job_id,
                "job_name": item.job_name,
                "attempt": item.attempt,
                "started_at": iso_z(item.started_at),
            }
            for item in view.executions
        ],
    }
