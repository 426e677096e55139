"""The turn: the path a run takes through a worker, claim -> start -> record.

One turn is one short transaction on the worker's kept connection (on PostgreSQL one statement,
`app.sql.turn.record_and_claim`): record the results that came back (running -> terminal or
retry_scheduled, Attempt closed, dead letter when exhausted), then claim and start due rows in
the slots they freed (pending | retry_scheduled -> running in one step, lease stamped, Attempt
row). What it claimed enters the run book's `ready`, from which `fork_ready` hands runs to the
executor. Every move is guarded by status and owner, so a worker whose lease was recovered while
it was cut off cannot overwrite what the new owner did: its late result is discarded and logged.

On PostgreSQL, while runs claimed ahead wait, the turn's statement and commit run on a committer
thread (app/services/engine/committer.py) and the main thread keeps forking from `ready` and
gathers the results that arrive meanwhile for the next turn (`_overlapped`), so a slot that frees
while the turn waits for its WAL flush is refilled at once.

Why the history stays truthful (docs/adr/0010-claim-ahead.md): a process is forked only for a run
whose claim and Attempt row have committed (what a turn claims reaches `ready` only after its
commit returned), so a worker killed at any instant leaves an Attempt for every process it
forked; a run claimed but not forked when the worker dies is `running` under a lease like any run
whose worker died, so lease recovery settles its Attempt as abandoned and retries it (never lost,
and never run twice: the dead worker cannot fork it any more, and nobody else may before the
lease ends). The zygote gets a few of the `ready` runs early (ZYGOTE_QUEUE_PER_SLOT per slot, with
the slot count as `within`) and forks one the moment a task ends; they are still runs whose claim
committed, and one withdrawn from its queue comes back as a result with `forked` False, settled
as a run that never left `ready` (ADR 0010, amendment on the zygote's queue).

The turn never holds a transaction open while a task runs, never forks a run whose claim has not
committed, and never decides when a turn is due (the loop asks the run book); its SQL is
app/sql's.
"""

from __future__ import annotations

import logging
import select
from collections.abc import Callable
from datetime import datetime

from app import metrics
from app.domain.states import AttemptStatus
from app.executor import ExecutorCrashed, ForkServer, TaskResult
from app.services.engine import callbacks, wakeups
from app.services.engine.committer import Committer
from app.services.engine.kept_connection import KeptConnection
from app.services.engine.recorder import Recorder, WorkerStats
from app.services.engine.run_book import Ready, RunBook, claim_size
from app.services.engine.task_requests import TaskRequests
from app.services.engine.upkeep import Upkeep
from app.sql import turn
from app.sql.rows import Turn

log = logging.getLogger("cronwell.worker")


