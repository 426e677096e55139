"""The execution state machine.

Each status says who moves an execution out of it. Transitions not listed in ALLOWED are bugs;
the store enforces them with guarded UPDATEs (`WHERE status IN (...)`) and the database enforces
the status vocabulary and the finished_at rule with CHECK constraints.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum


class ExecutionStatus(str, Enum):
    # Created by the scheduler tick or a manual trigger/retry. Left by a worker's turn, which
    # claims and starts it in one transaction (-> running), or by disable/cancel (-> cancelled).
    PENDING = "pending"
    # Legacy: no live code path writes it any more. Older releases claimed a row in one step and
    # started it in the next, so an installation upgraded with a worker killed in between can
    # still hold `claimed` rows. The enum and the CHECK constraint keep the value so those rows
    # stay valid; lease recovery settles them back to pending, and cancel still cancels them.
    CLAIMED = "claimed"
    # The task process is running. Left by the worker recording the outcome (-> cancelled when
    # an operator asked it to stop the task), or by expired-lease recovery when the worker
    # vanished (-> retry_scheduled | dead_lettered, or cancelled when a cancel was requested).
    RUNNING = "running"
    # Waiting for its backoff to pass (available_at). Started again by a worker like pending.
    RETRY_SCHEDULED = "retry_scheduled"
    # Terminal states below: nobody moves an execution out of them. A manual retry creates a
    # new execution instead, so history stays truthful.
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    MISSED = "missed"  # never ran: misfire policy skip, or overlap policy skip
    CANCELLED = "cancelled"  # an operator cancelled it (queued or running), or its job was disabled
    DEAD_LETTERED = "dead_lettered"  # abandoned (expired lease) with no attempts left
    # Waited longer than its job's queued_ttl_seconds for a worker after it became available; set
    # by the scheduler's expiry pass (Store.expire_queued) instead of running it hours late.
    EXPIRED = "expired"

    def __str__(self) -> str:
        return self.value


S = ExecutionStatus

# The table. The store derives every guard (`UPDATE ... WHERE status IN (...)`) from it through
# `sources_of` / `guard_for` and the named sets below, so the SQL cannot move a row in a way the
# table forbids (tests/integration/test_store_transitions.py checks every store operation).
ALLOWED: dict[ExecutionStatus, frozenset[ExecutionStatus]] = {
    S.PENDING: frozenset({S.RUNNING, S.CANCELLED, S.EXPIRED}),
    S.RETRY_SCHEDULED: frozenset({S.RUNNING, S.CANCELLED, S.EXPIRED}),
    S.CLAIMED: frozenset({S.PENDING, S.CANCELLED}),  # legacy rows only, see CLAIMED
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.RETRY_SCHEDULED, S.DEAD_LETTERED, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.TIMED_OUT: frozenset(),
    S.MISSED: frozenset(),
    S.CANCELLED: frozenset(),
    S.DEAD_LETTERED: frozenset(),
    S.EXPIRED: frozenset(),
}

# Statuses a new execution row may be created in (nothing else is inserted).
INITIAL = frozenset({S.PENDING, S.MISSED})


def is_forecast(
    status: ExecutionStatus | str, *, trigger: str, attempts: int, created_at: datetime, scheduled_for: datetime
) -> bool:
    """A scheduled occurrence the scheduler wrote ahead of its time (SCHEDULER_LEAD_MS) that no
    worker has started: a forecast, not yet history. It is the one non-terminal row that may be
    deleted: withdrawn before its time when its job changes (the cursor moves back, so the change
    applies as without a lead), or replaced at its time by the `missed` row the tick would have
    written when its overlap-skip job is busy (docs/scheduling.md, "Lead time"). Rows the tick
    writes at or after their time are never forecasts."""
    return S(status) == S.PENDING and trigger == "schedule" and attempts == 0 and created_at < scheduled_for


def can_transition(current: ExecutionStatus | str, target: ExecutionStatus | str) -> bool:
    """True when the state machine allows current -> target."""
    return S(target) in ALLOWED[S(current)]


def sources_of(target: ExecutionStatus) -> frozenset[ExecutionStatus]:
    """The statuses from which `target` may be reached, for guarded UPDATE ... WHERE status IN."""
    return frozenset(s for s, targets in ALLOWED.items() if S(target) in targets)


def guard_for(*targets: ExecutionStatus) -> frozenset[ExecutionStatus]:
    """The statuses from which every one of `targets` may be reached: the guard of an UPDATE
    whose target is chosen per row (recording an outcome: succeeded, failed, ... or a retry)."""
    return frozenset.intersection(*(sources_of(target) for target in targets))


def is_terminal(status: ExecutionStatus | str) -> bool:
    return S(status) in TERMINAL


# Named sets, all derived from the table.
TERMINAL = frozenset(s for s, targets in ALLOWED.items() if not targets)
CLAIMABLE = sources_of(S.RUNNING)  # what a worker's turn may start
CANCELLABLE = sources_of(S.CANCELLED)  # what an operator may cancel, queued or running
# Cancelled in one UPDATE (operator cancel, disable, the turn's disabled-job rows). A running row is
# never cancelled that way: its worker must kill the task first (cancel requests, below).
QUEUED_CANCELLABLE = CANCELLABLE - {S.RUNNING}
# Cancelled by asking the owning worker (cancel_requested_at), which kills the task and records it.
RUNNING_CANCELLABLE = CANCELLABLE - QUEUED_CANCELLABLE
IN_FLIGHT = frozenset(S) - TERMINAL - CLAIMABLE  # holding a lease: running (and legacy claimed)
# A unique key is held while its run waits or runs (every status that is not terminal): another
# trigger with the key then returns that run instead of adding one (uq_executions_unique_key).
UNIQUE_HELD = CLAIMABLE | IN_FLIGHT
# What a worker records an outcome from (the attempt's status, or a retry).
RECORDABLE = guard_for(S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.RETRY_SCHEDULED)
# Operator retry: a new row.
RETRYABLE = frozenset({S.FAILED, S.TIMED_OUT, S.DEAD_LETTERED, S.CANCELLED, S.EXPIRED})
EXPIRABLE = sources_of(S.EXPIRED)  # what the queued-TTL pass may expire: waiting, never started


class Trigger(str, Enum):
    SCHEDULE = "schedule"
    CATCH_UP = "catch_up"
    MANUAL = "manual"  # an operator's ad-hoc run: now, after a delay or at an instant
    RETRY = "retry"
    CALLBACK = "callback"  # a job's on_success/on_failure or a batch's on_complete task (parent_id / batch_id)
    BATCH = "batch"  # one item of a batch (batch_id), with its config override
    BACKFILL = "backfill"  # a past occurrence run on request (keyed like the scheduled one: no duplicate)
    WORKFLOW = "workflow"  # one step of a workflow run (workflow_run_id, step)


class AttemptStatus(str, Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    ABANDONED = "abandoned"  # the worker vanished; recorded by lease recovery
    CANCELLED = "cancelled"  # an operator cancelled the running execution; its task was killed


class OverlapPolicy(str, Enum):
    SKIP = "skip"
    QUEUE = "queue"
    ALLOW = "allow"


class MisfirePolicy(str, Enum):
    COALESCE = "coalesce"
    CATCH_UP = "catch_up"
    SKIP = "skip"


class WorkerState(str, Enum):
    """What the worker registry shows. The worker writes the first three in its heartbeat;
    `stale` is read, not written: a heartbeat older than HEARTBEAT_STALE_SECONDS."""

    RUNNING = "running"  # claiming and running work
    DRAINING = "draining"  # told to drain: claims nothing, finishes what runs, then stops
    STOPPED = "stopped"  # exited cleanly; listed until its heartbeat is pruned
    STALE = "stale"  # stopped heartbeating without saying so (killed, hung, cut off)


class ProcessStatus(str, Enum):
    """Is a scheduler or worker process there at all: the one word `flask health`, `/readyz`,
    `flask worker list` and the pages use for it. A worker's state says more (running or draining);
    only an alive, running worker serves its queues."""

    ALIVE = "alive"  # heartbeating (a worker running or draining)
    STOPPED = "stopped"  # said it stopped and exited
    LOST = "lost"  # stopped heartbeating without saying so (killed, hung, cut off)


def process_state(written: str | None, age_seconds: float, stale_after_seconds: int) -> WorkerState:
    """A process's state from what it wrote in its heartbeat and the heartbeat's age: stopped
    when it said so, stale when the heartbeat is older than the threshold, else what it wrote."""
    if written == WorkerState.STOPPED.value:
        return WorkerState.STOPPED
    if age_seconds > stale_after_seconds:
        return WorkerState.STALE
    return WorkerState.DRAINING if written == WorkerState.DRAINING.value else WorkerState.RUNNING


def process_status(state: WorkerState) -> ProcessStatus:
    """The liveness word of a state: running and draining are alive, stale is lost."""
    if state is WorkerState.STOPPED:
        return ProcessStatus.STOPPED
    if state is WorkerState.STALE:
        return ProcessStatus.LOST
    return ProcessStatus.ALIVE


def serves(state: WorkerState) -> bool:
    """Whether a worker in this state claims work: alive and not draining."""
    return state is WorkerState.RUNNING


class WorkerCommandKind(str, Enum):
    DRAIN = "drain"  # stop claiming, let running tasks finish, exit 0
    STOP = "stop"  # stop now: kill running tasks, settle them as abandoned (retried per policy), exit 0
    RELOAD = "reload"  # finish running tasks, restart the fork server with the new code, advertise, go on


class ScheduleType(str, Enum):
    ONE_TIME = "one_time"
    INTERVAL = "interval"
    CRON = "cron"


class AlertMode(str, Enum):
    WEB = "web"
    LOG_ONLY = "log_only"


class Isolation(str, Enum):
    """Where a job's attempts run (docs/job-policies.md, "Isolation")."""

    PROCESS = "process"  # a fresh process forked for each attempt
    POOL = "pool"  # a long-lived pool process reused across attempts (trusted, cheap tasks)


class Role(str, Enum):
    ADMIN = "admin"
    OPERATOR = "operator"
    VIEWER = "viewer"


def values(enum_type: type[Enum]) -> tuple[str, ...]:
    return tuple(member.value for member in enum_type)
