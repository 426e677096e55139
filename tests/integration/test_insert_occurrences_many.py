"""Creating many occurrences in one call, on both backends (`app` runs each test on SQLite and
PostgreSQL): more rows than one statement may bind (SQLite: 32,766 parameters, about 1,700 rows
of executions), some of them already there, and each row created exactly once."""

from datetime import timedelta

from sqlalchemy import func, select

from app.database import write_transaction
from app.domain.states import ExecutionStatus as S
from app.extensions import db
from app.models import Execution
from app.store import occurrence_row, store_for
from tests.factories import make_job, utc

T0 = utc(2026, 12, 2, 6, 0)
ROWS = 4_000  # x the 19 columns an occurrence binds: 76,000 parameters, over both databases' limits


def occurrences(job, minutes: range) -> list[dict]:
    return [
        occurrence_row(job, T0 + timedelta(minutes=m), trigger="schedule", status=S.PENDING, now=T0) for m in minutes
    ]


def test_thousands_of_occurrences_are_created_once_each_and_duplicates_skipped(app):
    job = make_job("many")
    store = store_for(db.engine)
    with write_transaction(db.engine) as conn:
        first = store.insert_occurrences(conn, occurrences(job, range(0, ROWS, 2)))
    with write_transaction(db.engine) as conn:
        # Every even minute exists already: only the odd ones are new.
        second = store.insert_occurrences(conn, occurrences(job, range(ROWS)))

    db.session.rollback()  # the session's snapshot began when it loaded the job
    assert len(first) == ROWS // 2 and len(second) == ROWS // 2
    assert {status for _, status in first + second} == {"pending"}
    assert len({i for i, _ in first} | {i for i, _ in second}) == ROWS
    stored = db.session.execute(
        select(func.count(), func.count(func.distinct(Execution.scheduled_for))).where(Execution.job_id == job.id)
    ).one()
    assert tuple(stored) == (ROWS, ROWS)
    odd = db.session.scalars(select(Execution.scheduled_for).where(Execution.id.in_([i for i, _ in second[:50]])))
    assert all(int((at - T0).total_seconds() // 60) % 2 == 1 for at in odd)


def test_no_rows_is_no_statement(app):
    with write_transaction(db.engine) as conn:
        assert store_for(db.engine).insert_occurrences(conn, []) == []
