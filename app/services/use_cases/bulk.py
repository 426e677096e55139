"""Acting on many rows at once: retry or cancel executions, enable or disable jobs.

Two steps, so the confirmation can say exactly how many rows will change: `plan` sorts the
selected ids into those the action changes and those it leaves alone (with why), reading their
current state; `apply` runs the one-row use case for each changeable id, so every row gets its own
audit entry and the same checks as a single action (a row that changed in between is reported,
not forced).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select

from app.domain.permissions import Action
from app.domain.states import CANCELLABLE, RETRYABLE, ExecutionStatus
from app.extensions import db
from app.models import Execution, Job
from app.services import scoping
from app.services.caller import Caller
from app.services.errors import ServiceError, ValidationFailed
from app.services.use_cases import executions as execution_service
from app.services.use_cases import jobs as job_service

# (kind, action) -> (verb for people, past tense)
ACTIONS = {
    ("executions", "retry"): ("retry", "retried"),
    ("executions", "cancel"): ("cancel", "cancelled"),
    ("jobs", "enable"): ("enable", "enabled"),
    ("jobs", "disable"): ("disable", "disabled"),
}
MAX_ROWS = 500


@dataclass
class BulkPlan:
    kind: str
    action: str
    change: list[int] = field(default_factory=list)  # ids the action will change
    unchanged: list[tuple[int, str]] = field(default_factory=list)  # (id, why not)

    @property
    def verb(self) -> str:
        return ACTIONS[(self.kind, self.action)][0]


@dataclass
class BulkResult:
    done: list[int] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)


def plan(kind: str, action: str, ids: list[int], caller: Caller | None = None) -> BulkPlan:
    """What `action` would change among `ids` right now (ids the caller cannot see are 'not found')."""
    if (kind, action) not in ACTIONS:
        raise ValidationFailed({"action": f"no bulk action {action!r} on {kind}"})
    if caller is not None:
        caller.require(Action.OPERATE)
    ids = sorted(set(ids))
    if not ids:
        raise ValidationFailed({"ids": "Select at least one row."})
    if len(ids) > MAX_ROWS:
        raise ValidationFailed({"ids": f"Select at most {MAX_ROWS} rows at a time."})
    result = BulkPlan(kind, action)
    if kind == "executions":
        found = dict(
            db.session.execute(
                scoping.executions(select(Execution.id, Execution.status).where(Execution.id.in_(ids)), caller)
            )
            .tuples()
            .all()
        )
        cancel_asked = set(
            db.session.scalars(
                select(Execution.id).where(Execution.id.in_(ids), Execution.cancel_requested_at.is_not(None))
            )
        )
        for execution_id in ids:
            status = found.get(execution_id)
            if status is None:
                result.unchanged.append((execution_id, "does not exist"))
            elif action == "retry" and ExecutionStatus(status) not in RETRYABLE:
                result.unchanged.append(
                    (execution_id, f"is {status.replace('_', ' ')}: only finished, unsuccessful runs are retried")
                )
            elif action == "cancel" and (ExecutionStatus(status) not in CANCELLABLE or execution_id in cancel_asked):
                why = "a cancel was already asked" if execution_id in cancel_asked else f"is {status.replace('_', ' ')}"
                result.unchanged.append((execution_id, why))
            else:
                result.change.append(execution_id)
    else:
        found = dict(
            db.session.execute(scoping.jobs(select(Job.id, Job.enabled).where(Job.id.in_(ids)), caller)).tuples().all()
        )
        for job_id in ids:
            enabled = found.get(job_id)
            if enabled is None:
                result.unchanged.append((job_id, "does not exist"))
            elif enabled == (action == "enable"):
                result.unchanged.append((job_id, f"is already {'enabled' if enabled else 'disabled'}"))
            else:
                result.change.append(job_id)
    return result


def apply(bulk: BulkPlan, *, now: datetime, actor: str, caller: Caller | None = None) -> BulkResult:
    """Run the action on each id of `bulk.change`, one audited use-case call per row."""
    result = BulkResult()
    for row_id in bulk.change:
        try:
            if (bulk.kind, bulk.action) == ("executions", "retry"):
                execution_service.retry_execution(row_id, now=now, actor=actor, caller=caller)
            elif (bulk.kind, bulk.action) == ("executions", "cancel"):
                execution_service.cancel_execution(row_id, now=now, actor=actor, caller=caller)
            elif bulk.action == "enable":
                job_service.enable_job(row_id, now=now, actor=actor, caller=caller)
            else:
                job_service.disable_job(row_id, now=now, actor=actor, caller=caller)
        except ServiceError as exc:  # it changed since the confirmation: report it, go on
            db.session.rollback()
            result.refused.append((row_id, str(exc)))
        else:
            result.done.append(row_id)
    return result
