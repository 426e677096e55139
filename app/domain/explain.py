"""Explain: what became of each expected occurrence of a job, and why.

Pure: given the occurrences a schedule expected and the evidence the database holds (executions,
events, scheduler heartbeat spans, the queue's state and its live workers), say each
occurrence's fate. No I/O and no clock: the read model (app/services/read/explain.py) gathers the
evidence and passes `now`.

Fates:
- `fired`: an execution ran (or runs) for it: its id, status and trigger;
- `coalesced`: folded into a later run by the coalesce misfire policy (the event, how late);
- `skipped_overlap`: recorded missed because an earlier run was still active (the blocking run);
- `missed_misfire`: recorded missed (or counted in an event) because the scheduler reached it
  too late (how late, and whether any scheduler heartbeat existed at that time);
- `expired`: waited longer than the job's queued TTL;
- `cancelled`: cancelled (by whom);
- `disabled`: not created because the job was disabled then (by whom, when, why);
- `queue_paused`, `rate_limited`, `no_worker`, `no_worker_for_task`, `waiting`: created but not
  started: its queue is paused, its queue's or job's rate limit is reached, no live worker serves
  its queue, the live workers serving it do not offer its task (a worker claims only the tasks it
  advertises: during a deploy, until one with the task's module runs or reloads), or it waits for
  a slot or its (jittered) start time;
- `not_created_yet`: due, but no scheduler has reached it (scheduler down or behind);
- `not_due`: in the future;
- `before_job`: before the job existed;
- `no_record`: nothing found (history pruned by retention, or the schedule changed since).
A DST adjustment of the fire time (the rule applied) is reported with any fate (`dst`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.clock import iso_z

RAN = frozenset({"running", "succeeded", "failed", "timed_out", "retry_scheduled", "dead_lettered"})
WAITING = frozenset({"pending", "claimed"})


@dataclass(frozen=True)
class RunRecord:
    """An execution, as evidence."""

    id: int
    scheduled_for: datetime
    trigger: str
    status: str
    reason: str | None
    created_at: datetime
    available_at: datetime
    finished_at: datetime | None = None
    cancel_requested_by: str | None = None
    task: str | None = None  # the task it forks; None for a workflow's own run, which forks none


@dataclass(frozen=True)
class EventRecord:
    """An event of the job's log, as evidence."""

    id: int
    type: str
    at: datetime
    actor: str
    payload: dict[str, Any]
    execution_id: int | None = None


@dataclass(frozen=True)
class Span:
    """A scheduler process was alive (heartbeating) from `start` to `end`."""

    process_id: str
    start: datetime
    end: datetime


@dataclass(frozen=True)
class QueueState:
    name: str
    paused: bool = False
    paused_at: datetime | None = None
    paused_by: str | None = None
    paused_reason: str | None = None
    live_workers: int = 0
    # The tasks those live workers advertise, together; None when one of them advertises nothing
    # (a release before advertising: it claims every task).
    offered_tasks: frozenset[str] | None = None
    # The queue's rate limit (`10/minute`) and how many more it lets start now; None: no limit.
    rate_limit: str | None = None
    rate_room: int | None = None


@dataclass(frozen=True)
class Evidence:
    now: datetime
    job_created_at: datetime
    next_run_at: datetime | None
    runs: Sequence[RunRecord]
    events: Sequence[EventRecord]
    scheduler_spans: Sequence[Span]
    queue: QueueState
    # The job's rate limit and how many more it lets start now; None: no limit.
    job_rate_limit: str | None = None
    job_rate_room: int | None = None


@dataclass
class Fate:
    """One occurrence's fate: a code, a sentence, and the evidence behind it."""

    scheduled_for: datetime
    fate: str
    summary: str
    dst: str | None = None
    execution_id: int | None = None
    status: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "scheduled_for": iso_z(self.scheduled_for),
            "fate": self.fate,
            "summary": self.summary,
            "dst": self.dst,
            "execution_id": self.execution_id,
            "status": self.status,
            "details": self.details,
        }


