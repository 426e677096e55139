"""What a list row of an execution shows beyond its own columns.

`executions.started_at` is the start of the latest attempt, so a retried execution's row used to
show only its last try. A row shows the first attempt's start and the total time from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from app.extensions import db
from app.models import Attempt, Execution


@dataclass(frozen=True)
class RowTimes:
    first_started_at: datetime | None
    total_seconds: float | None  # first start to finish (or None while it runs)


def row_times(executions: list[Execution]) -> dict[int, RowTimes]:
    """First start and total time of each execution, with one query for the retried ones."""
    retried = [e.id for e in executions if (e.attempts or 0) > 1]
    first: dict[int, datetime] = {}
    if retried:
        rows = db.session.execute(
            select(Attempt.execution_id, Attempt.started_at).where(
                Attempt.execution_id.in_(retried), Attempt.number == 1
            )
        )
        first = {execution_id: started for execution_id, started in rows}
    times = {}
    for e in executions:
        start = first.get(e.id, e.started_at)
        total = (e.finished_at - start).total_seconds() if start and e.finished_at else None
        times[e.id] = RowTimes(first_started_at=start, total_seconds=total)
    return times
