"""The store: every SQL statement that creates, claims, moves or counts executions, or locks jobs.

`store_for(conn_or_engine)` returns the backend for that database (`Store`, app/store/interface.py):
`PostgresStore` (app/store/postgres.py) or `SqliteStore` (app/store/sqlite.py), both built on the
dialect-neutral statements of app/store/common.py. Methods take a SQLAlchemy Connection inside a
transaction the caller owns, and `now` as a parameter. Transitions are guarded (`WHERE id = :id
AND status IN (...)`, the set derived from the state machine): zero rows changed means another
process got there first, and the caller treats the row as lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.store.interface import Store
from app.store.rows import (
    DISABLED_BEFORE_RUN,
    ClaimedExecution,
    ExpiredLease,
    ExpiredRun,
    Finished,
    Outcome,
    QueueCounts,
    QueueStats,
    Turn,
    occurrence_key,
    occurrence_row,
    truncate,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine
    from sqlalchemy.orm import Session


_BACKENDS: dict[str, Store] = {}


def store_for(bind: Connection | Engine | Session) -> Store:
    """The store for the database behind `bind` (a Connection, Engine or Session), one per dialect."""
    name = bind.get_bind().dialect.name if hasattr(bind, "get_bind") else bind.dialect.name
    backend = _BACKENDS.get(name)
    if backend is None:
        if name == "postgresql":
            from app.store.postgres import PostgresStore

            backend = PostgresStore()
        elif name == "sqlite":
            from app.store.sqlite import SqliteStore

            backend = SqliteStore()
        else:
            raise ValueError(f"no store for the {name!r} database (PostgreSQL and SQLite are supported)")
        _BACKENDS[name] = backend
    return backend


__all__ = [
    "DISABLED_BEFORE_RUN",
    "ClaimedExecution",
    "ExpiredLease",
    "ExpiredRun",
    "Finished",
    "Outcome",
    "QueueCounts",
    "QueueStats",
    "Store",
    "Turn",
    "occurrence_key",
    "occurrence_row",
    "store_for",
    "truncate",
]
