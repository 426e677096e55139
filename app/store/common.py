"""The store operations whose SQL is the same on PostgreSQL and SQLite (SQLAlchemy Core).

`CommonStore` is the base both backends extend; they add what differs: the INSERT ... ON
CONFLICT flavour and the worker's turn. Every method takes a Connection inside a transaction the
caller owns, and `now` as a parameter. Every UPDATE that moves an execution is guarded by a
status set derived from the state machine (`app.domain.states`): zero rows changed means another
process got there first, and the caller treats the row as lost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, bindparam, func, insert, or_, select, text, update
from sqlalchemy.engine import Connection, Row

if TYPE_CHECKING:
    from sqlalchemy import Update
    from sqlalchemy.dialects import postgresql, sqlite

from app.domain.policies import TOP_PRIORITY
from app.domain.run_limits import result_expired
from app.domain.states import (
    CLAIMABLE,
    EXPIRABLE,
    IN_FLIGHT,
    QUEUED_CANCELLABLE,
    RUNNING_CANCELLABLE,
    TERMINAL,
    UNIQUE_HELD,
    sources_of,
)
from app.domain.states import ExecutionStatus as S
from app.models.execution import UNIQUE_HELD_WHERE
from app.models.types import UTCDateTime
from app.sql import control, follow_ups, leases, turn, waiting
from app.sql import queues as sql_queues
from app.sql import recovery as sql_recovery
from app.sql.candidates import CANDIDATE_ORDER, CANDIDATE_WHERE  # noqa: F401  (re-exported: benchmarks)
from app.sql.rows import JobColumns
from app.sql.statuses import sql_statuses, status_values
from app.sql.turn import RECORD_TARGETS, check_recordable  # noqa: F401  (re-exported)
from app.store.rows import (
    ExpiredLease,
    ExpiredRun,
    Finished,
    QueueCounts,
    QueueStats,
    executions,
    jobs,
    manual_row,
    queues,
)

# Only finished history is pruned: never queued or in-flight work, and never dead-lettered rows
# or rows with a DeadLetter (an unresolved failure stays visible).
_PRUNABLE_WHERE = f"""
    e.status IN ({sql_statuses(TERMINAL - {S.DEAD_LETTERED})})
    AND NOT EXISTS (SELECT 1 FROM dead_letters AS d WHERE d.execution_id = e.id)
"""
# Rows beyond the newest retention_count finished executions of their job. Only jobs with a
# count limit are ranked (the filter is inside the window: a job's rows are all in or all out, so
# the row numbers do not change): outside, every finished row of 10M was numbered on every pass.
_OVER_COUNT = f"""
SELECT id, job_id FROM (
    SELECT e.id, e.job_id, j.retention_count,
           ROW_NUMBER() OVER (PARTITION BY e.job_id ORDER BY e.id DESC) AS newest_first
    FROM executions AS e JOIN jobs AS j ON j.id = e.job_id
    WHERE {_PRUNABLE_WHERE} AND j.retention_count > 0
) AS ranked
WHERE newest_first > retention_count
LIMIT :batch
"""
# Candidates for the age axis: finished before the most lenient cutoff any job could have
# (now - the smallest retention_days). Each row is then checked against its own job's days in
# Python, which avoids dialect-specific interval arithmetic.
_TOO_OLD = f"""
SELECT e.id, e.job_id, j.retention_days, e.finished_at FROM executions AS e JOIN jobs AS j ON j.id = e.job_id
WHERE {_PRUNABLE_WHERE} AND j.retention_days > 0 AND e.finished_at < :oldest_cutoff
ORDER BY e.id
LIMIT :batch
"""


def _utc(value: datetime | str) -> datetime:
    """A timestamp column read through `text()` as an aware UTC datetime: PostgreSQL returns an
    aware datetime (compared as it is), SQLite the naive UTC text UTCDateTime stores."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


# Candidates for the result-TTL axis: finished before the most lenient cutoff any job's TTL could
# give; a dead-lettered row only once every alert about it is resolved (and there is one).
# A one-off run (no job) has its TTLs on its own row.
_PAST_TTL = f"""
SELECT e.id, e.job_id, e.status, e.finished_at,
       COALESCE(j.success_ttl_seconds, e.success_ttl_seconds) AS success_ttl_seconds,
       COALESCE(j.failure_ttl_seconds, e.failure_ttl_seconds) AS failure_ttl_seconds
FROM executions AS e LEFT JOIN jobs AS j ON j.id = e.job_id
WHERE e.status IN ({sql_statuses(TERMINAL)})
  AND (j.success_ttl_seconds >= 0 OR j.failure_ttl_seconds >= 0
       OR (e.job_id IS NULL AND (e.success_ttl_seconds >= 0 OR e.failure_ttl_seconds >= 0)))
  AND e.finished_at <= :oldest_cutoff
  AND ((e.status <> '{S.DEAD_LETTERED.value}'
        AND NOT EXISTS (SELECT 1 FROM dead_letters AS d WHERE d.execution_id = e.id))
       OR (EXISTS (SELECT 1 FROM alerts AS a WHERE a.execution_id = e.id)
           AND NOT EXISTS (SELECT 1 FROM alerts AS a WHERE a.execution_id = e.id AND a.resolved_at IS NULL)))
ORDER BY e.id
LIMIT :batch
"""


