"""The worker: claims due executions under a lease and runs each in its own process.

Each turn of the loop is one short transaction, and none is open while a task runs: record
the results that came back (running -> terminal or retry_scheduled, Attempt closed, dead letter
when exhausted), then claim and start due rows in the slots they freed (pending |
retry_scheduled -> running in one step, lease stamped, Attempt row). Then the tasks are handed
to the executor.
Every move is guarded by status and owner, so a worker whose lease was recovered while it was
cut off cannot overwrite what the new owner did: its late result is discarded and logged.
The worker renews the leases of its running executions with its heartbeat (one statement, at
least five times per lease), so a task with no timeout keeps its run as long as the worker lives;
a worker that cannot renew stops its own tasks before their leases expire
(app/services/engine/lease_watchdog.py), so a recovered run never has two copies running.

Claiming ahead keeps the turn off the path between a slot freeing and the next fork. While tasks
are short (a moving average under AHEAD_TASK_SECONDS), a turn claims runs beyond the free slots
(a slot's worth each, more for very short tasks: `_ahead`); they wait in `_ready`, started in the
database (status running, lease, Attempt row) but not forked. When a result arrives its slot is
refilled from `_ready` at once; the turn that records results and claims the replacements runs
once `_ready` is half empty or a result has waited RECORD_WITHIN_SECONDS, so one commit serves a
batch (`_turn_due`). On PostgreSQL the turn's statement and commit run on a committer thread
(app/services/engine/committer.py) while the main thread keeps forking from `_ready` and gathers
the results that arrive meanwhile for the next turn (`_overlapped`), so a slot that frees while
the turn waits for its WAL flush is refilled at once. Why the history stays truthful
(docs/adr/0010-claim-ahead.md): a process is forked only for a run whose claim and Attempt row
have committed (what a turn claims reaches `_ready` only after its commit returned), so a worker
killed at any instant leaves an Attempt for every process it forked;
a run claimed but not forked when the worker dies is `running` under a lease like any run whose
worker died, so lease recovery settles its Attempt as abandoned and retries it (never lost, and
never run twice: the dead worker cannot fork it any more, and nobody else may before the lease
ends). A graceful stop forks the waiting runs within its grace period and settles what is left as
abandoned "before the task started"; a cancel request or a lost lease takes a waiting run out of
`_ready` without a process.
The zygote gets a few of the `_ready` runs early (ZYGOTE_QUEUE_PER_SLOT per slot, with the slot
count as `within`): it queues them and forks one the moment a task ends, so a slot no longer waits
for the result's round trip through this loop. They are still runs whose claim committed, so
the argument above holds; everything that reaches a forked run reaches a queued one through the
executor's `kill` (cancel, lost lease, a claim given back) or `stop` (shutdown), and a queued run
withdrawn there comes back as a result with `forked` False, settled as a run that never left
`_ready` (ADR 0010, amendment on the zygote's queue; app/executor/zygote.py, "Never fork for a worker that
is gone"). tests/integration/test_worker_killed_at_random.py kills workers at
random points under load and checks both claims.

`run(burst=True)` drains what is due and returns, which is how tests drive it; `run()` keeps
going, sleeping on the executor's socket and the PostgreSQL LISTEN socket together.

Operators reach a running worker through the database (app/services/engine/worker_commands.py):
on every wake, at least once a second, it takes its stored commands (drain: claim nothing more,
finish what runs, exit; stop: kill what runs and settle it as abandoned, exit) and the cancel
requests on its running executions, whose task process groups it has the executor kill; the
killed attempt is recorded `cancelled`, never retried.
"""

from __future__ import annotations

import logging
import os
import random
import select
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from app import cache, metrics
from app.clock import iso_z, utcnow
from app.domain.pacing import retention_settings
from app.domain.retry import RetryPolicy
from app.domain.states import AttemptStatus, WorkerCommandKind, WorkerState
from app.executor import ExecutorCrashed, ForkServer, TaskRequest, TaskResult
from app.executor.pool_limits import PoolLimits
from app.services.engine import (
    callbacks,
    heartbeats,
    idle_pacing,
    lease_watchdog,
    recovery,
    task_env,
    wakeups,
    worker_commands,
)
from app.services.engine.committer import Committer
from app.services.engine.dead_letters import dead_letter
from app.services.engine.runtime import WorkerRuntime
from app.services.errors import NotFound
from app.sql import leases, queues, turn, waiting
from app.sql.connections import is_database_trouble
from app.sql.events import insert_event
from app.sql.rows import ClaimedExecution, ExpiredLease, Finished, Outcome, Turn
from app.sql.transport import DBConnection
from app.tasks.loading import (
    TaskModuleError,
    catalog_state,
    catalog_versions,
    preload_modules,
    reload_task_modules,
    restore_catalog,
)
from app.tasks.registry import needs_database, registered_task

if TYPE_CHECKING:
    from flask import Flask

log = logging.getLogger("cronwell.worker")
Clock = Callable[[], datetime]
T = TypeVar("T")
HEARTBEAT_EVERY = timedelta(seconds=5)
RECOVERY_EVERY = timedelta(seconds=15)
LISTEN_TO = [wakeups.WORK_CHANNEL, wakeups.CONTROL_CHANNEL]
REGISTRY_EXECUTIONS = 50  # running executions listed in the heartbeat (the registry shows them)
FORK_TIMES_KEPT = 10_000  # fork times kept in WorkerStats (benchmarks read them; metrics keep the rest)
# A burst (`worker run --once`) retries database failures with the same back-off as a long-running
# worker (1, 2, 4, 8, 16, 30 s) and gives up after these many in a row: about a minute.
BURST_FAILURES_TOLERATED = 6
# Claim ahead (runs started in the database but not forked yet) only while tasks finish this
# fast on average: then a claimed run waits a few ms for its slot, never a long task.
AHEAD_TASK_SECONDS = 0.25
AHEAD_SMOOTHING = 0.2  # weight of the newest task duration in the moving average
# How far ahead: at least a slot's worth each, and more while tasks are very short (pooled
# no-ops take well under a millisecond, a turn waits for a WAL flush), as many as the slots run
# in AHEAD_WAIT_SECONDS at the average task duration, at most AHEAD_MAX_PER_SLOT per slot.
AHEAD_WAIT_SECONDS = 0.05
AHEAD_MAX_PER_SLOT = 16
# A result waits at most this long for the turn that records it (the turn runs earlier when the
# runs claimed ahead run low); its execution's finished_at is that turn's time.
RECORD_WITHIN_SECONDS = 0.02
# Runs from `_ready` handed to the zygote beyond the free slots, per slot: queued there, forked the
# moment a task ends, without a round trip through the worker (ADR 0010, amendment on the zygote's queue).
ZYGOTE_QUEUE_PER_SLOT = 1


