"""The execution state machine table."""

from app.domain.states import ALLOWED, TERMINAL, can_transition, sources_of
from app.domain.states import ExecutionStatus as S


def test_terminal_states_have_no_way_out():
    for status in TERMINAL:
        assert ALLOWED[status] == frozenset()


def test_every_status_is_in_the_table():
    assert set(ALLOWED) == set(S)


def test_running_can_only_end_or_be_recovered():
    assert ALLOWED[S.RUNNING] == {S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.RETRY_SCHEDULED, S.DEAD_LETTERED}
    assert not can_transition("running", "cancelled")
    assert not can_transition("running", "pending")


def test_sources_of_cancelled_are_the_queued_states():
    assert sources_of(S.CANCELLED) == ("claimed", "pending", "retry_scheduled")
