"""The state machine governs the SQL: every store operation, run on both databases, moves rows
only in ways `ALLOWED` permits, creates rows only in INITIAL statuses and deletes only terminal
ones. Checked from the outside: a snapshot of the executions table before and after each step."""

from sqlalchemy import Integer, bindparam, select, text

from app.database import write_transaction
from app.domain.policies import lease_duration
from app.domain.states import INITIAL, TERMINAL, can_transition, is_forecast
from app.domain.states import ExecutionStatus as S
from app.extensions import db
from app.models import Execution
from app.sql.turn_postgresql import lease_expires_at_sql
from tests.helpers.store_scenario import SCENARIO, T0, new_run


def statuses() -> dict[int, str]:
    db.session.rollback()
    found = dict(db.session.execute(select(Execution.id, Execution.status)).all())
    db.session.rollback()
    return found


def forecasts() -> set[int]:
    """The rows written ahead of their time and not started (the only non-terminal rows the
    scheduler may delete)."""
    db.session.rollback()
    rows = db.session.execute(
        select(
            Execution.id,
            Execution.status,
            Execution.trigger,
            Execution.attempts,
            Execution.created_at,
            Execution.scheduled_for,
        )
    ).all()
    db.session.rollback()
    return {
        row.id
        for row in rows
        if is_forecast(
            row.status,
            trigger=row.trigger,
            attempts=row.attempts,
            created_at=row.created_at,
            scheduled_for=row.scheduled_for,
        )
    }


def test_every_transition_the_store_makes_is_allowed_by_the_table(app):
    run = new_run()
    seen: set[tuple[str, str]] = set()
    deleted_forecasts = 0
    for name, action, _, is_store_operation in SCENARIO:
        before, written_ahead = statuses(), forecasts()
        action(run)
        after = statuses()
        if not is_store_operation:
            continue
        for execution_id in after.keys() - before.keys():
            assert S(after[execution_id]) in INITIAL, f"{name}: created {after[execution_id]}"
        for execution_id in before.keys() - after.keys():
            deletable = S(before[execution_id]) in TERMINAL or execution_id in written_ahead
            assert deletable, f"{name}: deleted a {before[execution_id]} row"
            deleted_forecasts += execution_id in written_ahead
        for execution_id in before.keys() & after.keys():
            old, new = before[execution_id], after[execution_id]
            if old != new:
                assert can_transition(old, new), f"{name}: {old} -> {new} is not in ALLOWED"
                seen.add((old, new))
    # The scenario really exercises the moves the engine makes (so the check above means something).
    assert seen == {
        ("pending", "running"),
        ("retry_scheduled", "running"),
        ("pending", "cancelled"),
        ("retry_scheduled", "cancelled"),
        ("running", "succeeded"),
        ("running", "failed"),
        ("running", "timed_out"),
        ("running", "retry_scheduled"),
        ("running", "dead_lettered"),
        ("running", "cancelled"),
        ("claimed", "pending"),
        ("pending", "expired"),
    }
    assert deleted_forecasts == 2  # one withdrawn before its time, one replaced by its missed row


def test_a_guard_refuses_a_move_the_table_forbids(app):
    run = new_run()
    for _, action, _, _ in SCENARIO[:14]:  # up to the turn that starts q1
        action(run)
    store = run.store
    with write_transaction(db.engine) as conn:
        # q1 is running: an operator cancel is not an allowed move, and the guard changes nothing.
        assert store.cancel_execution(conn, run.ids["q1"], now=T0, reason="no") is False
        # off1 is cancelled (terminal): nothing may record an outcome on it.
        assert store.cancel_execution(conn, run.ids["off1"], now=T0, reason="no") is False
    assert statuses()[run.ids["q1"]] == "running"


def test_the_postgres_lease_expression_agrees_with_lease_duration(pg_app):
    # None: a job with no timeout, whose lease is LEASE_SECONDS alone (its worker renews it).
    cases = [(0, 60, 30), (30, 60, 30), (45, 60, 30), (600, 120, 30), (86_400, 60, 0), (5, 1, 1), (None, 60, 30)]
    with db.engine.connect() as conn:
        for timeout, lease, buffer in cases:
            expression = lease_expires_at_sql(
                now="CAST(:now AS timestamptz)", timeout=":timeout", lease_seconds=":lease", buffer_seconds=":buffer"
            )
            got = conn.execute(
                text(f"SELECT {expression}").bindparams(bindparam("timeout", type_=Integer)),
                {"now": T0, "timeout": timeout, "lease": lease, "buffer": buffer},
            ).scalar_one()
            assert got == T0 + lease_duration(timeout, lease, buffer), (timeout, lease, buffer)
            assert got - T0 >= lease_duration(timeout, 0, 0)  # the lease outlives the hard timeout
