"""/api/v1/jobs: list, create, read, edit, delete, enable, disable, trigger, preview.

Bodies are validated by the job definition (`app.definitions.JobSchema`) inside the jobs use case,
the same schema that documents them here, so the API, the CLI and the web form accept exactly the
same jobs with the same messages.
"""

from __future__ import annotations

from flask import jsonify, request, url_for
from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.conventions import (
    IDEMPOTENCY_HEADER,
    IF_MATCH_HEADER,
    check_if_match,
    idempotent,
    json_object_body,
    paginate,
    with_etag,
)
from app.api.errors import ApiError
from app.api.schemas import (
    ExplainQuery,
    LintWarningSchema,
    PageQuery,
    PreviewQuery,
    PreviewSchema,
    TriggeredSchema,
    page_schema,
)
from app.api.scope import ID_MAX
from app.api.security import authenticated, current_caller
from app.clock import iso_z, utcnow
from app.definitions import JobSchema, dump_job
from app.definitions.backfill import BackfillSchema as BackfillDefinition
from app.definitions.batch import RunSchema
from app.domain.permissions import Action
from app.models import Job
from app.scheduling import ScheduleError, preview
from app.services.errors import NotFound
from app.services.read.explain import explain_job
from app.services.serialize import execution_to_dict
from app.services.use_cases import jobs, runs
from app.services.use_cases.backfill import backfill_from_input

blp = Blueprint("api_jobs", __name__, url_prefix="/api/v1/jobs", description="Jobs: what runs, and when.")


class JobEditSchema(JobSchema):
    """The fields of a job edit: any subset of the job's fields."""


class JobQuery(PageQuery):
    pass


JobPage = page_schema(JobSchema, "JobPage")
ERRORS_READ = (401, 403, 404)


READ_ONLY = frozenset(name for name, field in JobSchema().fields.items() if field.dump_only)


def _id(job_id: int) -> int:
    """A job id the database can hold (a larger one names nothing: 404, never a database error)."""
    if not 0 < job_id <= ID_MAX:
        raise NotFound(f"job {job_id} does not exist")
    return job_id


def _body() -> dict:
    """The job fields sent: a JSON object without the fields only the server sets."""
    data = json_object_body()
    given = sorted(READ_ONLY & data.keys())
    if given:
        raise ApiError(
            422, "read-only fields were sent: " + ", ".join(given), errors=dict.fromkeys(given, "is read-only")
        )
    return data


@blp.get("")
@authenticated(Action.READ)
@blp.arguments(JobQuery, location="query")
@blp.response(200, JobPage, example=ex.page(ex.JOB, "/api/v1/jobs"))
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_jobs(args):
    """Jobs of the caller's organization (or token's project), oldest first, by cursor.

    Roles: viewer, operator, admin. Errors: 401, 403, 422 (bad limit or cursor).
    """
    return paginate(jobs.list_query(current_caller()), Job.id, args, lambda job: job, descending=False)


@blp.post("")
@authenticated(Action.OPERATE)
@idempotent
@blp.doc(
    parameters=[IDEMPOTENCY_HEADER],
    requestBody={
        "required": True,
        "content": {
            "application/json": {
                "schema": JobSchema,
                "example": ex.JOB_CREATE,
            }
        },
    },
)
@blp.response(201, JobSchema, example=ex.JOB)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(409, response="CONFLICT")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def create_job():
    """Create a job; 201 with the job and its Location. Send an Idempotency-Key to retry safely.

    Roles: operator, admin. Errors: 401, 403, 422 (field errors, one message per field).
    """
    caller = current_caller()
    job = jobs.create_job(_body(), now=utcnow(), actor=caller.actor, caller=caller)
    return job, 201, {"Location": url_for("api_jobs.get_job", job_id=job.id)}


@blp.get("/<int:job_id>")
@authenticated(Action.READ)
@blp.response(200, JobSchema, example=ex.JOB)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_job(job_id):
    """One job, with an ETag to send back as If-Match when editing it.

    Roles: viewer, operator, admin. Errors: 401, 403, 404 (missing or another organization's).
    """
    job = jobs.get_job(_id(job_id), current_caller())
    return with_etag(job, dump_job(job))


