"""The one database connection a worker keeps for its turns and the reads between them.

Keeping it spares each turn a connect; after any error it is closed and the next use opens a new
one, so a connection that failed once is never trusted again. Between transactions it is in
autocommit: a read leaves no transaction open for the next turn's BEGIN, and a turn that is a
single statement on PostgreSQL needs no BEGIN and COMMIT around it.

It runs what it is given and decides nothing about what a turn does; it never retries (the loop
decides what an error means).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from app.sql.connections import Database
from app.sql.transport import DBConnection

T = TypeVar("T")


class KeptConnection:
    """A worker's kept DB-API connection (see the module docstring)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._conn: DBConnection | None = None

    @contextmanager
    def transaction(self, *, single_statement: bool = False) -> Iterator[DBConnection]:
        """A write transaction on the kept connection. A turn that is a single statement
        (PostgreSQL, nothing but successes to record) runs it in autocommit: one statement is
        atomic on its own, and leaving out BEGIN and COMMIT saves a round trip on every turn."""
        if self._conn is None:
            self._conn = self.database.connect()
        try:
            if single_statement and self.database.dialect == "postgresql":
                yield self._conn
            else:
                with self.database.transaction(self._conn) as conn:
                    yield conn
        except Exception:
            self.drop()
            raise

    def read(self, read: Callable[[DBConnection], T]) -> T:
        """One read on the kept connection, in autocommit: no transaction is left open for the
        next turn's BEGIN."""
        if self._conn is None:
            self._conn = self.database.connect()
        try:
            return read(self._conn)
        except Exception:
            self.drop()
            raise

    def drop(self) -> None:
        """Close the kept connection (after an error, or at the end); the next use opens a new one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
