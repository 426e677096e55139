"""The execution state machine.

Each status says who moves an execution out of it. Transitions not listed in ALLOWED are bugs;
the store enforces them with guarded UPDATEs (`WHERE status IN (...)`) and the database enforces
the status vocabulary and the finished_at rule with CHECK constraints.
"""

from __future__ import annotations

from enum import Enum


class ExecutionStatus(str, Enum):
    # Created by the scheduler tick or a manual trigger/retry. Left by a worker claim
    # (-> claimed), by disable/cancel (-> cancelled).
    PENDING = "pending"
    # A worker holds the lease but has not started the task yet. Left when the worker starts
    # it (-> running), releases it on shutdown (-> pending), or lease recovery.
    CLAIMED = "claimed"
    # The task process is running. Left by the worker recording the outcome, or by
    # expired-lease recovery when the worker vanished (-> retry_scheduled | dead_lettered).
    RUNNING = "running"
    # Waiting for its backoff to pass (available_at). Claimed again by a worker like pending.
    RETRY_SCHEDULED = "retry_scheduled"
    # Terminal states below: nobody moves an execution out of them. A manual retry creates a
    # new execution instead, so history stays truthful.
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    MISSED = "missed"  # never ran: misfire policy skip, or overlap policy skip
    CANCELLED = "cancelled"  # an operator cancelled it, or its job was disabled
    DEAD_LETTERED = "dead_lettered"  # abandoned (expired lease) with no attempts left

    def __str__(self) -> str:
        return self.value


S = ExecutionStatus

TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.MISSED, S.CANCELLED, S.DEAD_LETTERED})
CLAIMABLE = frozenset({S.PENDING, S.RETRY_SCHEDULED})
IN_FLIGHT = frozenset({S.CLAIMED, S.RUNNING})
CANCELLABLE = frozenset({S.PENDING, S.RETRY_SCHEDULED, S.CLAIMED})
RETRYABLE = frozenset({S.FAILED, S.TIMED_OUT, S.DEAD_LETTERED, S.CANCELLED})

ALLOWED: dict[ExecutionStatus, frozenset[ExecutionStatus]] = {
    S.PENDING: frozenset({S.CLAIMED, S.CANCELLED}),
    S.RETRY_SCHEDULED: frozenset({S.CLAIMED, S.CANCELLED}),
    S.CLAIMED: frozenset({S.RUNNING, S.PENDING, S.RETRY_SCHEDULED, S.CANCELLED, S.DEAD_LETTERED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.RETRY_SCHEDULED, S.DEAD_LETTERED}),
    **{terminal: frozenset() for terminal in TERMINAL},
}


def can_transition(current: ExecutionStatus | str, target: ExecutionStatus | str) -> bool:
    """True when the state machine allows current -> target."""
    return S(target) in ALLOWED[S(current)]


def sources_of(target: ExecutionStatus) -> tuple[str, ...]:
    """The statuses from which `target` may be reached, for guarded UPDATE ... WHERE status IN."""
    return tuple(sorted(s.value for s, targets in ALLOWED.items() if target in targets))


def is_terminal(status: ExecutionStatus | str) -> bool:
    return S(status) in TERMINAL


class Trigger(str, Enum):
    SCHEDULE = "schedule"
    CATCH_UP = "catch_up"
    MANUAL = "manual"
    RETRY = "retry"


class AttemptStatus(str, Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    ABANDONED = "abandoned"  # the worker vanished; recorded by lease recovery


class OverlapPolicy(str, Enum):
    SKIP = "skip"
    QUEUE = "queue"
    ALLOW = "allow"


class MisfirePolicy(str, Enum):
    COALESCE = "coalesce"
    CATCH_UP = "catch_up"
    SKIP = "skip"


class ScheduleType(str, Enum):
    ONE_TIME = "one_time"
    INTERVAL = "interval"
    CRON = "cron"


class AlertMode(str, Enum):
    WEB = "web"
    LOG_ONLY = "log_only"


class Role(str, Enum):
    ADMIN = "admin"
    OPERATOR = "operator"
    VIEWER = "viewer"


def values(enum_type: type[Enum]) -> tuple[str, ...]:
    return tuple(member.value for member in enum_type)
