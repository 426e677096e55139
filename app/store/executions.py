"""Creating, claiming and moving executions. Read this file to know how work moves."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import and_, bindparam, exists, func, insert, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from app.domain.states import CANCELLABLE, CLAIMABLE, IN_FLIGHT, AttemptStatus
from app.domain.states import ExecutionStatus as S
from app.models import Attempt, Execution, Job
from app.models.types import UTCDateTime

executions = Execution.__table__
attempts = Attempt.__table__
jobs = Job.__table__

OUTPUT_LIMIT = 20_000
_CLAIMABLE = [s.value for s in CLAIMABLE]
_IN_FLIGHT = [s.value for s in IN_FLIGHT]


def truncate(text_value: str | None, limit: int = OUTPUT_LIMIT) -> str:
    """Cap stored output and errors at `limit` characters, saying that it was cut."""
    text_value = text_value or ""
    if len(text_value) <= limit:
        return text_value
    marker = f"\n[... truncated: {len(text_value)} characters in all]"
    return text_value[: limit - len(marker)] + marker


def occurrence_key(job_id: int, scheduled_for: datetime) -> str:
    """The idempotency key of a scheduled occurrence: the same on every scheduler."""
    return f"job:{job_id}:at:{scheduled_for.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"


def _insert(conn: Connection):
    return (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(executions)


# --- creating -------------------------------------------------------------------------------


def occurrence_row(
    job, scheduled_for: datetime, *, trigger: str, status: S, now: datetime, reason: str | None = None
) -> dict:
    """The execution row for one scheduled occurrence of `job` (a jobs row or Job)."""
    return dict(
        job_id=job.id,
        scheduled_for=scheduled_for,
        trigger=trigger,
        idempotency_key=occurrence_key(job.id, scheduled_for),
        status=status.value,
        reason=reason,
        attempts=0,
        max_attempts=job.max_attempts,
        queue=job.queue,
        priority=job.priority,
        exclusive=job.overlap_policy != "allow",
        available_at=scheduled_for,
        finished_at=now if status is S.MISSED else None,
        output="",
        error="",
        created_at=now,
        updated_at=now,
    )


def insert_occurrences(conn: Connection, rows: Sequence[dict], *, chunk: int = 500) -> list[tuple[int, str]]:
    """Create executions for scheduled occurrences, skipping any that already exist.

    The unique idempotency key (and the unique (job, scheduled_for) index) make a second row
    impossible even when several schedulers process the same job at once; ON CONFLICT DO
    NOTHING turns that into "already there". Returns (id, status) of the rows created. Rows go
    in multi-row statements of `chunk` (SQLite caps the bound parameters of one statement).
    """
    created: list[tuple[int, str]] = []
    for start in range(0, len(rows), chunk):
        stmt = (
            _insert(conn)
            .values(list(rows[start : start + chunk]))
            .on_conflict_do_nothing()
            .returning(executions.c.id, executions.c.status)
        )
        created += [(row[0], row[1]) for row in conn.execute(stmt)]
    return created


def insert_occurrence(
    conn: Connection, job, scheduled_for: datetime, *, trigger: str, status: S, now: datetime, reason: str | None = None
) -> int | None:
    """Create the execution for one scheduled occurrence; None if it already exists."""
    created = insert_occurrences(
        conn, [occurrence_row(job, scheduled_for, trigger=trigger, status=status, now=now, reason=reason)]
    )
    return created[0][0] if created else None


def insert_manual(
    conn: Connection, job, *, now: datetime, trigger: str = "manual", retry_of_id: int | None = None
) -> int:
    """Create a manual (or operator retry) execution, runnable now."""
    key = f"job:{job.id}:{trigger}:{uuid.uuid4().hex}"
    stmt = (
        insert(executions)
        .values(
            job_id=job.id,
            scheduled_for=now,
            trigger=trigger,
            idempotency_key=key,
            status=S.PENDING.value,
            attempts=0,
            max_attempts=job.max_attempts,
            queue=job.queue,
            priority=job.priority,
            exclusive=job.overlap_policy != "allow",
            available_at=now,
            retry_of_id=retry_of_id,
            output="",
            error="",
            created_at=now,
            updated_at=now,
        )
        .returning(executions.c.id)
    )
    return conn.execute(stmt).scalar_one()


def _active_condition(now: datetime):
    """Overlap at tick time: claimed, running, pending, or retry_scheduled and due."""
    e = executions
    return or_(
        e.c.status.in_([S.CLAIMED.value, S.RUNNING.value, S.PENDING.value]),
        and_(e.c.status == S.RETRY_SCHEDULED.value, e.c.available_at <= now),
    )


def has_active_run(conn: Connection, job_id: int, now: datetime) -> bool:
    e = executions
    return bool(conn.execute(select(exists().where(e.c.job_id == job_id, _active_condition(now)))).scalar())


def jobs_with_active_runs(conn: Connection, job_ids: Sequence[int], now: datetime) -> set[int]:
    """Which of `job_ids` have an active run (one query for a whole tick batch)."""
    if not job_ids:
        return set()
    e = executions
    return set(
        conn.execute(
            select(e.c.job_id).distinct().where(e.c.job_id.in_(list(job_ids)), _active_condition(now))
        ).scalars()
    )


# --- claiming -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimedExecution:
    id: int
    job_id: int
    job_name: str
    task: str
    config: dict
    timeout_seconds: int
    job_enabled: bool
    attempts: int
    max_attempts: int
    idempotency_key: str
    lease_expires_at: datetime
    scheduled_for: datetime
    trigger: str
    retry_backoff_seconds: int
    alert_mode: str


# A candidate is claimable when it is due and in the worker's queues, and - for exclusive jobs
# (overlap policy skip/queue) - no run of its job is in flight and no older due row of its job
# is waiting. The second condition keeps queue-policy jobs FIFO even while another worker
# holds the older row locked (SKIP LOCKED would otherwise hand out the next one).
_CANDIDATE_WHERE = """
    e.status IN ('pending', 'retry_scheduled')
    AND e.available_at <= :now
    {queue_filter}
    AND (NOT e.exclusive OR (
        NOT EXISTS (SELECT 1 FROM executions AS busy
                    WHERE busy.job_id = e.job_id AND busy.exclusive
                      AND busy.status IN ('claimed', 'running'))
        AND NOT EXISTS (SELECT 1 FROM executions AS older
                        WHERE older.job_id = e.job_id AND older.exclusive
                          AND older.status IN ('pending', 'retry_scheduled')
                          AND older.available_at <= :now
                          AND (older.available_at < e.available_at
                               OR (older.available_at = e.available_at AND older.id < e.id)))))