def explain_occurrence(at: datetime, evidence: Evidence, *, dst_note: str | None = None) -> Fate:
    """The fate of the occurrence expected at `at`."""
    run = next((r for r in evidence.runs if r.scheduled_for == at and r.trigger != "manual"), None)
    fate = _from_run(run, evidence) if run is not None else _without_run(at, evidence)
    if dst_note:
        fate.dst = dst_note
        fate.summary += f" Shifted by DST: {dst_note}."
    return fate


def explain_run(run: RunRecord, evidence: Evidence) -> Fate:
    """The fate of one execution, whatever made it (a one-off run, a manual trigger, an occurrence)."""
    return _from_run(run, evidence)


def explain_window(fires: Sequence[tuple[datetime, str | None]], evidence: Evidence) -> list[Fate]:
    """The fates of each expected occurrence (instant, DST note), in order."""
    return [explain_occurrence(at, evidence, dst_note=note) for at, note in fires]


# --- an execution exists --------------------------------------------------------------------


def _from_run(run: RunRecord, evidence: Evidence) -> Fate:
    base: dict[str, Any] = {"execution_id": run.id, "status": run.status}
    details: dict[str, Any] = {"trigger": run.trigger, "created_at": iso_z(run.created_at)}
    if run.status in RAN:
        how = " (backfill)" if run.trigger == "backfill" else " (caught up late)" if run.trigger == "catch_up" else ""
        return Fate(
            run.scheduled_for, "fired", f"Fired{how}: execution #{run.id} {run.status}.", details=details, **base
        )
    if run.status in WAITING:
        return _waiting(run, evidence, details, base)
    if run.status == "missed":
        reason = run.reason or ""
        if reason.startswith("overlap"):
            blocking = _blocking_run(run, evidence.runs)
            details["blocking_execution_id"] = blocking.id if blocking else None
            who = f"execution #{blocking.id} ({blocking.status})" if blocking else "an earlier run"
            return Fate(
                run.scheduled_for,
                "skipped_overlap",
                f"Skipped for overlap: {who} was still active (overlap policy skip); recorded as missed "
                f"execution #{run.id}.",
                details=details,
                **base,
            )
        late = (run.created_at - run.scheduled_for).total_seconds()
        details.update(_lateness(run.scheduled_for, late, evidence))
        return Fate(
            run.scheduled_for,
            "missed_misfire",
            f"Missed by misfire: the scheduler reached it {_duration(late)} late, beyond the grace "
            f"(misfire policy skip); {_heartbeat_text(details)}.",
            details=details,
            **base,
        )
    if run.status == "expired":
        details["reason"] = run.reason
        return Fate(
            run.scheduled_for,
            "expired",
            f"Expired: execution #{run.id} waited longer than the job's queued TTL"
            + (f" ({run.reason})." if run.reason else "."),
            details=details,
            **base,
        )
    if run.status == "cancelled":
        by, why = _cancelled_by(run, evidence.events)
        details.update({"cancelled_by": by, "reason": why})
        return Fate(
            run.scheduled_for,
            "cancelled",
            f"Cancelled: execution #{run.id} was cancelled by {by or 'an unknown actor'}"
            + (f" ({why})." if why else "."),
            details=details,
            **base,
        )
    return Fate(run.scheduled_for, run.status, f"Execution #{run.id} is {run.status}.", details=details, **base)


