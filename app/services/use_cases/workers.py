"""Operators' orders to workers: drain (finish what runs, then exit), stop now, or reload (finish
what runs, restart the fork server with the task code now on disk, advertise it, go on).

The order is stored (`worker_commands`) and announced with NOTIFY on the control channel, with
the worker's id as payload; the worker also polls for it, so it acts within about a second
either way (app/services/engine/worker_commands.py). Every order is audited.
"""

from __future__ import annotations

from datetime import datetime

from app.database import begin_write
from app.domain.states import WorkerCommandKind, WorkerState
from app.extensions import db
from app.services import audit_trail
from app.services.engine import wakeups, worker_commands
from app.services.errors import Conflict
from app.services.events import record_event
from app.services.read.workers import WorkerView, get_worker, list_workers


def stop_worker(worker_id: str, *, now: datetime, actor: str, at_once: bool = False) -> WorkerView:
    """Order a live worker to drain (default) or to stop at once (`at_once`: its running tasks are
    killed and settled as abandoned, so they are retried per their job's policy). Returns the
    worker as the registry shows it, with the order pending."""
    command = WorkerCommandKind.STOP if at_once else WorkerCommandKind.DRAIN
    begin_write(db.session)
    worker = get_worker(worker_id, now)
    if worker.state is WorkerState.STOPPED:
        raise Conflict(f"worker {worker_id} is already stopped")
    if worker.state is WorkerState.STALE:
        raise Conflict(
            f"worker {worker_id} is stale (no heartbeat for {worker.age_seconds:.0f} s): it is not running, so it "
            "cannot take orders; lease recovery settles its work"
        )
    if command is WorkerCommandKind.DRAIN and (
        worker.state is WorkerState.DRAINING or worker.pending_command is not None
    ):
        raise Conflict(f"worker {worker_id} is already draining or stopping; use --now to stop it at once")
    if command is WorkerCommandKind.STOP and worker.pending_command == WorkerCommandKind.STOP.value:
        raise Conflict(f"worker {worker_id} has already been told to stop")
    _issue(worker, command, now=now, actor=actor, action="stop_requested" if at_once else "drain_requested")
    db.session.commit()
    return get_worker(worker_id, now)


def reload_worker(worker_id: str | None, *, now: datetime, actor: str) -> list[WorkerView]:
    """Order a live worker (every running one when `worker_id` is None) to reload its task code:
    it claims nothing more until its running attempts are finished and recorded, restarts its fork
    server on the code now on disk, advertises the new catalog and goes on. Returns the workers
    told, as the registry shows them."""
    begin_write(db.session)
    if worker_id is not None:
        worker = get_worker(worker_id, now)
        if worker.state is WorkerState.STOPPED:
            raise Conflict(f"worker {worker_id} is stopped: its next start runs the new code")
        if worker.state is WorkerState.STALE:
            raise Conflict(
                f"worker {worker_id} is stale (no heartbeat for {worker.age_seconds:.0f} s): it is not running, so it "
                "cannot take orders"
            )
        if worker.state is WorkerState.DRAINING or worker.pending_command in ("drain", "stop"):
            raise Conflict(f"worker {worker_id} is draining or stopping: its next start runs the new code")
        if worker.pending_command == WorkerCommandKind.RELOAD.value:
            raise Conflict(f"worker {worker_id} has already been told to reload")
        workers = [worker]
    else:
        workers = [w for w in list_workers(now) if w.state is WorkerState.RUNNING and w.pending_command is None]
        if not workers:
            raise Conflict("no running worker to reload (see `flask worker list`)")
    for worker in workers:
        _issue(worker, WorkerCommandKind.RELOAD, now=now, actor=actor, action="reload_requested")
    db.session.commit()
    return [get_worker(worker.id, now) for worker in workers]


def _issue(worker: WorkerView, command: WorkerCommandKind, *, now: datetime, actor: str, action: str) -> None:
    """Store `command` for `worker`, with its event and audit entry, and announce it."""
    conn = db.session.connection()
    command_id = worker_commands.issue(conn, worker_id=worker.id, command=command, issued_by=actor, now=now)
    record_event(
        f"worker_{command.value}_requested",
        now=now,
        actor=actor,
        worker_id=worker.id,
        command_id=command_id,
        busy=worker.busy,
    )
    after = {
        WorkerCommandKind.STOP: "stopping",
        WorkerCommandKind.DRAIN: WorkerState.DRAINING.value,
        WorkerCommandKind.RELOAD: "reloading",
    }[command]
    audit_trail.record_change(
        actor,
        action,
        "worker",
        worker.id,
        {"state": worker.state.value},
        {"state": after},
        now=now,
        label=worker.id,
        extra={"command_id": command_id},
    )
    wakeups.notify(conn, wakeups.CONTROL_CHANNEL, worker.id)
