"""The worker: claims due executions under a lease and runs each in its own process.

This module is the loop; what it ties together lives beside it, one job each:
app/services/engine/turns.py (the turn: record what came back, claim and start into the freed
slots in one transaction, fork what is ready), run_book.py (what is in flight here, and how far
ahead to claim), recorder.py (what a finished attempt becomes: outcome, retry, dead letter, the
counts), upkeep.py (heartbeat and lease renewal, lost leases, claims given back, idle recovery,
cancels), waits.py (when it sleeps, for how long, what wakes it), task_requests.py (what a task
process is handed), kept_connection.py (the connection the turns and the reads run on) and
code_reload.py (new task code without a restart).

Each wake-up: upkeep when due (heartbeat, lease renewal, the operator's orders), then the results
that came back free their slots, which are refilled at once from the runs claimed ahead, and a
turn runs when the run book says one is due (ready runs low, or a result waited long enough), so
one commit serves a batch; then the worker sleeps on the executor's socket and the PostgreSQL
LISTEN socket together until a result, a NOTIFY, the next claimable row or the next renewal.
A quiet worker (listening, running nothing, no NOTIFY since its last look) looks with one read
instead of a turn (idle_pacing.py).

`run(burst=True)` drains what is due and returns, which is how tests drive it; `run()` keeps
going. Only database trouble (`is_database_trouble`: a lost connection, a server restarting or
overloaded, no schema yet) is retried with back-off, keeping running tasks alive; any other
error is a bug and stops the worker with its traceback, and lease recovery settles what it held.
A graceful stop forks the runs claimed ahead within its grace period and settles what is left as
abandoned.

Operators reach a running worker through the database (app/services/engine/worker_commands.py):
on every wake, at least once a second, it takes its stored commands (drain: claim nothing more,
finish what runs, exit; stop: kill what runs and settle it as abandoned, exit; reload) and the
cancel requests on its running executions (upkeep kills their tasks; the attempt is recorded
`cancelled`, never retried).

The loop writes no SQL of its own (the statements are app/sql's) and holds no transaction open
while it sleeps or a task runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from app import cache
from app.clock import utcnow
from app.domain.states import WorkerCommandKind, WorkerState
from app.executor import ExecutorCrashed, ForkServer
from app.executor.pool_limits import PoolLimits
from app.services.engine import heartbeats, task_env, wakeups, worker_commands
from app.services.engine.code_reload import CodeReload
from app.services.engine.kept_connection import KeptConnection
from app.services.engine.recorder import Recorder, WorkerStats
from app.services.engine.run_book import RECORD_WITHIN_SECONDS, RunBook, claim_size
from app.services.engine.runtime import WorkerRuntime
from app.services.engine.task_requests import TaskRequests
from app.services.engine.turns import Turns
from app.services.engine.upkeep import Upkeep
from app.services.engine.waits import Waits
from app.services.errors import NotFound
from app.sql import queues
from app.sql.connections import is_database_trouble
from app.tasks.loading import catalog_versions, preload_modules

if TYPE_CHECKING:
    from flask import Flask

# WorkerStats is the recorder's; callers of `run` get one, so it is named here too.
__all__ = ["Worker", "WorkerStats"]

log = logging.getLogger("cronwell.worker")
Clock = Callable[[], datetime]
LISTEN_TO = [wakeups.WORK_CHANNEL, wakeups.CONTROL_CHANNEL]
# A burst (`worker run --once`) retries database failures with the same back-off as a long-running
# worker (1, 2, 4, 8, 16, 30 s) and gives up after these many in a row: about a minute.
BURST_FAILURES_TOLERATED = 6


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
        forks = executor or ForkServer(
            kill_grace_seconds=2.0,
            pool=PoolLimits.from_config(cfg),
            preload=preload_modules(cfg.get("CRONWELL_TASK_MODULES")),
            result_max_bytes=cfg.get("RESULT_MAX_BYTES", 65536),
            withhold=task_env.declared_names(),
        )
        self.poll_seconds = poll_seconds if poll_seconds is not None else cfg["WORKER_POLL_SECONDS"]
        # Listening and running nothing, the longest sleep and the heartbeat's cadence (idle_pacing.py).
        self.idle_poll_seconds = max(self.poll_seconds, cfg.get("WORKER_IDLE_POLL_SECONDS", 5))
        self.stats = WorkerStats()
        self.started_at = clock()
        self._stopping = False
        self._draining = False  # an operator's drain: claim nothing, stop once nothing runs
        self._stop_now = False  # an operator's stop: no grace for running tasks
        self._should_stop: Callable[[], bool] = lambda: False
        self._dirty_jobs: set[int | None] = set()  # jobs whose cached pages this worker's writes made stale
        self._notify = cfg.get("LISTEN_NOTIFY", True)  # LISTEN/NOTIFY wake-ups (PostgreSQL)
        self._watchdog_on = cfg.get("LEASE_WATCHDOG", True)
        self.book = RunBook(self.slots)
        self.running = self.book.running  # the book's own dict, under the name callers read
        self.upkeep = Upkeep(
            database=self.database,
            worker_id=self.id,
            clock=clock,
            book=self.book,
            stats=self.stats,
            executor=lambda: self.turns.executor,
            started_at=self.started_at,
            queues=self.queues,
            lease_seconds=cfg["LEASE_SECONDS"],
            kill_grace_seconds=forks.kill_grace_seconds,
            stale_seconds=cfg.get("HEARTBEAT_STALE_SECONDS", 60),
            dirty_jobs=self._dirty_jobs,
        )
        self.watchdog = self.upkeep.watchdog  # the loop holds each run in it as it starts, releases it as it ends
        self.recorder = Recorder(
            worker_id=self.id,
            database=self.database,
            clock=clock,
            book=self.book,
            watchdog=self.watchdog,
            stats=self.stats,
            dirty_jobs=self._dirty_jobs,
        )
        self.connection = KeptConnection(self.database)
        self.turns = Turns(
            worker_id=self.id,
            executor=forks,
            tasks=catalog_versions(),  # the catalog this process imported (app/tasks/loading.py)
            slots=self.slots,
            queue_ids=self.queue_ids,
            lease=(cfg["LEASE_SECONDS"], cfg["LEASE_BUFFER_SECONDS"]),
            notify=self._notify,
            connection=self.connection,
            book=self.book,
            recorder=self.recorder,
            upkeep=self.upkeep,
            requests=TaskRequests(cfg, worker_id=self.id, database_url=self.database.url),
            stats=self.stats,
            dirty_jobs=self._dirty_jobs,
        )
        self.reload = CodeReload(
            database=self.database,
            clock=clock,
            worker_id=self.id,
            settings=cfg,
            listed_preload=forks.preload if executor is None else (),
        )
        self.waits = Waits(
            worker_id=self.id,
            clock=clock,
            connection=self.connection,
            book=self.book,
            control=self.upkeep.control,
            queue_ids=self.queue_ids,
            poll_seconds=self.poll_seconds,
            idle_poll_seconds=self.idle_poll_seconds,
            executor=lambda: self.turns.executor,
            wake_early=lambda: self._should_stop() or self.reload.asked is not None,
        )

    @property
    def executor(self) -> ForkServer:
        """The fork server the tasks run in (a new one after a crash or a reload)."""
        return self.turns.executor

    @property
    def tasks(self) -> dict[str, str]:
        """What this worker advertises in its registry row, {task: code version}: it claims only
        runs of these tasks, and records the version with each attempt's outcome."""
        return self.turns.tasks

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
        flag). See app/services/engine/code_reload.py."""
        self.reload.ask(how)

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
                    self._restart_executor(crash)
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
                    self.connection.drop()
                    listener.close()
                    self.upkeep.after_database_failure()  # beat (and reconcile) once the database answers
                    self.waits.notified = True  # NOTIFYs sent while the database was away went unheard
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

    def _restart_executor(self, crash: ExecutorCrashed) -> None:
        """The fork server died: record what it reported, start a new one with its settings."""
        log.error("executor crashed; restarting it", extra={"event": "executor_crashed", "error": str(crash)})
        self.turns.record(crash.results, self.clock())
        crashed = self.turns.executor
        self.turns.executor = ForkServer(
            kill_grace_seconds=crashed.kill_grace_seconds,
            preload=crashed.preload,
            pool=crashed.pool,
            result_max_bytes=crashed.result_max_bytes,
            withhold=crashed.withhold,
        )
        self.turns.executor.start()

    def shutdown(self, *, echo: Callable[[WorkerStats], None] = lambda stats: None) -> None:
        """Wait for running tasks up to the grace period, settle any still running, stop the zygote."""
        grace = 0 if self._stop_now else self.runtime.settings["WORKER_SHUTDOWN_GRACE_SECONDS"]
        deadline = time.monotonic() + grace
        while self.running and time.monotonic() < deadline:
            try:
                self.turns.fork_ready()  # runs claimed ahead are started in the database: run them too
                polled = self.executor.poll(min(0.5, max(0.0, deadline - time.monotonic())))
                self.turns.record(polled, self.clock())
            except ExecutorCrashed as crash:
                self.turns.record(crash.results, self.clock())
                break
            except Exception as exc:  # database unreachable: expired-lease recovery settles the rest
                log.error(
                    "could not record results while stopping",
                    extra={"event": "shutdown_record_failed", "error": str(exc)[:300]},
                )
                break
        waiting = {ready.item.id for ready in self.book.ready}
        self.book.ready.clear()
        try:
            # Runs still queued in the zygote come back withdrawn (never forked): settled like
            # those that waited in `ready`.
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
                    self.recorder.abandon(never_forked, reason=f"worker {self.id} {how} before the task started")
                if leftovers:
                    self.recorder.abandon(leftovers, reason=f"worker {self.id} {how} before the task finished")
            except Exception as exc:
                log.error(
                    "could not settle running executions while stopping; their leases will expire",
                    extra={"event": "shutdown_settle_failed", "error": str(exc)[:300]},
                )
        try:
            # Listed as stopped until pruned.
            self.upkeep.beat(
                self.clock(), WorkerState.STOPPED, tasks=self.tasks, reloading=self.reload.under_way is not None
            )
        except Exception:
            log.warning("could not mark the heartbeat stopped", extra={"event": "heartbeat_stop_failed"})
        self.connection.drop()
        self.database.close()
        self.turns.close()
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
        book, turns, waits, control = self.book, self.turns, self.waits, self.upkeep.control
        waits.listening = wait is None and listener is not None and listener.active
        control.every = self.idle_poll_seconds if waits.listening else worker_commands.CONTROL_POLL_SECONDS
        changing = bool(self._stopping or self._draining or self.reload.under_way or self.reload.asked)
        if waits.may_look(changing=changing):
            rest, expired_leases = waits.look()
            if rest > 0:
                self._housekeeping(self.clock(), recover=expired_leases)
                waits.sleep(rest, listener)
                return 0
        self._housekeeping(self.clock())
        orders = control.check(self.clock(), running=bool(self.running))
        if orders.commands:
            self._obey(orders.commands)
        if orders.cancels:
            self.upkeep.cancel(orders.cancels)
        if self.reload.asked is not None and self.reload.begin(
            busy=len(self.running), exiting=self._stopping or self._draining
        ):
            self.upkeep.beat_soon()  # show `reloading` in the registry at once
        read_at = time.monotonic()  # where the watchdog measures the leases this turn grants from
        now = self.clock()  # read after housekeeping so started_at and the lease are not early
        results = book.results_to_record(turns.executor.poll(0))
        # Slots these results freed are refilled from the runs claimed ahead before the turn that
        # records them: the turn is not on the path between a slot freeing and the next fork.
        turns.fork_ready(freed=len(results))
        reloading = self.reload.under_way is not None
        claiming = not (self._stopping or self._draining or reloading)
        ahead = book.ahead() if claiming else 0
        free = claim_size(self.slots + ahead - len(self.running) + len(results)) if claiming else 0
        started = finished = 0
        if book.turn_due(results, free, ahead, claiming):
            started, finished = turns.settle_and_claim(results, free, now, read_at, overlap=True)
            turns.fork_ready()
        else:
            book.unrecorded = results  # the next turn records them, within RECORD_WITHIN_SECONDS
        if reloading and not self.running:
            self._swap_code()  # every attempt is recorded: the new code takes over, claiming at once
            self._flush_cache()
            return started + finished + 1
        timeout = self.poll_seconds if wait is None else wait
        if wait is None and claiming and len(self.running) < self.slots:
            # A slot is idle: wake when the next waiting row becomes claimable, not at the next
            # poll (occurrences written ahead of their time, retries, delayed runs).
            timeout = waits.until_claimable(since=now)
        if book.unrecorded:
            timeout = min(timeout, max(0.0, RECORD_WITHIN_SECONDS - book.unrecorded_age()))
        if wait == 0.0 and self.running:
            timeout = 0.05  # burst: wait briefly for a result rather than spin
        if self.running:  # wake in time to renew the leases
            timeout = min(timeout, self.upkeep.until_renewal())
        waits.sleep(timeout, listener)
        self._flush_cache()
        return started + finished

    def _housekeeping(self, now: datetime, *, recover: bool = True) -> None:
        """Upkeep's heartbeat, lease renewal and idle recovery, with what the registry shows."""
        self.upkeep.housekeeping(
            now,
            WorkerState.DRAINING if self._draining else WorkerState.RUNNING,
            tasks=self.turns.tasks,
            reloading=self.reload.under_way is not None,
            listening=self.waits.listening,
            recover=recover,
        )

    def _obey(self, commands: list[WorkerCommandKind]) -> None:
        """Act on an operator's commands (see ControlCheck); upkeep acts on the cancel requests."""
        for command in commands:
            if command is WorkerCommandKind.RELOAD:
                self.request_reload("command")  # logged as it begins (CodeReload.begin)
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
                self.upkeep.beat_soon()  # show `draining` in the registry at once

    def _swap_code(self) -> None:
        """The reload, once nothing runs here: the new fork server and catalog take over (or, if
        the new code does not load, the worker goes on as it was)."""
        new = self.reload.swap(self.executor)
        self.upkeep.beat_soon()  # advertise the new catalog (or that no reload is under way) at once
        if new is None:
            return
        old, self.turns.executor = self.turns.executor, new.executor
        old.stop(0)  # nothing runs there any more: every attempt it ran is recorded
        before = self.tasks
        self.turns.use_catalog(new.tasks)
        self.reload.swapped(new, before)

    def _flush_cache(self) -> None:
        if not self._dirty_jobs:
            return
        keys = cache.keys_for_jobs(self._dirty_jobs)
        self._dirty_jobs.clear()
        if self.runtime.cache is not None:
            self.runtime.cache.delete(keys)
