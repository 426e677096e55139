"""The worker registry: every worker process the heartbeats know, as operators see it.

A worker writes its state (running | draining | stopped), slots, queues and the executions it
runs into its heartbeat (app/services/engine/worker.py), and the tasks it advertises with their
code versions beside it (it claims only those; explain says when no live worker offers a run's task); a heartbeat older than
HEARTBEAT_STALE_SECONDS that was not marked stopped reads as `stale` (killed, hung or cut off).
Stopped and stale workers stay listed until HEARTBEAT_PRUNE_SECONDS removes their rows.
Used by `flask worker list` and the workers page; `worker_to_dict` is the JSON shape of both.
Workers are the site's, shared by every organization: a caller narrowed to an organization sees
every worker but only the running executions of its own jobs.

What a worker runs is read from the executions, not only from its last heartbeat: a heartbeat is
a snapshot up to a few seconds old, and a killed worker's last one goes on naming runs that have
finished since and misses the one it claimed last. So a live worker shows the runs its heartbeat
names that are still in flight, plus any in-flight run claimed by it that the heartbeat missed;
a stale or stopped worker runs nothing: its in-flight runs are listed as lost (recovered when
their lease expires), and the runs it lost that lease recovery already settled as recovered,
with the status they have now.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from flask import current_app
from sqlalchemy import select

from app.clock import iso_z
from app.domain.states import AttemptStatus, ExecutionStatus, WorkerState, process_state, process_status
from app.extensions import db
from app.models import Attempt, Execution, Heartbeat, Job
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
class LostExecution:
    """A run of a worker that died: still waiting for its lease to expire, or already recovered."""

    id: int
    job_id: int | None
    job_name: str | None
    status: str  # its status now: running (lease not yet expired), retry_scheduled, dead_lettered...
    recovered: bool
    lease_expires_at: datetime | None = None


_IN_FLIGHT = (ExecutionStatus.CLAIMED.value, ExecutionStatus.RUNNING.value)
LOST_SHOWN = 20  # recovered runs listed per dead worker (its newest)


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
    pending_command: str | None = None  # drain | stop | reload, stored but not yet taken by the worker
    lost: list[LostExecution] = field(default_factory=list)  # a stale or stopped worker's runs
    # The tasks it advertises, {name: code version}; None for a worker of an older release, which
    # advertises nothing and claims every task.
    tasks: dict[str, str] | None = None
    reloading: bool = False  # finishing what runs before it restarts its fork server on new code

    @property
    def idle(self) -> bool:
        return self.busy == 0

    def serves(self, queue_name: str) -> bool:
        """Whether this worker claims from queue `queue_name` (it serves all queues or that one)."""
        return "*" in self.queues or queue_name in self.queues

    def offers(self, task: str) -> bool:
        """Whether this worker may claim a run of `task` (one that advertises nothing may)."""
        return self.tasks is None or task in self.tasks

    @property
    def versions(self) -> list[tuple[str, int]]:
        """The code versions of its tasks, each with how many tasks have it, most first."""
        counts: dict[str, int] = {}
        for version in (self.tasks or {}).values():
            counts[version] = counts.get(version, 0) + 1
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


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
        tasks=dict(beat.tasks) if isinstance(beat.tasks, dict) else None,
        reloading=bool(info.get("reloading")) and state is WorkerState.RUNNING,
    )


def _in_flight_by_worker(worker_ids: list[str]) -> dict[str, list]:
    """Worker id -> the in-flight executions it holds (claimed_by), from the executions table."""
    rows = db.session.execute(
        select(
            Execution.id,
            Execution.job_id,
            Job.name,
            Execution.attempts,
            Execution.started_at,
            Execution.claimed_by,
            Execution.status,
            Execution.lease_expires_at,
        )
        .outerjoin(Job, Job.id == Execution.job_id)
        .where(Execution.status.in_(_IN_FLIGHT), Execution.claimed_by.in_(worker_ids))
        .order_by(Execution.id)
    ).all()
    found: dict[str, list] = {}
    for row in rows:
        found.setdefault(row.claimed_by, []).append(row)
    return found


def _recovered_of(view: WorkerView) -> list[LostExecution]:
    """The runs a dead worker lost that lease recovery settled (its abandoned attempts since it started)."""
    rows = db.session.execute(
        select(Execution.id, Execution.job_id, Job.name, Execution.status)
        .select_from(Attempt)
        .join(Execution, Execution.id == Attempt.execution_id)
        .outerjoin(Job, Job.id == Execution.job_id)
        .where(
            Attempt.worker_id == view.id,
            Attempt.status == AttemptStatus.ABANDONED.value,
            Attempt.started_at >= view.started_at,
        )
        .order_by(Attempt.id.desc())
        .limit(LOST_SHOWN)
    ).all()
    return [LostExecution(row.id, row.job_id, row.name, row.status, recovered=True) for row in rows]


def _truthful(views: list[WorkerView]) -> list[WorkerView]:
    """Each view's runs checked against the executions table (see the module's docstring)."""
    if not views:
        return views
    in_flight = _in_flight_by_worker([view.id for view in views])
    checked = []
    for view in views:
        held = in_flight.get(view.id, [])
        if view.state in (WorkerState.RUNNING, WorkerState.DRAINING):
            ids = {row.id for row in held}
            executions = [item for item in view.executions if item.id in ids]
            named = {item.id for item in executions}
            executions += [
                RunningExecution(row.id, row.job_id, row.name, row.attempts, row.started_at)
                for row in held
                if row.id not in named
            ]
            checked.append(replace(view, executions=executions, busy=len(executions)))
            continue
        lost = [
            LostExecution(
                row.id, row.job_id, row.name, row.status, recovered=False, lease_expires_at=row.lease_expires_at
            )
            for row in held
        ]
        checked.append(replace(view, executions=[], busy=0, lost=lost + _recovered_of(view)))
    return checked


def _visible(views: list[WorkerView], caller: Caller | None) -> list[WorkerView]:
    """The views with only the running (or lost) executions the caller may see (its jobs' runs,
    and the one-off runs of its projects)."""
    views = _truthful(views)
    jobs = scoping.job_ids(caller)
    if jobs is None:
        return views
    mine = set(db.session.scalars(jobs))
    one_off_ids = {item.id for view in views for item in view.executions if item.job_id is None}
    one_off_ids |= {item.id for view in views for item in view.lost if item.job_id is None}
    visible = set()
    if one_off_ids:
        query = scoping.executions(select(Execution.id).where(Execution.id.in_(one_off_ids)), caller)
        visible = set(db.session.scalars(query))

    def shown(item: RunningExecution | LostExecution) -> bool:
        return item.job_id in mine if item.job_id is not None else item.id in visible

    return [
        replace(
            view,
            executions=[item for item in view.executions if shown(item)],
            lost=[item for item in view.lost if shown(item)],
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


def live_serving(views: list[WorkerView], queue_name: str) -> list[WorkerView]:
    """The running workers (not draining, stale or stopped) that claim from queue `queue_name`."""
    return [view for view in views if view.state is WorkerState.RUNNING and view.serves(queue_name)]


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
        "reloading": view.reloading,
        "tasks": view.tasks,
        "lost": [
            {
                "id": item.id,
                "job_id": item.job_id,
                "job_name": item.job_name,
                "status": item.status,
                "recovered": item.recovered,
                "lease_expires_at": iso_z(item.lease_expires_at),
            }
            for item in view.lost
        ],
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
