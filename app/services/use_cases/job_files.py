"""Jobs as code: plan, apply and export the job files of a project.

`apply_job_files` reads the documents (app/definitions/job_file.py), checks every one of them
before anything is compared, then, in one write transaction that holds the project row's lock (so
two applies of one project run one after the other), works out the plan and carries it out:
declared queues created or brought in line, jobs created, updated field by field, and with
`prune` the jobs the same source owns but no longer lists deleted. A dry run does the same and
rolls back, so its plan is exactly what an apply would do (including the errors only a write
finds, such as a one-time run already in the past). Any error refuses the whole apply.

Ownership: a job created or updated by an apply gets `managed_by` (the source, e.g.
`file:jobs/nightly.yaml`). An unchanged job listed by another source (or made by hand) is
`adopted`: its owner changes, which the plan shows apart from the changes, so applying an export
reports none. `prune` only ever deletes jobs whose owner is one of the sources being applied.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask import current_app
from marshmallow.utils import missing
from sqlalchemy import select

from app import cache
from app.database import begin_write
from app.definitions.job import JobSchema, defaults_from, dump_job
from app.definitions.job_file import JOB_FIELDS, DocumentError, JobEntry, JobFile, load_document
from app.domain.permissions import Action
from app.extensions import db
from app.models import Job, Project, Queue
from app.services import audit_trail
from app.services.caller import Caller
from app.services.engine import wakeups
from app.services.errors import Conflict, ValidationFailed
from app.services.events import record_event, rehearsal
from app.services.use_cases import jobs as job_service
from app.services.use_cases import tenancy
from app.services.use_cases.queues import project_for

SOURCE_MAX = 300
QUEUE_FIELDS = ("description", "concurrency_limit", "rate_limit", "priority", "paused")
# Fields that move together: a new schedule is read with its type and zone.
SCHEDULE_TRIO = ("schedule_type", "schedule", "timezone")


@dataclass(frozen=True)
class Source:
    """One document to apply: `label` names it in errors (a file's path), `managed_by` is the
    owner its jobs get (`file:<path>`, or an API client's source)."""

    label: str
    managed_by: str
    document: Any


@dataclass
class _JobStep:
    source: Source
    entry: JobEntry
    target: dict[str, Any]  # the entry's values with the queue's priority and a same schedule kept
    job: Job | None
    changes: dict[str, dict[str, Any]]
    created: bool = False
    adopted: bool = False  # unchanged, but listed by a source that does not own it yet
    owner_before: str | None = None


def apply_job_files(
    sources: list[Source],
    *,
    now: datetime,
    actor: str,
    caller: Caller | None = None,
    project_name: str | None = None,
    dry_run: bool = False,
    prune: bool = False,
) -> dict[str, Any]:
    """Check, plan and (unless `dry_run`) apply the documents in one transaction; returns the plan.
    Raises ValidationFailed naming every problem (`<file>: jobs[3].schedule`), changing nothing."""
    if caller is not None:
        caller.require(Action.READ if dry_run else Action.OPERATE)
    for source in sources:
        if not source.managed_by or len(source.managed_by) > SOURCE_MAX:
            raise ValidationFailed({"source": f"must be 1-{SOURCE_MAX} characters"})
    files = _load(sources, now=now)
    project = _project(files, caller, project_name)
    begin_write(db.session)
    try:
        # Two applies of one project: the second waits here for the first's commit, then plans
        # against what the first wrote (SQLite's BEGIN IMMEDIATE already runs one writer at a time).
        # NO KEY UPDATE, as the job use case takes it: foreign-key checks of other inserts go on.
        db.session.execute(select(Project.id).where(Project.id == project.id).with_for_update(key_share=True))
        with rehearsal() if dry_run else nullcontext():
            plan = _plan_and_run(files, project, now=now, actor=actor, caller=caller, prune=prune, dry_run=dry_run)
    except BaseException:
        db.session.rollback()
        raise
    if dry_run:
        db.session.rollback()
    else:
        cache.invalidate_on_commit(db.session, cache.keys_for_job_change(None))
        wakeups.notify_on_commit(db.session, jobs_changed=True, work=False)
        db.session.commit()
    return plan


def _load(sources: list[Source], *, now: datetime) -> list[tuple[Source, JobFile]]:
    defaults = defaults_from(current_app.config)
    files, problems = [], {}
    for source in sources:
        try:
            files.append((source, load_document(source.document, now=now, defaults=defaults)))
        except DocumentError as exc:
            problems.update({_where(source, path): message for path, message in exc.problems})
    names: dict[str, str] = {}
    for source, loaded in files:
        for entry in loaded.jobs:
            other = names.setdefault(entry.name.lower(), _where(source, entry.path))
            if other != _where(source, entry.path):
                problems[_where(source, entry.path + ".name")] = f"job {entry.name!r} is also in {other}"
    if problems:
        raise ValidationFailed(problems)
    return files


def _where(source: Source, path: str) -> str:
    return f"{source.label}: {path}" if source.label else path


def _project(files: list[tuple[Source, JobFile]], caller: Caller | None, project_name: str | None) -> Project:
    named = {loaded.project for _, loaded in files if loaded.project} | ({project_name} if project_name else set())
    if len(named) > 1:
        raise ValidationFailed(
            {
                "project": "the files and --project name different projects (" + ", ".join(sorted(named)) + "); "
                "apply one project at a time"
            }
        )
    if named:
        return tenancy.find_project(named.pop(), caller)
    return project_for(caller)


def _plan_and_run(
    files, project: Project, *, now: datetime, actor: str, caller: Caller | None, prune: bool, dry_run: bool
) -> dict[str, Any]:
    stored_queues = {q.name: q for q in db.session.scalars(select(Queue).where(Queue.project_id == project.id))}
    stored_jobs = {j.name.lower(): j for j in db.session.scalars(select(Job).where(Job.project_id == project.id))}
    queue_plan = _queue_plan(files, stored_queues)
    if caller is not None and not dry_run and (queue_plan["created"] or queue_plan["updated"]):
        caller.require(Action.ADMINISTER)  # queues are an admin's, as everywhere else (a plan is anyone's)
    declared = {entry.name: entry for _, loaded in files for entry in loaded.queues}
    problems: dict[str, str] = {}
    steps = []
    for source, loaded in files:
        for entry in loaded.jobs:
            queue_name = entry.values["queue"]
            if queue_name not in stored_queues and queue_name not in declared:
                known = ", ".join(sorted(stored_queues)) or "none"
                problems[_where(source, entry.path + ".queue")] = (
                    f"unknown queue {queue_name!r} in {project.full_name}; known queues: {known} "
                    f"(declare it under `queues:`) (job {entry.name!r})"
                )
                continue
            queue_priority = _queue_priority(queue_name, declared, stored_queues)
            steps.append(_job_step(source, entry, stored_jobs.get(entry.name.lower()), queue_priority))
    if problems:
        raise ValidationFailed(problems)
    listed = {step.entry.name.lower() for step in steps}
    owners = {source.managed_by for source, _ in files}
    doomed = (
        [job for key, job in sorted(stored_jobs.items()) if job.managed_by in owners and key not in listed]
        if prune
        else []
    )
    _run_queues(queue_plan, project, stored_queues, now=now, actor=actor)
    for job in doomed:
        job_service.remove_job(job, now=now, actor=actor)
    for step in steps:
        try:
            _run_job(step, project, stored_queues, now=now, actor=actor)
        except (ValidationFailed, Conflict) as exc:
            fields = exc.errors if isinstance(exc, ValidationFailed) else {"": str(exc)}
            for key, message in fields.items():
                path = f"{step.entry.path}.{key}" if key else step.entry.path
                problems[_where(step.source, path)] = f"{message} (job {step.entry.name!r})"
    if problems:
        raise ValidationFailed(problems)
    # New jobs go in as one multi-row insert; their events and audit rows then name their ids.
    db.session.flush()
    for step in steps:
        if step.created:
            job_service.record_created(step.job, now=now, actor=actor)
    plan = _plan_document(project, steps, doomed, queue_plan, dry_run=dry_run, prune=prune)
    audit_trail.record_change(
        caller or actor,
        "applied",
        "project",
        project.id,
        now=now,
        label=project.full_name,
        project_id=project.id,
        organization_id=project.organization_id,
        extra={"sources": sorted(owners), "plan": _plan_summary(plan)},
    )
    record_event("jobs_applied", now=now, actor=actor, project=project.full_name, **_plan_summary(plan))
    return plan


# --- queues ------------------------------------------------------------------------------------


def _queue_plan(files, stored: dict[str, Queue]) -> dict[str, list]:
    plan: dict[str, list] = {"created": [], "updated": [], "unchanged": []}
    for _, loaded in files:
        for entry in loaded.queues:
            queue = stored.get(entry.name)
            if queue is None:
                plan["created"].append({"name": entry.name, "values": entry.values})
                continue
            changes = {
                key: {"before": getattr(queue, key), "after": value}
                for key, value in entry.values.items()
                if key in QUEUE_FIELDS and getattr(queue, key) != value
            }
            plan["updated" if changes else "unchanged"].append({"name": entry.name, "changes": changes})
    return plan


def _queue_priority(name: str, declared: dict, stored: dict[str, Queue]) -> int:
    entry = declared.get(name)
    if entry is not None and "priority" in entry.values:
        return entry.values["priority"]
    return stored[name].priority if name in stored else 0


def _run_queues(plan: dict[str, list], project: Project, stored: dict[str, Queue], *, now: datetime, actor) -> None:
    for item in plan["created"]:
        values = {key: value for key, value in item["values"].items() if key in QUEUE_FIELDS}
        queue = Queue(project_id=project.id, name=item["name"], created_at=now, updated_at=now)
        _set_queue_fields(queue, values, now=now, actor=actor)
        db.session.add(queue)
        db.session.flush()
        stored[queue.name] = queue
        record_event("queue_created", now=now, actor=actor, queue=queue.name)
        audit_trail.record_change(
            actor,
            "created",
            "queue",
            queue.id,
            None,
            _queue_state(queue),
            now=now,
            label=queue.name,
            project_id=project.id,
        )
    for item in plan["updated"]:
        queue = stored[item["name"]]
        before = _queue_state(queue)
        _set_queue_fields(
            queue, {key: change["after"] for key, change in item["changes"].items()}, now=now, actor=actor
        )
        queue.updated_at = now
        record_event("queue_updated", now=now, actor=actor, queue=queue.name, changed=sorted(item["changes"]))
        audit_trail.record_change(
            actor,
            "updated",
            "queue",
            queue.id,
            before,
            _queue_state(queue),
            now=now,
            label=queue.name,
            project_id=project.id,
        )


def _set_queue_fields(queue: Queue, values: dict[str, Any], *, now: datetime, actor) -> None:
    for key, value in values.items():
        if key == "paused":
            queue.paused = value
            queue.paused_at, queue.paused_by = (now, str(actor)[:200]) if value else (None, None)
            queue.paused_reason = "declared paused in a job file" if value else None
        else:
            setattr(queue, key, value)


def _queue_state(queue: Queue) -> dict[str, Any]:
    return {key: getattr(queue, key) for key in QUEUE_FIELDS}


# --- jobs --------------------------------------------------------------------------------------


def _job_step(source: Source, entry: JobEntry, job: Job | None, queue_priority: int) -> _JobStep:
    target = {name: entry.values.get(name) for name in JOB_FIELDS}
    if "priority" not in entry.given:
        target["priority"] = queue_priority  # as a job created without a priority takes its queue's
    if job is None:
        return _JobStep(source, entry, target, None, {}, created=True)
    current = {name: getattr(job, name) for name in JOB_FIELDS}
    if _same_interval(entry, target, current):
        # The file gives `every` without an anchor: the stored phase is kept, not moved to now.
        target["schedule"] = current["schedule"]
    before, after = _dump(current), _dump(target)
    changes = {
        name: {"before": before[name], "after": after[name]} for name in JOB_FIELDS if before[name] != after[name]
    }
    adopted = not changes and job.managed_by != source.managed_by
    return _JobStep(source, entry, target, job, changes, adopted=adopted, owner_before=job.managed_by)


def _same_interval(entry: JobEntry, target: dict, current: dict) -> bool:
    given = entry.given.get("schedule")
    anchored = isinstance(given, dict) and "start_at" in given or target.get("start_at") is not None
    if anchored or target["schedule_type"] != "interval" or current["schedule_type"] != "interval":
        return False
    return target["schedule"].get("every") == (current["schedule"] or {}).get("every")


def _dump(values: dict[str, Any]) -> dict[str, Any]:
    return _COMPARER.dump(values)


_COMPARER = JobSchema(only=JOB_FIELDS)


def _run_job(step: _JobStep, project: Project, queues: dict[str, Queue], *, now: datetime, actor) -> None:
    owner = step.source.managed_by
    if step.job is None:
        # The names were checked against every job of the project, under its lock (_load, _plan_and_run).
        step.job = job_service.add_job(
            step.target,
            project_id=project.id,
            now=now,
            actor=actor,
            own_priority=True,
            managed_by=owner,
            queue=queues[step.target["queue"]],
            name_checked=True,
            deferred=True,
        )
        return
    if not step.changes:
        if step.adopted:
            step.job.managed_by = owner
            audit_trail.record_change(
                actor,
                "updated",
                "job",
                step.job.id,
                {"managed_by": step.owner_before},
                {"managed_by": owner},
                now=now,
                **audit_trail.about_job(step.job),
            )
        return
    changed = {name: step.target[name] for name in step.changes}
    if SCHEDULE_TRIO_SET & changed.keys():
        changed.update({name: step.target[name] for name in SCHEDULE_TRIO})
    job_service.change_job(step.job, changed, now=now, actor=actor, managed_by=owner)


SCHEDULE_TRIO_SET = frozenset(SCHEDULE_TRIO)


# --- the plan ----------------------------------------------------------------------------------


def _plan_document(project: Project, steps, doomed, queue_plan, *, dry_run: bool, prune: bool) -> dict[str, Any]:
    created = [{"name": s.entry.name, "id": s.job.id, "source": s.source.managed_by} for s in steps if s.created]
    updated = [
        {"name": s.entry.name, "id": s.job.id, "source": s.source.managed_by, "changes": s.changes}
        for s in steps
        if s.changes
    ]
    unchanged = [{"name": s.entry.name, "id": s.job.id} for s in steps if not s.created and not s.changes]
    adopted = [
        {"name": s.entry.name, "id": s.job.id, "from": s.owner_before, "to": s.source.managed_by}
        for s in steps
        if s.adopted
    ]
    deleted = [{"name": job.name, "id": job.id, "source": job.managed_by} for job in doomed]
    changed = bool(created or updated or deleted or queue_plan["created"] or queue_plan["updated"])
    return {
        "project": project.full_name,
        "dry_run": dry_run,
        "prune": prune,
        "changed": changed,
        "created": created,
        "updated": updated,
        "unchanged": unchanged,
        "deleted": deleted,
        "adopted": adopted,
        "queues": {
            "created": [item["name"] for item in queue_plan["created"]],
            "updated": [{"name": item["name"], "changes": item["changes"]} for item in queue_plan["updated"]],
            "unchanged": [item["name"] for item in queue_plan["unchanged"]],
        },
    }


def _plan_summary(plan: dict[str, Any]) -> dict[str, Any]:
    return {
        "created": [item["name"] for item in plan["created"]],
        "updated": {item["name"]: sorted(item["changes"]) for item in plan["updated"]},
        "deleted": [item["name"] for item in plan["deleted"]],
        "unchanged": len(plan["unchanged"]),
        "queues_created": plan["queues"]["created"],
        "queues_updated": [item["name"] for item in plan["queues"]["updated"]],
    }


# --- export ------------------------------------------------------------------------------------


def export_document(
    *, caller: Caller | None = None, project_name: str | None = None, names: list[str] | None = None
) -> dict[str, Any]:
    """The project's jobs (or the named ones) and the queues they use, as a job file that applies
    with no changes. A field is written only where it differs from what leaving it out gives."""
    if caller is not None:
        caller.require(Action.READ)
    project = tenancy.find_project(project_name, caller) if project_name else project_for(caller)
    query = select(Job).where(Job.project_id == project.id).order_by(Job.name, Job.id)
    found = list(db.session.scalars(query))
    if names:
        wanted = {name.lower(): name for name in names}
        found = [job for job in found if job.name.lower() in wanted]
        missing = sorted(set(wanted) - {job.name.lower() for job in found})
        if missing:
            from app.services.errors import NotFound

            raise NotFound(f"no job named {wanted[missing[0]]!r} in {project.full_name}")
    omitted = _omitted_values()
    jobs = []
    for job in found:
        values = {name: value for name, value in dump_job(job).items() if name in JOB_FIELDS}
        document = {}
        for name in JOB_FIELDS:
            value = values[name]
            if name == "priority":
                if value == job.queue_row.priority:
                    continue
            elif name in omitted and omitted[name] == value:
                continue
            document[name] = value
        jobs.append(document)
    used = {job.queue_id for job in found}
    queues = [
        {
            "name": q.name,
            "description": q.description,
            "concurrency_limit": q.concurrency_limit,
            "rate_limit": q.rate_limit,
            "priority": q.priority,
            "paused": q.paused,
        }
        for q in db.session.scalars(select(Queue).where(Queue.project_id == project.id).order_by(Queue.name))
        if q.id in used
    ]
    return {"project": project.full_name, "queues": queues, "jobs": jobs}


def _omitted_values() -> dict[str, Any]:
    """What each field loads to when a file leaves it out (dumped), with this installation's
    setting defaults. Required fields have none and are always written."""
    schema = JobSchema(defaults=defaults_from(current_app.config))
    values = {}
    for name in JOB_FIELDS:
        field = schema.load_fields[name]
        if field.required:
            continue
        default = field.load_default
        if callable(default):
            default = default()
        elif default is missing:
            default = None
        values[name] = default
    return JobSchema(only=[n for n in values if n not in ("schedule",)]).dump(values)
