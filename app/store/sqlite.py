"""The store on SQLite: its INSERT flavour, and the worker's turn, composed of plain steps under
the write lock (app/sql/turn.py: the caller's write transaction starts with BEGIN IMMEDIATE,
app/database.py, so select-then-update cannot race).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from app.sql import turn
from app.store.common import CommonStore
from app.store.rows import Finished, Turn, executions


class SqliteStore(CommonStore):
    dialect = "sqlite"

    def _insert(self) -> sqlite.Insert:
        return sqlite.insert(executions)

    def record_and_claim(
        self,
        conn: Connection,
        finished: Sequence[Finished],
        *,
        worker_id: str,
        now: datetime,
        limit: int,
        queue_ids: Sequence[int] | None,
        lease_seconds: int,
        buffer_seconds: int,
        tasks: Sequence[str] | None = None,
    ) -> Turn:
        """A worker's turn as steps under the write lock (app/sql/turn.py): record `finished`, then
        start up to `limit` due executions (pending | retry_scheduled -> running + Attempt row),
        cancelling those whose job was disabled. The same results as PostgreSQL's one statement
        (tests/integration/test_store_parity.py)."""
        return turn.record_and_claim(
            conn,
            finished,
            worker_id=worker_id,
            now=now,
            limit=limit,
            queue_ids=queue_ids,
            lease_seconds=lease_seconds,
            buffer_seconds=buffer_seconds,
            tasks=tasks,
        )
