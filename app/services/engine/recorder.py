"""The recorder: what a finished attempt becomes, and what is written beside it.

A result that came back from the executor becomes a `Finished` for the turn to record
(`finished`: the outcome with the task's secrets scrubbed, the code version that ran it, and the
retry time the job's retry policy gives while attempts remain). Once the turn has recorded it,
`recorded` counts it, logs it and writes, in the same transaction, what its outcome calls for: the
cancel event, the retry event, or the dead letter (with its alert) when the attempts are spent.
A result the guards refused (the row changed hands) is counted and logged as discarded (`lost`).
A stopping worker's runs are settled as lease recovery would settle them (`abandon`).

It never claims, forks or signals a process, and never decides when a turn runs; it writes only
on the connection the turn hands it, inside the turn's transaction, except `abandon`, which is a
stopping worker's own transaction.
"""

from __future__ import annotations

import logging
import os
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from app import metrics
from app.domain.states import AttemptStatus
from app.executor import TaskResult
from app.services.engine import callbacks, recovery, task_env
from app.services.engine.dead_letters import dead_letter
from app.services.engine.lease_watchdog import LeaseWatchdog
from app.services.engine.run_book import RunBook, Running
from app.sql import leases
from app.sql.connections import Database
from app.sql.events import insert_event
from app.sql.rows import ExpiredLease, Finished, Outcome
from app.sql.transport import DBConnection
from app.tasks.registry import registered_task

log = logging.getLogger("cronwell.worker")
FORK_TIMES_KEPT = 10_000  # fork times kept in WorkerStats (benchmarks read them; metrics keep the rest)


@dataclass
class WorkerStats:
    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    retried: int = 0
    dead_lettered: int = 0
    cancelled: int = 0
    discarded: int = 0
    # The most recent fork times only: a worker lives for months, and the full distribution is
    # the metrics' histogram (cronwell_executor_fork_seconds); benchmarks read these.
    fork_ms: deque[float] = field(default_factory=lambda: deque(maxlen=FORK_TIMES_KEPT))
    # A burst (`--once`) that stopped because the database kept failing: the last error.
    gave_up: str | None = None
    EVENT: ClassVar[str] = "summary"  # logged as event worker_summary

    def fields(self) -> dict[str, int]:
        """The counts so far, as logged (extra=) and as printed by line()."""
        names = ("claimed", "succeeded", "failed", "timed_out", "retried", "dead_lettered", "cancelled", "discarded")
        return {name: getattr(self, name) for name in names}

    def line(self) -> str:
        return "worker " + " ".join(f"{key}={value}" for key, value in self.fields().items())