def _waiting(run: RunRecord, evidence: Evidence, details: dict[str, Any], base: dict[str, Any]) -> Fate:
    queue = evidence.queue
    details["available_at"] = iso_z(run.available_at)
    details["queue"] = queue.name
    if run.available_at > evidence.now:
        return Fate(
            run.scheduled_for,
            "waiting",
            f"Waiting: execution #{run.id} becomes available at {iso_z(run.available_at)} (jitter or retry delay).",
            details=details,
            **base,
        )
    if queue.paused:
        details.update(
            {"paused_by": queue.paused_by, "paused_at": iso_z(queue.paused_at), "reason": queue.paused_reason}
        )
        return Fate(
            run.scheduled_for,
            "queue_paused",
            f"Waiting: queue {queue.name!r} is paused (by {queue.paused_by}"
            + (f" at {iso_z(queue.paused_at)}" if queue.paused_at else "")
            + (f": {queue.paused_reason}" if queue.paused_reason else "")
            + f"); execution #{run.id} starts when it resumes.",
            details=details,
            **base,
        )
    for owner, limit, room in (
        (f"queue {queue.name!r}", queue.rate_limit, queue.rate_room),
        ("the job", evidence.job_rate_limit, evidence.job_rate_room),
    ):
        if limit and room == 0:
            details["rate_limit"] = limit
            return Fate(
                run.scheduled_for,
                "rate_limited",
                f"Waiting: rate limit {limit} reached ({owner}); execution #{run.id} starts when an "
                "earlier start leaves the window.",
                details=details,
                **base,
            )
    if queue.live_workers == 0:
        return Fate(
            run.scheduled_for,
            "no_worker",
            f"Waiting: no live worker serves queue {queue.name!r}; execution #{run.id} has waited "
            f"{_duration((evidence.now - run.available_at).total_seconds())}.",
            details=details,
            **base,
        )
    if run.task is not None and queue.offered_tasks is not None and run.task not in queue.offered_tasks:
        details["task"] = run.task
        return Fate(
            run.scheduled_for,
            "no_worker_for_task",
            f"Waiting: no live worker serving queue {queue.name!r} offers task {run.task!r} "
            f"({queue.live_workers} live worker(s) serve the queue without it: deploy the task's module "
            f"to one and reload it, `flask worker reload`); execution #{run.id} has waited "
            f"{_duration((evidence.now - run.available_at).total_seconds())}.",
            details=details,
            **base,
        )
    return Fate(
        run.scheduled_for,
        "waiting",
        f"Waiting: execution #{run.id} is pending for a free worker slot ({queue.live_workers} live worker(s) "
        f"serve queue {queue.name!r}).",
        details=details,
        **base,
    )


def _blocking_run(missed: RunRecord, runs: Sequence[RunRecord]) -> RunRecord | None:
    """The run that was active when `missed` was decided: created before it, not finished then."""
    candidates = [
        r
        for r in runs
        if r.id != missed.id
        and r.status != "missed"
        and r.created_at <= missed.created_at
        and (r.finished_at is None or r.finished_at >= missed.created_at)
    ]
    return max(candidates, key=lambda r: (r.created_at, r.id), default=None)


def _cancelled_by(run: RunRecord, events: Sequence[EventRecord]) -> tuple[str | None, str | None]:
    if run.cancel_requested_by:
        return run.cancel_requested_by, run.reason
    for event in events:
        if event.execution_id == run.id and event.type in ("execution_cancelled", "execution_cancel_requested"):
            return event.actor, event.payload.get("reason") or run.reason
    if run.reason and ("disabled" in run.reason or "auto-paused" in run.reason):
        disabled = _last_state_change(events, run.finished_at or run.created_at, inclusive=True)
        if disabled is not None and disabled.type == "job_disabled":
            return disabled.actor, run.reason
    return None, run.reason


# --- no execution ---------------------------------------------------------------------------


