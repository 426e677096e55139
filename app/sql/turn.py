"""The worker's turn: record the attempts that came back and start the next due executions, in
the caller's transaction, on whatever connection it holds (a bare psycopg or sqlite3 connection,
or a SQLAlchemy one; ADR 0012).

PostgreSQL does the whole turn in one statement (`TURN_SQL`), the hot path of the whole system:
one round trip per turn whatever the batch sizes (see `python -m bench throughput`). SQLite does
it as plain steps under the write lock: the caller has begun with BEGIN IMMEDIATE, so nobody else
writes between the candidate SELECT and the UPDATEs, select-then-update cannot race, and
claiming and starting are one step there too (no session ever sees a row claimed). SQLite has no
interval arithmetic, so its lease is computed in Python (`lease_duration`); PostgreSQL's is the
same rule as an expression (`lease_expires_at_sql`). Both turns' status guards and column lists
are rendered from the state machine and from the `ClaimedExecution` declaration, not written by
hand, and give the same results (tests/integration/test_store_parity.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from app.domain.policies import lease_duration
from app.domain.states import CLAIMABLE, QUEUED_CANCELLABLE, RECORDABLE, AttemptStatus, can_transition, sources_of
from app.domain.states import ExecutionStatus as S
from app.sql import turn_postgresql
from app.sql.candidates import CANDIDATE_ORDER, CANDIDATE_WHERE, TASK_JOIN, task_filter
from app.sql.queues import release_slots
from app.sql.rate_limits import Pacer
from app.sql.rows import (
    CLAIMED_FIELDS,
    DISABLED_BEFORE_RUN,
    ClaimedExecution,
    Finished,
    Turn,
    claimed_sql_list,
    truncate,
)
from app.sql.statuses import sql_status, sql_statuses
from app.sql.transport import POSTGRESQL, DBConnection, Result, Statement, dialect_of, execute

# What recording may move a row to: allowed from every RECORDABLE status.
RECORD_TARGETS = frozenset(t for t in S if all(can_transition(s, t) for s in RECORDABLE))


def check_recordable(finished: Sequence[Finished]) -> None:
    """Every outcome a worker records must be a move the table allows from RECORDABLE."""
    for item in finished:
        if item.target not in RECORD_TARGETS:
            raise ValueError(f"execution {item.execution_id}: cannot record {item.target}")


def record_and_claim(
    conn: DBConnection,
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
    """A worker's turn: record `finished` (each guarded by status and owner, so a worker whose
    lease was recovered writes nothing), then start up to `limit` due executions of `queue_ids`
    (all queues when None) whose task is one of `tasks` (the worker's; any task when None):
    pending | retry_scheduled -> running with its lease and an open Attempt, cancelling those
    whose job was disabled. Nothing is committed here."""
    check_recordable(finished)
    turn = turn_postgresql.record_and_claim if dialect_of(conn) == POSTGRESQL else _turn_on_sqlite
    return turn(
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


# --- recording (both databases) ----------------------------------------------------------------

_RECORD = f"""
UPDATE executions
SET status = :status, exit_code = :exit_code, output = :output, error = :error, updated_at = :now,
    result = :result, task_version = :task_version, lease_expires_at = NULL, {{moved}}
WHERE id = :id AND status IN ({sql_statuses(RECORDABLE)}) AND claimed_by = :worker_id
"""
# A final outcome ends the run; a retry gives the row back, due again at `retry_at`.
RECORD_FINAL = Statement(_RECORD.format(moved="finished_at = :now"), datetimes=("now",))
RECORD_RETRY = Statement(
    _RECORD.format(moved="available_at = :retry_at, claimed_by = NULL"), datetimes=("now", "retry_at")
)
CLOSE_FINISHED_ATTEMPT = Statement(
    f"""
    UPDATE attempts SET status = :status, finished_at = :now, exit_code = :exit_code, pid = :pid,
        output = :output, error = :error
    WHERE execution_id = :id AND number = :number AND status = {sql_status(AttemptStatus.RUNNING)}
    """,
    datetimes=("now",),
)


def record_finished(conn: DBConnection, finished: Sequence[Finished], *, worker_id: str, now: datetime) -> set[int]:
    """Record finished attempts one by one: each execution moves on (running -> its outcome,
    or -> retry_scheduled), guarded by status and owner, and its Attempt is closed; the slots
    of limited queues they held are given back. Returns the ids recorded; a missing id was lost
    (recovered or cancelled meanwhile). PostgreSQL's turn records a whole batch in its one
    statement instead; this is the step on its own (SQLite's turn, and the store's callers)."""
    check_recordable(finished)
    return _record(conn, finished, worker_id=worker_id, now=now)


def _record(conn: DBConnection, finished: Sequence[Finished], *, worker_id: str, now: datetime) -> set[int]:
    recorded = set()
    for item in finished:
        outcome = item.outcome
        ended: dict[str, Any] = {"id": item.execution_id, "exit_code": outcome.exit_code, "now": now}
        ended.update(output=truncate(outcome.output), error=truncate(outcome.error))
        moved = {
            **ended,
            "status": item.target.value,
            "worker_id": worker_id,
            "result": outcome.result,
            "task_version": outcome.task_version,
        }
        if item.retry_at is None:
            written = execute(conn, RECORD_FINAL, moved).rowcount
        else:
            written = execute(conn, RECORD_RETRY, {**moved, "retry_at": item.retry_at}).rowcount
        if written == 1:
            closed = {**ended, "status": outcome.status.value, "number": item.attempt_number, "pid": outcome.pid}
            execute(conn, CLOSE_FINISHED_ATTEMPT, closed)
            recorded.add(item.execution_id)
    release_slots(conn, sorted(recorded))
    return recorded


# --- SQLite's turn: steps under the write lock --------------------------------------------------

# SQLite's alone (json_each, `true`): PostgreSQL's turn is app/sql/turn_postgresql.py.
_CANDIDATES = f"""
SELECT {claimed_sql_list(execution_alias="x", job_alias="j")}
FROM executions AS x LEFT JOIN jobs AS j ON j.id = x.job_id
WHERE x.id IN (SELECT e.id FROM executions AS e {{task_join}}, queues AS q
               WHERE {CANDIDATE_WHERE}
               ORDER BY {CANDIDATE_ORDER}
               LIMIT :limit)
ORDER BY x.priority, x.available_at, x.id
"""
_CLAIMED_READ: dict[str, Any] = dict(
    datetimes=("now",),
    returns_datetimes=tuple(CLAIMED_FIELDS.index(name) for name in ("lease_expires_at", "scheduled_for")),
    returns_documents=tuple(CLAIMED_FIELDS.index(name) for name in ("config", "config_override", "upstream_results")),
)
_IN_QUEUES = "AND e.queue_id IN (SELECT value FROM json_each(:queues))"
# The worker's task names, one JSON list parameter: a run reaches only a worker that has its task.
_OF_TASKS = dict(task_filter=task_filter("IN (SELECT value FROM json_each(:tasks))"), task_join=TASK_JOIN)
_ANY_TASK = dict(task_filter="", task_join="")
CANDIDATES = Statement(_CANDIDATES.format(queue_filter="", **_ANY_TASK), **_CLAIMED_READ)
CANDIDATES_IN_QUEUES = Statement(
    _CANDIDATES.format(queue_filter=_IN_QUEUES, **_ANY_TASK), lists=("queues",), **_CLAIMED_READ
)
CANDIDATES_OF_TASKS = Statement(_CANDIDATES.format(queue_filter="", **_OF_TASKS), lists=("tasks",), **_CLAIMED_READ)
CANDIDATES_OF_TASKS_IN_QUEUES = Statement(
    _CANDIDATES.format(queue_filter=_IN_QUEUES, **_OF_TASKS), lists=("queues", "tasks"), **_CLAIMED_READ
)
# The write lock makes counting exact: a limited queue's free slots are its limit minus its
# running executions that hold a slot.
FREE_SLOTS = Statement(
    f"""
    SELECT q.id, q.concurrency_limit - (SELECT count(*) FROM executions AS e
                                        WHERE e.queue_id = q.id AND e.status = {sql_status(S.RUNNING)} AND e.holds_slot)
    FROM queues AS q
    WHERE q.concurrency_limit IS NOT NULL AND q.id IN (SELECT value FROM json_each(:ids))
    """,
    lists=("ids",),
)
START = Statement(
    f"""
    UPDATE executions
    SET status = {sql_status(S.RUNNING)}, claimed_by = :worker_id, started_at = :now, attempts = attempts + 1,
        updated_at = :now, lease_expires_at = :lease_expires_at, holds_slot = :holds_slot
    WHERE id = :id AND status IN ({sql_statuses(CLAIMABLE)})
    RETURNING attempts
    """,
    datetimes=("now", "lease_expires_at"),
)
# The counter PostgreSQL keeps in its turn, kept here too for the queue statistics.
TAKE_SLOT = Statement("UPDATE queues SET slots_taken = slots_taken + 1 WHERE id = :id")
OPEN_ATTEMPT = Statement(
    f"""
    INSERT INTO attempts (execution_id, number, worker_id, status, started_at, output, error)
    VALUES (:id, :number, :worker_id, {sql_status(AttemptStatus.RUNNING)}, :now, '', '')
    """,
    datetimes=("now",),
)
CANCEL_DISABLED = Statement(
    f"""
    UPDATE executions
    SET status = {sql_status(S.CANCELLED)}, reason = :reason, finished_at = :now, updated_at = :now,
        claimed_by = NULL, lease_expires_at = NULL
    WHERE id = :id AND status IN ({sql_statuses(sources_of(S.CANCELLED) & QUEUED_CANCELLABLE)})
    """,
    datetimes=("now",),
)


def _turn_on_sqlite(
    conn: DBConnection,
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
    recorded = _record(conn, finished, worker_id=worker_id, now=now)
    if limit <= 0:
        return Turn(recorded, [], [])
    params: dict[str, Any] = {"now": now, "limit": limit}
    if queue_ids:
        params["queues"] = list(queue_ids)
    if tasks is not None:
        params["tasks"] = list(tasks)
    statement = {
        (False, False): CANDIDATES,
        (True, False): CANDIDATES_IN_QUEUES,
        (False, True): CANDIDATES_OF_TASKS,
        (True, True): CANDIDATES_OF_TASKS_IN_QUEUES,
    }[(bool(queue_ids), tasks is not None)]
    read = execute(conn, statement, params)
    candidates = [ClaimedExecution.from_mapping(row) for row in _mappings(read)]
    limited = {item.queue_id for item in candidates}
    free = dict(execute(conn, FREE_SLOTS, {"ids": sorted(limited)}).rows) if limited else {}
    # Rate limits of the candidates' queues and jobs, counted exactly under the write lock.
    pacer = Pacer(
        conn,
        queue_ids=[i.queue_id for i in candidates if i.queue_id],
        job_ids=[i.job_id for i in candidates if i.job_id is not None],
        now=now,
    )
    started: list[tuple[ClaimedExecution, int]] = []
    cancelled: list[ClaimedExecution] = []
    for item in candidates:
        if not item.job_enabled:
            params = {"id": item.id, "now": now, "reason": DISABLED_BEFORE_RUN}
            if execute(conn, CANCEL_DISABLED, params).rowcount == 1:
                cancelled.append(item)
            continue
        holds_slot = item.queue_id in free
        if holds_slot and free[item.queue_id] <= 0:
            continue  # its queue is full: it stays pending
        if not pacer.take(queue_id=item.queue_id, job_id=item.job_id):
            continue  # its queue's or its job's rate limit is reached: it stays pending
        if holds_slot:
            free[item.queue_id] -= 1
        lease = now + lease_duration(item.timeout_seconds, lease_seconds, buffer_seconds)
        start = {"id": item.id, "worker_id": worker_id, "now": now, "lease_expires_at": lease, "holds_slot": holds_slot}
        number = execute(conn, START, start).scalar()
        if number is None:
            pacer.give_back(queue_id=item.queue_id, job_id=item.job_id)
            continue  # no longer claimable
        if holds_slot:
            execute(conn, TAKE_SLOT, {"id": item.queue_id})
        execute(conn, OPEN_ATTEMPT, {"id": item.id, "number": number, "worker_id": worker_id, "now": now})
        started.append((replace(item, lease_expires_at=lease), number))
    pacer.save(conn)
    started.sort(key=lambda pair: pair[0].id)
    return Turn(recorded, started, cancelled)


def _mappings(result: Result) -> list[dict[str, Any]]:
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]