class Recorder:
    """Outcomes for one worker's turns (see the module docstring)."""

    def __init__(
        self,
        *,
        worker_id: str,
        database: Database,
        clock: Callable[[], datetime],
        book: RunBook,
        watchdog: LeaseWatchdog,
        stats: WorkerStats,
        dirty_jobs: set[int | None],
    ) -> None:
        self.worker_id = worker_id
        self.database = database
        self.clock = clock
        self.book = book
        self.watchdog = watchdog
        self.stats = stats
        self.dirty_jobs = dirty_jobs  # the worker's: jobs whose cached pages its writes made stale

    def finished(self, result: TaskResult, now: datetime, versions: dict[str, str]) -> Finished:
        """What the turn records for `result`; `versions` are the task versions the worker
        advertises (the code its fork server loaded)."""
        run = self.book.running[result.execution_id]
        error = result.error
        if not result.forked:  # withdrawn from the zygote's queue: recorded as if from `ready`
            error = self.book.withdrawing.get(result.execution_id, error)
        elif result.execution_id in self.watchdog.stopped:
            error = f"stopped by the lease watchdog: its lease could not be renewed in time ({error})"
        spec = registered_task(run.task)
        secrets = task_env.secret_values(spec, os.environ)  # never stored: scrubbed from all three
        outcome = Outcome(
            status=AttemptStatus(result.status),
            exit_code=result.exit_code,
            output=task_env.scrub(result.output, secrets) if secrets else result.output,
            error=task_env.scrub(error, secrets) if secrets else error,
            pid=result.pid,
            result=task_env.result_text(result.result, secrets),
            task_version=versions.get(run.task),
        )
        retry_at = None
        if result.status not in ("succeeded", "cancelled") and run.attempt < run.max_attempts:
            retry_at = now + run.retry.delay(run.attempt, random.random())  # the job's retry kind
        return Finished(run.execution_id, run.attempt, outcome, retry_at)

    def may_follow(self, item: Finished) -> bool:
        """Whether this final outcome may create a callback, end a batch or hand off to a
        workflow's next steps (followed up in the turn's transaction)."""
        run = self.book.running[item.execution_id]
        return callbacks.may_follow(
            is_callback=run.is_callback,
            batch_id=run.batch_id,
            status=item.target.value,
            on_success=run.on_success,
            on_failure=run.on_failure,
            workflow_run_id=run.workflow_run_id,
        )

    def recorded(
        self, conn: DBConnection, run: Running, result: TaskResult, retry_at: datetime | None, now: datetime
    ) -> None:
        """The turn recorded `result`: count and log it, and write what its outcome calls for."""
        metrics.observe_outcome(result.status, retried=retry_at is not None)
        log.info(
            "execution finished",
            extra={
                "event": "execution_finished",
                "execution_id": run.execution_id,
                "job_id": run.job_id,
                "worker_id": self.worker_id,
                "attempt": run.attempt,
                "status": result.status,
                "retry": retry_at is not None,
                "duration_ms": round(result.duration_seconds * 1000, 1),
            },
        )
        if result.status == "succeeded":
            self.stats.succeeded += 1
            return
        if result.status == "cancelled":
            self.stats.cancelled += 1
            insert_event(
                conn,
                "execution_cancelled",
                now=now,
                actor=self.book.cancelling.get(run.execution_id) or "system",
                job_id=run.job_id,
                execution_id=run.execution_id,
                attempt=run.attempt,
                worker_id=self.worker_id,
                how="running task killed",
            )
            return
        setattr(self.stats, result.status, getattr(self.stats, result.status) + 1)
        if retry_at is not None:
            self.stats.retried += 1
            insert_event(
                conn,
                "retry_scheduled",
                now=now,
                job_id=run.job_id,
                execution_id=run.execution_id,
                attempt=run.attempt,
                status=result.status,
                retry_at=retry_at.isoformat(),
            )
        else:
            self.stats.dead_lettered += 1
            metrics.observe_dead_letter(result.status)
            last_line = (result.error or "").strip().splitlines()[-1:] or ["no error text"]
            reason = f"{result.status} after {run.attempt} attempt(s): {last_line[0][:300]}"
            dead_letter(
                conn,
                execution_id=run.execution_id,
                job_id=run.job_id,
                job_name=run.job_name,
                alert_mode=run.alert_mode,
                status=result.status,
                reason=reason,
                now=now,
            )

    def lost(self, execution_id: int, step: str) -> None:
        """Zero rows changed: cancelled, recovered or deleted meanwhile. Never overwrite."""
        self.stats.discarded += 1
        log.warning(
            "execution changed hands; result discarded",
            extra={
                "event": "result_discarded",
                "execution_id": execution_id,
                "step": step,
                "worker_id": self.worker_id,
            },
        )

    def abandon(self, runs: list[Running], *, reason: str) -> None:
        """Settle tasks this worker had to kill on shutdown, as lease recovery would."""
        now = self.clock()
        with self.database.write_transaction() as conn:
            for run in runs:
                row = ExpiredLease(
                    id=run.execution_id,
                    job_id=run.job_id,
                    status="running",
                    attempts=run.attempt,
                    max_attempts=run.max_attempts,
                    claimed_by=self.worker_id,
                    job_name=run.job_name,
                    retry_backoff_seconds=run.retry_backoff_seconds,
                    alert_mode=run.alert_mode,
                    cancel_requested_by=self.book.cancelling.get(run.execution_id),
                    retry_kind=run.retry.kind,
                    retry_max_delay_seconds=run.retry.max_delay_seconds,
                    retry_jitter=run.retry.jitter,
                )
                leases.expire_lease(conn, run.execution_id, worker_id=self.worker_id, now=now)
                recovery.settle_abandoned(conn, row, now=now, reason=reason)
                self.dirty_jobs.add(run.job_id)
        for run in runs:
            self.watchdog.release(run.execution_id)
        self.book.forget_all()