"""

_RETURNING = """x.id, x.job_id, j.name, j.task, j.config, j.timeout_seconds, j.enabled, x.attempts,
                x.max_attempts, x.idempotency_key, x.lease_expires_at, x.scheduled_for, x.trigger,
                j.retry_backoff_seconds, j.alert_mode"""

# PostgreSQL, shared by the claim below and the worker's turn (_TURN_SQL): pick and lock the
# batch (lower priority value first, then oldest), skipping rows other workers hold.
_CANDIDATES_POSTGRES = f"""
    SELECT e.id FROM executions AS e
    WHERE {_CANDIDATE_WHERE}
    ORDER BY e.priority, e.available_at, e.id
    LIMIT :limit
    FOR UPDATE OF e SKIP LOCKED"""
# The lease covers the job's hard timeout, so a healthy run is never recovered from under its
# worker (`j` is the execution's job).
_LEASE_EXPIRES_AT = ":now + make_interval(secs => GREATEST(:lease_seconds, j.timeout_seconds + :buffer_seconds))"

# PostgreSQL: one round trip, the candidates locked and stamped claimed with their lease.
_CLAIM_POSTGRES = f"""
WITH candidates AS ({_CANDIDATES_POSTGRES}
)
UPDATE executions AS x
SET status = 'claimed', claimed_by = :worker_id, updated_at = :now, lease_expires_at = {_LEASE_EXPIRES_AT}
FROM candidates AS c, jobs AS j
WHERE x.id = c.id AND j.id = x.job_id
RETURNING {_RETURNING}
"""

# SQLite: the caller holds the database write lock (BEGIN IMMEDIATE), so select-then-update
# cannot race; the lease is computed in Python because SQLite has no interval arithmetic.
_CANDIDATES_SQLITE = f"""
SELECT e.id, j.timeout_seconds FROM executions AS e JOIN jobs AS j ON j.id = e.job_id
WHERE {_CANDIDATE_WHERE}
ORDER BY e.priority, e.available_at, e.id
LIMIT :limit
"""


def claim_due_executions(
    conn: Connection,
    *,
    worker_id: str,
    now: datetime,
    limit: int,
    queues: Sequence[str] | None,
    lease_seconds: int,
    buffer_seconds: int,
) -> list[ClaimedExecution]:
    """Claim up to `limit` due executions for `worker_id`; returns what was claimed."""
    if limit <= 0:
        return []
    params = {"now": now, "limit": limit, "worker_id": worker_id}
    typed = [bindparam("now", type_=UTCDateTime)]
    if conn.dialect.name == "postgresql":
        queue_filter = "AND e.queue = ANY(:queues)" if queues else ""
        if queues:
            params["queues"] = list(queues)
        stmt = text(_CLAIM_POSTGRES.format(queue_filter=queue_filter)).bindparams(*typed)
        params.update(lease_seconds=lease_seconds, buffer_seconds=buffer_seconds)
        rows = conn.execute(stmt, params).fetchall()
    else:
        queue_filter = "AND e.queue IN :queues" if queues else ""
        if queues:
            typed.append(bindparam("queues", expanding=True))
            params["queues"] = list(queues)
        candidates = conn.execute(
            text(_CANDIDATES_SQLITE.format(queue_filter=queue_filter)).bindparams(*typed), params
        ).fetchall()
        if not candidates:
            return []
        for candidate_id, timeout in candidates:
            lease = now + timedelta(seconds=max(lease_seconds, timeout + buffer_seconds))
            conn.execute(
                update(executions)
                .where(executions.c.id == candidate_id)
                .values(status=S.CLAIMED.value, claimed_by=worker_id, lease_expires_at=lease, updated_at=now)
            )
        e, j = executions, jobs
        stmt = (
            select(
                e.c.id,
                e.c.job_id,
                j.c.name,
                j.c.task,
                j.c.config,
                j.c.timeout_seconds,
                j.c.enabled,
                e.c.attempts,
                e.c.max_attempts,
                e.c.idempotency_key,
                e.c.lease_expires_at,
                e.c.scheduled_for,
                e.c.trigger,
                j.c.retry_backoff_seconds,
                j.c.alert_mode,
            )
            .join_from(e, j, e.c.job_id == j.c.id)
            .where(e.c.id.in_([c[0] for c in candidates]))
            .order_by(e.c.priority, e.c.available_at, e.c.id)
        )
        rows = conn.execute(stmt).fetchall()
    return [_claimed(row) for row in rows]


@dataclass(frozen=True)
class Turn:
    """What one worker turn (`record_and_claim`) did."""

    recorded: set[int]  # finished attempts written; a missing id was lost meanwhile
    started: list[tuple[ClaimedExecution, int]]  # claimed and now running, with the attempt number
    cancelled: list[ClaimedExecution]  # claimed, but their job had been disabled: cancelled instead


def record_and_claim(
    conn: Connection,
    finished: Sequence[Finished],
    *,
    worker_id: str,
    now: datetime,
    limit: int,
    queues: Sequence[str] | None,
    lease_seconds: int,
    buffer_seconds: int,
) -> Turn:
    """A worker's turn: record `finished`, claim up to `limit` due executions and start them.

    PostgreSQL does all of it in one statement (`_TURN_POSTGRES`), so a turn costs one round
    trip whatever the batch sizes. SQLite composes the same steps from the functions below
    (it runs in-process, so statements are cheap; the write lock makes them atomic).
    """
    if conn.dialect.name != "postgresql":
        recorded = record_finished(conn, finished, worker_id=worker_id, now=now)
        claimed = claim_due_executions(
            conn,
            worker_id=worker_id,
            now=now,
            limit=limit,
            queues=queues,
            lease_seconds=lease_seconds,
            buffer_seconds=buffer_seconds,
        )
        cancelled = [
            item
            for item in claimed
            if not item.job_enabled and cancel_execution(conn, item.id, now=now, reason=DISABLED_BEFORE_RUN)
        ]
        runnable = [item for item in claimed if item.job_enabled]
        numbers = start_executions(conn, [item.id for item in runnable], worker_id=worker_id, now=now)
        return Turn(recorded, [(item, numbers[item.id]) for item in runnable if item.id in numbers], cancelled)
    params = dict(
        _finished_params(finished),
        worker_id=worker_id,
        now=now,
        limit=max(0, limit),
        lease_seconds=lease_seconds,
        buffer_seconds=buffer_seconds,
        disabled_reason=DISABLED_BEFORE_RUN,
    )
    if queues:
        params["queues"] = list(queues)
    recorded: set[int] = set()
    started: list[tuple[ClaimedExecution, int]] = []
    cancelled: list[ClaimedExecution] = []
    for row in conn.execute(_TURN_POSTGRES[bool(queues)], params):
        if row[0] == "recorded":
            recorded.add(row[1])
        elif row[0] == "started":
            # RETURNING gives the row after the update: its attempts count is this attempt's number.
            item = _claimed(row[1:])
            started.append((replace(item, attempts=item.attempts - 1), item.attempts))
        else:
            cancelled.append(_claimed(row[1:]))
    started.sort(key=lambda pair: pair[0].id)
    return Turn(recorded, started, cancelled)


DISABLED_BEFORE_RUN = "job disabled before it could run"

# One worker turn on PostgreSQL, in one statement. Its parts, in order:
#   result      the finished attempts handed in as arrays (a batch of any size, one statement text)
#   recorded    running -> final status, or -> retry_scheduled; guarded by status and owner like
#               complete_execution, so a worker whose lease was recovered writes nothing
#   closed      the Attempt of each recorded execution
#   candidates  due rows this worker may run, locked, skipping rows other workers hold
#               (_CANDIDATES_POSTGRES, as in claim_due_executions)
#   started     candidates of enabled jobs: -> running, lease stamped, attempts + 1
#   opened      their Attempt rows
#   cancelled   candidates whose job was disabled after the row was queued
# All parts see the database as it was when the statement began: a run recorded here does not
# yet free its job for `candidates`, so the worker claims again at once when it had results and
# slots to spare (see Worker._settle_and_claim).
_TURN_SQL = f"""
WITH result AS (
    SELECT * FROM unnest(CAST(:ids AS bigint[]), CAST(:numbers AS integer[]), CAST(:statuses AS text[]),
                         CAST(:exit_codes AS integer[]), CAST(:pids AS integer[]), CAST(:outputs AS text[]),
                         CAST(:errors AS text[]), CAST(:retry_ats AS timestamptz[]))
        AS r(id, number, status, exit_code, pid, output, error, retry_at)
), recorded AS (
    UPDATE executions AS x
    SET status = CASE WHEN r.retry_at IS NULL THEN r.status ELSE 'retry_scheduled' END,
        finished_at = CASE WHEN r.retry_at IS NULL THEN CAST(:now AS timestamptz) END,
        available_at = COALESCE(r.retry_at, x.available_at),
        claimed_by = CASE WHEN r.retry_at IS NULL THEN x.claimed_by END,
        exit_code = r.exit_code, output = r.output, error = r.error,
        lease_expires_at = NULL, updated_at = :now
    FROM result AS r
    WHERE x.id = r.id AND x.status = 'running' AND x.claimed_by = :worker_id
    RETURNING x.id
), closed AS (
    UPDATE attempts AS a
    SET status = r.status, finished_at = :now, exit_code = r.exit_code, pid = r.pid,
        output = r.output, error = r.error
    FROM result AS r JOIN recorded AS m ON m.id = r.id
    WHERE a.execution_id = r.id AND a.number = r.number AND a.status = 'running'
), candidates AS ({_CANDIDATES_POSTGRES}
), started AS (
    UPDATE executions AS x
    SET status = 'running', claimed_by = :worker_id, started_at = :now, attempts = x.attempts + 1,
        updated_at = :now, lease_expires_at = {_LEASE_EXPIRES_AT}
    FROM candidates AS c, jobs AS j
    WHERE x.id = c.id AND j.id = x.job_id AND j.enabled
    RETURNING {_RETURNING}
), opened AS (
    INSERT INTO attempts (execution_id, number, worker_id, status, started_at, output, error)
    SELECT id, attempts, :worker_id, 'running', :now, '', '' FROM started
), cancelled AS (
    UPDATE executions AS x
    SET status = 'cancelled', reason = :disabled_reason, finished_at = :now, updated_at = :now,
        claimed_by = NULL, lease_expires_at = NULL
    FROM candidates AS c, jobs AS j
    WHERE x.id = c.id AND j.id = x.job_id AND NOT j.enabled
    RETURNING {_RETURNING}
)
SELECT 'recorded', id, NULL, NULL, NULL, CAST(NULL AS jsonb), NULL, NULL, NULL, NULL, NULL,
       CAST(NULL AS timestamptz), CAST(NULL AS timestamptz), NULL, NULL, NULL FROM recorded
