"""Finding things on the console's lists: the jobs list (search, filters, last run, last outcome,
success rate over 24 h) and the executions list (job by name, trigger, queue, date range).

Every filter is a WHERE on an indexed path so the lists stay within the page budget at a million
executions (`python -m bench console`):
- a job's last outcome is its newest finished execution, found through `(job_id, id)` backwards;
- the success rate counts the runs *created* in the last 24 h, from the first id created in that
  window: a range of `(job_id, id)` per job instead of a scan of a day of `finished_at`;
- on PostgreSQL that index carries status, finished_at and created_at (migration 0017), so both
  are index-only scans: at 10M executions the rows they would read are not in memory;
- the executions date range is on `created_at` (indexed), which is when a run was scheduled or
  requested.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, case, false, func, or_, select

from app.domain.states import TERMINAL, ExecutionStatus, values
from app.extensions import db
from app.models import Execution, Job, Organization, Project, Queue
from app.models.execution import runs_task
from app.services import scoping
from app.services.caller import Caller

NEVER = "never"
# What "last outcome" can be filtered by: each final status, or no finished run yet.
OUTCOMES = tuple(sorted(s.value for s in TERMINAL)) + (NEVER,)
SUCCESS_WINDOW = timedelta(hours=24)
# At most this many jobs match a name typed into the executions list's job filter.
JOB_MATCH_LIMIT = 200


def _like(text: str) -> str:
    """`text` as a LIKE pattern matching it anywhere, with LIKE's own characters taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


@dataclass(frozen=True)
class JobFilters:
    search: str = ""  # in name, task or description, any case
    enabled: bool | None = None
    queue_ids: tuple[int, ...] | None = None  # None: any queue (a name is one queue per project in view)
    task: str = ""
    outcome: str = ""  # one of OUTCOMES, or "" for any
    sort: str = ""  # one of JOB_SORTS, or "" for the id (creation) order
    descending: bool = False


# The columns the jobs list sorts by. Rows without a value (no next run, never finished) come last
# in either direction, and the id breaks ties, so a page boundary never repeats or skips a row.
JOB_SORTS = ("name", "next_run", "last_outcome", "created")


def _job_order(filters: JobFilters) -> list:
    column = {
        "name": Job.name,
        "next_run": Job.next_run_at,
        "last_outcome": _last_finished_status(),
        "created": Job.created_at,
    }.get(filters.sort)
    if column is None:
        return [Job.id.desc() if filters.descending else Job.id]
    direction = column.desc() if filters.descending else column.asc()
    tie = Job.id.desc() if filters.descending else Job.id
    return [column.is_(None), direction, tie]


def _last_finished_status():
    """The status of the job's newest finished execution (NULL when none)."""
    return (
        select(Execution.status)
        .where(Execution.job_id == Job.id, Execution.finished_at.is_not(None))
        .order_by(Execution.id.desc())
        .limit(1)
        .correlate(Job)
        .scalar_subquery()
    )


def jobs_query(filters: JobFilters, caller: Caller | None = None):
    """The jobs matching `filters` in their sort order, oldest first by default (for
    `app.web.pagination.paginate`)."""
    query = select(Job).order_by(*_job_order(filters))
    if filters.search:
        pattern = _like(filters.search)
        query = query.where(
            or_(
                Job.name.ilike(pattern, escape="\\"),
                Job.task.ilike(pattern, escape="\\"),
                Job.description.ilike(pattern, escape="\\"),
            )
        )
    if filters.enabled is not None:
        query = query.where(Job.enabled.is_(filters.enabled))
    if filters.queue_ids is not None:
        query = query.where(Job.queue_id.in_(filters.queue_ids))
    if filters.task:
        query = query.where(Job.task == filters.task)
    if filters.outcome == NEVER:
        query = query.where(_last_finished_status().is_(None))
    elif filters.outcome:
        query = query.where(_last_finished_status() == filters.outcome)
    return scoping.jobs(query, caller)


# What a row of the jobs list shows (templates/jobs/_table.html), read as plain rows: a Job object
# brings its eager-joined queue and every column (config, policies) the list never shows.
def _project_name(queue_id):
    """`ORG/PROJECT` of the queue `queue_id` (a correlated subquery: one row of each table)."""
    return (
        select(Organization.name + "/" + Project.name)
        .select_from(Queue)
        .join(Project, Project.id == Queue.project_id)
        .join(Organization, Organization.id == Project.organization_id)
        .where(Queue.id == queue_id)
        .scalar_subquery()
    )


JOB_LIST_COLUMNS = (
    Job.id,
    Job.name,
    Job.task,
    Job.schedule_type,
    Job.schedule,
    Job.timezone,
    Job.enabled,
    Job.disabled_reason,
    Job.next_run_at,
    Job.created_at,
    _project_name(Job.queue_id).label("project"),
)


def job_list_query(filters: JobFilters, caller: Caller | None = None):
    """`jobs_query` as rows of JOB_LIST_COLUMNS, for the jobs list."""
    return jobs_query(filters, caller).with_only_columns(*JOB_LIST_COLUMNS)


@dataclass(frozen=True)
class JobRow:
    last_run_at: datetime | None  # when its newest finished execution finished
    last_outcome: str | None  # that execution's status
    last_execution_id: int | None
    finished_24h: int  # runs created in the last 24 h that have finished
    succeeded_24h: int

    @property
    def success_rate(self) -> float | None:
        return self.succeeded_24h / self.finished_24h if self.finished_24h else None


