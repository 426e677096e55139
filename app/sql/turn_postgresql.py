"""The worker's turn on PostgreSQL, in one statement (`TURN_SQL`), sent through a psycopg
`RawCursor` on the connection the caller holds (a bare psycopg connection or the one under a
SQLAlchemy `Connection`), in its transaction or its autocommit.

This is the hot path of the whole system - one round trip per worker turn whatever the batch
sizes (see `python -m bench throughput`) - so it stays one text statement; its status guards and
its column lists are rendered from the state machine and from the `ClaimedExecution`
declaration, not written by hand. app/sql/turn.py chooses it, and holds SQLite's turn beside it.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from app.domain.one_off import job_column_sql
from app.domain.states import RECORDABLE, AttemptStatus
from app.domain.states import ExecutionStatus as S
from app.sql.candidates import CANDIDATE_ORDER, CANDIDATE_WHERE, TASK_JOIN, task_filter
from app.sql.rate_limits import recorded_sql, room_sql
from app.sql.rows import (
    DISABLED_BEFORE_RUN,
    ClaimedExecution,
    Finished,
    Turn,
    claimed_null_list,
    claimed_sql_list,
    truncate,
)
from app.sql.statuses import sql_status, sql_statuses
from app.sql.transport import DBConnection, Statement, execute


def lease_expires_at_sql(*, now: str, timeout: str, lease_seconds: str, buffer_seconds: str) -> str:
    """The lease rule of `app.domain.policies.lease_duration` as a PostgreSQL expression:
    now + max(lease_seconds, timeout + buffer_seconds) seconds. The lease covers the job's hard
    timeout, so a healthy run is never recovered from under its worker; a job with no timeout
    (NULL) gets lease_seconds alone (tests/integration/test_store_transitions.py checks that both
    give the same instant)."""
    return f"{now} + make_interval(secs => GREATEST({lease_seconds}, COALESCE({timeout} + {buffer_seconds}, 0)))"


# The turn's lease: `j` is the execution's job (none for a one-off run, which has its own
# timeout), the rest are the statement's parameters.
LEASE_EXPIRES_AT = lease_expires_at_sql(
    now=":now",
    timeout=job_column_sql("timeout_seconds", execution_alias="x", job_alias="j"),
    lease_seconds=":lease_seconds",
    buffer_seconds=":buffer_seconds",
)
# A candidate may start unless its job was disabled; a one-off run has no job to disable.
_RUNNABLE = "(x.job_id IS NULL OR j.enabled)"

# Pick and lock the batch (lower priority value first, then oldest), skipping rows other
# workers hold. `q` is each queue as this turn sees it once the runs it records have given back
# their slots (`released`): otherwise a full limited queue would offer no candidates to the turn
# that frees its slots, and every finish would cost a second turn to claim the successor. The
# job is joined only for the task filter (`{task_join}`): the worker claims only its tasks' runs.
CANDIDATES = f"""
    SELECT e.id, e.queue_id FROM executions AS e {{task_join}},
        (SELECT q0.id, q0.paused, q0.concurrency_limit, q0.slots_taken - COALESCE(r.n, 0) AS slots_taken
         FROM queues AS q0 LEFT JOIN released AS r ON r.queue_id = q0.id) AS q
    WHERE {CANDIDATE_WHERE}
    ORDER BY {CANDIDATE_ORDER}
    LIMIT {{limit}}
    FOR UPDATE OF e SKIP LOCKED"""

_CLAIMED = claimed_sql_list(execution_alias="x", job_alias="j")
_NO_CLAIMED = claimed_null_list(
    {
        "config": "jsonb",
        "config_override": "jsonb",
        "upstream_results": "jsonb",
        "lease_expires_at": "timestamptz",
        "scheduled_for": "timestamptz",
    },
    given={"id": "id"},
)

# One worker turn, in one statement. Its parts, in order:
#   result      the finished attempts handed in as arrays (a batch of any size, one statement text)
#   recorded    running -> its outcome, or -> retry_scheduled; guarded by status (RECORDABLE)
#               and owner, so a worker whose lease was recovered writes nothing
#   closed      the Attempt of each recorded execution
#   released    the slots of limited queues the recorded runs give back
#   candidates  due rows this worker may run (queue not paused, a slot free as far as the
#               snapshot and `released` know), locked, skipping rows other workers hold
#   paced_jobs, paced
#               job rate limits: the rate-limited jobs of the candidates are locked (after their
#               queues) and only as many of each job's candidates go on as its window allows
#               (app/sql/rate_limits.py); the rest stay pending, as for a full queue
#   wanted, slotted, grants, counted
#               the concurrency limit (ADR 0008): slots given back by `recorded` and slots wanted
#               by the candidates of limited queues are settled under the queue rows' locks, and
#               `granted` says how many of each limited queue's candidates may start; a queue's
#               rate limit is settled the same way and `granted` is the smaller of the two
#   ranked, allowed
#               the candidates that may start: all of unlimited queues, the first `granted` of
#               limited ones (the rest stay pending, unlocked at commit)
#   started     allowed candidates of enabled jobs: pending | retry_scheduled -> running, lease
#               stamped, attempts + 1, holds_slot when the queue is limited (claim and start are
#               one step: no session ever sees them claimed)
#   opened      their Attempt rows
#   job_counted the starts recorded in the rate-limited jobs' windows (queues': `counted`)
#   cancelled   candidates whose job was disabled after the row was queued
# All parts see the database as it was when the statement began: a run recorded here does not
# yet free its job for `candidates`, so the worker claims again at once when it had results and
# slots to spare (see Turns.settle_and_claim in app/services/engine/turns.py).
TURN_SQL = f"""
WITH result AS (
    SELECT * FROM unnest(CAST(:ids AS bigint[]), CAST(:numbers AS integer[]), CAST(:statuses AS text[]),
                         CAST(:exit_codes AS integer[]), CAST(:pids AS integer[]), CAST(:outputs AS text[]),
                         CAST(:errors AS text[]), CAST(:retry_ats AS timestamptz[]),
                         CAST(:results AS text[]), CAST(:task_versions AS text[]))
        AS r(id, number, status, exit_code, pid, output, error, retry_at, result, task_version)
), recorded AS (
    UPDATE executions AS x
    SET status = CASE WHEN r.retry_at IS NULL THEN r.status ELSE {sql_status(S.RETRY_SCHEDULED)} END,
        finished_at = CASE WHEN r.retry_at IS NULL THEN CAST(:now AS timestamptz) END,
        available_at = COALESCE(r.retry_at, x.available_at),
        claimed_by = CASE WHEN r.retry_at IS NULL THEN x.claimed_by END,
        exit_code = r.exit_code, output = r.output, error = r.error,
        result = r.result, task_version = r.task_version,
        lease_expires_at = NULL, updated_at = :now, holds_slot = false
    FROM result AS r JOIN executions AS o ON o.id = r.id
    WHERE x.id = r.id AND x.status IN ({sql_statuses(RECORDABLE)}) AND x.claimed_by = :worker_id
    RETURNING x.id, x.queue_id, o.holds_slot
), closed AS (
    UPDATE attempts AS a
    SET status = r.status, finished_at = :now, exit_code = r.exit_code, pid = r.pid,
        output = r.output, error = r.error
    FROM result AS r JOIN recorded AS m ON m.id = r.id
    WHERE a.execution_id = r.id AND a.number = r.number AND a.status = {sql_status(AttemptStatus.RUNNING)}
), released AS (
    SELECT queue_id, count(*) AS n FROM recorded WHERE holds_slot GROUP BY queue_id
), candidates AS ({CANDIDATES}
), slotted AS (
    -- The queues whose slot count or rate window this turn reads or changes, locked in id order.
    -- A row locked here is read as its newest committed version (not the statement's snapshot),
    -- so turns racing on one limited queue each see the slots (and starts) the others took.
    SELECT q.id, q.concurrency_limit, q.slots_taken, q.rate_limit, q.rate_starts FROM queues AS q
    WHERE q.id IN (SELECT queue_id FROM released
                   UNION SELECT c.queue_id FROM candidates AS c JOIN queues AS l ON l.id = c.queue_id
                         WHERE l.concurrency_limit IS NOT NULL OR l.rate_limit IS NOT NULL)
    ORDER BY q.id
    FOR UPDATE
), paced_jobs AS (
    -- Rate-limited jobs of the candidates, locked and read fresh like the queues. SKIP LOCKED:
    -- a job row someone else holds (an edit, a disable, a scheduler tick, another turn) is not
    -- waited for, so a turn never waits on a job while it holds the candidates' rows; that
    -- job's candidates simply wait for a later turn. The scalar subquery on `slotted` is
    -- evaluated before the first job row is locked, so queue locks always come first.
    SELECT j.id, j.rate_limit, j.rate_starts FROM jobs AS j
    WHERE j.rate_limit IS NOT NULL AND j.enabled
      AND j.id IN (SELECT x.job_id FROM candidates AS c JOIN executions AS x ON x.id = c.id)
      AND (SELECT count(*) FROM slotted) >= 0
    ORDER BY j.id
    FOR UPDATE SKIP LOCKED
), paced AS (
    -- Candidates that may run (a one-off run, or a run of an enabled job) within their job's rate
    -- limit (the first `room` of each job); a rate-limited job this turn could not lock starts
    -- nothing now. A one-off run has no job, so no job's limit (its queue's still applies).
    SELECT e.id, e.queue_id, e.job_id FROM (
        SELECT c.id, c.queue_id, x.job_id, j.rate_limit,
               row_number() OVER (PARTITION BY x.job_id ORDER BY x.priority, x.available_at, x.id) AS k
        FROM candidates AS c JOIN executions AS x ON x.id = c.id LEFT JOIN jobs AS j ON j.id = x.job_id
        WHERE {_RUNNABLE}) AS e
    LEFT JOIN paced_jobs AS p ON p.id = e.job_id
    WHERE e.rate_limit IS NULL OR (p.id IS NOT NULL AND e.k <= {room_sql("p")})
), wanted AS (
    SELECT queue_id, count(*) AS n FROM paced GROUP BY queue_id
), grants AS (
    -- LEAST (and GREATEST) ignore NULLs: a queue with only one of the two limits is bounded by
    -- that one (the other's term is NULL); a queue with neither is not limited (NULL).
    SELECT s.id AS queue_id, s.concurrency_limit, s.rate_limit, s.rate_starts,
           GREATEST(0, s.slots_taken - COALESCE(r.n, 0)) AS base,
           CASE WHEN s.concurrency_limit IS NULL AND s.rate_limit IS NULL THEN NULL
                ELSE LEAST(COALESCE(w.n, 0),
                           CASE WHEN s.concurrency_limit IS NOT NULL
                                THEN GREATEST(0, s.concurrency_limit - GREATEST(0, s.slots_taken - COALESCE(r.n, 0))) END,
                           {room_sql("s")})
           END AS granted
    FROM slotted AS s LEFT JOIN released AS r ON r.queue_id = s.id LEFT JOIN wanted AS w ON w.queue_id = s.id
), counted AS (
    UPDATE queues AS q
    SET slots_taken = g.base + CASE WHEN g.concurrency_limit IS NULL THEN 0 ELSE COALESCE(g.granted, 0) END,
        rate_starts = CASE WHEN g.rate_limit IS NULL OR COALESCE(g.granted, 0) = 0 THEN g.rate_starts
                           ELSE {recorded_sql("g", "g.granted")} END
    FROM grants AS g WHERE q.id = g.queue_id
), ranked AS (
    SELECT c.id, c.job_id, g.granted, g.concurrency_limit IS NOT NULL AS limited,
           row_number() OVER (PARTITION BY c.queue_id ORDER BY x.priority, x.available_at, x.id) AS k
    FROM paced AS c JOIN executions AS x ON x.id = c.id
    LEFT JOIN grants AS g ON g.queue_id = c.queue_id
), allowed AS (
    SELECT id, job_id, COALESCE(limited, false) AS limited FROM ranked WHERE granted IS NULL OR k <= granted
), started AS (
    -- The job is joined through `allowed` (an execution's job never changes), LEFT so that a
    -- one-off run, which has none, starts too.
    UPDATE executions AS x
    SET status = {sql_status(S.RUNNING)}, claimed_by = :worker_id, started_at = :now, attempts = x.attempts + 1,
        updated_at = :now, lease_expires_at = {LEASE_EXPIRES_AT}, holds_slot = a.limited
    FROM allowed AS a LEFT JOIN jobs AS j ON j.id = a.job_id
    WHERE x.id = a.id AND {_RUNNABLE}
    RETURNING {_CLAIMED}
), opened AS (
    INSERT INTO attempts (execution_id, number, worker_id, status, started_at, output, error)
    SELECT id, attempts, :worker_id, {sql_status(AttemptStatus.RUNNING)}, :now, '', '' FROM started
), job_counted AS (
    UPDATE jobs AS j SET rate_starts = {recorded_sql("p", "n.started")}
    FROM paced_jobs AS p,
         (SELECT x.job_id, count(*) AS started FROM allowed AS a JOIN executions AS x ON x.id = a.id
          GROUP BY x.job_id) AS n
    WHERE j.id = p.id AND n.job_id = p.id
), cancelled AS (
    UPDATE executions AS x
    SET status = {sql_status(S.CANCELLED)}, reason = :disabled_reason, finished_at = :now, updated_at = :now,
        claimed_by = NULL, lease_expires_at = NULL
    FROM candidates AS c, jobs AS j
    WHERE x.id = c.id AND j.id = x.job_id AND NOT j.enabled
    RETURNING {_CLAIMED}
)
SELECT 'recorded' AS kind, {_NO_CLAIMED} FROM recorded
UNION ALL SELECT 'started' AS kind, * FROM started
UNION ALL SELECT 'disabled' AS kind, * FROM cancelled
"""


# The worker's task names, one array parameter: a run reaches only a worker that has its task.
TASK_FILTER = task_filter("= ANY(CAST(:tasks AS text[]))")


@lru_cache(maxsize=64)
def _turn_statement(filtered: bool, limit: int, by_task: bool = False) -> str:
    """The turn statement for a batch of `limit` (a literal, so that its plan knows it).

    Each text is prepared once per connection (at its first use: `record_and_claim`) and the
    worker's connection plans it once (`GENERIC_TURN_PLANS`): planning this statement
    costs more than running it, and it is the same for every turn. With the limit a literal, the
    one plan is the plan of a small batch (walk the claimable index in order, stop after
    `limit`), never one guessed for an unknown limit. A worker has at most `slots` texts.
    `by_task`: only runs of the tasks in `:tasks` (what the worker advertises).
    """
    queue_filter = "AND e.queue_id = ANY(CAST(:queues AS integer[]))" if filtered else ""
    return TURN_SQL.format(
        queue_filter=queue_filter,
        task_filter=TASK_FILTER if by_task else "",
        task_join=TASK_JOIN if by_task else "",
        limit=int(limit),
    )


_COLUMNS: dict[bytes, list[str]] = {}  # the turn's result columns, by statement text
_PARAMETER = re.compile(r"(?<![:\w]):(\w+)")  # a :name bind parameter (not a ::cast)


@lru_cache(maxsize=64)
def _turn_query(filtered: bool, limit: int, by_task: bool = False) -> tuple[bytes, tuple[str, ...]]:
    """`_turn_statement`'s text with PostgreSQL's own $n placeholders, and the parameter names in
    $n order, for a psycopg `RawCursor`.

    Why not through `transport.execute`: psycopg caches its conversion of a query with named parameters only
    up to 4 KB, and the turn is 7.5 KB, so every turn parsed it again; SQLAlchemy then built a
    result object over 26 columns. Together about a third of the worker parent's CPU per turn
    (docs/performance.md). A raw query is sent as it is, and psycopg still prepares it.
    """
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    sql = _PARAMETER.sub(number, _turn_statement(filtered, limit, by_task))
    return sql.encode(), tuple(names)


# Plan the turn once per connection instead of once per turn (see `_turn_statement`). Session
# state on the worker's kept connection; measured in docs/performance.md ("The worker's turn").
GENERIC_TURN_PLANS = "SET plan_cache_mode = force_generic_plan"


# The raw psycopg connections whose session already plans the turn once: a connection's own
# state, so it goes when the connection does (SQLAlchemy's pool replacing one, a worker reopening).
_PLANNED: weakref.WeakSet[Any] = weakref.WeakSet()


def _plan_turns_once(conn: DBConnection, raw: object) -> None:
    """Set GENERIC_TURN_PLANS on `raw` (the psycopg connection `conn` is or wraps) once."""
    if raw not in _PLANNED:
        # Behind a transaction-pooling PgBouncer nothing is prepared (`prepare_threshold` None:
        # app.database.configure_engine, and the worker's runtime for a bare connection) and a
        # session setting would reach whoever gets the server session next: leave it.
        if getattr(raw, "prepare_threshold", 5) is not None:
            execute(conn, Statement(GENERIC_TURN_PLANS))
        _PLANNED.add(raw)


def _finished_params(finished: Sequence[Finished]) -> dict[str, Any]:
    return {
        "ids": [item.execution_id for item in finished],
        "numbers": [item.attempt_number for item in finished],
        "statuses": [item.outcome.status.value for item in finished],
        "exit_codes": [item.outcome.exit_code for item in finished],
        "pids": [item.outcome.pid for item in finished],
        "outputs": [truncate(item.outcome.output) for item in finished],
        "errors": [truncate(item.outcome.error) for item in finished],
        "retry_ats": [item.retry_at for item in finished],
        "results": [item.outcome.result for item in finished],
        "task_versions": [item.outcome.task_version for item in finished],
    }


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
    """A worker's turn in one statement (`TURN_SQL`): record `finished`, then start up to
    `limit` due executions of `tasks` (any task when None; cancelling those whose job was
    disabled). `finished` is checked by the caller (app.sql.turn.record_and_claim)."""
    from psycopg import RawCursor  # here, not at import: a worker on SQLite never loads psycopg

    raw = conn.connection.dbapi_connection if hasattr(conn, "exec_driver_sql") else conn
    _plan_turns_once(conn, raw)
    params = dict(
        _finished_params(finished),
        worker_id=worker_id,
        now=now,
        lease_seconds=lease_seconds,
        buffer_seconds=buffer_seconds,
        disabled_reason=DISABLED_BEFORE_RUN,
    )
    if queue_ids:
        params["queues"] = list(queue_ids)
    if tasks is not None:
        params["tasks"] = list(tasks)
    recorded: set[int] = set()
    started: list[tuple[ClaimedExecution, int]] = []
    cancelled: list[ClaimedExecution] = []
    query, names = _turn_query(bool(queue_ids), max(0, limit), tasks is not None)
    # Prepared at its first use rather than psycopg's fifth: until it is, every turn plans this
    # statement again (several ms; a worker's claim size moves with its tasks' durations, and
    # each size is its own text). Not behind a transaction-pooling PgBouncer, where nothing is.
    prepare = True if getattr(raw, "prepare_threshold", 5) is not None else None
    # On the DB-API connection itself, so in the caller's transaction (or its autocommit).
    with RawCursor(raw) as cursor:
        cursor.execute(query, [params[name] for name in names], prepare=prepare)
        columns = _COLUMNS.get(query)
        if columns is None:  # the same for every turn of this text: psycopg builds 26 objects each time
            assert cursor.description is not None  # a RETURNING statement describes its rows
            columns = _COLUMNS[query] = [column.name for column in cursor.description]
        rows = cursor.fetchall()
    for row in rows:
        mapping = dict(zip(columns, row, strict=True))
        kind = mapping["kind"]
        if kind == "recorded":
            recorded.add(mapping["id"])
        elif kind == "started":
            # RETURNING gives the row after the update: its attempts count is this attempt's number.
            number = mapping["attempts"]
            mapping["attempts"] = number - 1
            started.append((ClaimedExecution.from_mapping(mapping), number))
        else:
            cancelled.append(ClaimedExecution.from_mapping(mapping))
    started.sort(key=lambda pair: pair[0].id)
    return Turn(recorded, started, cancelled)