UNION ALL SELECT 'started', * FROM started
UNION ALL SELECT 'cancelled', * FROM cancelled
"""
_TURN_POSTGRES = {
    False: text(_TURN_SQL.format(queue_filter="")),
    True: text(_TURN_SQL.format(queue_filter="AND e.queue = ANY(CAST(:queues AS text[]))")),
}


def _claimed(row) -> ClaimedExecution:
    # Rows from the PostgreSQL text() statement come straight from psycopg: jsonb as a dict and
    # timestamptz as an aware datetime, which is what the typed SQLite path yields too.
    return ClaimedExecution(
        id=row[0],
        job_id=row[1],
        job_name=row[2],
        task=row[3],
        config=row[4] or {},
        timeout_seconds=row[5],
        job_enabled=bool(row[6]),
        attempts=row[7],
        max_attempts=row[8],
        idempotency_key=row[9],
        lease_expires_at=row[10],
        scheduled_for=row[11],
        trigger=row[12],
        retry_backoff_seconds=row[13],
        alert_mode=row[14],
    )


# --- moving ---------------------------------------------------------------------------------


def _guarded(execution_id: int, allowed: Iterable[str], worker_id: str | None = None):
    conditions = [executions.c.id == execution_id, executions.c.status.in_(list(allowed))]
    if worker_id is not None:
        conditions.append(executions.c.claimed_by == worker_id)
    return update(executions).where(*conditions)


def start_executions(
    conn: Connection, execution_ids: Sequence[int], *, worker_id: str, now: datetime
) -> dict[int, int]:
    """claimed -> running for a batch, opening one Attempt each (two statements in all).

    Returns {execution_id: attempt_number} for the rows this worker still owned; a missing id
    was lost (cancelled or recovered) between the claim and now. The worker on PostgreSQL does
    this inside its turn statement (`record_and_claim`); this is the step on its own.
    """
    if not execution_ids:
        return {}
    started = dict(
        conn.execute(
            update(executions)
            .where(
                executions.c.id.in_(list(execution_ids)),
                executions.c.status == S.CLAIMED.value,
                executions.c.claimed_by == worker_id,
            )
            .values(status=S.RUNNING.value, started_at=now, attempts=executions.c.attempts + 1, updated_at=now)
            .returning(executions.c.id, executions.c.attempts)
        ).all()
    )
    if started:
        conn.execute(
            insert(attempts),
            [
                {
                    "execution_id": execution_id,
                    "number": number,
                    "worker_id": worker_id,
                    "status": AttemptStatus.RUNNING.value,
                    "started_at": now,
                    "output": "",
                    "error": "",
                }
                for execution_id, number in started.items()
            ],
        )
    return started


def start_execution(conn: Connection, execution_id: int, *, worker_id: str, now: datetime) -> int | None:
    """claimed -> running and open an Attempt; returns the attempt number, None if lost."""
    return start_executions(conn, [execution_id], worker_id=worker_id, now=now).get(execution_id)


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended, as the worker saw it."""

    status: AttemptStatus  # succeeded | failed | timed_out
    exit_code: int | None
    output: str
    error: str
    pid: int | None = None