class Turns:
    """One worker's turns and forks (see the module docstring)."""

    def __init__(
        self,
        *,
        worker_id: str,
        executor: ForkServer,
        tasks: dict[str, str],
        slots: int,
        queue_ids: list[int] | None,
        lease: tuple[int, int],
        notify: bool,
        connection: KeptConnection,
        book: RunBook,
        recorder: Recorder,
        upkeep: Upkeep,
        requests: TaskRequests,
        stats: WorkerStats,
        dirty_jobs: set[int | None],
    ) -> None:
        self.worker_id = worker_id
        self.executor = executor  # the fork server; the loop puts a new one here after a crash or a reload
        # What this worker advertises, {task: code version}: it claims only runs of these tasks,
        # and records the version with each attempt's outcome. A reload puts the new catalog here.
        self.tasks = tasks
        self.task_names = sorted(tasks)
        self.slots = slots
        self.queue_ids = queue_ids
        self.lease = lease  # (LEASE_SECONDS, LEASE_BUFFER_SECONDS)
        self.notify = notify  # LISTEN/NOTIFY wake-ups (PostgreSQL)
        self.connection = connection
        self.book = book
        self.recorder = recorder
        self.upkeep = upkeep
        self.watchdog = upkeep.watchdog
        self.requests = requests
        self.stats = stats
        self.dirty_jobs = dirty_jobs  # the worker's: jobs whose cached pages its writes made stale
        self._overlap = connection.database.dialect == "postgresql"
        self.committer: Committer | None = None  # runs turns while the slots are fed (_overlapped)

    def use_catalog(self, tasks: dict[str, str]) -> None:
        """A reload loaded new task code: advertise it, claim its tasks, record its versions."""
        self.tasks, self.task_names = tasks, sorted(tasks)

    def record(self, results: list[TaskResult], now: datetime) -> int:
        """Record results without claiming more (executor crash, shutdown)."""
        results = self.book.results_to_record(results)
        if not results:
            return 0
        return self.settle_and_claim(results, 0, now, 0.0)[1]  # claims nothing: no lease to measure

    def settle_and_claim(
        self, results: list[TaskResult], free: int, now: datetime, read_at: float, *, overlap: bool = False
    ) -> tuple[int, int]:
        """One transaction: record `results`, claim up to `free` executions and start them.

        On PostgreSQL that is one statement (`Store.record_and_claim`), which is what keeps the
        database cost per execution low. If it fails nothing is half-done: the claims roll back
        with it, and the results are kept to be recorded on the next try (the executor will not
        hand them over again). `now` is the turn's time and `read_at` the monotonic instant it
        was read (where the watchdog measures the leases granted from). Returns (started, finished).
        """
        book, recorder, watchdog = self.book, self.recorder, self.watchdog
        for result in [r for r in results if r.execution_id in book.disowned]:
            results.remove(result)
            book.disowned.discard(result.execution_id)
            book.running.pop(result.execution_id)
            watchdog.release(result.execution_id)
            book.withdrawing.pop(result.execution_id, None)
            if result.forked:  # withdrawn from the zygote's queue: nothing ran, nothing to discard
                recorder.lost(result.execution_id, "complete")
        finished = [recorder.finished(result, now, self.tasks) for result in results]
        # Final outcomes that may create a callback or end a batch: followed up in this same
        # transaction (app/services/engine/callbacks.py).
        follow = [item.execution_id for item in finished if item.retry_at is None and recorder.may_follow(item)]
        # Failures add statements (retry event, dead letter, alert) to the turn; without them the
        # turn is the one statement and needs no BEGIN/COMMIT around it on PostgreSQL.
        single = not follow and all(item.outcome.status is AttemptStatus.SUCCEEDED for item in finished)

        def work() -> Turn:
            with self.connection.transaction(single_statement=single) as conn:
                taken = turn.record_and_claim(
                    conn,
                    finished,
                    worker_id=self.worker_id,
                    now=now,
                    limit=free,
                    queue_ids=self.queue_ids,
                    lease_seconds=self.lease[0],
                    buffer_seconds=self.lease[1],
                    tasks=self.task_names,  # only runs of the tasks it advertises
                )
                for item, result in zip(finished, results):
                    if item.execution_id in taken.recorded:
                        recorder.recorded(conn, book.running[item.execution_id], result, item.retry_at, now)
                wake = any(item.retry_at is not None for item in finished if item.execution_id in taken.recorded)
                if follow:
                    followed = callbacks.after_final(conn, [i for i in follow if i in taken.recorded], now=now)
                    self.dirty_jobs |= followed.job_ids
                    wake = wake or bool(followed.callbacks or followed.steps)
                if wake:  # a retry, a callback or a workflow's next steps: idle workers look now
                    wakeups.notify(conn, wakeups.WORK_CHANNEL, on=self.notify)
            return taken

        crash = None
        try:
            if overlap and book.ready and self._overlap:
                done, crash = self._overlapped(work, len(results))
            else:
                done = work()
        except Exception:
            book.unrecorded = [*results, *book.unrecorded]  # recorded by the next turn
            raise
        for item, result in zip(finished, results):
            run = book.settle(result.execution_id)
            watchdog.release(result.execution_id)
            if item.execution_id not in done.recorded:
                recorder.lost(item.execution_id, "complete")
            self.dirty_jobs.add(run.job_id)
            self.stats.fork_ms.append(result.fork_ms)
            metrics.observe_task(result)
            if result.pid:  # a process ran (not a run dropped before its fork)
                book.task_took(max(0.0, result.finished_at - result.started_at))
        claimed = len(done.started) + len(done.cancelled)
        if claimed:
            metrics.observe_claim(claimed)
            self.stats.claimed += claimed
        for execution in done.cancelled:
            metrics.observe_cancelled()
            self.stats.cancelled += 1
            self.dirty_jobs.add(execution.job_id)
        metrics.observe_fire_lateness(
            [(item.trigger, item.scheduled_for) for item, number in done.started if number == 1], now
        )
        again = {item.id for item, _ in done.started if item.id in book.running}
        if again:
            self.upkeep.give_back(again, now)
        for execution, number in done.started:
            if execution.id not in again:
                # This worker's from now on (its lease is renewed with the others); it waits in
                # `ready` until `fork_ready` gives it a slot.
                book.take(execution, number, now, read_at)
                self.dirty_jobs.add(execution.job_id)
        if crash is not None:
            # The zygote died while the turn ran; its failed reports wait in `unrecorded` (the
            # loop records them and restarts the executor).
            raise ExecutorCrashed(str(crash))
        started = len(done.started)
        if free > started and (done.recorded or done.cancelled):
            # Claim again at once, rather than at the next wake-up, when slots are still free and
            # (a) a run recorded in this statement did not yet free its job for the claim in the
            # same statement (one snapshot), so a queued successor would wait; or (b) claimed
            # rows were cancelled (job disabled), which used up the claim without filling slots.
            started += self.settle_and_claim([], claim_size(free - started), now, read_at, overlap=overlap)[0]
        return started, len(results)

    def _overlapped(self, work: Callable[[], Turn], recording: int) -> tuple[Turn, ExecutorCrashed | None]:
        """Run a turn's database work (`work`) on the committer thread and, while it waits for
        PostgreSQL, keep the slots fed: results that arrive are kept for the next turn and their
        slots refilled from `ready`, whose runs' claims committed in earlier turns. What this
        turn claims reaches `ready` only after `work` returned, so only once it has committed
        (ADR 0010). `recording` is how many results the turn records (their slots are free).
        Returns the turn, and the executor's crash if the zygote died meanwhile (its failed
        reports are in `unrecorded`)."""
        if self.committer is None:
            self.committer = Committer()
        committer, book = self.committer, self.book
        committer.submit(work)
        crash = None
        fds = [committer.fileno(), self.executor.fileno()]
        while crash is None and not committer.poll(0):
            readable = select.select(fds, [], [], 1.0)[0]
            if fds[1] not in readable:
                continue
            try:
                book.unrecorded += [r for r in self.executor.poll(0) if r.execution_id in book.running]
                self.fork_ready(freed=recording)
            except ExecutorCrashed as exc:
                crash = exc
                book.unrecorded += [r for r in exc.results if r.execution_id in book.running]
        try:
            return committer.result(), crash
        except Exception:
            if crash is None:
                raise
            raise ExecutorCrashed(str(crash)) from None  # the loop restarts the executor; reports wait

    def fork_ready(self, freed: int = 0) -> None:
        """Fork runs waiting in `ready` into the free slots (and the zygote's queue behind them);
        `freed` results the caller holds (finished, not recorded yet) free their slots too."""
        book = self.book
        busy = book.occupied(freed)
        while book.ready and busy < book.handed_at_most:
            self._submit(book.ready.popleft())
            busy += 1

    def _submit(self, ready: Ready) -> None:
        item, attempt = ready.item, ready.attempt
        # Measured from the turn that granted the lease, not from now: the watchdog errs early.
        self.watchdog.hold(item.id, lease_expires_at=item.lease_expires_at, now=ready.now, read_at=ready.read_at)
        # Beyond the free slots it waits in the zygote's queue.
        self.executor.submit(self.requests.for_run(item, attempt), within=self.slots)
        log.info(
            "execution started",
            extra={
                "event": "execution_started",
                "execution_id": item.id,
                "job_id": item.job_id,
                "worker_id": self.worker_id,
                "task": item.task_to_run,
                "attempt": attempt,
            },
        )

    def close(self) -> None:
        """Stop the committer thread (the worker is stopping)."""
        if self.committer is not None:
            self.committer.close()
            self.committer = None
