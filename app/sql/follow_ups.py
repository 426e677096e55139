"""What follows a run that reached its end, in the transaction that recorded it: its job's
callback and, for a batch's last item, the batch's completion and on-complete callback
(app/services/engine/callbacks.py decides which; these are its statements)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cache, lru_cache
from types import SimpleNamespace
from typing import Any

from app.domain.states import TERMINAL
from app.sql.statuses import sql_statuses
from app.sql.transport import DBConnection, Statement, execute, with_lists

# The executions columns whose values are datetimes or JSON documents, for a row inserted as text
# (tests/integration/test_sql_transport.py checks them against the model's column types).
EXECUTION_DATETIMES = frozenset(
    {
        "scheduled_for",
        "cancel_requested_at",
        "available_at",
        "lease_expires_at",
        "started_at",
        "finished_at",
        "created_at",
        "updated_at",
    }
)
EXECUTION_DOCUMENTS = frozenset({"config_override", "upstream_results"})

_ENDED_WITH_JOBS = f"""
SELECT e.id, e.job_id, e."trigger", e.status, e.exit_code, e.error, e.batch_id, e.callback_task,
       e.attempts, e.finished_at, j.name AS job_name, j.on_success, j.on_success_config,
       j.on_failure, j.on_failure_config, j.queue_id, j.priority, j.max_attempts, j.overlap_policy, e.result,
       e.workflow_run_id
FROM executions AS e JOIN jobs AS j ON e.job_id = j.id
WHERE e.id {{ids}} AND e.status IN ({sql_statuses(TERMINAL)})
"""
ENDED_WITH_JOBS = with_lists(_ENDED_WITH_JOBS, {"ids": "bigint"}, returns_datetimes=(9,), returns_documents=(12, 14))

# Named batches wait for their row locks (a worker's turn); the sweep skips locked ones (their
# holder settles them). SQLite's write lock already serialises the turns.
_LOCK_BATCHES = "SELECT id FROM batches WHERE completed_at IS NULL{named} ORDER BY id"
LOCK_NAMED_BATCHES = with_lists(
    _LOCK_BATCHES.format(named=" AND id {ids}") + " FOR UPDATE",
    {"ids": "bigint"},
    sqlite_text=_LOCK_BATCHES.format(named=" AND id {ids}"),
)
LOCK_OPEN_BATCHES = Statement(
    _LOCK_BATCHES.format(named="") + " FOR UPDATE SKIP LOCKED", sqlite_text=_LOCK_BATCHES.format(named="")
)
_COMPLETE = f"""
UPDATE batches SET completed_at = :now
WHERE id {{locked}} AND completed_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM executions AS e WHERE e.batch_id = batches.id AND e."trigger" = 'batch'
                  AND e.status NOT IN ({sql_statuses(TERMINAL)}))
