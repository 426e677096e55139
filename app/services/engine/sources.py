"""Connections from either kind of source the engine's shared code is handed: the worker
parent's `Database` (bare DB-API connections, docs/adr/0012-worker-parent-on-dbapi.md) or a
SQLAlchemy Engine (the scheduler, the CLI, tests). Recovery and operators' commands run in both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeAlias

from app.sql.connections import Database
from app.sql.transport import DBConnection

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

# Where the engine's shared code gets connections: the worker parent's `Database` or a SQLAlchemy
# Engine (the scheduler, the CLI, tests).
Source: TypeAlias = "Database | Engine"


@contextmanager
def reading(source: Source) -> Iterator[DBConnection]:
    """A connection for reads from `source`: a `Database` or a SQLAlchemy Engine (the scheduler,
    the CLI and tests hand the engine code theirs; the worker parent its `Database`)."""
    if isinstance(source, Database):
        with source.reading() as conn:
            yield conn
    else:
        with source.connect() as conn:
            yield conn


@contextmanager
def writing(source: Source) -> Iterator[DBConnection]:
    """A write transaction from `source` (see `reading`), committed on success."""
    if isinstance(source, Database):
        with source.write_transaction() as conn:
            yield conn
    else:
        from app.database import write_transaction  # SQLAlchemy's, only for an Engine

        with write_transaction(source) as conn:
            yield conn
