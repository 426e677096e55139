"""Rate limits in the worker's claim: the SQL twin of app/domain/rate_limits.py for PostgreSQL's
turn, and SQLite's step, which uses the domain's functions under the write lock.

A limited row (a queue or a job) carries `rate_limit` in its canonical spelling (`10/minute`,
written by the definitions) and `rate_starts`, the epoch seconds of its last N starts, newest
first (a JSON array; NULL is empty). The claim reads both from the row it has locked, so turns
racing on one limited row serialize on it and each sees the starts the others recorded
(the reason is the one ADR 0008 gives for `slots_taken`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from app.domain.rate_limits import PERIODS, allowance, parse_rate_limit, record_starts
from app.sql.transport import DBConnection, Statement, execute, with_lists

# The turn's instant as epoch seconds (what `rate_starts` holds).
EPOCH_NOW = "CAST(EXTRACT(EPOCH FROM CAST(:now AS timestamptz)) AS double precision)"


def _count(alias: str) -> str:
    return f"CAST(split_part({alias}.rate_limit, '/', 1) AS integer)"


def _period(alias: str) -> str:
    cases = " ".join(f"WHEN '{name}' THEN {seconds}" for name, seconds in PERIODS.items())
    return f"(CASE split_part({alias}.rate_limit, '/', 2) {cases} END)"


def _starts(alias: str) -> str:
    return f"jsonb_array_elements_text(COALESCE({alias}.rate_starts, '[]'::jsonb))"


def room_sql(alias: str) -> str:
    """How many more starts the limit of row `alias` allows now (`allowance`); NULL when the row
    has no limit."""
    recent = f"(SELECT count(*) FROM {_starts(alias)} AS t(v) WHERE CAST(t.v AS double precision) > {EPOCH_NOW} - {_period(alias)})"
    return f"CASE WHEN {alias}.rate_limit IS NULL THEN NULL ELSE GREATEST(0, {_count(alias)} - {recent}) END"


def recorded_sql(alias: str, started: str) -> str:
    """Row `alias`'s `rate_starts` after `started` starts now (`record_starts`): the newest N."""
    return f"""(SELECT COALESCE(jsonb_agg(v ORDER BY v DESC), '[]'::jsonb) FROM (
        SELECT v FROM (SELECT CAST(t.v AS double precision) AS v FROM {_starts(alias)} AS t(v)
                       UNION ALL SELECT {EPOCH_NOW} FROM generate_series(1, {started})) AS every_start
        ORDER BY v DESC LIMIT {_count(alias)}) AS kept)"""


# --- SQLite: under the write lock, with the domain's functions ---------------------------------

_LIMITED = "SELECT id, rate_limit, rate_starts FROM {table} WHERE rate_limit IS NOT NULL AND id {{ids}}"
LIMITED_QUEUES = with_lists(_LIMITED.format(table="queues"), {"ids": "bigint"})
LIMITED_JOBS = with_lists(_LIMITED.format(table="jobs"), {"ids": "bigint"})
RECORD_QUEUE = Statement("UPDATE queues SET rate_starts = :starts WHERE id = :id", documents=("starts",))
RECORD_JOB = Statement("UPDATE jobs SET rate_starts = :starts WHERE id = :id", documents=("starts",))


class Pacer:
    """The rate limits of the queues and jobs a SQLite turn's candidates belong to: `take` says
    whether one more may start now (and counts it), `save` writes the new starts."""

    def __init__(self, conn: DBConnection, *, queue_ids: Iterable[int], job_ids: Iterable[int], now: datetime):
        self.now = now.timestamp()
        self.limits: dict[tuple[str, int], Any] = {}
        self.starts: dict[tuple[str, int], list[float]] = {}
        self.taken: dict[tuple[str, int], int] = {}
        for kind, statement, ids in (("queue", LIMITED_QUEUES, queue_ids), ("job", LIMITED_JOBS, job_ids)):
            wanted = sorted(set(ids))
            if not wanted:
                continue
            for row_id, text, starts in execute(conn, statement, {"ids": wanted}).rows:
                self.limits[(kind, row_id)] = parse_rate_limit(text)
                self.starts[(kind, row_id)] = _floats(starts)

    def take(self, *, queue_id: int | None, job_id: int | None) -> bool:
        """Whether a run of `job_id` (None: a one-off run, with no job's limit) in `queue_id` may
        start now under both limits; counted if so."""
        keys = [key for key in (("queue", queue_id or 0), ("job", job_id or 0)) if key in self.limits]
        for key in keys:
            if allowance(self.limits[key], self.starts[key], self.now) - self.taken.get(key, 0) <= 0:
                return False
        for key in keys:
            self.taken[key] = self.taken.get(key, 0) + 1
        return True

    def give_back(self, *, queue_id: int | None, job_id: int | None) -> None:
        """Undo a `take` whose start did not happen."""
        for key in (("queue", queue_id or 0), ("job", job_id or 0)):
            if self.taken.get(key):
                self.taken[key] -= 1

    def save(self, conn: DBConnection) -> None:
        for (kind, row_id), started in self.taken.items():
            if started:
                starts = record_starts(self.limits[(kind, row_id)], self.starts[(kind, row_id)], self.now, started)
                execute(conn, RECORD_QUEUE if kind == "queue" else RECORD_JOB, {"id": row_id, "starts": starts})


def _floats(value: Any) -> list[float]:
    if value is None:
        return []
    items: Sequence[Any] = json.loads(value) if isinstance(value, str) else value
    return [float(item) for item in items]


def starts_of(row: Mapping[str, Any]) -> list[float]:
    """A limited row's recorded starts as floats (for statistics and explain)."""
    return _floats(row.get("rate_starts"))
