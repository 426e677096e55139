"""The scheduler: decides what is due and writes durable executions for it.

`Scheduler.tick(now)` is one pass and what tests call; `run_forever()` is a thin loop around it
that sleeps until the next tick is needed (capped by the tick interval) and wakes early when a
job changes (PostgreSQL NOTIFY). Several schedulers may run at once: each tick locks the due
jobs it works on with SKIP LOCKED, and the unique occurrence key makes a duplicate row
impossible even if two schedulers ever considered the same occurrence.

With a lead time (SCHEDULER_LEAD_MS, app/domain/lead_time.py) a tick also writes the occurrences
of on-time jobs falling due within the lead, so the tick is off the path between an occurrence's
time and its start: workers sleep until the earliest claimable time and claim it then. A row
written ahead is claimable at its available_at, never before; until its time it is withdrawn
when its job changes (`withdraw_ahead`), and an overlap-skip job busy at its time gets the
`missed` row instead (`_confirm_ahead`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, ClassVar

from flask import Flask
from sqlalchemy import Row, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from app import cache, metrics, metrics_exposition
from app.clock import iso_z, utcnow
from app.database import write_transaction
from app.domain import lead_time, run_limits
from app.domain.jitter import jitter_offset
from app.domain.policies import plan_occurrences, starving_since
from app.domain.run_limits import RunLimits
from app.domain.states import ExecutionStatus as S
from app.extensions import db
from app.scheduling import Schedule, parse_schedule
from app.services import audit_trail
from app.services.engine import (
    alerting,
    callbacks,
    deliveries,
    heartbeats,
    recovery,
    retention,
    wakeups,
    workflows,
)
from app.services.events import insert_event
from app.sql import workflows as workflow_statements
from app.sql.rows import JobColumns
from app.store import occurrence_row, store_for

log = logging.getLogger("cronwell.scheduler")

Clock = Callable[[], datetime]
UPKEEP_EVERY = timedelta(seconds=1)
INSUFFICIENT_PRIVILEGE = "42501"  # SQLSTATE of a refused ANALYZE (the role does not own the table)


@lru_cache(maxsize=4096)
def _parsed_schedule(schedule_type: str, schedule_json: str, tz: str) -> Schedule:
    return parse_schedule(schedule_type, json.loads(schedule_json), tz)


def cached_schedule(schedule_type: str, schedule: dict[str, Any], tz: str) -> Schedule:
    """Parsing a cron expression is not free; ticks see the same few thousand schedules again."""
    return _parsed_schedule(schedule_type, json.dumps(schedule, sort_keys=True), tz)


OVERLAP_REASON = "overlap: an earlier run of this job was still active"


def _record_overlap_skips(conn: Connection, rows: list[dict[str, Any]], created: set[int], now: datetime) -> None:
    """An `overlap_skipped` event for each occurrence just recorded as missed for overlap, naming
    its job and its missed execution (found by key; only rows this tick `created` get one)."""
    keys = [row["idempotency_key"] for row in rows if row.get("reason") == OVERLAP_REASON]
    if not keys or not created:
        return
    from app.models import Execution

    table = Execution.__table__
    found = conn.execute(
        select(table.c.id, table.c.job_id, table.c.scheduled_for).where(table.c.idempotency_key.in_(keys))
    ).all()
    for row in found:
        if row.id not in created:
            continue
        insert_event(
            conn,
            "overlap_skipped",
            now=now,
            job_id=row.job_id,
            execution_id=row.id,
            scheduled_for=_iso(row.scheduled_for),
            reason=OVERLAP_REASON,
        )


@dataclass
class TickReport:
    due: int = 0
    created: int = 0
    missed: int = 0
    coalesced: int = 0
    recovered: int = 0
    pruned: int = 0
    aged: int = 0  # waiting executions raised to the top priority (priority draining)
    expired: int = 0  # waiting executions past their job's queued TTL, ended `expired`
    duration_ms: float = 0.0
    job_ids: set[int] = field(default_factory=set)
    EVENT: ClassVar[str] = "tick"  # logged as event scheduler_tick

    def fields(self) -> dict[str, int | float]:
        """The tick's figures, as logged (extra=) and as printed by line()."""
        return {
            "due": self.due,
            "created": self.created,
            "missed": self.missed,
            "coalesced": self.coalesced,
            "recovered": self.recovered,
            "pruned": self.pruned,
            "aged": self.aged,
            "expired": self.expired,
            "ms": round(self.duration_ms, 1),
        }

    def line(self) -> str:
        return "tick " + " ".join(f"{key}={value}" for key, value in self.fields().items())


