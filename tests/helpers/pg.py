"""PostgreSQL helpers for race tests: a starting gate built from a table lock.

Processes start at different speeds (importing the app takes most of a second), so "start four
workers at once" would really mean "the first one gets a head start". `starting_gate` holds
`LOCK TABLE executions IN EXCLUSIVE MODE`: plain reads still work, but every claim and lease
recovery (SELECT ... FOR UPDATE, UPDATE) waits on it. The test waits until every racer is
queued on the lock, then opens the gate, and they all go at the same instant.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from tests.helpers.processes import wait_for

_WAITERS = """
SELECT count(*) FROM pg_locks AS l
JOIN pg_class AS c ON c.oid = l.relation
WHERE c.relname = %s AND NOT l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


def plain_url(url: str) -> str:
    """A psycopg URL from an SQLAlchemy one (postgresql+psycopg:// -> postgresql://)."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


class Gate:
    def __init__(self, url: str, table: str) -> None:
        self.table = table
        self._holder = psycopg.connect(url)
        self._observer = psycopg.connect(url, autocommit=True)
        self._holder.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")

    def waiting(self) -> int:
        """How many other sessions are blocked on the lock."""
        return self._observer.execute(_WAITERS, (self.table,)).fetchone()[0]

    def wait_for_waiters(self, count: int, *, within: float, describe=lambda: "") -> None:
        wait_for(
            lambda: self.waiting() >= count,
            within=within,
            what=lambda: f"{count} sessions queued on the {self.table} lock\n{describe()}",
        )

    def open(self) -> None:
        if not self._holder.closed:
            self._holder.commit()
            self._holder.close()

    def close(self) -> None:
        self.open()
        self._observer.close()


@contextmanager
def starting_gate(url: str, table: str = "executions") -> Iterator[Gate]:
    """Hold the table lock until `gate.open()` (or the end of the block)."""
    gate = Gate(plain_url(url), table)
    try:
        yield gate
    finally:
        gate.close()