def finish_attempt(
    conn: Connection, execution_id: int, attempt_number: int, outcome: Outcome, *, now: datetime
) -> None:
    conn.execute(
        update(attempts)
        .where(
            attempts.c.execution_id == execution_id,
            attempts.c.number == attempt_number,
            attempts.c.status == AttemptStatus.RUNNING.value,
        )
        .values(
            status=outcome.status.value,
            finished_at=now,
            exit_code=outcome.exit_code,
            pid=outcome.pid,
            output=truncate(outcome.output),
            error=truncate(outcome.error),
        )
    )


def complete_execution(
    conn: Connection, execution_id: int, *, worker_id: str, outcome: Outcome, now: datetime, retry_at: datetime | None
) -> bool:
    """running -> succeeded | failed | timed_out, or -> retry_scheduled when `retry_at` is given.

    Guarded by status and owner: a worker whose lease was recovered cannot overwrite the row.
    """
    values = dict(
        exit_code=outcome.exit_code,
        output=truncate(outcome.output),
        error=truncate(outcome.error),
        updated_at=now,
        lease_expires_at=None,
    )
    if retry_at is not None:
        values.update(status=S.RETRY_SCHEDULED.value, available_at=retry_at, claimed_by=None)
    else:
        values.update(status=outcome.status.value, finished_at=now)
    result = conn.execute(_guarded(execution_id, [S.RUNNING.value], worker_id).values(**values))
    return result.rowcount == 1


