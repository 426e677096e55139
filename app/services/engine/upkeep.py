"""Upkeep: the worker's heartbeat, the leases of its runs, and the cancel requests on them.

- The heartbeat (the registry row app/services/read/workers.py shows) is written when due, and
  renews the leases of the runs in flight in the same transaction, at least five times per lease,
  so a task with no timeout keeps its run as long as the worker lives. A lease found not renewed
  is lost: its task stops at once (`lease_lost`). A worker that cannot renew at all stops its own
  tasks before their leases expire (the lease watchdog, app/services/engine/lease_watchdog.py),
  so a recovered run never has two copies running.
- After a database failure the rows claimed by this worker may not be the ones it holds (a claim
  committed unacknowledged, a record lost in a failover): the next heartbeat gives up the ones it
  does not hold (`after_database_failure`), and a run claimed again while its first copy still
  runs here is given back (`give_back`).
- An idle worker recovers expired leases every RECOVERY_EVERY, so abandoned work does not wait
  for a scheduler.
- Cancel requests an operator left on this worker's runs kill their task process groups
  (`cancel`); the killed attempt is recorded `cancelled`, never retried.

Upkeep never claims, records or forks a run, and never changes the loop's course: draining,
stopping and reloading are the loop's, which tells upkeep what the heartbeat should show.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from app import metrics
from app.clock import iso_z
from app.domain.states import WorkerState
from app.executor import ForkServer
from app.services.engine import heartbeats, idle_pacing, lease_watchdog, recovery, worker_commands
from app.services.engine.recorder import WorkerStats
from app.services.engine.run_book import RunBook
from app.sql import leases
from app.sql.connections import Database

log = logging.getLogger("cronwell.worker")
HEARTBEAT_EVERY = timedelta(seconds=5)
RECOVERY_EVERY = timedelta(seconds=15)
REGISTRY_EXECUTIONS = 50  # running executions listed in the heartbeat (the registry shows them)


class Upkeep:
    """One worker's heartbeat, lease renewal, idle recovery and cancels (see the module docstring)."""

    def __init__(
        self,
        *,
        database: Database,
        worker_id: str,
        clock: Callable[[], datetime],
        book: RunBook,
        stats: WorkerStats,
        executor: Callable[[], ForkServer],
        started_at: datetime,
        queues: list[str] | None,
        lease_seconds: int,
        kill_grace_seconds: float,
        stale_seconds: float,
        dirty_jobs: set[int | None],
    ) -> None:
        self.database = database
        self.worker_id = worker_id
        self.clock = clock
        self.book = book
        self.stats = stats
        self.executor = executor  # the worker's current one (a new one after a crash or a reload)
        self.started_at = started_at
        self.queues = queues
        self.lease_seconds = lease_seconds
        self.stale_seconds = stale_seconds
        self.dirty_jobs = dirty_jobs  # the worker's: jobs whose cached pages its writes made stale
        self.control = worker_commands.ControlCheck(database, worker_id)
        # Leases are renewed with the heartbeat, at least five times per lease; a worker that
        # cannot renew stops its tasks before they lapse.
        self.renew_every = lease_watchdog.renew_every(lease_seconds, HEARTBEAT_EVERY.total_seconds())
        self.last_renewal = time.monotonic()
        self.watchdog = lease_watchdog.LeaseWatchdog(
            margin=lease_watchdog.margin_for(lease_seconds, kill_grace_seconds),
            pid_of=lambda execution_id: self.executor().pid_of(execution_id),
            fallback=self._stop_every_task,
        )
        self._last_heartbeat: datetime | None = None
        self._last_recovery: datetime | None = None
        self._beat_busy = True  # the last heartbeat showed runs (or none was written yet)
        self._reconcile = False  # give up, at the next heartbeat, claims this worker does not hold

    def beat_soon(self) -> None:
        """Write the heartbeat at the next chance (what it shows changed)."""
        self._last_heartbeat = None

    def after_database_failure(self) -> None:
        """Reconcile the claims with the database at the next heartbeat, as soon as it answers."""
        self._reconcile = True
        self._last_heartbeat = None

    def until_renewal(self) -> float:
        """Seconds until the leases of the running executions are due for renewal."""
        return max(0.0, self.last_renewal + self.renew_every - time.monotonic())

    def housekeeping(
        self,
        now: datetime,
        state: WorkerState,
        *,
        tasks: dict[str, str],
        reloading: bool,
        listening: bool,
        recover: bool = True,
    ) -> None:
        """Heartbeat (and lease renewal) when due; an idle worker's lease recovery every
        RECOVERY_EVERY, or, after a quiet look, only when the look saw an expired lease."""
        running = self.book.running
        renew = bool(running) and time.monotonic() - self.last_renewal >= self.renew_every
        every = idle_pacing.heartbeat_every(
            busy=bool(running) or self._beat_busy,
            listening=listening,
            normal=HEARTBEAT_EVERY.total_seconds(),
            stale_seconds=self.stale_seconds,
        )
        if renew or self._last_heartbeat is None or (now - self._last_heartbeat).total_seconds() >= every:
            self._last_heartbeat = now
            self.beat(now, state, tasks=tasks, reloading=reloading)
        if recover and not running and (self._last_recovery is None or now - self._last_recovery >= RECOVERY_EVERY):
            # Idle workers help recover abandoned work so recovery does not wait for a scheduler.
            self._last_recovery = now
            report = recovery.recover_expired_leases(self.database, now=now)
            metrics.observe_recovery(report)
            self.dirty_jobs |= report.job_ids or set()

    def beat(self, now: datetime, state: WorkerState, *, tasks: dict[str, str], reloading: bool) -> None:
        """Write the heartbeat (what the worker registry, app/services/read/workers.py, shows) and
        renew the leases of the running executions in the same transaction."""
        running, executor = self.book.running, self.executor()
        runs = [running[i] for i in sorted(running)[:REGISTRY_EXECUTIONS]]
        holding = sorted(set(running) - self.book.disowned)
        read_at = time.monotonic()
        renew_now = self.clock()
        reconcile, released = self._reconcile, []
        with self.database.write_transaction() as conn:
            renewed = leases.renew_leases(
                conn, holding, worker_id=self.worker_id, now=renew_now, lease_seconds=self.lease_seconds
            )
            if reconcile:
                released = leases.release_unheld(
                    conn, sorted(running), worker_id=self.worker_id, since=self.started_at, now=renew_now
                )
            heartbeats.beat(
                conn,
                process_id=self.worker_id,
                kind="worker",
                started_at=self.started_at,
                now=now,
                tasks=tasks,
                info={
                    "state": state.value,
                    "reloading": reloading,
                    "slots": self.book.slots,
                    "busy": sum(1 for i in running if executor.pid_of(i)),  # processes, not runs
                    "queues": self.queues or ["*"],
                    "running": [run.execution_id for run in runs],
                    "executions": [
                        {
                            "id": run.execution_id,
                            "job_id": run.job_id,
                            "job_name": run.job_name,
                            "attempt": run.attempt,
                            "started_at": iso_z(run.started_at),
                        }
                        for run in runs
                    ],
                    "succeeded": self.stats.succeeded,
                    "failed": self.stats.failed + self.stats.timed_out,
                },
            )
        self.last_renewal = read_at
        self._beat_busy = bool(runs)
        if reconcile:
            self._reconcile = False
            for execution_id in released:
                log.warning(
                    "a run claimed by this worker that it does not hold; its lease is given up for recovery",
                    extra={"event": "claim_released", "execution_id": execution_id, "worker_id": self.worker_id},
                )
        self.watchdog.renewed(renewed, now=renew_now, read_at=read_at)
        for execution_id in holding:
            if execution_id not in renewed and execution_id in running:
                self.lease_lost(execution_id)

    def lease_lost(self, execution_id: int) -> None:
        """The row is no longer this worker's (recovered, cancelled or deleted while the worker was
        slow or cut off): another copy may be starting, so this one stops now."""
        log.error(
            "lease lost; stopping the task",
            extra={"event": "lease_lost", "execution_id": execution_id, "worker_id": self.worker_id},
        )
        if self.book.unfork(execution_id, "failed", "the lease was lost before the task process started"):
            return
        self.book.withdrawing[execution_id] = "the lease was lost before the task process started"
        self.watchdog.stopped.setdefault(execution_id, time.monotonic())
        executor = self.executor()
        if execution_id in executor.running():
            executor.kill(execution_id, reason="killed")

    def give_back(self, execution_ids: set[int], now: datetime) -> None:
        """The database handed this worker runs it still has a task for: their first claim was lost
        with a failed-over primary (asynchronous replication) and they were claimed again. The old
        copy has no claim any more: it is stopped and its result discarded; the new claim is given
        back (its lease expired at once) for recovery to retry, so no run has two copies and no
        result lands on another attempt (or, if the id was reused, another job's run)."""
        executor = self.executor()
        for execution_id in sorted(execution_ids):
            log.error(
                "claimed a run this worker still has a task for (a claim lost in a failover); giving it back",
                extra={"event": "claimed_again", "execution_id": execution_id, "worker_id": self.worker_id},
            )
            if self.book.unfork(execution_id, None, ""):
                self.book.running.pop(execution_id, None)  # no process: nothing to stop or discard
                self.watchdog.release(execution_id)
                continue
            self.book.disowned.add(execution_id)
            if execution_id in executor.running():
                executor.kill(execution_id, reason="killed")
        with self.database.write_transaction() as conn:
            for execution_id in sorted(execution_ids):
                leases.expire_lease(conn, execution_id, worker_id=self.worker_id, now=now)

    def cancel(self, cancels: dict[int, str]) -> None:
        """Kill the tasks of the running executions an operator asked to cancel ({id: who asked});
        a run still waiting in `ready` is taken out and recorded cancelled without a process."""
        book = self.book
        for execution_id, requested_by in cancels.items():
            if execution_id in book.running and execution_id not in book.cancelling:
                book.cancelling[execution_id] = requested_by
                if book.unfork(execution_id, "cancelled", "cancelled before its task process started"):
                    continue
                book.withdrawing[execution_id] = "cancelled before its task process started"
                self.executor().kill(execution_id, reason="cancelled")
                log.info(
                    "cancelling a running execution",
                    extra={"event": "execution_cancelling", "execution_id": execution_id, "worker_id": self.worker_id},
                )

    def _stop_every_task(self) -> None:
        """The lease watchdog's fallback (a task whose fork is not reported yet): SIGTERM makes the
        fork server kill every task's process group and exit; the worker restarts it."""
        pid = self.executor().zygote_pid
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
