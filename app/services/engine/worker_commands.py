"""Operators' orders to one worker (drain, stop now, reload), stored in `worker_commands`.

A command is a row so it survives a missed NOTIFY or a worker that is busy: the use case stores
it and notifies `cronwell_control` with the worker's id; the worker takes its unacted commands
on every wake (at least every CONTROL_POLL_SECONDS), stamping `acted_at` in the same statement
so a command is acted on once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from app.domain.states import WorkerCommandKind
from app.services.engine.sources import reading, writing
from app.sql import control

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection
from app.services.engine.sources import Source
from app.sql.transport import DBConnection

# `issue` and `unacted` (the use cases' side) import SQLAlchemy and the models where they run:
# the worker parent uses the rest without them (docs/adr/0012-worker-parent-on-dbapi.md).


def issue(conn: Connection, *, worker_id: str, command: WorkerCommandKind, issued_by: str, now: datetime) -> int:
    """Store an order for `worker_id`; returns the command's id."""
    from sqlalchemy import insert

    from app.models import WorkerCommand

    commands = WorkerCommand.__table__
    stmt = insert(commands).values(
        worker_id=worker_id, command=WorkerCommandKind(command).value, issued_by=issued_by, issued_at=now
    )
    return int(conn.execute(stmt.returning(commands.c.id)).scalar_one())


def has_unacted(conn: DBConnection, worker_id: str) -> bool:
    """Whether `worker_id` has orders waiting (a read, so a worker's check takes no write lock)."""
    return control.has_unacted(conn, worker_id)


def take(conn: DBConnection, *, worker_id: str, now: datetime) -> list[WorkerCommandKind]:
    """Stamp and return the worker's unacted orders, oldest first."""
    return [WorkerCommandKind(command) for command in control.take_commands(conn, worker_id=worker_id, now=now)]


# Which waiting order the registry shows when a worker has several: stop beats drain beats reload.
_STRENGTH = {WorkerCommandKind.RELOAD: 0, WorkerCommandKind.DRAIN: 1, WorkerCommandKind.STOP: 2}


def unacted(conn: Connection, worker_ids: list[str] | None = None) -> dict[str, WorkerCommandKind]:
    """The strongest order waiting for each worker (stop, then drain, then reload): {worker id: command}."""
    from sqlalchemy import select

    from app.models import WorkerCommand

    commands = WorkerCommand.__table__
    stmt = select(commands.c.worker_id, commands.c.command).where(commands.c.acted_at.is_(None))
    if worker_ids is not None:
        stmt = stmt.where(commands.c.worker_id.in_(worker_ids))
    found: dict[str, WorkerCommandKind] = {}
    for worker_id, command in conn.execute(stmt):
        kind = WorkerCommandKind(command)
        if worker_id not in found or _STRENGTH[kind] > _STRENGTH[found[worker_id]]:
            found[worker_id] = kind
    return found


# How often a worker looks for orders and cancel requests when no NOTIFY told it to (SQLite, a
# lost notification): the "about a second" an operator waits at most.
CONTROL_POLL_SECONDS = 1.0


@dataclass
class Orders:
    """What a worker found to do: commands (stamped acted) and cancel requests {id: by}."""

    commands: list[WorkerCommandKind] = field(default_factory=list)
    cancels: dict[int, str] = field(default_factory=dict)


class ControlCheck:
    """When a worker looks for its orders (at once after a NOTIFY naming it, otherwise every
    CONTROL_POLL_SECONDS) and the looking: one read of its unacted commands, one of its
    cancel-requested running rows (only while it runs something), and a write only when a
    command is waiting, so an idle check takes no write lock on SQLite."""

    def __init__(self, database: Source, worker_id: str, *, every: float = CONTROL_POLL_SECONDS) -> None:
        self.database = database  # an app.sql.connections.Database, or a SQLAlchemy Engine
        self.worker_id = worker_id
        self.every = every
        self._due = True
        self._last = float("-inf")

    def heard(self, payloads: list[str]) -> None:
        """NOTIFY payloads on the control channel: look at the next chance if one names us."""
        if self.worker_id in payloads:
            self._due = True

    @property
    def due(self) -> bool:
        """A NOTIFY named this worker since its last check (the next wake-up must check)."""
        return self._due

    def looked(self, *, orders: bool) -> None:
        """An idle worker's safety look read whether orders wait (app.sql.waiting.idle_look):
        that counts as a check of its commands; with orders waiting the next wake-up takes them."""
        self._last = time.monotonic()
        self._due = orders

    def check(self, now: datetime, *, running: bool) -> Orders:
        if not self._due and time.monotonic() - self._last < self.every:
            return Orders()
        self._due, self._last = False, time.monotonic()
        with reading(self.database) as conn:
            waiting = has_unacted(conn, self.worker_id)
            cancels = control.cancel_requests(conn, worker_id=self.worker_id) if running else {}
        orders = Orders(cancels=cancels)
        if waiting:
            with writing(self.database) as conn:
                orders.commands = take(conn, worker_id=self.worker_id, now=now)
        return orders