@dataclass(frozen=True)
class Finished:
    """One attempt that came back from the executor, ready to record."""

    execution_id: int
    attempt_number: int
    outcome: Outcome
    retry_at: datetime | None  # set: attempts remain, run again then; None: the outcome is final


def record_finished(conn: Connection, finished: Sequence[Finished], *, worker_id: str, now: datetime) -> set[int]:
    """Record finished attempts one by one: each execution moves on (`complete_execution`) and
    its Attempt is closed (`finish_attempt`). Returns the ids recorded; a missing id was lost
    (recovered or cancelled meanwhile) and nothing of it was written. The worker on PostgreSQL
    records a whole batch inside its turn statement instead (`record_and_claim`).
    """
    recorded = set()
    for item in finished:
        if complete_execution(
            conn, item.execution_id, worker_id=worker_id, outcome=item.outcome, now=now, retry_at=item.retry_at
        ):
            finish_attempt(conn, item.execution_id, item.attempt_number, item.outcome, now=now)
            recorded.add(item.execution_id)
    return recorded


def _finished_params(finished: Sequence[Finished]) -> dict:
    return {
        "ids": [item.execution_id for item in finished],
        "numbers": [item.attempt_number for item in finished],
        "statuses": [item.outcome.status.value for item in finished],
        "exit_codes": [item.outcome.exit_code for item in finished],
        "pids": [item.outcome.pid for item in finished],
        "outputs": [truncate(item.outcome.output) for item in finished],
        "errors": [truncate(item.outcome.error) for item in finished],
        "retry_ats": [item.retry_at for item in finished],
    }