def guarded(
    execution_id: int, target: S, *, worker_id: str | None = None, among: Iterable[str] | None = None
) -> Update:
    """UPDATE executions for one row, allowed only from the statuses `target` may be reached
    from (`sources_of`), narrowed to `among` when the caller knows the row's status."""
    allowed = sources_of(target) if among is None else sources_of(target) & frozenset(S(s) for s in among)
    if not allowed:
        raise ValueError(f"the state machine forbids {sorted(among or [])} -> {target}")
    conditions = [executions.c.id == execution_id, executions.c.status.in_(status_values(allowed))]
    if worker_id is not None:
        conditions.append(executions.c.claimed_by == worker_id)
    return update(executions).where(*conditions)


LATENESS_SAMPLE = 1000  # newest scheduled runs the lateness percentiles are taken from


def _percentile(sorted_values: list[float], share: float) -> float | None:
    """Nearest-rank percentile of an ascending list (None for an empty one)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(share * len(sorted_values)))
    return round(sorted_values[rank - 1], 3)


class CommonStore:
    """The operations both databases run with the same statements."""

    dialect: str = ""

    # --- creating ---------------------------------------------------------------------------

    def _insert(self) -> postgresql.Insert | sqlite.Insert:  # the dialect's INSERT (for ON CONFLICT DO NOTHING)
        raise NotImplementedError

    def insert_occurrences(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> list[tuple[int, str]]:
        """Create executions for scheduled occurrences (`rows.occurrence_row`), skipping any
        that already exist.

        The unique idempotency key (and the unique (job, scheduled_for) index) make a second row
        impossible even when several schedulers process the same job at once; ON CONFLICT DO
        NOTHING turns that into "already there". Returns (id, status) of the rows created, in no
        particular order. The rows go as one executemany of one shape (every row has the same
        keys, as the row builders of app/store/rows.py make them): SQLAlchemy compiles the one-row
        statement once, from its cache, and sends the rows in multi-row batches sized to the
        database's bound-parameter limit ("insertmanyvalues"). Compiling a 500-row VALUES clause
        per chunk instead was most of a 1,000-job tick's CPU (docs/performance.md, "Cron bursts").
        """
        if not rows:
            return []
        stmt = self._insert().on_conflict_do_nothing().returning(executions.c.id, executions.c.status)
        return [(row.id, row.status) for row in conn.execute(stmt, list(rows))]

    def insert_manual(
        self,
        conn: Connection,
        job: JobColumns,
        *,
        now: datetime,
        trigger: str = "manual",
        retry_of_id: int | None = None,
        available_at: datetime | None = None,
        config_override: dict[str, Any] | None = None,
        callback_task: str | None = None,
        parent_id: int | None = None,
    ) -> int:
        """Create a manual (or operator retry) execution, runnable now or from `available_at` (a
        delayed ad-hoc run), with an optional config override (a retried callback: its task and
        parent too); returns its id (for a unique job whose key is held: the holder's id)."""
        row = manual_row(
            job,
            now=now,
            trigger=trigger,
            retry_of_id=retry_of_id,
            available_at=available_at,
            config_override=config_override,
            callback_task=callback_task,
            parent_id=parent_id,
        )
        return self.insert_unique(conn, row)[0]

    def insert_manual_once(
        self,
        conn: Connection,
        job: JobColumns,
        *,
        now: datetime,
        available_at: datetime | None = None,
        config_override: dict[str, Any] | None = None,
    ) -> tuple[int, bool]:
        """A manual run like `insert_manual`, saying whether it was deduplicated: (id, False) for a
        new run, (holder id, True) when a unique job's key is held by a waiting or running run."""
        row = manual_row(job, now=now, available_at=available_at, config_override=config_override)
        return self.insert_unique(conn, row)

    def insert_unique(self, conn: Connection, row: dict[str, Any]) -> tuple[int, bool]:
        """Insert one execution row; when it carries a unique key that a waiting or running run
        holds, insert nothing and return (that run's id, True).

        The partial unique index uq_executions_unique_key decides, not a read before the write:
        `ON CONFLICT (unique_key) WHERE ... DO NOTHING` waits for a concurrent insert of the key
        to commit (PostgreSQL) or runs under the write lock (SQLite), and the holder is read
        after it. A holder that ended in between (its key is free again) means the insert is
        tried again."""
        key = row.get("unique_key")
        if key is None:
            return int(conn.execute(insert(executions).values(**row).returning(executions.c.id)).scalar_one()), False
        stmt = (
            self._insert()
            .values(**row)
            .on_conflict_do_nothing(index_elements=["unique_key"], index_where=text(UNIQUE_HELD_WHERE))
            .returning(executions.c.id)
        )
        holder_of = (
            select(executions.c.id)
            .where(executions.c.unique_key == key, executions.c.status.in_(status_values(UNIQUE_HELD)))
            .limit(1)
        )
        for _ in range(10):
            created = conn.execute(stmt).scalar()
            if created is not None:
                return int(created), False
            holder = conn.execute(holder_of).scalar()
            if holder is not None:
                return int(holder), True
        raise RuntimeError(f"unique key {key!r}: neither inserted nor held after 10 tries")

    def deduplicate_occurrences(
        self, conn: Connection, rows: Sequence[dict[str, Any]], *, now: datetime
    ) -> list[tuple[dict[str, Any], int]]:
        """After `insert_occurrences`: the runnable occurrences of unique jobs that were not
        created because a waiting or running run held their key. Each is recorded as a `missed`
        row that names the holder (so the occurrence is accounted for, as an overlap skip is);
        returns (row, holder id) for each. An occurrence another scheduler created is left alone."""
        unique = [row for row in rows if row.get("unique_key") and row["status"] == S.PENDING.value]
        if not unique:
            return []
        keys = [row["idempotency_key"] for row in unique]
        there = set(
            conn.execute(select(executions.c.idempotency_key).where(executions.c.idempotency_key.in_(keys))).scalars()
        )
        deduplicated = []
        for row in unique:
            if row["idempotency_key"] in there:
                continue
            holder, held = self.insert_unique(conn, row)
            if held:
                reason = f"deduplicated: execution {holder} holds the unique key"
                missed = {**row, "status": S.MISSED.value, "finished_at": now, "reason": reason}
                self.insert_occurrences(conn, [missed])
                deduplicated.append((row, holder))
        return deduplicated

    def insert_executions(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Create batch items or callbacks (`rows.batch_item_row`, `rows.callback_row`), skipping any
        whose idempotency key exists (a callback recorded twice is created once): the ids created."""
        return [execution_id for execution_id, _ in self.insert_occurrences(conn, rows)]

    def insert_one_off_runs(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> list[tuple[int, bool]]:
        """Create one-off runs (`rows.one_off_row`) in one executemany; a row whose idempotency key
        exists already (an earlier run, or a concurrent request that committed first: ON CONFLICT
        DO NOTHING waits for it) is not created. Returns, per row in order, (id, created): the
        existing run's id for a key that was there."""
        if not rows:
            return []
        stmt = self._insert().on_conflict_do_nothing().returning(executions.c.id, executions.c.idempotency_key)
        created = {row.idempotency_key: row.id for row in conn.execute(stmt, list(rows))}
        missing = sorted({row["idempotency_key"] for row in rows} - set(created))
        existing: dict[str, int] = {}
        for start in range(0, len(missing), 500):
            chunk = missing[start : start + 500]
            found = select(executions.c.idempotency_key, executions.c.id).where(executions.c.idempotency_key.in_(chunk))
            existing.update({key: execution_id for key, execution_id in conn.execute(found)})
        answers: list[tuple[int, bool]] = []
        seen: set[str] = set()
        for row in rows:
            key = row["idempotency_key"]
            if key in created:
                answers.append((created[key], key not in seen))  # a key twice in one list: one run
            else:
                answers.append((existing[key], False))
            seen.add(key)
        return answers

    # --- the scheduler's jobs ---------------------------------------------------------------

    def lock_due_jobs(self, conn: Connection, *, now: datetime, limit: int) -> list[Row[Any]]:
        """Enabled jobs whose next_run_at has come, oldest first, locked (skipping jobs another
        scheduler holds; SQLite has no row locks: its ticks serialise on BEGIN IMMEDIATE).

        The filter is written `enabled`, not `enabled IS true`: only the former matches the
        partial index ix_jobs_due, which keeps the tick proportional to due jobs, not all jobs.
        """
        return list(
            conn.execute(
                select(jobs)
                .where(jobs.c.enabled, jobs.c.next_run_at <= now)
                .order_by(jobs.c.next_run_at)
                .limit(limit)
                .with_for_update(skip_locked=True)
            ).fetchall()
        )

    def advance_jobs(
        self,
        conn: Connection,
        next_runs: Sequence[tuple[int, datetime | None]],
        *,
        runs_added: Mapping[int, int] | None = None,
        limit_reasons: Mapping[int, str] | None = None,
    ) -> None:
        """Move each locked job's next_run_at on (None: its schedule is exhausted); one executemany.
        With `runs_added` each job's runs_created grows by its count, and a job in `limit_reasons`
        reached a run limit: its disabled_reason says which (app/domain/run_limits.py)."""
        if not next_runs:
            return
        if not any((runs_added or {}).values()) and not limit_reasons:
            conn.execute(
                update(jobs).where(jobs.c.id == bindparam("job_id")).values(next_run_at=bindparam("next_run_at")),
                [{"job_id": job_id, "next_run_at": at} for job_id, at in next_runs],
            )
            return
        runs_added, limit_reasons = runs_added or {}, limit_reasons or {}
        conn.execute(
            update(jobs)
            .where(jobs.c.id == bindparam("job_id"))
            .values(
                next_run_at=bindparam("next_run_at"),
                runs_created=jobs.c.runs_created + bindparam("added"),
                disabled_reason=func.coalesce(
                    bindparam("reason", type_=jobs.c.disabled_reason.type), jobs.c.disabled_reason
                ),
            ),
            [
                {
                    "job_id": job_id,
                    "next_run_at": at,
                    "added": runs_added.get(job_id, 0),
                    "reason": limit_reasons.get(job_id),
                }
                for job_id, at in next_runs
            ],
        )

    def finish_limited_jobs(
        self, conn: Connection, *, now: datetime, job_ids: Sequence[int] | None = None
    ) -> list[tuple[int, str]]:
        """Disable the enabled jobs that reached a run limit (no next run, a disabled_reason) and
        have no run waiting or in flight: the runs created before the limit run first, because a
        disabled job's queued runs would be cancelled at claim time. Returns (id, reason) of each."""
        j, e = jobs, executions
        active = (
            select(e.c.id).where(e.c.job_id == j.c.id, e.c.status.in_(status_values(CLAIMABLE | IN_FLIGHT))).exists()
        )
        conditions = [j.c.enabled, j.c.next_run_at.is_(None), j.c.disabled_reason.is_not(None), ~active]
        if job_ids is not None:
            if not job_ids:
                return []
            conditions.append(j.c.id.in_(sorted(job_ids)))
        stmt = update(j).where(*conditions).values(enabled=False, updated_at=now).returning(j.c.id, j.c.disabled_reason)
        return sorted((row.id, row.disabled_reason) for row in conn.execute(stmt))

    def earliest_next_run(self, conn: Connection, *, after: datetime | None = None) -> datetime | None:
        """The earliest next_run_at of any enabled job (how long the scheduler may sleep); with
        `after`, the earliest one later than that (the jobs beyond the lead time's horizon)."""
        stmt = select(func.min(jobs.c.next_run_at)).where(jobs.c.enabled)
        if after is not None:
            stmt = stmt.where(jobs.c.next_run_at > after)
        return conn.execute(stmt).scalar()

    def any_active(self, conn: Connection) -> bool:
        """Whether any execution waits or runs (an idle scheduler sleeps longer when none does)."""
        e = executions
        found = conn.execute(select(e.c.id).where(e.c.status.in_(status_values(IN_FLIGHT | CLAIMABLE))).limit(1))
        return found.first() is not None

    # --- occurrences written ahead (SCHEDULER_LEAD_MS, app/domain/lead_time.py) ----------------

    def jobs_with_work(self, conn: Connection, job_ids: Sequence[int]) -> set[int]:
        """Which of `job_ids` have a run in flight or waiting, whatever its available_at: an
        overlap-skip job with any is not written ahead (its next occurrence is decided at its time)."""
        if not job_ids:
            return set()
        e = executions
        return set(
            conn.execute(
                select(e.c.job_id)
                .distinct()
                .where(
                    e.c.job_id.in_(list(job_ids)),
                    e.c.trigger.not_in(["batch", "callback"]),
                    e.c.status.in_(status_values(IN_FLIGHT | CLAIMABLE)),
                )
            ).scalars()
        )

    def withdraw_ahead(self, conn: Connection, job_id: int, *, now: datetime) -> tuple[int, Row[Any] | None]:
        """Delete the job's occurrences written ahead whose time has not come (pending, trigger
        schedule, scheduled_for > now) and move its cursor back to the first of them, with its
        runs_created count: they were a forecast, and the job is about to change. The job row is
        locked first, so a tick writing ahead at the same moment either committed (its rows are
        deleted here) or waits for this transaction. Returns how many were withdrawn and the
        job's (next_run_at, runs_created) afterwards."""
        e = executions
        locked = conn.execute(
            select(jobs.c.next_run_at, jobs.c.runs_created).where(jobs.c.id == job_id).with_for_update()
        ).first()
        withdrawn = sorted(
            conn.execute(
                e.delete()
                .where(
                    e.c.job_id == job_id,
                    e.c.status == S.PENDING.value,
                    e.c.trigger == "schedule",
                    e.c.attempts == 0,
                    e.c.scheduled_for > now,
                )
                .returning(e.c.scheduled_for)
            ).scalars()
        )
        if not withdrawn or locked is None:
            return 0, locked
        next_run_at = withdrawn[0] if locked.next_run_at is None else min(withdrawn[0], locked.next_run_at)
        runs_created = max(0, (locked.runs_created or 0) - len(withdrawn))
        conn.execute(update(jobs).where(jobs.c.id == job_id).values(next_run_at=next_run_at, runs_created=runs_created))
        return len(withdrawn), conn.execute(
            select(jobs.c.next_run_at, jobs.c.runs_created).where(jobs.c.id == job_id)
        ).first()

    def pending_ahead(self, conn: Connection, job_ids: Sequence[int], *, now: datetime) -> dict[int, datetime]:
        """The occurrences of `job_ids` written ahead and not yet due: {id: scheduled_for}."""
        if not job_ids:
            return {}
        e = executions
        found = conn.execute(
            select(e.c.id, e.c.scheduled_for).where(
                e.c.job_id.in_(sorted(job_ids)),
                e.c.trigger == "schedule",
                e.c.status == S.PENDING.value,
                e.c.scheduled_for > now,
            )
        )
        return {row.id: row.scheduled_for for row in found}

    def overlap_skip_ahead(self, conn: Connection) -> dict[int, datetime]:
        """Every overlap-skip occurrence written ahead that no worker has started: {id:
        scheduled_for}. A row written ahead is one created before its time (created_at <
        scheduled_for; the tick's own rows are created at or after it). Read once when a
        scheduler starts, so the rows an earlier scheduler wrote are checked at their time too."""
        e = executions
        found = conn.execute(
            select(e.c.id, e.c.scheduled_for)
            .select_from(e.join(jobs, jobs.c.id == e.c.job_id))
            .where(
                e.c.status == S.PENDING.value,
                e.c.trigger == "schedule",
                e.c.attempts == 0,
                e.c.created_at < e.c.scheduled_for,
                jobs.c.overlap_policy == "skip",
            )
        )
        return {row.id: row.scheduled_for for row in found}

    def jobs_by_id(self, conn: Connection, job_ids: Sequence[int]) -> list[Row[Any]]:
        """The jobs rows of `job_ids` (those that exist)."""
        if not job_ids:
            return []
        return list(conn.execute(select(jobs).where(jobs.c.id.in_(sorted(job_ids)))))

    def take_overlapped_ahead(self, conn: Connection, execution_ids: Sequence[int], *, now: datetime) -> list[Row[Any]]:
        """Of the overlap-skip occurrences written ahead (`execution_ids`), delete those whose time
        has come while another run of their job is active (in flight, or waiting and due: the
        tick's own test, `jobs_with_active_runs`), so the caller writes the `missed` row the tick
        would have written. A row a worker already started is left alone (status guard). Returns
        (id, job_id, scheduled_for) of each taken."""
        if not execution_ids:
            return []
        e, other = executions, executions.alias("other")
        active = (
            select(other.c.id)
            .where(
                other.c.job_id == e.c.job_id,
                other.c.id != e.c.id,
                other.c.trigger.not_in(["batch", "callback"]),
                or_(
                    other.c.status.in_(status_values(IN_FLIGHT)),
                    and_(other.c.status.in_(status_values(CLAIMABLE)), other.c.available_at <= now),
                ),
            )
            .exists()
        )
        return list(
            conn.execute(
                e.delete()
                .where(
                    e.c.id.in_(sorted(execution_ids)),
                    e.c.status == S.PENDING.value,
                    e.c.attempts == 0,
                    e.c.scheduled_for <= now,
                    active,
                )
                .returning(e.c.id, e.c.job_id, e.c.scheduled_for)
            )
        )

    def earliest_claimable(
        self, conn: Connection, *, after: datetime, queue_ids: Sequence[int] | None = None
    ) -> datetime | None:
        """When an idle worker next has something to claim (app/sql/waiting.py)."""
        return waiting.earliest_claimable(conn, after=after, queue_ids=queue_ids)

    def refresh_planner_statistics(self, conn: Connection, *, written: int) -> bool:
        """After a tick wrote `written` rows: bring the planner's statistics of executions up to
        date if they are far behind (PostgreSQL only, see PostgresStore). Whether it did."""
        return False

    def jobs_with_active_runs(self, conn: Connection, job_ids: Sequence[int], now: datetime) -> set[int]:
        """Which of `job_ids` have an active run (one query for a whole tick batch): in flight,
        pending, or retry_scheduled and due - the overlap policy skip's test at tick time."""
        if not job_ids:
            return set()
        e = executions
        # Batch items and callbacks run beside the job's own runs (never exclusive), so they do not
        # count; nor does a delayed ad-hoc run still waiting for its time.
        active = or_(
            e.c.status.in_(status_values(IN_FLIGHT)),
            and_(e.c.status.in_(status_values(CLAIMABLE)), e.c.available_at <= now),
        )
        return set(
            conn.execute(
                select(e.c.job_id)
                .distinct()
                .where(e.c.job_id.in_(list(job_ids)), e.c.trigger.not_in(["batch", "callback"]), active)
            ).scalars()
        )

    # --- recording --------------------------------------------------------------------------

    def record_finished(
        self, conn: Connection, finished: Sequence[Finished], *, worker_id: str, now: datetime
    ) -> set[int]:
        """Record finished attempts one by one: each execution moves on (running -> its outcome,
        or -> retry_scheduled), guarded by status and owner so a worker whose lease was recovered
        writes nothing, and its Attempt is closed. Returns the ids recorded; a missing id was lost
        (recovered or cancelled meanwhile). PostgreSQL's turn records a whole batch in its one
        statement instead; this is the step on its own (SQLite's turn, and tests)."""
        return turn.record_finished(conn, finished, worker_id=worker_id, now=now)

    # --- queues -----------------------------------------------------------------------------

    def queue_ids(self, conn: Connection, names: Sequence[str]) -> dict[str, int]:
        """{name: id} of the named queues that exist."""
        return sql_queues.queue_ids(conn, names)

    def queue_names(self, conn: Connection) -> list[str]:
        return sql_queues.queue_names(conn)

    def move_queued_to_queue(self, conn: Connection, job_id: int, queue_id: int) -> int:
        """A job moved to another queue takes its waiting executions with it (not running ones).
        A workflow's occurrence has no queue (no worker may claim it) and keeps none; a step keeps
        the queue it was created in (its own, or the job's then)."""
        e = executions
        stmt = (
            update(e)
            .where(
                e.c.job_id == job_id,
                e.c.status.in_(status_values(CLAIMABLE)),
                e.c.queue_id.is_not(None),
                e.c.workflow_run_id.is_(None),
            )
            .values(queue_id=queue_id)
        )
        return conn.execute(stmt).rowcount

    def queue_stats(
        self, conn: Connection, now: datetime, *, queue_ids: Sequence[int] | None = None
    ) -> dict[int, QueueStats]:
        """Per-queue statistics at `now` in four index-backed reads: waiting rows (the claimable
        partial index), running rows (ix_executions_queue_running), rows finished in the last hour
        (ix_executions_finished_at), and the start lateness of at most LATENESS_SAMPLE scheduled
        runs finished in the last 15 minutes (plus those still running)."""
        e = executions
        hour_ago, window = now - timedelta(hours=1), now - timedelta(minutes=15)
        scope = [e.c.queue_id.in_(list(queue_ids))] if queue_ids is not None else []
        figures: dict[int, dict[str, Any]] = {}

        def put(queue_id: int, **values: Any) -> None:
            figures.setdefault(queue_id, {}).update(values)

        due = e.c.available_at <= now
        for queue_id, pending, later, retrying, oldest in conn.execute(
            select(
                e.c.queue_id,
                func.count().filter(due),
                func.count().filter(and_(e.c.status == S.PENDING.value, e.c.available_at > now)),
                func.count().filter(and_(e.c.status == S.RETRY_SCHEDULED.value, e.c.available_at > now)),
                func.min(e.c.available_at).filter(due),
            )
            .where(e.c.status.in_(status_values(CLAIMABLE)), *scope)
            .group_by(e.c.queue_id)
        ):
            age = max(0.0, (now - oldest).total_seconds()) if oldest is not None else None
            put(queue_id, pending=pending, scheduled_later=later, retrying=retrying, oldest_pending_seconds=age)
        for queue_id, running in conn.execute(
            select(e.c.queue_id, func.count()).where(e.c.status == S.RUNNING.value, *scope).group_by(e.c.queue_id)
        ):
            put(queue_id, running=running)
        failed = status_values({S.FAILED, S.TIMED_OUT, S.DEAD_LETTERED})
        for queue_id, succeeded, failures, recent in conn.execute(
            select(
                e.c.queue_id,
                func.count().filter(e.c.status == S.SUCCEEDED.value),
                func.count().filter(e.c.status.in_(failed)),
                func.count().filter(e.c.finished_at >= window),
            )
            .where(e.c.finished_at >= hour_ago, *scope)
            .group_by(e.c.queue_id)
        ):
            put(queue_id, succeeded_last_hour=succeeded, failed_last_hour=failures, throughput_per_minute=recent / 15)
        scheduled = e.c.trigger.in_(["schedule", "catch_up"])
        started_recently = and_(scheduled, e.c.started_at >= window, *scope)
        finished = conn.execute(
            select(e.c.queue_id, e.c.started_at, e.c.scheduled_for)
            .where(e.c.finished_at >= window, started_recently)
            .order_by(e.c.finished_at.desc())
            .limit(LATENESS_SAMPLE)
        ).all()
        running = conn.execute(
            select(e.c.queue_id, e.c.started_at, e.c.scheduled_for).where(
                e.c.status == S.RUNNING.value, started_recently
            )
        ).all()
        late: dict[int, list[float]] = {}
        for queue_id, started_at, scheduled_for in [*finished, *running]:
            late.setdefault(queue_id, []).append(max(0.0, (started_at - scheduled_for).total_seconds()))
        for queue_id, values in late.items():
            values.sort()
            put(queue_id, lateness_p50_seconds=_percentile(values, 0.5), lateness_p95_seconds=_percentile(values, 0.95))
        wanted = set(queue_ids) if queue_ids is not None else set(conn.execute(select(queues.c.id)).scalars())
        return {queue_id: QueueStats(**figures.get(queue_id, {})) for queue_id in wanted if queue_id is not None}

    def raise_starving_priorities(self, conn: Connection, *, due_before: datetime) -> int:
        """Priority draining (app.domain.policies.starving_since): waiting work due before
        `due_before` moves to the top priority. Returns how many rows moved."""
        e = executions
        stmt = (
            update(e)
            .where(
                e.c.status.in_(status_values(CLAIMABLE)),
                e.c.available_at <= due_before,
                e.c.priority > TOP_PRIORITY,
            )
            .values(priority=TOP_PRIORITY)
        )
        return conn.execute(stmt).rowcount

    # --- concurrency slots ------------------------------------------------------------------

    def release_slots(self, conn: Connection, execution_ids: Sequence[int]) -> None:
        """Give back the queue slots of executions that just left `running` (those started under
        a limit, `holds_slot`, which is cleared), so each limited queue's `slots_taken` stays the
        number of its executions that hold one (ADR 0008; app/sql/queues.py). Releasing twice
        gives nothing back."""
        sql_queues.release_slots(conn, execution_ids)

    def release_slots_of_job(self, conn: Connection, job_id: int) -> None:
        """Before a job and its history are deleted: the slots its running executions hold."""
        running = conn.execute(
            select(executions.c.id).where(
                executions.c.job_id == job_id, executions.c.status == S.RUNNING.value, executions.c.holds_slot
            )
        ).scalars()
        self.release_slots(conn, list(running))

    # --- cancelling -------------------------------------------------------------------------

    def _cancelled_values(self, *, now: datetime, reason: str) -> dict[str, Any]:
        return dict(
            status=S.CANCELLED.value,
            reason=reason,
            finished_at=now,
            updated_at=now,
            claimed_by=None,
            lease_expires_at=None,
        )

    def cancel_execution(self, conn: Connection, execution_id: int, *, now: datetime, reason: str) -> bool:
        """Cancel one queued row (never a running one: see `request_cancel`); False when it was no
        longer cancellable."""
        stmt = guarded(execution_id, S.CANCELLED, among=QUEUED_CANCELLABLE).values(
            **self._cancelled_values(now=now, reason=reason)
        )
        return conn.execute(stmt).rowcount == 1

    def cancel_queued_for_job(self, conn: Connection, job_id: int, *, now: datetime, reason: str) -> list[int]:
        """Cancel a job's queued rows (pending, retry_scheduled, legacy claimed; never running ones)."""
        stmt = (
            update(executions)
            .where(executions.c.job_id == job_id, executions.c.status.in_(status_values(QUEUED_CANCELLABLE)))
            .values(**self._cancelled_values(now=now, reason=reason))
            .returning(executions.c.id)
        )
        return [row.id for row in conn.execute(stmt)]

    def request_cancel(
        self, conn: Connection, execution_id: int, *, now: datetime, requested_by: str, reason: str
    ) -> str | None:
        """Ask the worker running a row to stop it: stamps cancel_requested_at/by and the reason
        the row will end with. Moves nothing: the worker kills the task and records `cancelled`
        (or recovery does, if the worker is gone). Returns the owning worker's id; None when the
        row is not running or a cancel was already requested."""
        e = executions
        stmt = (
            update(e)
            .where(
                e.c.id == execution_id,
                e.c.status.in_(status_values(RUNNING_CANCELLABLE)),
                e.c.cancel_requested_at.is_(None),
            )
            .values(cancel_requested_at=now, cancel_requested_by=requested_by, reason=reason, updated_at=now)
            .returning(e.c.claimed_by)
        )
        row = conn.execute(stmt).first()
        return None if row is None else (row.claimed_by or "")

    def cancel_requests(self, conn: Connection, *, worker_id: str) -> dict[int, str]:
        """The running rows of `worker_id` an operator asked to cancel: {id: requested by}
        (app/sql/control.py: the worker's check on every wake)."""
        return control.cancel_requests(conn, worker_id=worker_id)

    # --- batches ----------------------------------------------------------------------------

    def complete_batches(self, conn: Connection, *, now: datetime, batch_ids: Sequence[int] | None = None) -> list[Any]:
        """Mark complete the open batches (of `batch_ids`, or all: the sweep) whose every item has
        ended, and return them (id, job_id, on_complete, on_complete_config, cancelled_at), each
        locked first so it completes once (app/sql/follow_ups.py)."""
        return follow_ups.complete_batches(conn, now=now, batch_ids=batch_ids)

    def batch_counts(self, conn: Connection, batch_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        """Items per status of each batch (trigger batch only: not its callback), {batch: {status: n}}."""
        return follow_ups.batch_counts(conn, batch_ids)

    def cancel_queued_for_batch(self, conn: Connection, batch_id: int, *, now: datetime, reason: str) -> list[int]:
        """Cancel a batch's items that have not started (never running ones): their ids."""
        stmt = (
            update(executions)
            .where(
                executions.c.batch_id == batch_id,
                executions.c.trigger == "batch",
                executions.c.status.in_(status_values(QUEUED_CANCELLABLE)),
            )
            .values(**self._cancelled_values(now=now, reason=reason))
            .returning(executions.c.id)
        )
        return sorted(row.id for row in conn.execute(stmt))

    # --- recovery ---------------------------------------------------------------------------

    def lock_expired_leases(self, conn: Connection, *, now: datetime, limit: int = 100) -> list[ExpiredLease]:
        """In-flight rows whose lease ran out (their worker is gone), with what recovery needs of
        their job. The execution rows are locked, skipping rows another recoverer holds."""
        return [ExpiredLease(**row) for row in sql_recovery.lock_expired_leases(conn, now=now, limit=limit)]

    def recover_execution(
        self, conn: Connection, lease: ExpiredLease, *, now: datetime, retry_at: datetime | None, reason: str
    ) -> str | None:
        """Move an expired in-flight row on, closing its Attempt (app/sql/recovery.py): the new
        status, None if lost."""
        return sql_recovery.recover_execution(conn, lease, now=now, retry_at=retry_at, reason=reason)

    def expire_queued(self, conn: Connection, *, now: datetime, limit: int = 1000) -> list[ExpiredRun]:
        """Queued TTL: waiting rows (pending, retry_scheduled) not started within their job's
        queued_ttl_seconds of becoming available (available_at) end `expired` with a reason.
        One guarded UPDATE per distinct TTL the jobs use (its cutoff is `now - ttl`, so no
        dialect-specific interval arithmetic), at most `limit` rows each; nothing is written, and
        one small read is made, while no job has a queued TTL. Returns the rows expired."""
        e, j = executions, jobs
        waiting = e.c.status.in_(status_values(EXPIRABLE))
        ttls = set(
            conn.execute(select(j.c.queued_ttl_seconds).distinct().where(j.c.queued_ttl_seconds.is_not(None))).scalars()
        )
        # One-off runs carry their own TTL (no job): those still waiting, on the one-off index.
        one_off_ttls = set(
            conn.execute(
                select(e.c.queued_ttl_seconds)
                .distinct()
                .where(e.c.job_id.is_(None), e.c.queued_ttl_seconds.is_not(None), waiting)
            ).scalars()
        )
        expired: list[ExpiredRun] = []
        for ttl, of_jobs in sorted([(t, True) for t in ttls] + [(t, False) for t in one_off_ttls]):
            reason = f"queued TTL passed: not started within {ttl}s of becoming available"
            due = select(e.c.id).where(waiting, e.c.available_at <= now - timedelta(seconds=ttl))
            if of_jobs:
                due = due.join_from(e, j, e.c.job_id == j.c.id).where(j.c.queued_ttl_seconds == ttl)
            else:
                due = due.where(e.c.job_id.is_(None), e.c.queued_ttl_seconds == ttl)
            ids = list(conn.execute(due.order_by(e.c.available_at, e.c.id).limit(limit)).scalars())
            if not ids:
                continue
            stmt = (
                update(e)
                .where(e.c.id.in_(ids), e.c.status.in_(status_values(EXPIRABLE)))
                .values(
                    status=S.EXPIRED.value,
                    reason=reason,
                    finished_at=now,
                    updated_at=now,
                    claimed_by=None,
                    lease_expires_at=None,
                )
                .returning(e.c.id, e.c.job_id)
            )
            expired += [ExpiredRun(row.id, row.job_id, reason) for row in conn.execute(stmt)]
        return sorted(expired, key=lambda row: row.id)

    def expire_lease(self, conn: Connection, execution_id: int, *, worker_id: str, now: datetime) -> bool:
        """A stopping worker gives up a running row it had to kill, so recovery may settle it now."""
        return leases.expire_lease(conn, execution_id, worker_id=worker_id, now=now)

    def renew_leases(
        self, conn: Connection, execution_ids: Sequence[int], *, worker_id: str, now: datetime, lease_seconds: int
    ) -> dict[int, datetime]:
        """Extend the leases of a worker's running rows in one statement (app/sql/leases.py): the
        rows renewed, {id: lease_expires_at}; a row missing from it is lost to the worker."""
        return leases.renew_leases(conn, execution_ids, worker_id=worker_id, now=now, lease_seconds=lease_seconds)

    # --- counts -----------------------------------------------------------------------------

    def queue_counts(self, conn: Connection, now: datetime) -> QueueCounts:
        """Queue depth (due claimable rows) and the oldest of them, waiting retries and in-flight
        rows: two short reads, each on a partial index (claimable; leased)."""
        e = executions
        due = e.c.available_at <= now
        depth, oldest, waiting = conn.execute(
            select(
                func.count().filter(due),
                func.min(e.c.available_at).filter(due),
                func.count().filter(and_(e.c.status == S.RETRY_SCHEDULED.value, e.c.available_at > now)),
            ).where(e.c.status.in_(status_values(CLAIMABLE)))
        ).one()
        in_flight = conn.execute(select(func.count()).where(e.c.status.in_(status_values(IN_FLIGHT)))).scalar_one()
        return QueueCounts(
            depth=depth or 0, oldest_due_at=oldest, in_flight=in_flight or 0, retries_waiting=waiting or 0
        )

    def counts_by_status(self, conn: Connection, *, created_since: datetime | None = None) -> dict[str, int]:
        """Executions per status, every status present (a full count: one GROUP BY), optionally
        only those created at or after `created_since`."""
        counts = dict.fromkeys(status_values(S), 0)
        stmt = select(executions.c.status, func.count()).group_by(executions.c.status)
        if created_since is not None:
            stmt = stmt.where(executions.c.created_at >= created_since)
        for status, count in conn.execute(stmt):
            counts[status] = count
        return {s.value: counts[s.value] for s in S}

    # --- retention --------------------------------------------------------------------------

    def prunable_history(self, conn: Connection, *, now: datetime, limit: int) -> dict[int, int | None]:
        """Finished executions beyond their job's retention (count or age) or past its result TTL
        (success_ttl_seconds / failure_ttl_seconds): {id: job_id}. Whichever removes first wins.

        Never queued or in-flight rows; never dead-lettered ones or rows with a DeadLetter, except
        through a result TTL once their alerts are resolved.
        """
        doomed: dict[int, int | None] = {}
        for row in conn.execute(text(_OVER_COUNT), {"batch": limit}):
            doomed[row.id] = row.job_id
        min_days = conn.execute(select(func.min(jobs.c.retention_days)).where(jobs.c.retention_days > 0)).scalar()
        if min_days:
            stmt = text(_TOO_OLD).bindparams(bindparam("oldest_cutoff", type_=UTCDateTime))
            # Per row only a comparison: a batch is 5,000 rows, and building a type object, a
            # timedelta and a converted datetime for each was a third of a batch's Python CPU
            # (profiled at 10M rows). Each job's cutoff is computed once per distinct days.
            cutoffs: dict[int, datetime] = {}
            rows = conn.execute(stmt, {"oldest_cutoff": now - timedelta(days=min_days), "batch": limit})
            for execution_id, job_id, days, finished in rows:
                cutoff = cutoffs.get(days)
                if cutoff is None:
                    cutoff = cutoffs[days] = now - timedelta(days=days)
                if _utc(finished) < cutoff and execution_id not in doomed:
                    doomed[execution_id] = job_id
        for execution_id, job_id in self._past_result_ttl(conn, now=now, limit=limit):
            doomed.setdefault(execution_id, job_id)
        return doomed

    def _past_result_ttl(self, conn: Connection, *, now: datetime, limit: int) -> list[tuple[int, int | None]]:
        """The result-TTL axis (app.domain.run_limits.result_expired): finished rows whose job's
        success_ttl_seconds (succeeded) or failure_ttl_seconds (every other end) has passed since
        they finished. A dead-lettered row (or one with a DeadLetter) goes only once its alerts are
        resolved. Candidates are read past the most lenient cutoff any job could have, then each
        is checked against its own job in Python; nothing is read while no job has a TTL."""
        ttls = [
            conn.execute(select(func.min(column)).where(column >= 0)).scalar()
            for column in (jobs.c.success_ttl_seconds, jobs.c.failure_ttl_seconds)
        ]
        one_off = executions.c.job_id.is_(None)
        ttls += [
            conn.execute(select(func.min(column)).where(one_off, column >= 0)).scalar()
            for column in (executions.c.success_ttl_seconds, executions.c.failure_ttl_seconds)
        ]
        shortest = min((ttl for ttl in ttls if ttl is not None), default=None)
        if shortest is None:
            return []
        stmt = text(_PAST_TTL).bindparams(bindparam("oldest_cutoff", type_=UTCDateTime))
        rows = conn.execute(stmt, {"oldest_cutoff": now - timedelta(seconds=max(0, shortest)), "batch": limit})
        found = []
        for row in rows:
            finished = _utc(row.finished_at)
            if result_expired(
                succeeded=row.status == S.SUCCEEDED.value,
                finished_at=finished,
                now=now,
                success_ttl_seconds=row.success_ttl_seconds,
                failure_ttl_seconds=row.failure_ttl_seconds,
            ):
                found.append((row.id, row.job_id))
        return found

    def delete_executions(self, conn: Connection, ids: Sequence[int], *, chunk: int = 2000) -> int:
        """Delete executions by id (retention's prunable history), in chunks; returns how many."""
        deleted = 0
        ids = sorted(ids)
        for start in range(0, len(ids), chunk):
            stmt = text("DELETE FROM executions WHERE id IN :ids").bindparams(bindparam("ids", expanding=True))
            deleted += conn.execute(stmt, {"ids": ids[start : start + chunk]}).rowcount
        return deleted
