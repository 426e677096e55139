"""The run book: what is in flight in this worker, and how far ahead it claims.

A run enters the book when the turn that claimed and started it has committed (`take`) and leaves
it when the turn that records its result has committed (`settle`), or when a stopping worker
settles it as abandoned (`forget_all`). Between the two:

- `running` holds every run this worker answers for, forked or not; its lease is renewed with the
  heartbeat (app/services/engine/upkeep.py);
- `ready` holds the runs claimed ahead: started in the database (status running, lease, Attempt
  row) but not forked yet, waiting for a slot. The loop forks only from here, so a process is
  forked only for a run whose claim committed (docs/adr/0010-claim-ahead.md);
- `unrecorded` holds results that came back and wait for the turn that records them: gathered for
  a batch, or kept after a failed write so a task that finished during an outage is not later
  abandoned and run again;
- `cancelling`, `withdrawing` and `disowned` note the runs an operator, a lost lease or a claim lost
  in a failover took away while they were in flight, and what their result must then say.

Claiming ahead keeps the turn off the path between a slot freeing and the next fork. While tasks
are short (a moving average under AHEAD_TASK_SECONDS), a turn claims beyond the free slots
(`ahead`); when a result arrives its slot is refilled from `ready` at once, and the turn that
records results and claims the replacements runs once `ready` is half empty or a result has
waited RECORD_WITHIN_SECONDS (`turn_due`), so one commit serves a batch.

Memory and arithmetic only: it never reads or writes the database, never signals a process and
never reads the worker's clock. The parts that do consult it and change it.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime

from app.domain.retry import RetryPolicy
from app.executor import TaskResult
from app.sql.rows import ClaimedExecution

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
# Runs from `ready` handed to the zygote beyond the free slots, per slot: queued there, forked the
# moment a task ends, without a round trip through the worker (ADR 0010, amendment on the zygote's queue).
ZYGOTE_QUEUE_PER_SLOT = 1


@dataclass
class Ready:
    """A run claimed and started in the database (lease, Attempt row) whose process is not
    forked yet: it waits for a slot in `RunBook.ready`. `now` and `read_at` are the claiming
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


class RunBook:
    """The runs one worker has in flight (see the module docstring)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        # Handed to the executor at most: the slots, and the zygote's queue behind them.
        self.handed_at_most = slots * (1 + ZYGOTE_QUEUE_PER_SLOT)
        self.running: dict[int, Running] = {}  # claimed by this worker: forked, or waiting in `ready`
        self.ready: deque[Ready] = deque()  # claimed ahead, not forked yet
        # Results not recorded yet: gathered for the next turn, or kept after its write failed.
        self.unrecorded: list[TaskResult] = []
        self.task_seconds: float | None = None  # moving average of task durations (`ahead`)
        self.cancelling: dict[int, str] = {}  # execution id -> who asked; its task is being killed
        # Why a run handed to the executor was withdrawn, should it come back never forked (the
        # text a run taken out of `ready` for the same reason records).
        self.withdrawing: dict[int, str] = {}
        # Running here, but the claim is gone (claimed again after a failover): result discarded.
        self.disowned: set[int] = set()

    def take(self, item: ClaimedExecution, attempt: int, now: datetime, read_at: float) -> None:
        """A run the turn claimed and started: this worker's from now on; it waits in `ready`
        until the loop gives it a slot."""
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
        self.ready.append(Ready(item, attempt, now, read_at))

    def results_to_record(self, polled: list[TaskResult]) -> list[TaskResult]:
        """The results kept from earlier, then `polled`, of runs still in the book; nothing is
        kept any more (what the caller does not record it puts back in `unrecorded`)."""
        results = [r for r in [*self.unrecorded, *polled] if r.execution_id in self.running]
        self.unrecorded = []
        return results

    def unfork(self, execution_id: int, status: str | None, error: str) -> bool:
        """Take a run out of `ready` before its fork; False if it is not waiting there. With a
        `status`, its result (no process ran) is recorded by the next turn like any other."""
        for ready in self.ready:
            if ready.item.id == execution_id:
                self.ready.remove(ready)
                break
        else:
            return False
        if status is not None:
            now = time.time()
            self.unrecorded.append(TaskResult(execution_id, status, None, "", error, 0, now, now, 0.0))
        return True

    def settle(self, execution_id: int) -> Running:
        """A run whose result a turn took (recorded, or refused as changed hands): out of the book."""
        self.cancelling.pop(execution_id, None)
        self.withdrawing.pop(execution_id, None)
        return self.running.pop(execution_id)

    def forget_all(self) -> None:
        """Every run settled at once (a stopping worker abandoned them)."""
        self.running.clear()
        self.cancelling.clear()
        self.withdrawing.clear()

    def task_took(self, seconds: float) -> None:
        """A task process ran for `seconds`: the moving average `ahead` reads."""
        average = self.task_seconds
        self.task_seconds = seconds if average is None else average + AHEAD_SMOOTHING * (seconds - average)

    def occupied(self, freed: int = 0) -> int:
        """Runs handed to the executor and not back yet: a run occupies a slot (or a place in the
        zygote's queue) unless it waits in `ready`, or its result is in `unrecorded` or among the
        `freed` results the caller holds (finished, not recorded yet)."""
        return len(self.running) - len(self.ready) - len(self.unrecorded) - freed

    def ahead(self) -> int:
        """How many runs to claim beyond the slots: none while tasks are long, a slot's worth each
        while they are short, and as many as the slots run in AHEAD_WAIT_SECONDS (at most
        AHEAD_MAX_PER_SLOT each) while they are very short, so that one turn records and claims
        a batch and the slots run the buffer while it waits for its commit."""
        average = self.task_seconds
        if average is None or average >= AHEAD_TASK_SECONDS:
            return 0
        by_wait = int(self.slots * AHEAD_WAIT_SECONDS / max(average, 1e-4))
        return max(self.slots, min(self.slots * AHEAD_MAX_PER_SLOT, by_wait))

    def turn_due(self, results: list[TaskResult], free: int, ahead: int, claiming: bool) -> bool:
        """Whether this wake-up runs a turn. Every turn waits for a commit (a WAL flush on
        PostgreSQL) whatever its size, so while runs claimed ahead keep the slots busy, results
        are gathered and recorded together: the turn runs once the buffer is down to half of
        `ahead` (with no buffer, at once), or when a result has waited RECORD_WITHIN_SECONDS."""
        if not results and free <= 0:
            return False
        # Runs queued in the zygote are still part of the buffer (handed over, not forked).
        handed = self.occupied(len(results))
        if not claiming or len(self.ready) + max(0, handed - self.slots) <= ahead // 2:
            return True
        return bool(results) and self.unrecorded_age(results) >= RECORD_WITHIN_SECONDS

    def unrecorded_age(self, results: list[TaskResult] | None = None) -> float:
        """How long the oldest of `results` (by default the kept ones) has waited to be recorded."""
        pending = self.unrecorded if results is None else results
        return time.time() - min((r.finished_at for r in pending), default=time.time())


def claim_size(free: int) -> int:
    """`free`, rounded down to one of a few sizes above 4 (4, 6, 8, 12, 16, 24, ...): each size
    is its own turn statement text (a literal limit, prepared and planned once per connection,
    app/store/postgres.py), so a worker claiming far ahead keeps a handful of texts, not one
    per size."""
    if free <= 4:
        return free
    power = 1 << (free.bit_length() - 1)
    return power + power // 2 if free >= power + power // 2 else power