def _without_run(at: datetime, evidence: Evidence) -> Fate:
    if at > evidence.now:
        return Fate(at, "not_due", f"Not due yet: fires at {iso_z(at)}.")
    if at < evidence.job_created_at:
        return Fate(at, "before_job", f"The job did not exist yet (created {iso_z(evidence.job_created_at)}).")
    for event in evidence.events:
        payload = event.payload
        if event.type == "misfire_coalesced" and _within(at, payload.get("first"), payload.get("into")):
            late = (event.at - at).total_seconds()
            details = {"event_id": event.id, "into": payload.get("into"), "occurrences": payload.get("occurrences")}
            details.update(_lateness(at, late, evidence))
            return Fate(
                at,
                "coalesced",
                f"Coalesced: the scheduler reached it {_duration(late)} late and folded "
                f"{payload.get('occurrences')} late occurrence(s) into the run at {payload.get('into')} "
                f"(event #{event.id}); {_heartbeat_text(details)}.",
                details=details,
            )
        if event.type == "misfire_skipped" and _within(at, payload.get("from"), payload.get("until")):
            late = (event.at - at).total_seconds()
            details = {"event_id": event.id, "occurrences": payload.get("occurrences")}
            details.update(_lateness(at, late, evidence))
            return Fate(
                at,
                "missed_misfire",
                f"Missed by misfire: the scheduler reached it {_duration(late)} late; counted with "
                f"{payload.get('occurrences')} others in event #{event.id}; {_heartbeat_text(details)}.",
                details=details,
            )
    change = _last_state_change(evidence.events, at, inclusive=True)
    if change is not None and change.type == "job_created" and change.payload.get("enabled") is False:
        return Fate(
            at,
            "disabled",
            f"Not created: the job was created disabled at {iso_z(change.at)} by {change.actor} "
            "and not enabled yet then.",
            details={
                "disabled_by": change.actor,
                "disabled_at": iso_z(change.at),
                "reason": None,
                "event_id": change.id,
            },
        )
    if change is not None and change.type == "job_disabled":
        reason = change.payload.get("reason")
        return Fate(
            at,
            "disabled",
            f"Not created: the job was disabled at {iso_z(change.at)} by {change.actor}"
            + (f" ({reason})." if reason else "."),
            details={
                "disabled_by": change.actor,
                "disabled_at": iso_z(change.at),
                "reason": reason,
                "event_id": change.id,
            },
        )
    if evidence.next_run_at is not None and at >= evidence.next_run_at:
        details = _lateness(at, (evidence.now - at).total_seconds(), evidence)
        live = any(span.end >= evidence.now - _STALE for span in evidence.scheduler_spans)
        details["scheduler_alive_now"] = live
        return Fate(
            at,
            "not_created_yet",
            f"Not created yet: due {_duration((evidence.now - at).total_seconds())} ago and no scheduler has reached "
            "it " + ("(a scheduler is alive: it is behind)." if live else "(no live scheduler heartbeat)."),
            details=details,
        )
    return Fate(
        at,
        "no_record",
        "No execution or event found for it (history pruned by retention, or the schedule changed since).",
    )


def _within(at: datetime, start: str | None, end: str | None) -> bool:
    if not start or not end:
        return False
    return _parse(start) <= at < _parse(end)


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _last_state_change(events: Sequence[EventRecord], at: datetime, *, inclusive: bool) -> EventRecord | None:
    """The job's last enable/disable/create event at or before `at`."""
    changes = [
        e
        for e in events
        if e.type in ("job_enabled", "job_disabled", "job_created") and (e.at <= at if inclusive else e.at < at)
    ]
    return max(changes, key=lambda e: (e.at, e.id), default=None)


# --- lateness and heartbeats ----------------------------------------------------------------

# A scheduler heartbeats every second; this much slack around a span still counts as alive.
_STALE = timedelta(seconds=15)


def _lateness(at: datetime, late_seconds: float, evidence: Evidence) -> dict[str, Any]:
    alive = [span.process_id for span in evidence.scheduler_spans if span.start <= at <= span.end + _STALE]
    return {"late_seconds": round(late_seconds, 3), "scheduler_heartbeat_then": bool(alive), "schedulers_then": alive}


def _heartbeat_text(details: dict[str, Any]) -> str:
    if details.get("scheduler_heartbeat_then"):
        return f"a scheduler was heartbeating then ({', '.join(details['schedulers_then'])}), so it was behind"
    return "no scheduler heartbeat existed at that time (scheduler down)"


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 172800:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d{(seconds % 86400) // 3600:02d}h"
