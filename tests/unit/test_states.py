"""Properties of the execution state machine that the engine relies on (not the table restated)."""

from collections import deque

import pytest

from app.domain.states import (
    ALLOWED,
    CANCELLABLE,
    CLAIMABLE,
    IN_FLIGHT,
    INITIAL,
    QUEUED_CANCELLABLE,
    RECORDABLE,
    RETRYABLE,
    RUNNING_CANCELLABLE,
    TERMINAL,
    can_transition,
    guard_for,
    is_terminal,
    sources_of,
)
from app.domain.states import ExecutionStatus as S

RAN = {S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.DEAD_LETTERED}  # statuses that say a task process ran


def reachable_from(starts) -> set[S]:
    seen, todo = set(starts), deque(starts)
    while todo:
        for target in ALLOWED[todo.popleft()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_every_status_is_in_the_table_and_every_target_is_a_status():
    assert set(ALLOWED) == set(S)
    assert all(set(targets) <= set(S) for targets in ALLOWED.values())


def test_every_live_status_is_reachable_from_creation_and_only_the_legacy_one_is_not():
    assert set(S) - reachable_from(INITIAL) == {S.CLAIMED}


def test_every_status_can_end_no_cycles_trap_work():
    for status in S:
        assert reachable_from([status]) & TERMINAL, status


def test_terminal_means_no_way_out_and_the_named_sets_partition_the_statuses():
    assert all(not ALLOWED[s] for s in TERMINAL) and all(ALLOWED[s] for s in set(S) - TERMINAL)
    assert TERMINAL | CLAIMABLE | IN_FLIGHT == set(S)
    assert not (TERMINAL & CLAIMABLE) and not (TERMINAL & IN_FLIGHT) and not (CLAIMABLE & IN_FLIGHT)
    assert is_terminal("succeeded") and not is_terminal(S.RETRY_SCHEDULED)


def test_a_worker_claims_and_starts_in_one_step_so_nothing_enters_claimed():
    assert CLAIMABLE == {S.PENDING, S.RETRY_SCHEDULED}
    assert sources_of(S.CLAIMED) == frozenset()
    assert can_transition("pending", "running") and can_transition(S.RETRY_SCHEDULED, S.RUNNING)
    # Legacy claimed rows can still be settled by recovery or cancelled, never started.
    assert ALLOWED[S.CLAIMED] == {S.PENDING, S.CANCELLED}


def test_only_a_run_can_produce_a_result():
    for status in RAN:
        assert sources_of(status) == {S.RUNNING}, status
    assert RECORDABLE == {S.RUNNING}


def test_running_work_is_cancelled_only_by_request_and_never_requeued():
    # Running work is cancelled by asking its worker (it kills the task first); one UPDATE may
    # cancel only queued rows, so disabling a job or cancelling queued work never touches it.
    assert can_transition("running", "cancelled")
    assert not can_transition("running", "pending")
    assert QUEUED_CANCELLABLE == CLAIMABLE | {S.CLAIMED}
    assert RUNNING_CANCELLABLE == {S.RUNNING}
    assert CANCELLABLE == QUEUED_CANCELLABLE | RUNNING_CANCELLABLE == sources_of(S.CANCELLED)
    assert CLAIMABLE <= QUEUED_CANCELLABLE  # the turn cancels due rows of disabled jobs


def test_created_rows_start_queued_or_already_missed():
    assert INITIAL == {S.PENDING, S.MISSED}
    assert S.MISSED in TERMINAL and sources_of(S.MISSED) == frozenset()


def test_operator_retries_only_finished_failures():
    assert RETRYABLE <= TERMINAL
    assert S.SUCCEEDED not in RETRYABLE and S.MISSED not in RETRYABLE


def test_guard_for_is_where_every_target_may_be_reached_from():
    assert guard_for(S.SUCCEEDED, S.RETRY_SCHEDULED) == {S.RUNNING}
    assert guard_for(S.RUNNING, S.CANCELLED) == CLAIMABLE
    assert guard_for(S.PENDING) == {S.CLAIMED}


@pytest.mark.parametrize("current", list(S))
def test_can_transition_is_the_table(current):
    for target in S:
        assert can_transition(current.value, target.value) == (target in ALLOWED[current])
        assert (current in sources_of(target)) == can_transition(current, target)