@dataclass
class Ready:
    """A run claimed and started in the database (lease, Attempt row) whose process is not
    forked yet: it waits for a slot in `Worker._ready`. `now` and `read_at` are the claiming
    turn's, so the watchdog measures its lease from the statement that granted it."""

    item: ClaimedExecution
    attempt: int
    now: datetime
    read_at: float


@dataclass
class Running:
    execution_id: int
    job_id: int | None  # None: a one-off run
    job_name: str
    attempt: int
    max_attempts: int
    started_at: datetime
    retry_backoff_seconds: int
    alert_mode: str
    # What decides whether its final outcome needs a follow-up (app/services/engine/callbacks.py).
    is_callback: bool = False
    batch_id: int | None = None
    on_success: str | None = None
    on_failure: str | None = None
    retry: RetryPolicy = RetryPolicy()  # the job's retry kind, backoff, cap and jitter
    task: str = ""  # the task it runs (a callback's own)
    workflow_run_id: int | None = None  # a workflow step: its end hands off to the next steps


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


class Worker:
    def __init__(
        self,
        runtime: WorkerRuntime | Flask,
        *,
        worker_id: str | None = None,
        slots: int = 4,
        queues: Sequence[str] | None = None,
        clock: Clock = utcnow,
        executor: ForkServer | None = None,
        poll_seconds: float | None = None,
    ) -> None:
        # A WorkerRuntime (the worker process), or a Flask app whose settings and database it uses.
        self.runtime = runtime if isinstance(runtime, WorkerRuntime) else WorkerRuntime.from_app(runtime)
        self.database = self.runtime.database
        cfg = self.runtime.settings
        self.id = worker_id or heartbeats.default_process_id("worker")
        self.slots = max(1, slots)
        self.queues = list(queues) if queues else None
        # Queue names resolve to rows before anything starts: a typo is an error, not an idle worker.
        self.queue_ids = self._resolve_queues(self.queues) if self.queues else None
        self.clock = clock
        self.executor = executor or ForkServer(
            kill_grace_seconds=2.0,
            pool=PoolLimits.from_config(cfg),
            preload=preload_modules(cfg.get("CRONWELL_TASK_MODULES")),
            result_max_bytes=cfg.get("RESULT_MAX_BYTES", 65536),
            withhold=task_env.declared_names(),
        )
        # The catalog's modules as this worker listed them for its fork server; whatever else a
        # given executor preloads (a test's helper module) is kept across reloads (_next_preload).
        self._listed_preload = self.executor.preload if executor is None else ()
        # What this worker advertises in its registry row, {task: code version}: it claims only
        # runs of these tasks, and records the version with each attempt's outcome.
        self.tasks: dict[str, str] = catalog_versions()
        self._task_names = sorted(self.tasks)
        self._reload_asked: str | None = None  # how a reload was asked (SIGHUP, command), not begun
        self._reloading: str | None = None  # a reload under way: nothing claimed until nothing runs
        self.poll_seconds = poll_seconds if poll_seconds is not None else cfg["WORKER_POLL_SECONDS"]
        # Listening and running nothing, the longest sleep and the heartbeat's cadence (idle_pacing.py).
        self.idle_poll_seconds = max(self.poll_seconds, cfg.get("WORKER_IDLE_POLL_SECONDS", 5))
        self._stale_seconds = cfg.get("HEARTBEAT_STALE_SECONDS", 60)
        self._listening = False  # LISTEN worked for the last wait (a run_once given a listener)
        # Whether the next wake-up must run a turn rather than a safety look: a NOTIFY came, rows
        # it could not claim wait, or it has not looked since it (re)started listening.
        self._notified = True
        self._held_back = True
        self._beat_busy = True  # the last heartbeat showed runs (or none was written yet)
        self.running: dict[int, Running] = {}  # claimed by this worker: forked, or waiting in _ready
        self._ready: deque[Ready] = deque()  # claimed ahead, not forked yet (see the module docstring)
        self._task_seconds: float | None = None  # moving average of task durations (claim-ahead rule)
        self.stats = WorkerStats()
        self.started_at = clock()
        self._stopping = False
        self._draining = False  # an operator's drain: claim nothing, stop once nothing runs
        self._stop_now = False  # an operator's stop: no grace for running tasks
        self._cancelling: dict[int, str] = {}  # execution id -> who asked; its task is being killed
        # Why a run handed to the executor was withdrawn, should it come back never forked (the
        # text a run taken out of `_ready` for the same reason records).
        self._withdrawing: dict[int, str] = {}
        self._disowned: set[int] = set()  # running here, but the claim is gone: result discarded (_give_back)
        # After a database failure the rows claimed by this worker may not be the ones it holds
        # (a claim committed unacknowledged, a record lost in a failover): the next heartbeat
        # gives up the ones it does not hold (_beat).
        self._reconcile = False
        self.control = worker_commands.ControlCheck(self.database, self.id)
        self._should_stop: Callable[[], bool] = lambda: False
        self._last_heartbeat: datetime | None = None
        self._last_recovery: datetime | None = None
        self._dirty_jobs: set[int | None] = set()
        # Results whose write failed (database unreachable): recorded on the next try, so a task
        # that finished during an outage is not later abandoned and run again.
        self._unrecorded: list[TaskResult] = []
        self._conn = None  # a DB-API connection kept across turns; see _transaction
        self._committer: Committer | None = None  # runs turns while the slots are fed (_overlapped)
        self._notify = cfg.get("LISTEN_NOTIFY", True)  # LISTEN/NOTIFY wake-ups (PostgreSQL)
        self._lease = (cfg["LEASE_SECONDS"], cfg["LEASE_BUFFER_SECONDS"])
        # Leases are renewed with the heartbeat, at least five times per lease; a worker that
        # cannot renew stops its tasks before they lapse (app/services/engine/lease_watchdog.py).
        self._renew_every = lease_watchdog.renew_every(cfg["LEASE_SECONDS"], HEARTBEAT_EVERY.total_seconds())
        self._last_renewal = time.monotonic()
        self._now_read_at = time.monotonic()  # when the turn's `now` was read (the leases' origin)
        self.watchdog = lease_watchdog.LeaseWatchdog(
            margin=lease_watchdog.margin_for(cfg["LEASE_SECONDS"], self.executor.kill_grace_seconds),
            pid_of=lambda execution_id: self.executor.pid_of(execution_id),
            fallback=self._stop_every_task,
        )
        self._watchdog_on = cfg.get("LEASE_WATCHDOG", True)
        self._context_base = {"artifact_dir": cfg["ARTIFACT_DIR"], "marker_dir": cfg["MARKER_DIR"]}
        self._callback_timeout = cfg.get("CALLBACK_TIMEOUT_SECONDS", 60)
        # Given only to tasks registered with needs_database=True (app/tasks/registry.py).
        self._database_url = self.database.url
        self._retention = retention_settings(cfg)  # for them too: cleanup_old_runs prunes by these

    def _resolve_queues(self, names: list[str]) -> list[int]:
        with self.database.reading() as conn:
            found = queues.queue_ids(conn, names)
            missing = [name for name in names if name not in found]
            if missing:
                known = ", ".join(queues.queue_names(conn)) or "none"
                plural = "s" if len(missing) > 1 else ""
                raise NotFound(f"unknown queue{plural} {', '.join(map(repr, missing))}; known queues: {known}")
        return [found[name] for name in names]

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self.executor.start()
        if self._watchdog_on:
            self.watchdog.start()

    def request_stop(self) -> None:
        """Stop claiming; running tasks are allowed to finish (see `shutdown`)."""
        self._stopping = True

    def request_reload(self, how: str = "SIGHUP") -> None:
        """Reload the task code at the next wake-up (safe in a signal handler: it only sets a
        flag). See `_begin_reload` and `_swap_code`."""
        if self._reloading is None:
            self._reload_asked = how

    def run(
        self,
        *,
        burst: bool = False,
        should_stop: Callable[[], bool] = lambda: False,
        echo: Callable[[WorkerStats], None] = lambda stats: None,
    ) -> WorkerStats:
        """Work until stopped (or, with burst, until nothing is due or running)."""
        started_here = self.executor.zygote_pid is None
        self._should_stop = should_stop
        if started_here:
            self.start()
        elif self._watchdog_on:
            self.watchdog.start()
        listener = (
            wakeups.Listener.open(self.database, LISTEN_TO, on=self._notify) if not burst else wakeups.Listener(None)
        )
        failures = 0
        last_line, last_echo = self.stats.line(), time.monotonic()
        try:
            while True:
                if not burst and time.monotonic() - last_echo >= 10 and self.stats.line() != last_line:
                    last_line, last_echo = self.stats.line(), time.monotonic()
                    echo(self.stats)  # a running summary, at most every 10 s
                if should_stop() or (self._draining and not self.running):
                    self.request_stop()
                if self._stopping:
                    break  # shutdown() gives running tasks their grace period, then settles them
                try:
                    if not burst and not listener.active:
                        listener = wakeups.Listener.open(
                            self.database, LISTEN_TO, on=self._notify
                        )  # lost: listen again
                    activity = self.run_once(wait=0.0 if burst else None, listener=listener)
                    failures = 0
                except ExecutorCrashed as crash:
                    log.error(
                        "executor crashed; restarting it", extra={"event": "executor_crashed", "error": str(crash)}
                    )
                    self._record_results(crash.results)
                    self.executor = ForkServer(
                        kill_grace_seconds=self.executor.kill_grace_seconds,
                        preload=self.executor.preload,
                        pool=self.executor.pool,
                        result_max_bytes=self.executor.result_max_bytes,
                        withhold=self.executor.withhold,
                    )
                    self.executor.start()
                    continue
                except Exception as exc:
                    if not is_database_trouble(exc):
                        # A bug, not an outage: retrying it would only hide it behind "the
                        # database kept failing". Stop with the traceback; `finally` settles
                        # what is running and lease recovery covers the rest.
                        log.critical(
                            "worker stopped by an unexpected error",
                            exc_info=True,
                            extra={"event": "worker_crashed", "error": f"{type(exc).__name__}: {exc}"[:300]},
                        )
                        raise
                    failures += 1  # database trouble: back off, keep running tasks alive
                    if burst and failures > BURST_FAILURES_TOLERATED:
                        # A drain that cannot reach its database (or finds no schema there) says
                        # so and ends, rather than retrying for ever under a script; what it had
                        # claimed is settled by shutdown or, failing that, by lease recovery.
                        self.stats.gave_up = " ".join(str(exc).split())[:300] or type(exc).__name__
                        log.error(
                            "worker gave up: the database kept failing",
                            extra={"event": "worker_gave_up", "error": self.stats.gave_up, "failures": failures},
                        )
                        break
                    delay = min(30.0, 0.5 * 2 ** min(failures, 6))
                    log.error(
                        "worker loop failed; retrying",
                        extra={"event": "worker_loop_failed", "error": str(exc)[:300], "retry_in": delay},
                    )
                    self._drop_connection()
                    listener.close()
                    self._reconcile = True
                    self._last_heartbeat = None  # beat (and reconcile) as soon as the database answers
                    self._notified = True  # NOTIFYs sent while the database was away went unheard
                    time.sleep(delay)
                    if not burst:
                        listener = wakeups.Listener.open(self.database, LISTEN_TO, on=self._notify)
                    continue
                if burst and not activity and not self.running:
                    break
        finally:
            listener.close()
            self.shutdown(echo=echo)
        return self.stats

    def shutdown(self, *, echo: Callable[[WorkerStats], None] = lambda stats: None) -> None:
        """Wait for running tasks up to the grace period, settle any still running, stop the zygote."""
        grace = 0 if self._stop_now else self.runtime.settings["WORKER_SHUTDOWN_GRACE_SECONDS"]
        deadline = time.monotonic() + grace
        while self.running and time.monotonic() < deadline:
            try:
                self._fork_ready()  # runs claimed ahead are started in the database: run them too
                self._record_results(self.executor.poll(min(0.5, max(0.0, deadline - time.monotonic()))))
            except ExecutorCrashed as crash:
                self._record_results(crash.results)
                break
            except Exception as exc:  # database unreachable: expired-lease recovery settles the rest
                log.error(
                    "could not record results while stopping",
                    extra={"event": "shutdown_record_failed", "error": str(exc)[:300]},
                )
                break
        waiting = {ready.item.id for ready in self._ready}
        self._ready.clear()
        try:
            # Runs still queued in the zygote come back withdrawn (never forked): settled like
            # those that waited in `_ready`.
            waiting |= {result.execution_id for result in self.executor.stop(0) if not result.forked}
        except Exception:
            log.exception("executor did not stop cleanly")
        leftovers = [run for run in self.running.values() if run.execution_id not in waiting]
        never_forked = [run for run in self.running.values() if run.execution_id in waiting]
        self.watchdog.stop()
        if leftovers or never_forked:
            how = "was stopped by an operator" if self._stop_now else "stopped"
            try:
                if never_forked:
                    self._abandon(never_forked, reason=f"worker {self.id} {how} before the task started")
                if leftovers:
                    self._abandon(leftovers, reason=f"worker {self.id} {how} before the task finished")
            except Exception as exc:
                log.error(
                    "could not settle running executions while stopping; their leases will expire",
                    extra={"event": "shutdown_settle_failed", "error": str(exc)[:300]},
                )
        try:
            self._beat(self.clock(), WorkerState.STOPPED)  # listed as stopped until pruned
        except Exception:
            log.warning("could not mark the heartbeat stopped", extra={"event": "heartbeat_stop_failed"})
        self._drop_connection()
        self.database.close()
        if self._committer is not None:
            self._committer.close()
            self._committer = None
        self._flush_cache()
        echo(self.stats)

    # --- one step ---------------------------------------------------------------------------

    def run_once(self, *, wait: float | None = None, listener: wakeups.Listener | None = None) -> int:
        """Record finished results and claim into the freed slots in one transaction, start
        what was claimed, then wait for the next result or wake-up.

        `wait` caps that wait (None: up to the poll interval). Returns how many executions were
        started or finished (0: nothing happened). A quiet worker (listening, running nothing, no
        NOTIFY since its last look) first looks with one read and sleeps again when nothing is
        claimable yet (idle_pacing.py).
        """
        self._listening = wait is None and listener is not None and listener.active
        self.control.every = self.idle_poll_seconds if self._listening else worker_commands.CONTROL_POLL_SECONDS
        if self._quiet():
            rest, expired_leases = self._look()
            if rest > 0:
                self._housekeeping(self.clock(), recover=expired_leases)
                self._wait(rest, listener)
                return 0
        self._housekeeping(self.clock())
        self._obey(self.control.check(self.clock(), running=bool(self.running)))
        if self._reload_asked is not None:
            self._begin_reload()
        self._now_read_at = time.monotonic()
        now = self.clock()  # read after housekeeping so started_at and the lease are not early
        results = [r for r in [*self._unrecorded, *self.executor.poll(0)] if r.execution_id in self.running]
        self._unrecorded = []
        # Slots these results freed are refilled from the runs claimed ahead before the turn that
        # records them: the turn is not on the path between a slot freeing and the next fork.
        self._fork_ready(freed=len(results))
        claiming = not (self._stopping or self._draining or self._reloading)
        ahead = self._ahead() if claiming else 0
        free = _claim_size(self.slots + ahead - len(self.running) + len(results)) if claiming else 0
        started = finished = 0
        if self._turn_due(results, free, ahead, claiming):
            started, finished = self._settle_and_claim(results, free, now, overlap=True)
            self._fork_ready()
        else:
            self._unrecorded = results  # the next turn records them, within RECORD_WITHIN_SECONDS
        if self._reloading and not self.running:
            self._swap_code()  # every attempt is recorded: the new code takes over, claiming at once
            self._flush_cache()
            return started + finished + 1
        timeout = self.poll_seconds if wait is None else wait
        if wait is None and claiming and len(self.running) < self.slots:
            # A slot is idle: wake when the next waiting row becomes claimable, not at the next
            # poll (occurrences written ahead of their time, retries, delayed runs).
            timeout = self._until_claimable(since=now)
        if self._unrecorded:
            timeout = min(timeout, max(0.0, RECORD_WITHIN_SECONDS - self._unrecorded_age()))
        if wait == 0.0 and self.running:
            timeout = 0.05  # burst: wait briefly for a result rather than spin
        if self.running:  # wake in time to renew the leases
            timeout = min(timeout, max(0.0, self._last_renewal + self._renew_every - time.monotonic()))
        self._wait(timeout, listener)
        self._flush_cache()
        return started + finished

    def _until_claimable(self, *, since: datetime) -> float:
        """Seconds until the earliest waiting row in this worker's queues becomes claimable (its
        available_at; never before it, so nothing starts early), at most the poll interval (the
        idle one when quiet and nothing it could not claim waits).

        `since` is the time the turn claimed at: a row that became claimable after it (while the
        turn ran, e.g. the first rows of a burst written ahead) is due now, so the wait is zero
        rather than a whole poll interval."""
        ahead = self._read(lambda conn: waiting.outlook(conn, after=since, queue_ids=self.queue_ids))
        self._held_back = ahead.held_back
        return idle_pacing.wait_after_turn(
            ahead,
            now=self.clock(),
            poll=self.poll_seconds,
            idle_poll=self.idle_poll_seconds,
            quiet=self._listening and not self.running and not self._unrecorded,
        )

    def _quiet(self) -> bool:
        """Whether this wake-up may be a safety look rather than a turn (see idle_pacing.py)."""
        return (
            self._listening
            and not (self._notified or self._held_back or self.control.due)
            and not (self.running or self._unrecorded or self._ready)
            and not (self._stopping or self._draining or self._reloading or self._reload_asked)
        )

    def _look(self) -> tuple[float, bool]:
        """A quiet worker's safety look (one read): how much longer it may sleep (0: run a turn),
        and whether a lease expired somewhere (the idle worker's recovery has work)."""
        now = self.clock()
        look = self._read(lambda conn: waiting.idle_look(conn, worker_id=self.id, now=now, queue_ids=self.queue_ids))
        self.control.looked(orders=look.orders)
        return idle_pacing.rest_after_look(
            look, now=self.clock(), idle_poll=self.idle_poll_seconds
        ), look.expired_leases

    def _read(self, read: Callable[[DBConnection], T]) -> T:
        """One read on the kept connection, in autocommit: no transaction is left open for the
        next turn's BEGIN."""
        if self._conn is None:
            self._conn = self.database.connect()
        try:
            return read(self._conn)
        except Exception:
            self._drop_connection()
            raise

    def _wait(self, timeout: float, listener: wakeups.Listener | None) -> None:
        if timeout <= 0:
            return
        fds = [self.executor.fileno()]
        if listener is not None and listener.active:
            fds.append(listener.fileno())
        # Sleep in short slices: select() resumes after a signal handler runs (PEP 475), so one
        # long select would keep a SIGTERMed worker asleep for the whole poll interval.
        deadline = time.monotonic() + timeout
        readable: list[Any] = []
        while not readable and not self._should_stop() and self._reload_asked is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            readable, _, _ = select.select(fds, [], [], min(remaining, 0.5))
        self._notified = False
        if listener is not None and listener.active and listener.fileno() in readable:
            listener.drain()
            self.control.heard(listener.take(wakeups.CONTROL_CHANNEL))
            self._notified = bool(listener.take(wakeups.WORK_CHANNEL))
        if listener is not None and not listener.active:
            self._notified = True  # the connection was lost: what was sent meanwhile is unheard

    def _obey(self, orders: worker_commands.Orders) -> None:
        """Act on an operator's commands and cancel requests (see ControlCheck)."""
        for command in orders.commands:
            if command is WorkerCommandKind.RELOAD:
                self.request_reload("command")  # logged as it begins (_begin_reload)
                continue
            log.info(
                f"worker told to {command.value}",
                extra={"event": f"worker_{command.value}_received", "worker_id": self.id, "busy": len(self.running)},
            )
            if command is WorkerCommandKind.STOP:
                self._stop_now = True
                self.request_stop()
            elif not self._draining:
                self._draining = True
                self._last_heartbeat = None  # show `draining` in the registry at once
        for execution_id, requested_by in orders.cancels.items():
            if execution_id in self.running and execution_id not in self._cancelling:
                self._cancelling[execution_id] = requested_by
                if self._unfork(execution_id, "cancelled", "cancelled before its task process started"):
                    continue
                self._withdrawing[execution_id] = "cancelled before its task process started"
                self.executor.kill(execution_id, reason="cancelled")
                log.info(
                    "cancelling a running execution",
                    extra={"event": "execution_cancelling", "execution_id": execution_id, "worker_id": self.id},
                )

    # --- reload ------------------------------------------------------------------------------

    def _begin_reload(self) -> None:
        """Stop claiming until every attempt that runs (or waits in `_ready`, claimed ahead) has
        finished with the code it started on and is recorded; then `_swap_code`."""
        how, self._reload_asked = self._reload_asked, None
        log.info(
            "worker told to reload its task code",
            extra={"event": "worker_reload_received", "worker_id": self.id, "how": how, "busy": len(self.running)},
        )
        if self._stopping or self._draining:
            return  # it is exiting: the next start runs the new code anyway
        self._reloading = how
        self._last_heartbeat = None  # show `reloading` in the registry at once

    def _next_preload(self) -> tuple[str, ...]:
        """What a fresh fork server preloads: the catalog's modules listed again (a new entry
        point counts), then whatever else the previous one preloaded."""
        listed = preload_modules(self.runtime.settings.get("CRONWELL_TASK_MODULES"))
        extra = [module for module in self.executor.preload if module not in self._listed_preload]
        self._listed_preload = listed
        return tuple(dict.fromkeys([*listed, *extra]))

    def _swap_code(self) -> None:
        """The reload, once nothing runs here: import the deployer's modules again in this
        process (what it advertises, the versions it records, the variables it hands tasks),
        start a fresh fork server (a new interpreter, so it preloads the code now on disk), stop
        the old one, advertise the new catalog and go on claiming. If the new code does not load,
        the old catalog and fork server stay and the worker goes on as it was."""
        how, self._reloading = self._reloading, None
        before, state = self.tasks, catalog_state()
        try:
            reload_task_modules(self.runtime.settings.get("CRONWELL_TASK_MODULES"))
            tasks = catalog_versions()
            fresh = ForkServer(
                kill_grace_seconds=self.executor.kill_grace_seconds,
                preload=self._next_preload(),
                pool=self.executor.pool,
                result_max_bytes=self.executor.result_max_bytes,
                withhold=task_env.declared_names(),
            )
            fresh.start()
        except (TaskModuleError, ExecutorCrashed) as exc:
            restore_catalog(state)
            error = " ".join(str(exc).split())[:300]
            log.error(
                "reload failed; the worker goes on with the code it had",
                extra={"event": "worker_reload_failed", "worker_id": self.id, "how": how, "error": error},
            )
            self._record_event("worker_reload_failed", how=how, error=error)
            self._last_heartbeat = None
            return
        old, self.executor = self.executor, fresh
        old.stop(0)  # nothing runs there any more: every attempt it ran is recorded
        self.tasks, self._task_names = tasks, sorted(tasks)
        self._last_heartbeat = None  # advertise the new catalog at once
        self._record_event(
            "worker_reloaded",
            how=how,
            tasks=len(tasks),
            added=sorted(set(tasks) - set(before)),
            removed=sorted(set(before) - set(tasks)),
            changed={
                name: [before[name], version] for name, version in tasks.items() if before.get(name, version) != version
            },
        )

    def _record_event(self, type_: str, **payload: Any) -> None:
        """An event of this worker's in the event log (and its log line); a database that does
        not answer costs the row, not the worker."""
        try:
            with self.database.write_transaction() as conn:
                insert_event(conn, type_, now=self.clock(), worker_id=self.id, **payload)
        except Exception as exc:
            if not is_database_trouble(exc):
                raise
            log.warning(
                "could not record a worker event",
                extra={"event": type_, "worker_id": self.id, "payload": payload, "error": str(exc)[:300]},
            )

    def _settle_and_claim(
        self, results: list[TaskResult], free: int, now: datetime, *, overlap: bool = False
    ) -> tuple[int, int]:
        """One transaction: record `results`, claim up to `free` executions and start them.

        On PostgreSQL that is one statement (`Store.record_and_claim`), which is what keeps the
        database cost per execution low. If it fails nothing is half-done: the claims roll back
        with it, and the results are kept to be recorded on the next try (the executor will not
        hand them over again). Returns (started, finished).
        """
        for result in [r for r in results if r.execution_id in self._disowned]:
            results.remove(result)
            self._disowned.discard(result.execution_id)
            self.running.pop(result.execution_id)
            self.watchdog.release(result.execution_id)
            self._withdrawing.pop(result.execution_id, None)
            if result.forked:  # withdrawn from the zygote's queue: nothing ran, nothing to discard
                self._lost(result.execution_id, "complete")
        finished = [self._finished(result, now) for result in results]
        # Final outcomes that may create a callback or end a batch: followed up in this same
        # transaction (app/services/engine/callbacks.py).
        follow = [item.execution_id for item in finished if item.retry_at is None and self._may_follow(item)]
        # Failures add statements (retry event, dead letter, alert) to the turn; without them the
        # turn is the one statement and needs no BEGIN/COMMIT around it on PostgreSQL.
        single = not follow and all(item.outcome.status is AttemptStatus.SUCCEEDED for item in finished)

        def work() -> Turn:
            with self._transaction(single_statement=single) as conn:
                taken = turn.record_and_claim(
                    conn,
                    finished,
                    worker_id=self.id,
                    now=now,
                    limit=free,
                    queue_ids=self.queue_ids,
                    lease_seconds=self._lease[0],
                    buffer_seconds=self._lease[1],
                    tasks=self._task_names,  # only runs of the tasks it advertises
                )
                for item, result in zip(finished, results):
                    if item.execution_id in taken.recorded:
                        self._recorded(conn, self.running[item.execution_id], result, item.retry_at, now)
                wake = any(item.retry_at is not None for item in finished if item.execution_id in taken.recorded)
                if follow:
                    followed = callbacks.after_final(conn, [i for i in follow if i in taken.recorded], now=now)
                    self._dirty_jobs |= followed.job_ids
                    wake = wake or bool(followed.callbacks or followed.steps)
                if wake:  # a retry, a callback or a workflow's next steps: idle workers look now
                    wakeups.notify(conn, wakeups.WORK_CHANNEL, on=self._notify)
            return taken

        crash = None
        try:
            if overlap and self._ready and self.database.dialect == "postgresql":
                done, crash = self._overlapped(work, len(results))
            else:
                done = work()
        except Exception:
            self._unrecorded = [*results, *self._unrecorded]  # recorded by the next turn
            raise
        for item, result in zip(finished, results):
            run = self.running.pop(result.execution_id)
            self._cancelling.pop(result.execution_id, None)
            self._withdrawing.pop(result.execution_id, None)
            self.watchdog.release(result.execution_id)
            if item.execution_id not in done.recorded:
                self._lost(item.execution_id, "complete")
            self._dirty_jobs.add(run.job_id)
            self.stats.fork_ms.append(result.fork_ms)
            metrics.observe_task(result)
            if result.pid:  # a process ran (not a run dropped before its fork)
                took = max(0.0, result.finished_at - result.started_at)
                average = self._task_seconds
                self._task_seconds = took if average is None else average + AHEAD_SMOOTHING * (took - average)
        claimed = len(done.started) + len(done.cancelled)
        if claimed:
            metrics.observe_claim(claimed)
            self.stats.claimed += claimed
        for execution in done.cancelled:
            metrics.observe_cancelled()
            self.stats.cancelled += 1
            self._dirty_jobs.add(execution.job_id)
        metrics.observe_fire_lateness(
            [(item.trigger, item.scheduled_for) for item, number in done.started if number == 1], now
        )
        again = {item.id for item, _ in done.started if item.id in self.running}
        if again:
            self._give_back(again, now)
        for execution, number in done.started:
            if execution.id not in again:
                self._take(execution, number, now)
        if crash is not None:
            # The zygote died while the turn ran; its failed reports wait in _unrecorded (the
            # handler in `run` records them and restarts the executor).
            raise ExecutorCrashed(str(crash))
        started = len(done.started)
        if free > started and (done.recorded or done.cancelled):
            # Claim again at once, rather than at the next wake-up, when slots are still free and
            # (a) a run recorded in this statement did not yet free its job for the claim in the
            # same statement (one snapshot), so a queued successor would wait; or (b) claimed
            # rows were cancelled (job disabled), which used up the claim without filling slots.
            started += self._settle_and_claim([], _claim_size(free - started), now, overlap=overlap)[0]
        return started, len(results)

    def _overlapped(self, work: Callable[[], Turn], recording: int) -> tuple[Turn, ExecutorCrashed | None]:
        """Run a turn's database work (`work`) on the committer thread and, while it waits for
        PostgreSQL, keep the slots fed: results that arrive are kept for the next turn and their
        slots refilled from `_ready`, whose runs' claims committed in earlier turns. What this
        turn claims reaches `_ready` only after `work` returned, so only once it has committed
        (ADR 0010). `recording` is how many results the turn records (their slots are free).
        Returns the turn, and the executor's crash if the zygote died meanwhile (its failed
        reports are in `_unrecorded`)."""
        if self._committer is None:
            self._committer = Committer()
        committer = self._committer
        committer.submit(work)
        crash = None
        fds = [committer.fileno(), self.executor.fileno()]
        while crash is None and not committer.poll(0):
            readable = select.select(fds, [], [], 1.0)[0]
            if fds[1] not in readable:
                continue
            try:
                self._unrecorded += [r for r in self.executor.poll(0) if r.execution_id in self.running]
                self._fork_ready(freed=recording)
            except ExecutorCrashed as exc:
                crash = exc
                self._unrecorded += [r for r in exc.results if r.execution_id in self.running]
        try:
            return committer.result(), crash
        except Exception:
            if crash is None:
                raise
            raise ExecutorCrashed(str(crash)) from None  # run() restarts the executor; reports wait

    def _take(self, item: ClaimedExecution, attempt: int, now: datetime) -> None:
        """A run the turn claimed and started: this worker's from now on (its lease is renewed with
        the others); it waits in `_ready` until `_fork_ready` gives it a slot."""
        self.running[item.id] = Running(
            item.id,
            item.job_id,
            item.job_name,
            attempt,
            item.max_attempts,
            now,
            item.retry_backoff_seconds,
            item.alert_mode,
            is_callback=item.callback_task is not None,
            batch_id=item.batch_id,
            on_success=item.on_success,
            on_failure=item.on_failure,
            retry=RetryPolicy(
                item.retry_kind, item.retry_backoff_seconds, item.retry_max_delay_seconds, item.retry_jitter
            ),
            task=item.task_to_run,
            workflow_run_id=item.workflow_run_id,
        )
        self._ready.append(Ready(item, attempt, now, self._now_read_at))
        self._dirty_jobs.add(item.job_id)

    def _fork_ready(self, freed: int = 0) -> None:
        """Fork runs waiting in `_ready` into the free slots. A run occupies a slot unless it is
        waiting, or its result is in `_unrecorded` or among the `freed` results the caller holds
        (finished, not recorded yet)."""
        busy = len(self.running) - len(self._ready) - len(self._unrecorded) - freed
        while self._ready and busy < self.slots * (1 + ZYGOTE_QUEUE_PER_SLOT):
            self._submit(self._ready.popleft())
            busy += 1

    def _ahead(self) -> int:
        """How many runs to claim beyond the slots: none while tasks are long, a slot's worth each
        while they are short, and as many as the slots run in AHEAD_WAIT_SECONDS (at most
        AHEAD_MAX_PER_SLOT each) while they are very short, so that one turn records and claims
        a batch and the slots run the buffer while it waits for its commit."""
        average = self._task_seconds
        if average is None or average >= AHEAD_TASK_SECONDS:
            return 0
        by_wait = int(self.slots * AHEAD_WAIT_SECONDS / max(average, 1e-4))
        return max(self.slots, min(self.slots * AHEAD_MAX_PER_SLOT, by_wait))

    def _turn_due(self, results: list[TaskResult], free: int, ahead: int, claiming: bool) -> bool:
        """Whether this wake-up runs a turn. Every turn waits for a commit (a WAL flush on
        PostgreSQL) whatever its size, so while runs claimed ahead keep the slots busy, results
        are gathered and recorded together: the turn runs once the buffer is down to half of
        `ahead` (with no buffer, at once, as before), or when a result has waited
        RECORD_WITHIN_SECONDS."""
        if not results and free <= 0:
            return False
        # Runs queued in the zygote are still part of the buffer (handed over, not forked).
        handed = len(self.running) - len(self._ready) - len(self._unrecorded) - len(results)
        if not claiming or len(self._ready) + max(0, handed - self.slots) <= ahead // 2:
            return True
        return bool(results) and self._unrecorded_age(results) >= RECORD_WITHIN_SECONDS

    def _unrecorded_age(self, results: list[TaskResult] | None = None) -> float:
        pending = self._unrecorded if results is None else results
        return time.time() - min((r.finished_at for r in pending), default=time.time())

    def _submit(self, ready: Ready) -> None:
        item, attempt = ready.item, ready.attempt
        # Measured from the turn that granted the lease, not from now: the watchdog errs early.
        self.watchdog.hold(item.id, lease_expires_at=item.lease_expires_at, now=ready.now, read_at=ready.read_at)
        context = dict(
            self._context_base,
            execution_id=item.id,
            job_id=item.job_id,
            job_name=item.job_name,
            idempotency_key=item.idempotency_key,
            attempt=attempt,
        )
        if needs_database(item.task_to_run):
            context["database_url"] = self._database_url
            context["retention"] = self._retention
        if item.callback_task:
            parent = (item.config_override or {}).get("parent")
            if isinstance(parent, dict) and parent.get("id") is not None:
                context["parent_execution_id"] = parent["id"]
                context["parent_result"] = parent.get("result")
        if item.step:
            context["step"] = item.step
            context["upstream_results"] = dict(item.upstream_results or {})
        env, refused = task_env.request_environment(registered_task(item.task_to_run), os.environ, worker_id=self.id)
        self.executor.submit(
            TaskRequest(
                execution_id=item.id,
                task_name=item.task_to_run,  # a callback runs its own task
                config=item.config_to_run,  # the job's config with the run's override merged over it
                context=context,
                timeout_seconds=self._callback_timeout if item.callback_task else item.timeout_seconds,
                isolation=item.isolation,  # process: a fork per attempt; pool: a reused process
                env=env,  # a deployer's task: exactly its declared variables and the base
                refused=refused,  # a declared variable missing here: fails without running
            ),
            within=self.slots,  # beyond the free slots it waits in the zygote's queue
        )
        log.info(
            "execution started",
            extra={
                "event": "execution_started",
                "execution_id": item.id,
                "job_id": item.job_id,
                "worker_id": self.id,
                "task": item.task_to_run,
                "attempt": attempt,
            },
        )

    @contextmanager
    def _transaction(self, *, single_statement: bool = False) -> Iterator[DBConnection]:
        """A write transaction on the connection this worker keeps for its turns.

        Keeping one connection spares each turn a connect; after any error it is closed and the
        next turn opens a new one. A turn that is a single statement (PostgreSQL, nothing but
        successes to record) runs it in autocommit, which the connection is in between
        transactions: one statement is atomic on its own, and leaving out BEGIN and COMMIT saves
        a round trip on every turn.
        """
        if self._conn is None:
            self._conn = self.database.connect()
        try:
            if single_statement and self.database.dialect == "postgresql":
                yield self._conn
            else:
                with self.database.transaction(self._conn) as conn:
                    yield conn
        except Exception:
            self._drop_connection()
            raise

    def _drop_connection(self) -> None:
        """Close the kept connection (after an error, or at the end); the next turn opens a new one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    # --- results ----------------------------------------------------------------------------

    def _record_results(self, results: list[TaskResult]) -> int:
        """Record results without claiming more (executor crash, shutdown)."""
        results = [r for r in [*self._unrecorded, *results] if r.execution_id in self.running]
        self._unrecorded = []
        if not results:
            return 0
        return self._settle_and_claim(results, 0, self.clock())[1]

    def _may_follow(self, item: Finished) -> bool:
        run = self.running[item.execution_id]
        return callbacks.may_follow(
            is_callback=run.is_callback,
            batch_id=run.batch_id,
            status=item.target.value,
            on_success=run.on_success,
            on_failure=run.on_failure,
            workflow_run_id=run.workflow_run_id,
        )

    def _finished(self, result: TaskResult, now: datetime) -> Finished:
        run = self.running[result.execution_id]
        error = result.error
        if not result.forked:  # withdrawn from the zygote's queue: recorded as if from `_ready`
            error = self._withdrawing.get(result.execution_id, error)
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
            task_version=self.tasks.get(run.task),  # the code its fork server loaded
        )
        retry_at = None
        if result.status not in ("succeeded", "cancelled") and run.attempt < run.max_attempts:
            retry_at = now + run.retry.delay(run.attempt, random.random())  # the job's retry kind
        return Finished(run.execution_id, run.attempt, outcome, retry_at)

    def _recorded(
        self, conn: DBConnection, run: Running, result: TaskResult, retry_at: datetime | None, now: datetime
    ) -> None:
        metrics.observe_outcome(result.status, retried=retry_at is not None)
        log.info(
            "execution finished",
            extra={
                "event": "execution_finished",
                "execution_id": run.execution_id,
                "job_id": run.job_id,
                "worker_id": self.id,
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
                actor=self._cancelling.get(run.execution_id) or "system",
                job_id=run.job_id,
                execution_id=run.execution_id,
                attempt=run.attempt,
                worker_id=self.id,
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

    def _abandon(self, runs: list[Running], *, reason: str) -> None:
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
                    claimed_by=self.id,
                    job_name=run.job_name,
                    retry_backoff_seconds=run.retry_backoff_seconds,
                    alert_mode=run.alert_mode,
                    cancel_requested_by=self._cancelling.get(run.execution_id),
                    retry_kind=run.retry.kind,
                    retry_max_delay_seconds=run.retry.max_delay_seconds,
                    retry_jitter=run.retry.jitter,
                )
                leases.expire_lease(conn, run.execution_id, worker_id=self.id, now=now)
                recovery.settle_abandoned(conn, row, now=now, reason=reason)
                self._dirty_jobs.add(run.job_id)
        for run in runs:
            self.watchdog.release(run.execution_id)
        self.running.clear()
        self._cancelling.clear()
        self._withdrawing.clear()

    def _lost(self, execution_id: int, step: str) -> None:
        # Zero rows changed: cancelled, recovered or deleted meanwhile. Never overwrite.
        self.stats.discarded += 1
        log.warning(
            "execution changed hands; result discarded",
            extra={"event": "result_discarded", "execution_id": execution_id, "step": step, "worker_id": self.id},
        )

    # --- housekeeping -----------------------------------------------------------------------

    def _housekeeping(self, now: datetime, *, recover: bool = True) -> None:
        """Heartbeat (and lease renewal) when due; an idle worker's lease recovery every
        RECOVERY_EVERY, or, after a quiet look, only when the look saw an expired lease."""
        renew = bool(self.running) and time.monotonic() - self._last_renewal >= self._renew_every
        every = idle_pacing.heartbeat_every(
            busy=bool(self.running) or self._beat_busy,
            listening=self._listening,
            normal=HEARTBEAT_EVERY.total_seconds(),
            stale_seconds=self._stale_seconds,
        )
        if renew or self._last_heartbeat is None or (now - self._last_heartbeat).total_seconds() >= every:
            self._last_heartbeat = now
            self._beat(now, WorkerState.DRAINING if self._draining else WorkerState.RUNNING)
        if (
            recover
            and not self.running
            and (self._last_recovery is None or now - self._last_recovery >= RECOVERY_EVERY)
        ):
            # Idle workers help recover abandoned work so recovery does not wait for a scheduler.
            self._last_recovery = now
            report = recovery.recover_expired_leases(self.database, now=now)
            metrics.observe_recovery(report)
            self._dirty_jobs |= report.job_ids or set()

    def _beat(self, now: datetime, state: WorkerState) -> None:
        """Write the heartbeat (what the worker registry, app/services/read/workers.py, shows) and
        renew the leases of the running executions in the same transaction."""
        runs = [self.running[i] for i in sorted(self.running)[:REGISTRY_EXECUTIONS]]
        holding = sorted(set(self.running) - self._disowned)
        read_at = time.monotonic()
        renew_now = self.clock()
        reconcile, released = self._reconcile, []
        with self.database.write_transaction() as conn:
            renewed = leases.renew_leases(conn, holding, worker_id=self.id, now=renew_now, lease_seconds=self._lease[0])
            if reconcile:
                released = leases.release_unheld(
                    conn, sorted(self.running), worker_id=self.id, since=self.started_at, now=renew_now
                )
            heartbeats.beat(
                conn,
                process_id=self.id,
                kind="worker",
                started_at=self.started_at,
                now=now,
                tasks=self.tasks,
                info={
                    "state": state.value,
                    "reloading": self._reloading is not None,
                    "slots": self.slots,
                    "busy": sum(1 for i in self.running if self.executor.pid_of(i)),  # processes, not runs
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
        self._last_renewal = read_at
        self._beat_busy = bool(runs)
        if reconcile:
            self._reconcile = False
            for execution_id in released:
                log.warning(
                    "a run claimed by this worker that it does not hold; its lease is given up for recovery",
                    extra={"event": "claim_released", "execution_id": execution_id, "worker_id": self.id},
                )
        self.watchdog.renewed(renewed, now=renew_now, read_at=read_at)
        for execution_id in holding:
            if execution_id not in renewed and execution_id in self.running:
                self._lease_lost(execution_id)

    def _lease_lost(self, execution_id: int) -> None:
        """The row is no longer this worker's (recovered, cancelled or deleted while the worker was
        slow or cut off): another copy may be starting, so this one stops now."""
        log.error(
            "lease lost; stopping the task",
            extra={"event": "lease_lost", "execution_id": execution_id, "worker_id": self.id},
        )
        if self._unfork(execution_id, "failed", "the lease was lost before the task process started"):
            return
        self._withdrawing[execution_id] = "the lease was lost before the task process started"
        self.watchdog.stopped.setdefault(execution_id, time.monotonic())
        if execution_id in self.executor.running():
            self.executor.kill(execution_id, reason="killed")

    def _give_back(self, execution_ids: set[int], now: datetime) -> None:
        """The database handed this worker runs it still has a task for: their first claim was lost
        with a failed-over primary (asynchronous replication) and they were claimed again. The old
        copy has no claim any more: it is stopped and its result discarded; the new claim is given
        back (its lease expired at once) for recovery to retry, so no run has two copies and no
        result lands on another attempt (or, if the id was reused, another job's run)."""
        for execution_id in sorted(execution_ids):
            log.error(
                "claimed a run this worker still has a task for (a claim lost in a failover); giving it back",
                extra={"event": "claimed_again", "execution_id": execution_id, "worker_id": self.id},
            )
            if self._unfork(execution_id, None, ""):
                self.running.pop(execution_id, None)  # no process: nothing to stop or discard
                self.watchdog.release(execution_id)
                continue
            self._disowned.add(execution_id)
            if execution_id in self.executor.running():
                self.executor.kill(execution_id, reason="killed")
        with self.database.write_transaction() as conn:
            for execution_id in sorted(execution_ids):
                leases.expire_lease(conn, execution_id, worker_id=self.id, now=now)

    def _unfork(self, execution_id: int, status: str | None, error: str) -> bool:
        """Take a run out of `_ready` before its fork; False if it is not waiting there. With a
        `status`, its result (no process ran) is recorded by the next turn like any other."""
        for ready in self._ready:
            if ready.item.id == execution_id:
                self._ready.remove(ready)
                break
        else:
            return False
        if status is not None:
            now = time.time()
            self._unrecorded.append(TaskResult(execution_id, status, None, "", error, 0, now, now, 0.0))
        return True

    def _stop_every_task(self) -> None:
        """The lease watchdog's fallback (a task whose fork is not reported yet): SIGTERM makes the
        fork server kill every task's process group and exit; the worker restarts it."""
        pid = self.executor.zygote_pid
        if pid is not None:
            os.kill(pid, signal.SIGTERM)

    def _flush_cache(self) -> None:
        if not self._dirty_jobs:
            return
        keys = cache.keys_for_jobs(self._dirty_jobs)
        self._dirty_jobs.clear()
        if self.runtime.cache is not None:
            self.runtime.cache.delete(keys)


def _claim_size(free: int) -> int:
    """`free`, rounded down to one of a few sizes above 4 (4, 6, 8, 12, 16, 24, ...): each size
    is its own turn statement text (a literal limit, prepared and planned once per connection,
    app/store/postgres.py), so a worker claiming far ahead keeps a handful of texts, not one
    per size."""
    if free <= 4:
        return free
    power = 1 << (free.bit_length() - 1)
    return power + power // 2 if free >= power + power // 2 else power