class Scheduler:
    def __init__(
        self, app: Flask, *, scheduler_id: str | None = None, clock: Clock = utcnow, batch_size: int = 500
    ) -> None:
        self.app = app
        self.id = scheduler_id or heartbeats.default_process_id("scheduler")
        self.clock = clock
        self.batch_size = batch_size
        self.cap = app.config["MISFIRE_CATCH_UP_CAP"]
        self.lead = timedelta(milliseconds=app.config.get("SCHEDULER_LEAD_MS", 0))
        # Overlap-skip rows this scheduler wrote ahead, checked at their time: id -> scheduled_for.
        self._skip_ahead: dict[int, datetime] = {}
        self._skip_ahead_loaded = False
        self._deferred: datetime | None = None  # earliest job time that could not be written ahead
        self._again = False  # a job is still inside the horizon after the last tick
        self._full = False  # the last batch was full: more jobs may be due
        self._horizon = clock()  # the last tick's now + lead
        self._refresh_statistics = True  # False once ANALYZE was refused (no privilege)
        self.started_at = clock()
        self.ticks = 0
        self._last_upkeep: datetime | None = None
        self._last_housekeeping: datetime | None = None
        self._last_retention: datetime | None = None
        self._last_aging: datetime | None = None
        self._last_alerting: datetime | None = None
        # Nothing waited or ran at the last sleep's read; with LISTEN working the loop then sleeps
        # up to SCHEDULER_IDLE_TICK_SECONDS (`idle_tick_cap`). `_idle_upkept`: an upkeep has run
        # since that read found nothing, so the next idle ticks skip the upkeep that acts on
        # runs (recovery, queued TTLs and finished jobs, priority aging, workflows), once the
        # upkeep's heartbeat has read again that nothing waits or runs (`_heartbeat`). One upkeep
        # runs after the last activity: a run that ended after the previous upkeep still gets
        # its job finished.
        self.idle = False
        self._idle_upkept = False

    @property
    def engine(self) -> Engine:
        return db.engine

    # --- one pass ---------------------------------------------------------------------------

    def tick(self, now: datetime | None = None) -> TickReport:
        """Fire due jobs; at most once a second also heartbeat, recover expired leases and do
        periodic housekeeping (see _upkeep_due)."""
        started = time.perf_counter()
        now = now or self.clock()
        report = TickReport()
        upkeep = self._upkeep_due(now)
        if upkeep:
            self._heartbeat(now)
        self._deferred, self._again, self._horizon = None, False, now + self.lead
        while True:
            moved = self.schedule_due_jobs(now, report)
            if not self._full or not moved:
                break  # a full batch of jobs left waiting for their time cannot move on this tick
        if report.created:
            self._refresh_planner_statistics(report.created)
        self._confirm_ahead(now, report)
        if upkeep:
            quiet = self.idle and self._idle_upkept
            if not quiet:
                recovered = recovery.recover_expired_leases(self.engine, now=now)
                metrics.observe_recovery(recovered)
                report.recovered = recovered.total
                report.job_ids |= recovered.job_ids or set()
            self._housekeeping(now, report, quiet=quiet)
            if not quiet:
                self._expire_and_finish(now, report)
                self._advance_workflows(now, report)
            self._idle_upkept = self.idle
        if report.job_ids:
            cache.get_cache().delete(cache.keys_for_jobs(report.job_ids))
        metrics_exposition.refresh_database_gauges(self.engine, now)
        self.ticks += 1
        report.duration_ms = (time.perf_counter() - started) * 1000
        metrics.observe_tick(report)
        return report

    def schedule_due_jobs(self, now: datetime, report: TickReport) -> int:
        """Lock one batch of due jobs (and, with a lead time, of jobs falling due within it) and
        create their occurrences; returns how many jobs moved on (0 ends the tick's loop).

        Statements are per batch, not per job: one overlap query, multi-row inserts, and one
        executemany for the new next_run_at values.
        """
        horizon = now + self.lead
        with write_transaction(self.engine) as conn:
            store = store_for(conn)
            due = store.lock_due_jobs(conn, now=horizon, limit=self.batch_size)
            self._full = len(due) >= self.batch_size
            if not due:
                return 0
            # Jobs whose time has come are planned as always; the others fall due within the lead.
            due_now = [j for j in due if j.next_run_at <= now]
            ahead = [j for j in due if j.next_run_at > now]
            busy = store.jobs_with_active_runs(conn, [j.id for j in due_now if j.overlap_policy == "skip"], now)
            waiting = store.jobs_with_work(conn, [j.id for j in ahead if j.overlap_policy == "skip"])
            rows: list[dict[str, Any]] = []
            next_runs: list[tuple[int, datetime | None]] = []
            runs_added: dict[int, int] = {}
            limited: dict[int, str] = {}  # jobs that reached a run limit this tick: the reason
            skip_ahead: list[int] = []
            for job in due_now:
                job_rows, next_run_at = self._plan_job(conn, job, now, job.id in busy, report)
                job_rows, next_run_at = self._bound_by_limits(conn, job, job_rows, next_run_at, now, limited)
                rows += job_rows
                next_runs.append((job.id, next_run_at))
                runs_added[job.id] = sum(1 for row in job_rows if row["status"] == S.PENDING.value)
                if next_run_at is not None and now < next_run_at <= horizon:
                    # Its next occurrence already falls inside the lead: the next tick writes it
                    # ahead or defers it to its time (it was not among this batch's `ahead`).
                    self._again = True
            for job in ahead:
                skip = job.overlap_policy == "skip"
                # A unique job's run is deduplicated against what waits or runs at its time, so
                # it is never written ahead (as a job with run limits is not).
                # A workflow's occurrence starts its steps when it is due, so it is not either.
                has_limits = job.max_runs is not None or job.end_at is not None or job.unique or job.steps is not None
                if (skip and job.id in waiting) or not lead_time.writes_ahead(
                    next_run_at=job.next_run_at, now=now, lead=self.lead, limited=has_limits
                ):
                    self._defer(job.next_run_at)  # ticked at its time, as without a lead
                    continue
                job_rows, next_run_at = self._plan_ahead(job, now)
                rows += job_rows
                next_runs.append((job.id, next_run_at))
                runs_added[job.id] = len(job_rows)
                report.job_ids.add(job.id)
                if skip:
                    skip_ahead.append(job.id)
                if next_run_at is not None and next_run_at <= horizon:
                    if skip:
                        self._defer(next_run_at)  # its row ahead makes it wait: decided at its time
                    else:
                        self._again = True  # more than MISFIRE_CATCH_UP_CAP occurrences inside the lead
            inserted = store.insert_occurrences(conn, rows)
            for _id, status in inserted:
                if status == S.PENDING.value:
                    report.created += 1
                else:
                    report.missed += 1
            _record_overlap_skips(conn, rows, {i for i, status in inserted if status == S.MISSED.value}, now)
            for row, holder in store.deduplicate_occurrences(conn, rows, now=now):
                report.missed += 1
                runs_added[row["job_id"]] -= 1
                insert_event(
                    conn,
                    "deduplicated",
                    now=now,
                    job_id=row["job_id"],
                    execution_id=holder,
                    trigger=row["trigger"],
                    scheduled_for=_iso(row["scheduled_for"]),
                    unique_key=row["unique_key"],
                )
            workflow_jobs = [job.id for job in due_now if job.steps is not None]
            if workflow_jobs:  # their occurrences start at once, under the locks this tick holds
                report.job_ids |= workflows.start_due(conn, now=now, job_ids=workflow_jobs).job_ids
            store.advance_jobs(conn, next_runs, runs_added=runs_added, limit_reasons=limited)
            if limited:
                self._disable_finished(conn, now, job_ids=list(limited))
            if skip_ahead:
                self._skip_ahead.update(store.pending_ahead(conn, skip_ahead, now=now))
            if report.created:
                wakeups.notify(conn, wakeups.WORK_CHANNEL)
        report.due += len(next_runs)
        return len(next_runs)

    def _refresh_planner_statistics(self, written: int) -> None:
        """After a tick that wrote a burst, ANALYZE executions if the planner's statistics count
        fewer rows than it wrote (`Store.refresh_planner_statistics`): workers plan their turn
        once per connection, and a plan made while the table looked empty costs the burst's size
        squared per turn. With a lead time this happens before the burst's instant, so the turns
        at it are planned for the table that holds it. A failure is logged, never fatal; without
        the privilege to ANALYZE the scheduler stops trying (autovacuum still does it, later)."""
        if not self._refresh_statistics:
            return
        try:
            with self.engine.begin() as conn:
                store_for(conn).refresh_planner_statistics(conn, written=written)
        except DBAPIError as exc:
            self._refresh_statistics = getattr(exc.orig, "sqlstate", None) != INSUFFICIENT_PRIVILEGE
            log.warning(
                "could not refresh the planner statistics of executions",
                extra={"event": "planner_statistics_failed", "error": str(exc)[:300]},
            )

    def _defer(self, at: datetime) -> None:
        self._deferred = at if self._deferred is None else min(self._deferred, at)

    def _plan_ahead(self, job: Row[Any], now: datetime) -> tuple[list[dict[str, Any]], datetime | None]:
        """The rows an on-time job gets written ahead (app/domain/lead_time.py) and its next run."""
        schedule = cached_schedule(job.schedule_type, job.schedule, job.timezone)
        plan = lead_time.plan_ahead(
            next_run_at=job.next_run_at,
            now=now,
            lead=self.lead,
            next_after=schedule.next_after,
            only_one=job.overlap_policy == "skip",
            limit=self.cap,
        )
        rows = []
        for scheduled_for in plan.fire:
            row = occurrence_row(job, scheduled_for, trigger="schedule", status=S.PENDING, now=now)
            row["available_at"] = scheduled_for + jitter_offset(job.id, job.jitter_seconds)  # as in _plan_job
            rows.append(row)
        return rows, plan.next_run_at

    def _confirm_ahead(self, now: datetime, report: TickReport) -> None:
        """Overlap skip for rows written ahead, decided at their time as the tick would have: a
        row whose job has another run active then is replaced by a `missed` row (same occurrence,
        same reason); the others stay, and a worker starts them."""
        if not self._skip_ahead_loaded:  # the rows an earlier scheduler process wrote ahead
            with self.engine.connect() as conn:
                self._skip_ahead.update(store_for(conn).overlap_skip_ahead(conn))
            self._skip_ahead_loaded = True
        due = sorted(execution_id for execution_id, at in self._skip_ahead.items() if at <= now)
        if not due:
            return
        with write_transaction(self.engine) as conn:
            store = store_for(conn)
            taken = store.take_overlapped_ahead(conn, due, now=now)
            if taken:
                by_id = {job.id: job for job in store.jobs_by_id(conn, sorted({row.job_id for row in taken}))}
                rows = [
                    occurrence_row(
                        by_id[row.job_id],
                        row.scheduled_for,
                        trigger="schedule",
                        status=S.MISSED,
                        now=now,
                        reason=OVERLAP_REASON,
                    )
                    for row in taken
                    if row.job_id in by_id
                ]
                inserted = store.insert_occurrences(conn, rows)
                report.missed += len(inserted)
                _record_overlap_skips(conn, rows, {i for i, _status in inserted}, now)
                report.job_ids |= {row.job_id for row in taken}
        for execution_id in due:
            self._skip_ahead.pop(execution_id, None)

    def _plan_job(
        self, conn: Connection, job: Row[Any], now: datetime, busy: bool, report: TickReport
    ) -> tuple[list[dict[str, Any]], datetime | None]:
        """The execution rows one due job gets this tick and its next run (misfire events are
        written here too)."""
        schedule = cached_schedule(job.schedule_type, job.schedule, job.timezone)
        plan = plan_occurrences(
            next_run_at=job.next_run_at,
            now=now,
            next_after=schedule.next_after,
            policy=job.misfire_policy,
            grace=timedelta(seconds=job.misfire_grace_seconds),
            cap=self.cap,
        )
        rows = []
        for scheduled_for, trigger in plan.fire:
            if busy:
                # Overlap policy skip: an earlier run is still active, so this one is recorded
                # as missed instead of piling up behind it.
                rows.append(
                    occurrence_row(
                        job,
                        scheduled_for,
                        trigger=trigger,
                        status=S.MISSED,
                        now=now,
                        reason=OVERLAP_REASON,
                    )
                )
                continue
            row = occurrence_row(job, scheduled_for, trigger=trigger, status=S.PENDING, now=now)
            # Jitter moves when the run may be claimed, never the occurrence's identity
            # (scheduled_for and its idempotency key stay the nominal time, so dedup holds).
            row["available_at"] = scheduled_for + jitter_offset(job.id, job.jitter_seconds)
            rows.append(row)
            busy = job.overlap_policy == "skip"  # catch-up re-checks overlap before each occurrence
        for scheduled_for in plan.missed:
            rows.append(
                occurrence_row(
                    job,
                    scheduled_for,
                    trigger="schedule",
                    status=S.MISSED,
                    now=now,
                    reason=f"misfire: {int((now - scheduled_for).total_seconds())}s late (grace "
                    f"{job.misfire_grace_seconds}s) and the misfire policy is skip",
                )
            )
        if plan.coalesced:
            report.coalesced += plan.coalesced
            insert_event(
                conn,
                "misfire_coalesced",
                now=now,
                job_id=job.id,
                occurrences=plan.coalesced,
                at_least=plan.lower_bound,
                first=_iso(job.next_run_at),
                into=_iso(plan.fire[0][0]),
                late_seconds=round((now - job.next_run_at).total_seconds(), 3),  # for explain and the logs
            )
        if plan.unrecorded:
            assert plan.unrecorded_range is not None  # set whenever occurrences went unrecorded
            bounds: dict[str, Any] = {"from": _iso(plan.unrecorded_range[0]), "until": _iso(plan.unrecorded_range[1])}
            insert_event(
                conn,
                "misfire_skipped",
                now=now,
                job_id=job.id,
                occurrences=plan.unrecorded,
                at_least=plan.lower_bound,
                **bounds,
                late_seconds=round((now - plan.unrecorded_range[0]).total_seconds(), 3),
                note="late occurrences beyond MISFIRE_CATCH_UP_CAP are counted here, not recorded one by one",
            )
        report.job_ids.add(job.id)
        return rows, plan.next_run_at

    def _bound_by_limits(
        self,
        conn: Connection,
        job: Row[Any],
        rows: list[dict[str, Any]],
        next_run_at: datetime | None,
        now: datetime,
        limited: dict[int, str],
    ) -> tuple[list[dict[str, Any]], datetime | None]:
        """Apply the job's run limits (max_runs, end_at: app/domain/run_limits.py) to the rows
        planned for it; a limit reached clears its next run and records why."""
        limits = RunLimits(job.max_runs, job.runs_created, job.start_at, job.end_at)
        if limits.max_runs is None and limits.end_at is None:
            return rows, next_run_at
        rows = sorted(rows, key=lambda row: row["scheduled_for"])
        bounded = run_limits.bound(
            [(row["scheduled_for"], row["status"] == S.PENDING.value) for row in rows], next_run_at, limits
        )
        if bounded.reason is not None:
            limited[job.id] = bounded.reason
            insert_event(
                conn,
                "run_limit_reached",
                now=now,
                job_id=job.id,
                reason=bounded.reason,
                runs_created=job.runs_created + bounded.runs_added,
                stopped_at=_iso(bounded.stopped_at),
            )
            log.info(
                "job reached a run limit",
                extra={"event": "run_limit_reached", "job_id": job.id, "reason": bounded.reason},
            )
        return rows[: bounded.keep], bounded.next_run_at

    def _disable_finished(self, conn: Connection, now: datetime, *, job_ids: list[int] | None = None) -> set[int]:
        """Disable the jobs that reached a run limit once none of their runs waits or runs (so the
        runs created before the limit still run); each gets a `job_disabled` event with its reason."""
        finished = store_for(conn).finish_limited_jobs(conn, now=now, job_ids=job_ids)
        for job_id, reason in finished:
            insert_event(
                conn,
                "job_disabled",
                now=now,
                actor="system",
                job_id=job_id,
                reason=reason,
                cancelled=0,
                next_run_at=None,
            )
            audit_trail.record_change(
                "system",
                "disabled",
                "job",
                job_id,
                {"enabled": True},
                {"enabled": False},
                now=now,
                job_id=job_id,
                extra={"reason": reason},
                conn=conn,
            )
        return {job_id for job_id, _ in finished}

    def _upkeep_due(self, now: datetime) -> bool:
        """Heartbeat, lease recovery and housekeeping run at most once per UPKEEP_EVERY.

        The loop wakes at each job's exact next_run_at, which with many jobs can be dozens of
        times a second; only firing due jobs has to happen on every wake.
        """
        last = self._last_upkeep
        if last is None or now - last >= UPKEEP_EVERY or now < last:
            self._last_upkeep = now
            return True
        return False

    def forget_heartbeat(self) -> None:
        with write_transaction(self.engine) as conn:
            heartbeats.remove(conn, self.id)

    def _heartbeat(self, now: datetime) -> None:
        """The scheduler's heartbeat; while it believes itself idle, also whether that still holds.

        `idle` was read before the sleep, and what woke it (a trigger that started a workflow run,
        a disable that cancelled a run's queued step, a job edit) may have put work in flight
        since: an upkeep that trusted the old read would skip the sweep that run needs for one
        more tick. The read rides in the heartbeat's transaction (no transaction more per tick)."""
        with write_transaction(self.engine) as conn:
            heartbeats.beat(
                conn,
                process_id=self.id,
                kind="scheduler",
                started_at=self.started_at,
                now=now,
                info={"ticks": self.ticks},
            )
            if self.idle:
                self.idle = not store_for(conn).any_active(conn)

    def _expire_and_finish(self, now: datetime, report: TickReport) -> None:
        """Queued TTLs: waiting work past its job's queued_ttl_seconds ends `expired`; then jobs
        that reached a run limit and have nothing left waiting or running are disabled."""
        with write_transaction(self.engine) as conn:
            expired = store_for(conn).expire_queued(conn, now=now)
            for row in expired:
                insert_event(
                    conn,
                    "execution_expired",
                    now=now,
                    job_id=row.job_id,
                    execution_id=row.id,
                    reason=row.reason,
                )
            report.expired += len(expired)
            report.job_ids |= {row.job_id for row in expired if row.job_id is not None}
            report.job_ids |= self._disable_finished(conn, now)

    def _advance_workflows(self, now: datetime, report: TickReport) -> None:
        """Start workflow occurrences that came due since (a delayed trigger, one that waited
        behind its job's run in flight) and advance runs whose step ended where no recorder
        saw it (expired). Nothing at all while no job is a workflow."""
        with self.engine.connect() as conn:
            if not workflow_statements.has_workflows(conn):
                return
        with write_transaction(self.engine) as conn:
            moved = workflows.start_due(conn, now=now)
            moved.add(workflows.sweep(conn, now=now))
            if moved.ended:
                moved.job_ids |= callbacks.after_final(conn, moved.ended, now=now).job_ids
            report.job_ids |= moved.job_ids
            if moved.steps:
                wakeups.notify(conn, wakeups.WORK_CHANNEL)

    def _housekeeping(self, now: datetime, report: TickReport, *, quiet: bool = False) -> None:
        """Every few seconds raise starving work's priority; once a minute prune stale heartbeats;
        once an hour apply retention."""
        due_before = starving_since(now, self.app.config["PRIORITY_AGING_SECONDS"])
        if (
            due_before is not None
            and not quiet
            and (self._last_aging is None or not 0 <= (now - self._last_aging).total_seconds() < 5)
        ):
            self._last_aging = now
            with write_transaction(self.engine) as conn:
                report.aged = store_for(conn).raise_starving_priorities(conn, due_before=due_before)
        if self._last_housekeeping is None or now - self._last_housekeeping >= timedelta(minutes=1):
            self._last_housekeeping = now
            with write_transaction(self.engine) as conn:
                heartbeats.prune(conn, now=now, older_than_seconds=self.app.config["HEARTBEAT_PRUNE_SECONDS"])
                # Batches whose last item ended where no recorder completes them (the job was
                # disabled, an item expired): completed here, with their on-complete callback.
                report.job_ids |= callbacks.settle_batches(conn, now=now).job_ids
        every = timedelta(seconds=self.app.config.get("ALERT_EVALUATE_SECONDS", 10))
        if self._last_alerting is None or not timedelta(0) <= now - self._last_alerting < every:
            self._last_alerting = now
            self.evaluate_alerts(now)
        if self._last_retention is None or now - self._last_retention >= timedelta(hours=1):
            self._last_retention = now
            report.pruned = retention.prune_history(now=now)["deleted"]

    def evaluate_alerts(self, now: datetime) -> alerting.AlertReport | None:
        """The alert pass (overdue, consecutive failures, auto-pause, backlog, lost workers); a
        failure is logged, never allowed to stop scheduling."""
        try:
            with write_transaction(self.engine) as conn:
                report = alerting.evaluate_alerts(conn, now=now, settings=self.app.config)
        except Exception as exc:  # noqa: BLE001 - alerting must not take the scheduler down
            log.error("alert pass failed", extra={"event": "alert_pass_failed", "error": str(exc)[:300]})
            return None
        if report.paused:
            cache.get_cache().delete(cache.keys_for_jobs(set(report.paused)))
        return report

    # --- the loop ---------------------------------------------------------------------------

    def seconds_until_due(self, now: datetime, cap: float, *, idle_cap: float | None = None) -> float:
        """How long to sleep: until the earliest enabled next_run_at (with a lead time: until the
        next tick the lead needs, `lead_time.wake_at`), at most `cap` seconds, or `idle_cap` when
        nothing waits or runs (read in the same transaction, and kept as `idle`)."""
        if self.lead <= timedelta(0):
            with self.engine.connect() as conn:  # one read transaction for both
                earliest = store_for(conn).earliest_next_run(conn)
                self.idle = not store_for(conn).any_active(conn)
        else:
            # Every job up to the last tick's horizon was written, deferred or flagged `_again`;
            # the ones beyond it are written `lead` before their time.
            with self.engine.connect() as conn:
                beyond = store_for(conn).earliest_next_run(conn, after=self._horizon)
                self.idle = not store_for(conn).any_active(conn)
            earliest = lead_time.wake_at(
                now=now,
                lead=self.lead,
                earliest_beyond=beyond,
                deferred=self._deferred,
                confirm=min(self._skip_ahead.values(), default=None),
                again=self._again,
            )
        if idle_cap is not None and self.idle:
            cap = idle_cap
        if earliest is None:
            return cap
        return max(0.0, min(cap, (earliest - now).total_seconds()))

    def idle_tick_cap(self, tick_seconds: float) -> float:
        """The longest sleep while nothing waits or runs and LISTEN works: SCHEDULER_IDLE_TICK_SECONDS,
        kept at least four heartbeats inside HEARTBEAT_STALE_SECONDS and never under `tick_seconds`."""
        config = self.app.config
        stale = float(config.get("HEARTBEAT_STALE_SECONDS", 60)) / 4
        return max(tick_seconds, min(float(config.get("SCHEDULER_IDLE_TICK_SECONDS", 15)), stale))

    def run_forever(
        self, *, tick_seconds: float, should_stop: Callable[[], bool], echo: Callable[[TickReport], None]
    ) -> None:
        """Tick, then sleep until something is due, a job changes, or `tick_seconds` pass (the
        idle cap while nothing waits or runs and LISTEN works: NOTIFY wakes it for every change)."""
        listener = wakeups.Listener.open(self.engine, [wakeups.JOBS_CHANNEL])
        # Alert delivery runs beside the ticks, in its own thread: a slow webhook never delays one.
        deliveries.DeliveryLoop(self.engine, self.app.config, clock=self.clock).start_thread(should_stop)
        failures = 0
        try:
            while not should_stop():
                try:
                    report = self.tick()
                    if report.due or report.recovered or report.pruned:
                        echo(report)
                    if not listener.active:
                        # LISTEN again after a lost connection, before reading the earliest next
                        # run, so a job changed in between is either read here or notified.
                        listener = wakeups.Listener.open(self.engine, [wakeups.JOBS_CHANNEL])
                    idle_cap = self.idle_tick_cap(tick_seconds) if listener.active else None
                    delay = self.seconds_until_due(self.clock(), tick_seconds, idle_cap=idle_cap)
                    failures = 0
                except Exception as exc:  # database down: back off and retry, never crash-loop
                    failures += 1
                    delay = min(30.0, 0.5 * 2 ** min(failures, 6))
                    log.error(
                        "scheduler tick failed; retrying",
                        extra={"event": "tick_failed", "error": str(exc)[:300], "retry_in": delay},
                    )
                    self.engine.dispose()
                    listener.close()
                    listener = wakeups.Listener.open(self.engine, [wakeups.JOBS_CHANNEL])
                listener.wait(delay, should_stop)
        finally:
            listener.close()
            try:
                self.forget_heartbeat()
            except Exception:  # the database may be the reason we are stopping
                log.warning("could not remove heartbeat", extra={"event": "heartbeat_remove_failed"})


def withdraw_ahead(conn: Connection, job: JobColumns, *, now: datetime) -> int:
    """Before a job changes (edit, disable, auto-pause): delete its occurrences written ahead
    whose time has not come and move its cursor back to them, so the change applies to them as
    it would have without a lead time (the scheduler writes them again, changed, if the job
    still has them). `job` is a Job or a jobs row; a Job's attributes follow. Returns how many."""
    count, row = store_for(conn).withdraw_ahead(conn, job.id, now=now)
    if count and row is not None and hasattr(job, "_sa_instance_state"):
        from sqlalchemy.orm.attributes import set_committed_value

        # The database already holds these values: the ORM object learns them without a write.
        set_committed_value(job, "next_run_at", row.next_run_at)
        set_committed_value(job, "runs_created", row.runs_created)
    return count


def _iso(value: datetime | None) -> str | None:
    return iso_z(value, "microseconds")