RETURNING id, job_id, on_complete, on_complete_config, cancelled_at
"""
COMPLETE_BATCHES = with_lists(
    _COMPLETE, {"locked": "bigint"}, datetimes=("now",), returns_documents=(3,), returns_datetimes=(4,)
)
_BATCH_COUNTS = """
SELECT batch_id, status, count(*) FROM executions
WHERE batch_id {ids} AND "trigger" = 'batch' GROUP BY batch_id, status
"""
BATCH_COUNTS = with_lists(_BATCH_COUNTS, {"ids": "bigint"})
JOBS_FOR_CALLBACKS = with_lists(
    "SELECT id, name, queue_id, priority, max_attempts, overlap_policy FROM jobs WHERE id {ids}", {"ids": "bigint"}
)


def ended_with_jobs(conn: DBConnection, execution_ids: Sequence[int]) -> list[SimpleNamespace]:
    """The executions of `execution_ids` that have ended, each with what of its job a callback needs."""
    return execute(conn, ENDED_WITH_JOBS, {"ids": sorted(set(execution_ids))}).records()


def complete_batches(
    conn: DBConnection, *, now: datetime, batch_ids: Sequence[int] | None = None
) -> list[SimpleNamespace]:
    """Mark complete the open batches (of `batch_ids`, or all: the sweep) whose every item has
    ended: (id, job_id, on_complete, on_complete_config, cancelled_at), by id.

    Each batch row is locked first, in id order, and its items are counted in the statement after
    the lock, which on PostgreSQL sees every item committed before the lock was granted: of two
    workers ending a batch's last two items at once, the one locking second sees both ended, so
    some recorder always completes it; `completed_at IS NULL` makes it once."""
    if batch_ids is not None:
        if not batch_ids:
            return []
        locked = [row[0] for row in execute(conn, LOCK_NAMED_BATCHES, {"ids": sorted(set(batch_ids))}).rows]
    else:
        locked = [row[0] for row in execute(conn, LOCK_OPEN_BATCHES).rows]
    if not locked:
        return []
    completed = execute(conn, COMPLETE_BATCHES, {"now": now, "locked": locked}).records()
    return sorted(completed, key=lambda batch: batch.id)


def batch_counts(conn: DBConnection, batch_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """Items per status of each batch (trigger batch only: not its callback), {batch: {status: n}}."""
    if not batch_ids:
        return {}
    counts: dict[int, dict[str, int]] = {batch_id: {} for batch_id in batch_ids}
    for batch_id, status, count in execute(conn, BATCH_COUNTS, {"ids": sorted(set(batch_ids))}).rows:
        counts[batch_id][status] = count
    return counts


def jobs_for_callbacks(conn: DBConnection, job_ids: Sequence[int]) -> dict[int, SimpleNamespace]:
    """{id: job} with what a callback row needs of its job."""
    return {job.id: job for job in execute(conn, JOBS_FOR_CALLBACKS, {"ids": sorted(set(job_ids))}).records()}


@cache
def _insert_execution(columns: tuple[str, ...]) -> Statement:
    names = ", ".join(f'"{column}"' for column in columns)
    values = ", ".join(f":{column}" for column in columns)
    return Statement(
        f"INSERT INTO executions ({names}) VALUES ({values}) ON CONFLICT DO NOTHING RETURNING id",
        datetimes=tuple(column for column in columns if column in EXECUTION_DATETIMES),
        documents=tuple(column for column in columns if column in EXECUTION_DOCUMENTS),
    )


# Rows per INSERT of `insert_executions`: a fan-out's steps in one round trip, far inside either
# database's limit on a statement's parameters (about 25 per row).
INSERT_BATCH = 100


@lru_cache(maxsize=INSERT_BATCH)
def _insert_executions(columns: tuple[str, ...], count: int) -> Statement:
    names = ", ".join(f'"{column}"' for column in columns)
    values = ", ".join("(" + ", ".join(f":{column}_{i}" for column in columns) + ")" for i in range(count))
    return Statement(
        f"INSERT INTO executions ({names}) VALUES {values} ON CONFLICT DO NOTHING RETURNING id, idempotency_key",
        datetimes=tuple(f"{column}_{i}" for i in range(count) for column in columns if column in EXECUTION_DATETIMES),
        documents=tuple(f"{column}_{i}" for i in range(count) for column in columns if column in EXECUTION_DOCUMENTS),
    )


EXECUTION_BY_KEY = Statement("SELECT id FROM executions WHERE idempotency_key = :key")


def execution_by_key(conn: DBConnection, key: str) -> int | None:
    """The id of the execution with idempotency key `key`, if any."""
    found: int | None = execute(conn, EXECUTION_BY_KEY, {"key": key}).scalar()
    return found


def insert_executions(conn: DBConnection, rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Create executions that share their columns (a workflow's steps, `workflows._step_row`),
    INSERT_BATCH to a statement, skipping those whose idempotency key exists: {key: id} of the
    ones created."""
    created: dict[str, int] = {}
    for start in range(0, len(rows), INSERT_BATCH):
        chunk = rows[start : start + INSERT_BATCH]
        columns = tuple(chunk[0])
        params = {f"{column}_{i}": row[column] for i, row in enumerate(chunk) for column in columns}
        for execution_id, key in execute(conn, _insert_executions(columns, len(chunk)), params).rows:
            created[key] = execution_id
    return created


def insert_execution(conn: DBConnection, row: Mapping[str, Any]) -> int | None:
    """Create one execution (a callback, `rows.callback_row`) unless its idempotency key exists:
    its id, or None when it was already there (a callback recorded twice is created once)."""
    created: int | None = execute(conn, _insert_execution(tuple(row)), row).scalar()
    return created
