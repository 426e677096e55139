"""Operators' orders to workers: drain (finish what runs, then exit) or stop now.

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
from app.services.read.workers import WorkerView, get_worker


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
    conn = db.session.connection()
    command_id = worker_commands.issue(conn, worker_id=worker_id, command=command, issued_by=actor, now=now)
    record_event(
        f"worker_{command.value}_requested",
        now=now,
        actor=actor,
        worker_id=worker_id,
        command_id=command_id,
        busy=worker.busy,
    )
    audit_trail.record_change(
        actor,
        "stop_requested" if at_once else "drain_requested",
        "worker",
        worker_id,
        {"state": worker.state.value},
        {"state": "stopping" if at_once else WorkerState.DRAINING.value},
        now=now,
        label=worker_id,
        extra={"command_id": command_id},
    )
    wakeups.notify(conn, wakeups.CONTROL_CHANNEL, worker_id)
    db.session.commit()
    return get_worker(worker_id, now)
