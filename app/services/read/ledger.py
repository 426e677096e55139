"""The ledger check behind `flask verify`: is every occurrence accounted for, exactly once?

For each job it walks the schedule's occurrences over the span it can vouch for and matches
them against executions and misfire events:
- every occurrence has exactly one scheduled execution, or falls in a recorded coalesced or
  skipped span, or in a span when the job was disabled (a job created disabled is disabled from
  its creation until it is first enabled);
- no in-flight execution holds a lease that expired more than `lease_slack` ago;
- no idempotency key or (job, scheduled_for) occurrence is used twice;
- attempts never exceed max_attempts, and Attempt rows match the attempt count;
- every exhausted (failed/timed_out at max attempts) or dead_lettered execution has a DeadLetter.
The span starts at the job's creation, its last schedule change, or (after retention pruned its
history) its oldest retained occurrence, and ends at its next_run_at.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select

from app.extensions import db
from app.models import Attempt, DeadLetter, Event, Execution, Job, WorkflowRun
from app.scheduling import parse_schedule

SCHEDULE_FIELDS = {"schedule", "schedule_type", "timezone"}
MAX_OCCURRENCES_PER_JOB = 200_000


@dataclass
class LedgerReport:
    jobs: int = 0
    occurrences: int = 0
    executions: int = 0
    coalesced_or_skipped: int = 0
    excused_disabled: int = 0
    in_flight: int = 0
    expired: int = 0  # ended `expired` (queued TTL passed): accounted for, never ran
    violations: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "jobs": self.jobs,
            "occurrences": self.occurrences,
            "executions": self.executions,
            "coalesced_or_skipped": self.coalesced_or_skipped,
            "excused_disabled": self.excused_disabled,
            "in_flight": self.in_flight,
            "expired": self.expired,
            "violations": self.violations,
            "warnings": self.warnings,
        }


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def verify(*, now: datetime, lease_slack: timedelta = timedelta(seconds=5)) -> LedgerReport:
    report = LedgerReport()
    if db.session.get_bind().dialect.name == "postgresql":
        # Every read below sees one snapshot: with workers running, a run that starts between
        # the count of Attempt rows and the read of executions would otherwise look like a
        # run without its Attempt.
        db.session.rollback()
        db.session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        try:
            return _verify(report, now, lease_slack)
        finally:
            db.session.rollback()  # the snapshot ends here; the session goes on as before
    return _verify(report, now, lease_slack)


def _verify(report: LedgerReport, now: datetime, lease_slack: timedelta) -> LedgerReport:
    _check_rows(report, now, lease_slack)
    events_by_job: dict[int, list[Event]] = defaultdict(list)
    pruned_jobs: set[int] = set()
    for event in db.session.scalars(
        select(Event)
        .where(
            Event.type.in_(
                [
                    "job_created",
                    "misfire_coalesced",
                    "misfire_skipped",
                    "job_disabled",
                    "job_enabled",
                    "job_updated",
                    "history_pruned",
                    "run_limit_reached",
                ]
            )
        )
        .order_by(Event.id)
    ):
        if event.type == "history_pruned":
            pruned_jobs |= {int(job_id) for job_id in event.payload.get("by_job", {}) if job_id.isdigit()}
            pruned_jobs |= {int(job_id) for job_id in event.payload.get("events_by_job", {}) if job_id.isdigit()}
        elif event.job_id is not None:
            events_by_job[event.job_id].append(event)
    for job in db.session.scalars(select(Job).order_by(Job.id)):
        report.jobs += 1
        _check_job(report, job, events_by_job[job.id], job.id in pruned_jobs, now)
    return report


def _check_rows(report: LedgerReport, now: datetime, lease_slack: timedelta) -> None:
    e = Execution
    report.executions = db.session.scalar(select(func.count()).select_from(e)) or 0
    report.expired = db.session.scalar(select(func.count()).select_from(e).where(e.status == "expired")) or 0
    for key, count in db.session.execute(
        select(e.idempotency_key, func.count()).group_by(e.idempotency_key).having(func.count() > 1)
    ):
        report.violations.append(f"idempotency key {key} is used by {count} executions")
    for job_id, at, count in db.session.execute(
        select(e.job_id, e.scheduled_for, func.count())
        .where(e.trigger.in_(["schedule", "catch_up"]))
        .group_by(e.job_id, e.scheduled_for)
        .having(func.count() > 1)
    ):
        report.violations.append(f"job {job_id} occurrence {at.isoformat()} has {count} executions")
    for row in db.session.execute(
        select(e.id, e.status, e.lease_expires_at).where(
            e.status.in_(["claimed", "running"]),
            # A running workflow run holds no lease (its steps do): no worker runs it.
            ~select(WorkflowRun.id).where(WorkflowRun.id == e.id).exists(),
        )
    ):
        report.in_flight += 1
        if row.lease_expires_at is None or row.lease_expires_at < now - lease_slack:
            report.violations.append(
                f"execution {row.id} is {row.status} with a lease that expired at "
                f"{row.lease_expires_at}; recovery has not settled it"
            )
    for row in db.session.execute(select(e.id, e.attempts, e.max_attempts).where(e.attempts > e.max_attempts)):
        report.violations.append(f"execution {row.id} made {row.attempts} attempts, more than {row.max_attempts}")
    attempt_counts = dict(
        db.session.execute(select(Attempt.execution_id, func.count()).group_by(Attempt.execution_id)).all()
    )
    for row in db.session.execute(select(e.id, e.attempts)):
        if attempt_counts.get(row.id, 0) != row.attempts:
            report.violations.append(
                f"execution {row.id} counts {row.attempts} attempts but has "
                f"{attempt_counts.get(row.id, 0)} Attempt rows"
            )
    dead = set(db.session.scalars(select(DeadLetter.execution_id)))
    for row in db.session.execute(
        select(e.id, e.status).where(
            (e.status == "dead_lettered") | (e.status.in_(["failed", "timed_out"]) & (e.attempts >= e.max_attempts))
        )
    ):
        if row.id not in dead:
            report.violations.append(f"execution {row.id} is {row.status} with no attempts left but has no dead letter")


def _check_job(report: LedgerReport, job: Job, events: list[Event], pruned: bool, now: datetime) -> None:
    schedule = parse_schedule(job.schedule_type, job.schedule, job.timezone)
    rows = (
        db.session.execute(
            select(Execution.scheduled_for).where(
                Execution.job_id == job.id, Execution.trigger.in_(["schedule", "catch_up"])
            )
        )
        .scalars()
        .all()
    )
    have = Counter(rows)
    start = job.created_at
    accounted: list[tuple[datetime, datetime]] = []  # half-open spans covered by events
    disabled: list[tuple[datetime, datetime]] = []
    disabled_since: datetime | None = None
    state_seen = False  # an enable or disable event has been read
    for event in events:
        payload = event.payload or {}
        if event.type == "job_created":
            if payload.get("enabled") is False:
                disabled_since = job.created_at
        elif event.type == "job_updated" and SCHEDULE_FIELDS & set(payload.get("fields", [])):
            start = max(start, event.created_at)
        elif event.type == "misfire_coalesced":
            accounted.append((_parse(payload["first"]), _parse(payload["into"])))
        elif event.type == "misfire_skipped" and payload.get("from"):
            accounted.append((_parse(payload["from"]), _parse(payload["until"])))
        elif event.type in ("job_disabled", "run_limit_reached"):
            # A run limit reached (max_runs, end_at) finishes the job from the first occurrence it
            # stopped; the job is disabled (job_disabled) once its last runs are done.
            since = min(
                filter(None, [event.created_at, _parse(payload.get("next_run_at") or payload.get("stopped_at"))])
            )
            disabled_since = since if disabled_since is None else min(disabled_since, since)
            state_seen = True
        elif event.type == "job_enabled":
            if disabled_since is None and not state_seen:
                # Enabled with no disable before it: the job was created disabled (by a release
                # whose job_created event did not say so), disabled from its creation.
                disabled_since = job.created_at
            if disabled_since is not None:
                disabled.append((disabled_since, event.created_at))
            disabled_since = None
            state_seen = True
    if disabled_since is not None:
        disabled.append((disabled_since, now))
    if job.start_at is not None:  # nothing is due before start_at
        start = max(start, job.start_at - timedelta(microseconds=1))
    if pruned and rows:
        start = max(start, min(rows) - timedelta(microseconds=1))
    # The span ends where the scheduler's cursor is; a job with none (a fired one_time) ends at now.
    end = job.next_run_at if job.next_run_at is not None else now
    end = min(end, now)
    occurrence = schedule.next_after(start)
    walked = 0
    while occurrence is not None and occurrence < end:
        walked += 1
        if walked > MAX_OCCURRENCES_PER_JOB:
            report.warnings.append(f"job {job.id}: more than {MAX_OCCURRENCES_PER_JOB} occurrences; checked the first")
            break
        report.occurrences += 1
        if have.get(occurrence, 0) >= 1:  # more than one is reported by the duplicate check
            pass
        elif any(a <= occurrence < b for a, b in accounted):
            report.coalesced_or_skipped += 1
        elif any(a <= occurrence <= b for a, b in disabled):
            report.excused_disabled += 1
        else:
            report.violations.append(
                f"job {job.id} ({job.name}) occurrence {occurrence.isoformat()} was due "
                "but has no execution and no misfire event: lost"
            )
        occurrence = schedule.next_after(occurrence)