@blp.patch("/<int:job_id>")
@authenticated(Action.OPERATE)
@blp.doc(
    parameters=[IF_MATCH_HEADER],
    requestBody={
        "required": True,
        "content": {"application/json": {"schema": JobEditSchema(partial=True), "example": ex.JOB_EDIT}},
    },
)
@blp.response(200, JobSchema, example=ex.EDITED_JOB)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
@blp.alt_response(412, response="PRECONDITION_FAILED")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def edit_job(job_id):
    """Change some fields of a job; with If-Match, a job changed meanwhile answers 412.

    Roles: operator, admin. Errors: 401, 403, 404, 412 (stale If-Match), 422 (field errors).
    """
    caller = current_caller()
    job = jobs.get_job(_id(job_id), caller)
    data = _body()
    check_if_match(dump_job(job))
    job = jobs.update_job(job_id, data, now=utcnow(), actor=caller.actor, caller=caller)
    return with_etag(job, dump_job(job))


@blp.delete("/<int:job_id>")
@authenticated(Action.OPERATE)
@blp.doc(parameters=[IF_MATCH_HEADER])
@blp.response(204)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(412, response="PRECONDITION_FAILED")
def delete_job(job_id):
    """Delete a job and its history (a run in flight finishes; its result is discarded).

    Roles: operator, admin. Errors: 401, 403, 404, 412.
    """
    caller = current_caller()
    job = jobs.get_job(_id(job_id), caller)
    check_if_match(dump_job(job))
    jobs.delete_job(job_id, now=utcnow(), actor=caller.actor, caller=caller)
    return None


@blp.post("/<int:job_id>/enable")
@authenticated(Action.OPERATE)
@blp.response(200, JobSchema, example=ex.JOB)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def enable_job(job_id):
    """Enable a job; it resumes from now (nothing missed while disabled is replayed).

    Roles: operator, admin. Errors: 401, 403, 404, 409 (a one-time job that already fired).
    """
    caller = current_caller()
    return jobs.enable_job(_id(job_id), now=utcnow(), actor=caller.actor, caller=caller)


@blp.post("/<int:job_id>/disable")
@authenticated(Action.OPERATE)
@blp.response(200, JobSchema, example=ex.DISABLED_JOB)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def disable_job(job_id):
    """Disable a job and cancel its queued runs.

    Roles: operator, admin. Errors: 401, 403, 404.
    """
    caller = current_caller()
    job, _cancelled = jobs.disable_job(_id(job_id), now=utcnow(), actor=caller.actor, caller=caller)
    return job


@blp.post("/<int:job_id>/trigger")
@authenticated(Action.OPERATE)
@idempotent
@blp.doc(
    parameters=[IDEMPOTENCY_HEADER],
    requestBody={
        "required": False,
        "content": {
            "application/json": {
                "schema": RunSchema(now=None, task=None, job_config=None),
                "example": ex.TRIGGER,
            }
        },
    },
)
@blp.response(201, TriggeredSchema, example={**ex.TRIGGERED, "deduplicated": False})
@blp.alt_response(
    200,
    schema=TriggeredSchema,
    description="Deduplicated: the unique job's run that holds its key.",
    example={**ex.TRIGGERED, "deduplicated": True},
)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def trigger_job(job_id):
    """Run the job now, after a delay (`in`: 30s, 5m...) or at an instant (`at`), optionally with a
    config override checked against the task's schema; 201 with the execution. Send an
    Idempotency-Key so that a retried request never creates a second run. A unique job whose
    key a pending or running run holds answers 200 with that run and `deduplicated: true`.

    Roles: operator, admin. Errors: 401, 403, 404, 409 (job disabled), 422 (bad delay, instant or override).
    """
    caller = current_caller()
    data = request.get_json(silent=True) if request.get_data() else {}
    if not isinstance(data, dict):
        raise ApiError(422, "the body must be a JSON object", errors={"_schema": "must be a JSON object"})
    execution = runs.trigger_run(_id(job_id), data, now=utcnow(), actor=caller.actor, caller=caller)
    document = {**execution_to_dict(execution), "deduplicated": execution.deduplicated}
    return (
        document,
        200 if execution.deduplicated else 201,
        {"Location": url_for("api_executions.get_execution", execution_id=execution.id)},
    )


