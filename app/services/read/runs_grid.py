"""The runs grid: jobs as rows, time as columns, each cell coloured by the fate of the occurrences
in it (succeeded, failed, missed, coalesced, running, upcoming), for the last N hours and the next
hour. What Airflow's and Dagster's operators look at first.

Time is cut into equal slots (SLOTS_PAST over the past window, SLOTS_AHEAD over the next hour); a
cell holds every occurrence of its job whose instant falls in its slot (an execution's
`scheduled_for`, a coalesced backlog's event time, an upcoming fire time) and shows the one that
needs attention most (`FATE_ORDER`), with the counts in its title. Reads: the page's jobs'
executions created since the window began (through `(job_id, id)` from the window's first id),
their misfire events, and each enabled job's next fire times.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select

from app.extensions import db
from app.models import Event, Execution, Job
from app.scheduling import ScheduleError, preview

SLOTS_PAST = 36
SLOTS_AHEAD = 6
HOURS_CHOICES = (1, 3, 6, 12, 24)
DEFAULT_HOURS = 6
# Which fate a cell shows when several occurrences share it: what needs attention first.
FATE_ORDER = ("failed", "running", "missed", "coalesced", "succeeded", "cancelled", "upcoming")
_FATE_OF_STATUS = {
    "succeeded": "succeeded",
    "failed": "failed",
    "timed_out": "failed",
    "dead_lettered": "failed",
    "missed": "missed",
    "cancelled": "cancelled",
    "expired": "missed",
    "pending": "running",
    "claimed": "running",
    "running": "running",
    "retry_scheduled": "running",
}


@dataclass
class Cell:
    start: datetime
    end: datetime
    fates: Counter = field(default_factory=Counter)
    execution_ids: list[int] = field(default_factory=list)

    @property
    def fate(self) -> str | None:
        return next((f for f in FATE_ORDER if self.fates[f]), None)

    @property
    def list_range(self) -> tuple[str, str]:
        """The slot as the executions list's From / Until filters (whole minutes, covering it)."""
        return self.start.strftime("%Y-%m-%dT%H:%M"), (self.end + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")

    @property
    def title(self) -> str:
        counts = ", ".join(
            f"{n} {fate}" for fate, n in sorted(self.fates.items(), key=lambda x: FATE_ORDER.index(x[0]))
        )
        return f"{self.start:%H:%M}-{self.end:%H:%M} UTC: {counts or 'nothing'}"


@dataclass
class Row:
    job: Job
    cells: list[Cell]


@dataclass
class Grid:
    start: datetime
    now: datetime
    end: datetime
    slot: timedelta
    columns: list[datetime]  # each slot's start
    rows: list[Row]
    hours: int


def build(jobs: list[Job], *, now: datetime, hours: int = DEFAULT_HOURS) -> Grid:
    """The grid of `jobs` over the `hours` before `now` and the hour after it."""
    slot_past = timedelta(hours=hours) / SLOTS_PAST
    slot_ahead = timedelta(hours=1) / SLOTS_AHEAD
    start, end = now - timedelta(hours=hours), now + timedelta(hours=1)
    columns = [start + slot_past * i for i in range(SLOTS_PAST)] + [now + slot_ahead * i for i in range(SLOTS_AHEAD)]
    bounds = columns + [end]
    rows = {job.id: Row(job, [Cell(bounds[i], bounds[i + 1]) for i in range(len(columns))]) for job in jobs}

    def place(job_id: int, instant: datetime, fate: str, execution_id: int | None = None) -> None:
        if not (start <= instant < end) or job_id not in rows:
            return
        if instant < now:
            index = min(int((instant - start) / slot_past), SLOTS_PAST - 1)
        else:
            index = SLOTS_PAST + min(int((instant - now) / slot_ahead), SLOTS_AHEAD - 1)
        cell = rows[job_id].cells[index]
        cell.fates[fate] += 1
        if execution_id is not None:
            cell.execution_ids.append(execution_id)

    ids = list(rows)
    if ids:
        first_id = db.session.scalar(
            select(Execution.id)
            .where(Execution.created_at >= start - timedelta(hours=1))
            .order_by(Execution.created_at, Execution.id)  # of rows created at one instant, the first
            .limit(1)
        )
        if first_id is not None:
            for execution_id, job_id, scheduled_for, status in db.session.execute(
                select(Execution.id, Execution.job_id, Execution.scheduled_for, Execution.status).where(
                    Execution.job_id.in_(ids),
                    Execution.id >= first_id,
                    Execution.scheduled_for >= start,
                    # A workflow run is one cell (its occurrence); its steps are on its own page.
                    Execution.workflow_run_id.is_(None),
                )
            ):
                place(job_id, scheduled_for, _FATE_OF_STATUS.get(status, "running"), execution_id)
        for job_id, created_at in db.session.execute(
            select(Event.job_id, Event.created_at).where(
                Event.job_id.in_(ids), Event.type == "misfire_coalesced", Event.created_at >= start
            )
        ):
            place(job_id, created_at, "coalesced")
    from app.services.use_cases.jobs import schedule_of

    for job in jobs:
        if not job.enabled or job.next_run_at is None:
            continue
        try:
            upcoming = preview(schedule_of(job), now, 60)
        except (ScheduleError, ValueError):
            continue
        for item in upcoming:
            if item.utc >= end:
                break
            place(job.id, item.utc, "upcoming")
    return Grid(start, now, end, slot_past, columns, list(rows.values()), hours)