def job_rows(jobs: list, now: datetime) -> dict[int, JobRow]:
    """Last run, last outcome and the 24 h success rate of each job on a page (three queries)."""
    ids = [job.id for job in jobs]
    if not ids:
        return {}
    newest = (
        select(func.max(Execution.id))
        .where(Execution.job_id == Job.id, Execution.finished_at.is_not(None))
        .correlate(Job)
        .scalar_subquery()
    )
    last = {
        job_id: (execution_id, status, finished)
        for job_id, execution_id, status, finished in db.session.execute(
            select(Job.id, Execution.id, Execution.status, Execution.finished_at)
            .select_from(Job)
            .join(Execution, Execution.id == newest)
            .where(Job.id.in_(ids))
        )
    }
    window_start = db.session.scalar(
        select(Execution.id).where(Execution.created_at >= now - SUCCESS_WINDOW).order_by(Execution.created_at).limit(1)
    )
    counts: dict[int, tuple[int, int]] = {}
    if window_start is not None:
        succeeded = func.count(case((Execution.status == ExecutionStatus.SUCCEEDED.value, 1)))
        for job_id, finished, ok in db.session.execute(
            select(Execution.job_id, func.count(), succeeded)
            .where(
                Execution.job_id.in_(ids),
                Execution.id >= window_start,
                Execution.created_at >= now - SUCCESS_WINDOW,
                Execution.finished_at.is_not(None),
            )
            .group_by(Execution.job_id)
        ):
            counts[job_id] = (finished, ok)
    rows = {}
    for job_id in ids:
        execution_id, status, finished = last.get(job_id, (None, None, None))
        total, ok = counts.get(job_id, (0, 0))
        rows[job_id] = JobRow(finished, status, execution_id, total, ok)
    return rows


@dataclass(frozen=True)
class ExecutionFilters:
    status: str | None = None
    job_ids: tuple[int, ...] | None = None  # None: any job
    queue_ids: tuple[int, ...] | None = None  # None: any queue
    trigger: str | None = None
    task: str | None = None  # the task it runs (a one-off run's, a callback's or its job's)
    created_from: datetime | None = None
    created_to: datetime | None = None  # exclusive


def jobs_named(text: str, caller: Caller | None = None) -> list[Job]:
    """Jobs whose name is `text` (any case), else those whose name contains it, oldest first."""
    exact = list(db.session.scalars(scoping.jobs(select(Job).where(func.lower(Job.name) == func.lower(text)), caller)))
    if exact:
        return exact
    query = scoping.jobs(select(Job).where(Job.name.ilike(_like(text), escape="\\")), caller)
    return list(db.session.scalars(query.order_by(Job.id).limit(JOB_MATCH_LIMIT)))


# What a row of the executions list shows (templates/executions/_table.html), read as plain rows:
# hydrating ORM objects with their eager-joined job and queue cost more CPU than the query.
_JOB_NAME = select(Job.name).where(Job.id == Execution.job_id).correlate(Execution).scalar_subquery()
LIST_COLUMNS = (
    Execution.id,
    Execution.job_id,
    _JOB_NAME.label("job_name"),  # None for a one-off run (shown as "one-off")
    Execution.task,
    Execution.status,
    Execution.reason,
    Execution.available_at,
    Execution.trigger,
    Execution.parent_id,
    Execution.batch_id,
    Execution.scheduled_for,
    Execution.started_at,
    Execution.finished_at,
    Execution.attempts,
    Execution.max_attempts,
    _project_name(Execution.queue_id).label("project"),
)


def executions_query(filters: ExecutionFilters, caller: Caller | None = None):
    """The executions matching `filters`, newest first, as rows of LIST_COLUMNS (the job's name
    is a subquery, so the count and the page's keys in `paginate` never join jobs)."""
    query = select(*LIST_COLUMNS).order_by(Execution.id.desc())
    if filters.status:
        query = query.where(Execution.status == filters.status)
    if filters.job_ids is not None:
        query = query.where(Execution.job_id.in_(filters.job_ids))
    if filters.queue_ids is not None:
        query = query.where(Execution.queue_id.in_(filters.queue_ids))
    if filters.trigger:
        query = query.where(Execution.trigger == filters.trigger)
    if filters.task:
        query = query.where(runs_task(filters.task))
    window = []
    if filters.created_from is not None:
        window.append(Execution.created_at >= filters.created_from)
        low = _first_id_created_since(filters.created_from - ID_CLOCK_MARGIN)
        window.append(Execution.id >= low if low is not None else false())
    if filters.created_to is not None:
        window.append(Execution.created_at < filters.created_to)
        high = _first_id_created_since(filters.created_to + ID_CLOCK_MARGIN)
        if high is not None:
            window.append(Execution.id < high)
    if window:
        query = query.where(and_(*window))
    return scoping.executions(query, caller)


# Ids grow with creation time, but rows inserted by different processes can disagree by the time
# a transaction takes; the id bounds of a date range are taken this much wider, and created_at
# still decides exactly.
ID_CLOCK_MARGIN = timedelta(minutes=5)


def _first_id_created_since(moment: datetime) -> int | None:
    """The id of the first execution created at or after `moment` (ix_executions_created), or None.

    A date range on `created_at` alone makes the newest-first list walk the primary key from the
    newest row down to the range (days of rows at a million); bounded by ids, it reads the range."""
    return db.session.scalar(
        select(Execution.id).where(Execution.created_at >= moment).order_by(Execution.created_at).limit(1)
    )


def queue_names(caller: Caller | None = None) -> list[str]:
    """The queue names a filter may offer."""
    return sorted(set(db.session.scalars(scoping.queues(select(Queue.name), caller))))


def statuses() -> tuple[str, ...]:
    return values(ExecutionStatus)