@blp.get("/<int:job_id>/preview")
@authenticated(Action.READ)
@blp.arguments(PreviewQuery, location="query")
@blp.response(200, PreviewSchema, example=ex.JOB_PREVIEW)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def preview_job(args, job_id):
    """The job's next fire times (UTC), with DST notes.

    Roles: viewer, operator, admin. Errors: 401, 403, 404, 422.
    """
    job = jobs.get_job(_id(job_id), current_caller())
    try:
        items = preview(jobs.schedule_of(job), args.get("after") or utcnow(), args["count"])
    except ScheduleError as exc:
        raise ApiError(422, str(exc), errors={"after": str(exc)}) from None
    return {
        "next_runs": [iso_z(i.utc) for i in items],
        "timezone": job.timezone,
        "notes": [i.note for i in items if i.note],
    }


@blp.get("/<int:job_id>/lint")
@authenticated(Action.READ)
@blp.response(200, LintWarningSchema(many=True), example=ex.LINT)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def lint_job(job_id):
    """Warnings about the job's schedule (uneven steps, DST gaps and folds, denser than its timeout,
    rarely firing); never errors.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    job = jobs.get_job(_id(job_id), current_caller())
    return [warning.to_json() for warning in jobs.lint_job(job, now=utcnow())]


def free_form(example: dict) -> dict:
    """A JSON object answer whose shape the read model defines (no schema of its own), with its example."""
    return {"application/json": {"schema": {"type": "object", "additionalProperties": True}, "example": example}}


@blp.get("/<int:job_id>/explain")
@authenticated(Action.READ)
@blp.arguments(ExplainQuery, location="query")
@blp.doc(
    responses={"200": {"description": "What became of the occurrences, and why.", "content": free_form(ex.EXPLAIN)}}
)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def explain(args, job_id):
    """What happened to the job's occurrence at an instant (`at`) or in a window (`from`, `to`), and why:
    fired, coalesced, skipped for overlap, missed, expired, not due, disabled, queue paused, no worker.

    Roles: viewer, operator, admin. Errors: 401, 403, 404, 422 (neither or both of at and a window).
    """
    document = explain_job(
        _id(job_id),
        now=utcnow(),
        at=args.get("at"),
        start=args.get("from_"),
        end=args.get("to"),
        caller=current_caller(),
    )
    return jsonify(document)


@blp.post("/<int:job_id>/backfill")
@authenticated(Action.OPERATE)
@idempotent
@blp.doc(
    parameters=[IDEMPOTENCY_HEADER],
    requestBody={
        "required": True,
        "content": {"application/json": {"schema": BackfillDefinition(now=None), "example": ex.BACKFILL}},
    },
    responses={
        "200": {"description": "The plan of a dry run (nothing created).", "content": free_form(ex.BACKFILL_PLAN)},
        "201": {"description": "The occurrences created as backfill runs.", "content": free_form(ex.BACKFILL_CREATED)},
    },
)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def backfill(job_id):
    """Run the job's occurrences of a past window that have no run yet (trigger `backfill`); with
    `dry_run` only say what would run. The overlap policy is the job's unless `overlap` is given.
    Instants without an offset are the job's local time.

    Roles: operator, admin. Errors: 401, 403, 404, 409 (job disabled), 422 (window, max, overlap).
    """
    caller = current_caller()
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise ApiError(422, "the body must be a JSON object", errors={"_schema": "must be a JSON object"})
    plan = backfill_from_input(_id(job_id), data, now=utcnow(), actor=caller.actor, caller=caller)
    response = jsonify(plan.to_json())
    response.status_code = 200 if plan.dry_run else 201
    return response
