"""The one interface the engine talks to: what the scheduler, worker, recovery, retention,
metrics and status need from the database, whatever the database.

Like Oban's engines or River's drivers: `app/store/postgres.py` and `app/store/sqlite.py` each
implement it (sharing the dialect-neutral statements of `app/store/common.py`), and
`app.store.store_for(conn_or_engine)` hands a caller the one for its database, so no caller
writes `if dialect`. Every method takes a Connection inside a transaction the caller owns (or
a plain connection for the reads) and `now` as a parameter. Every UPDATE that moves an execution
is guarded by a status set derived from `app.domain.states.ALLOWED`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.engine import Connection, Row

from app.sql.rows import JobColumns
from app.store.rows import ExpiredLease, ExpiredRun, Finished, QueueCounts, QueueStats, Turn


class Store(Protocol):
    dialect: str

    # creating
    def insert_occurrences(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> list[tuple[int, str]]:
        """Create scheduled occurrences (`rows.occurrence_row`), skipping existing ones: (id, status) created."""

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
        """Create a manual run (now, or delayed to `available_at`, with an optional config override)
        or an operator retry (of a callback: with its task and parent): its id (a unique job's
        held key: the holder's id)."""

    def insert_manual_once(
        self,
        conn: Connection,
        job: JobColumns,
        *,
        now: datetime,
        available_at: datetime | None = None,
        config_override: dict[str, Any] | None = None,
    ) -> tuple[int, bool]:
        """A manual run: (its id, False), or (the holder's id, True) when its unique key is held."""

    def insert_unique(self, conn: Connection, row: dict[str, Any]) -> tuple[int, bool]:
        """Insert one execution row unless a waiting or running run holds its unique key."""

    def deduplicate_occurrences(
        self, conn: Connection, rows: Sequence[dict[str, Any]], *, now: datetime
    ) -> list[tuple[dict[str, Any], int]]:
        """Record the occurrences of unique jobs whose key was held as missed: (row, holder id)."""

    def insert_one_off_runs(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> list[tuple[int, bool]]:
        """Create one-off runs, a row whose idempotency key exists being the existing run: per row
        (id, created)."""

    def insert_executions(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Create batch items or callbacks, skipping existing idempotency keys: the ids created."""

    # the scheduler
    def lock_due_jobs(self, conn: Connection, *, now: datetime, limit: int) -> list[Row[Any]]:
        """Enabled jobs with next_run_at <= now, oldest first, locked with SKIP LOCKED."""

    def advance_jobs(
        self,
        conn: Connection,
        next_runs: Sequence[tuple[int, datetime | None]],
        *,
        runs_added: Mapping[int, int] | None = None,
        limit_reasons: Mapping[int, str] | None = None,
    ) -> None:
        """Set each (job id, next_run_at); count the runs created and record run limits reached."""

    def finish_limited_jobs(
        self, conn: Connection, *, now: datetime, job_ids: Sequence[int] | None = None
    ) -> list[tuple[int, str]]:
        """Disable jobs that reached a run limit once none of their runs waits or runs: (id, reason)."""

    def expire_queued(self, conn: Connection, *, now: datetime, limit: int = 1000) -> list[ExpiredRun]:
        """End waiting rows past their job's queued_ttl_seconds `expired`: the rows expired."""

    def earliest_next_run(self, conn: Connection, *, after: datetime | None = None) -> datetime | None:
        """The earliest next_run_at of an enabled job (later than `after`, when given)."""

    def any_active(self, conn: Connection) -> bool:
        """Whether any execution waits or runs."""

    def jobs_with_work(self, conn: Connection, job_ids: Sequence[int]) -> set[int]:
        """Which of `job_ids` have a run in flight or waiting, whatever its available_at."""

    def withdraw_ahead(self, conn: Connection, job_id: int, *, now: datetime) -> tuple[int, Row[Any] | None]:
        """Delete the job's occurrences written ahead whose time has not come and move its cursor
        back (job row locked first): how many, and the job's (next_run_at, runs_created)."""

    def pending_ahead(self, conn: Connection, job_ids: Sequence[int], *, now: datetime) -> dict[int, datetime]:
        """The occurrences of `job_ids` written ahead and not yet due: {id: scheduled_for}."""

    def overlap_skip_ahead(self, conn: Connection) -> dict[int, datetime]:
        """Every overlap-skip occurrence written ahead that no worker has started: {id: scheduled_for}."""

    def jobs_by_id(self, conn: Connection, job_ids: Sequence[int]) -> list[Row[Any]]:
        """The jobs rows of `job_ids` (those that exist)."""

    def take_overlapped_ahead(self, conn: Connection, execution_ids: Sequence[int], *, now: datetime) -> list[Row[Any]]:
        """Delete the overlap-skip rows written ahead that fell due while their job was busy."""

    def earliest_claimable(
        self, conn: Connection, *, after: datetime, queue_ids: Sequence[int] | None = None
    ) -> datetime | None:
        """The earliest available_at later than `after` of a waiting row (an idle worker's wake-up)."""

    def refresh_planner_statistics(self, conn: Connection, *, written: int) -> bool:
        """ANALYZE executions when a tick wrote more rows than its statistics count (PostgreSQL)."""

    def jobs_with_active_runs(self, conn: Connection, job_ids: Sequence[int], now: datetime) -> set[int]:
        """Which of `job_ids` have a run in flight, pending or due for retry (overlap policy skip)."""

    # the worker
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
        """A worker's turn: record `finished`, start up to `limit` due rows (of `tasks`, any task when
        None), cancel those of disabled jobs."""

    def record_finished(
        self, conn: Connection, finished: Sequence[Finished], *, worker_id: str, now: datetime
    ) -> set[int]:
        """Record finished attempts only: the ids recorded (a missing one was lost)."""

    def expire_lease(self, conn: Connection, execution_id: int, *, worker_id: str, now: datetime) -> bool:
        """A stopping worker gives up a running row so recovery may settle it now."""

    def renew_leases(
        self, conn: Connection, execution_ids: Sequence[int], *, worker_id: str, now: datetime, lease_seconds: int
    ) -> dict[int, datetime]:
        """Extend the worker's running rows' leases to at least now + lease_seconds: {id: new lease}."""

    def queue_ids(self, conn: Connection, names: Sequence[str]) -> dict[str, int]:
        """{name: id} of the named queues that exist."""

    def queue_names(self, conn: Connection) -> list[str]:
        """Every queue name, sorted."""

    def move_queued_to_queue(self, conn: Connection, job_id: int, queue_id: int) -> int:
        """Move a job's waiting executions to its new queue: how many."""

    def raise_starving_priorities(self, conn: Connection, *, due_before: datetime) -> int:
        """Waiting work due before `due_before` moves to the top priority: how many rows."""

    def release_slots(self, conn: Connection, execution_ids: Sequence[int]) -> None:
        """Give back the queue slots of executions that just left running (ADR 0008)."""

    def release_slots_of_job(self, conn: Connection, job_id: int) -> None:
        """Give back the slots of a job's running executions before the job is deleted."""

    # operators
    def cancel_execution(self, conn: Connection, execution_id: int, *, now: datetime, reason: str) -> bool:
        """Cancel one queued row; False when it was no longer cancellable."""

    def cancel_queued_for_job(self, conn: Connection, job_id: int, *, now: datetime, reason: str) -> list[int]:
        """Cancel all of a job's queued rows: their ids."""

    def request_cancel(
        self, conn: Connection, execution_id: int, *, now: datetime, requested_by: str, reason: str
    ) -> str | None:
        """Ask the worker of a running row to cancel it: that worker's id, None if not running or already asked."""

    def cancel_requests(self, conn: Connection, *, worker_id: str) -> dict[int, str]:
        """The running rows of `worker_id` an operator asked to cancel: {id: requested by}."""

    # batches
    def complete_batches(self, conn: Connection, *, now: datetime, batch_ids: Sequence[int] | None = None) -> list[Any]:
        """Mark complete the open batches whose items have all ended (locked first): those completed now."""

    def batch_counts(self, conn: Connection, batch_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        """Items per status of each batch: {batch id: {status: count}}."""

    def cancel_queued_for_batch(self, conn: Connection, batch_id: int, *, now: datetime, reason: str) -> list[int]:
        """Cancel a batch's items that have not started: their ids."""

    # recovery
    def lock_expired_leases(self, conn: Connection, *, now: datetime, limit: int = 100) -> list[ExpiredLease]:
        """In-flight rows whose lease ran out, locked with SKIP LOCKED."""

    def recover_execution(
        self, conn: Connection, lease: ExpiredLease, *, now: datetime, retry_at: datetime | None, reason: str
    ) -> str | None:
        """Settle one expired lease (pending, retry_scheduled or dead_lettered): the new status, None if lost."""

    # counts
    def queue_counts(self, conn: Connection, now: datetime) -> QueueCounts:
        """Queue depth and oldest due row, waiting retries, in-flight rows."""

    def queue_stats(
        self, conn: Connection, now: datetime, *, queue_ids: Sequence[int] | None = None
    ) -> dict[int, QueueStats]:
        """Per-queue live statistics at `now` (every queue, or those of `queue_ids`)."""

    def counts_by_status(self, conn: Connection, *, created_since: datetime | None = None) -> dict[str, int]:
        """Executions per status, every status present (only those created since `created_since`)."""

    # retention
    def prunable_history(self, conn: Connection, *, now: datetime, limit: int) -> dict[int, int | None]:
        """Finished executions beyond their job's retention: {id: job_id}."""

    def delete_executions(self, conn: Connection, ids: Sequence[int], *, chunk: int = 2000) -> int:
        """Delete executions by id: how many."""