def cancel_execution(conn: Connection, execution_id: int, *, now: datetime, reason: str) -> bool:
    result = conn.execute(
        _guarded(execution_id, [s.value for s in CANCELLABLE]).values(
            status=S.CANCELLED.value,
            reason=reason,
            finished_at=now,
            updated_at=now,
            claimed_by=None,
            lease_expires_at=None,
        )
    )
    return result.rowcount == 1


def cancel_queued_for_job(conn: Connection, job_id: int, *, now: datetime, reason: str) -> list[int]:
    """Cancel a job's pending, retry_scheduled and claimed rows (never running ones)."""
    stmt = (
        update(executions)
        .where(executions.c.job_id == job_id, executions.c.status.in_([s.value for s in CANCELLABLE]))
        .values(
            status=S.CANCELLED.value,
            reason=reason,
            finished_at=now,
            updated_at=now,
            claimed_by=None,
            lease_expires_at=None,
        )
        .returning(executions.c.id)
    )
    return [row[0] for row in conn.execute(stmt)]


# --- recovery -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpiredLease:
    id: int
    job_id: int
    status: str
    attempts: int
    max_attempts: int
    claimed_by: str | None


def lock_expired_leases(conn: Connection, *, now: datetime, limit: int = 100) -> list[ExpiredLease]:
    """In-flight rows whose lease ran out: their worker is gone. Locked, skipping busy rows."""
    e = executions
    stmt = (
        select(e.c.id, e.c.job_id, e.c.status, e.c.attempts, e.c.max_attempts, e.c.claimed_by)
        .where(e.c.status.in_(_IN_FLIGHT), e.c.lease_expires_at < now)
        .order_by(e.c.lease_expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return [ExpiredLease(*row) for row in conn.execute(stmt)]


def abandon_attempt(conn: Connection, execution_id: int, attempt_number: int, *, now: datetime, error: str) -> None:
    conn.execute(
        update(attempts)
        .where(
            attempts.c.execution_id == execution_id,
            attempts.c.number == attempt_number,
            attempts.c.status == AttemptStatus.RUNNING.value,
        )
        .values(status=AttemptStatus.ABANDONED.value, finished_at=now, error=error)
    )


def recover_execution(
    conn: Connection, lease: ExpiredLease, *, now: datetime, retry_at: datetime | None, reason: str
) -> str | None:
    """Move an expired in-flight row on: claimed -> pending (never started), running ->
    retry_scheduled (attempts left) or dead_lettered. Returns the new status, None if lost."""
    e = executions
    guard = [e.c.id == lease.id, e.c.status == lease.status, e.c.lease_expires_at < now]
    base = dict(claimed_by=None, lease_expires_at=None, updated_at=now)
    if lease.status == S.CLAIMED.value:
        target, values = S.PENDING, dict(base, status=S.PENDING.value)
    elif retry_at is not None:
        target, values = (
            S.RETRY_SCHEDULED,
            dict(base, status=S.RETRY_SCHEDULED.value, available_at=retry_at, reason=reason),
        )
    else:
        target, values = (
            S.DEAD_LETTERED,
            dict(base, status=S.DEAD_LETTERED.value, finished_at=now, reason=reason, error=reason),
        )
    result = conn.execute(update(e).where(*guard).values(**values))
    return target.value if result.rowcount == 1 else None


def count_claimable(conn: Connection, now: datetime) -> int:
    e = executions
    return conn.execute(
        select(func.count()).select_from(e).where(e.c.status.in_(_CLAIMABLE), e.c.available_at <= now)
    ).scalar_one()


def next_available_at(conn: Connection, now: datetime) -> datetime | None:
    """When the earliest not-yet-due claimable row becomes due (a retry's backoff), for sleeping."""
    e = executions
    return conn.execute(
        select(func.min(e.c.available_at)).where(e.c.status.in_(_CLAIMABLE), e.c.available_at > now)
    ).scalar()


def expire_lease(conn: Connection, execution_id: int, *, worker_id: str, now: datetime) -> None:
    """A stopping worker gives up a running row it had to kill, so recovery may settle it now."""
    conn.execute(
        _guarded(execution_id, [S.RUNNING.value], worker_id).values(lease_expires_at=now - timedelta(microseconds=1))
    )
