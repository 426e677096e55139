"""/api/v1/jobs: list, create, read, edit, delete, enable, disable, trigger, preview.

Bodies are validated by the job definition (`app.definitions.JobSchema`) inside the jobs use case,
the same schema that documents them here, so the API, the CLI and the web form accept exactly the
same jobs with the same messages.
"""

from __future__ import annotations

from flask import url_for
from flask_smorest import Blueprint
from sqlalchemy import select

from app.api import scope
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
from app.api.schemas import ExecutionSchema, PageQuery, PreviewQuery, PreviewSchema, page_schema
from app.api.security import authenticated, current_caller
from app.clock import iso_z, utcnow
from app.definitions import JobSchema, dump_job
from app.domain.permissions import Action
from app.models import Job, Queue
from app.scheduling import ScheduleError, preview
from app.services import scoping
from app.services.serialize import execution_to_dict
from app.services.use_cases import jobs
from app.services.use_cases.tenancy import working_project

blp = Blueprint("api_jobs", __name__, url_prefix="/api/v1/jobs", description="Jobs: what runs, and when.")


class JobEditSchema(JobSchema):
    """The fields of a job edit: any subset of the job's fields."""


class JobQuery(PageQuery):
    pass


JobPage = page_schema(JobSchema, "JobPage")
ERRORS_READ = (401, 403, 404)


READ_ONLY = frozenset(name for name, field in JobSchema().fields.items() if field.dump_only)


def _body() -> dict:
    """The job fields sent: a JSON object without the fields only the server sets."""
    data = json_object_body()
    given = sorted(READ_ONLY & data.keys())
    if given:
        raise ApiError(
            422, "read-only fields were sent: " + ", ".join(given), errors=dict.fromkeys(given, "is read-only")
        )
    return data


def _check_queue_in_project(data: dict) -> None:
    """STOPGAP until the jobs use case takes the caller: a job's queue must be in the caller's project."""
    name = data.get("queue")
    caller = current_caller()
    if caller.sees_everything and caller.organization_id is None:
        return
    project = working_project(caller)
    if isinstance(name, str) and name:
        from app.extensions import db

        found = db.session.scalar(select(Queue.id).where(Queue.project_id == project.id, Queue.name == name))
        if found is None:
            raise ApiError(422, f"no queue named {name!r} in {project.full_name}", errors={"queue": "unknown queue"})


@blp.get("")
@authenticated(Action.READ)
@blp.arguments(JobQuery, location="query")
@blp.response(200, JobPage)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_jobs(args):
    """Jobs of the caller's organization (or token's project), oldest first, by cursor.

    Roles: viewer, operator, admin. Errors: 401, 403, 422 (bad limit or cursor).
    """
    query = scoping.jobs(select(Job), current_caller()).order_by(Job.id)
    return paginate(query, Job.id, args, lambda job: job, descending=False)


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
                "example": {
                    "name": "nightly report",
                    "task": "noop",
                    "schedule_type": "cron",
                    "schedule": {"expression": "0 2 * * *"},
                    "timezone": "UTC",
                },
            }
        },
    },
)
@blp.response(201, JobSchema)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(409, response="CONFLICT")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def create_job():
    """Create a job; 201 with the job and its Location. Send an Idempotency-Key to retry safely.

    Roles: operator, admin. Errors: 401, 403, 422 (field errors, one message per field).
    """
    data = _body()
    _check_queue_in_project(data)
    job = jobs.create_job(data, now=utcnow(), actor=current_caller().actor)
    return job, 201, {"Location": url_for("api_jobs.get_job", job_id=job.id)}


@blp.get("/<int:job_id>")
@authenticated(Action.READ)
@blp.response(200, JobSchema)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_job(job_id):
    """One job, with an ETag to send back as If-Match when editing it.

    Roles: viewer, operator, admin. Errors: 401, 403, 404 (missing or another organization's).
    """
    job = scope.job(current_caller(), job_id)
    return with_etag(job, dump_job(job))


@blp.patch("/<int:job_id>")
@authenticated(Action.OPERATE)
@blp.doc(
    parameters=[IF_MATCH_HEADER],
    requestBody={
        "required": True,
        "content": {
            "application/json": {"schema": JobEditSchema(partial=True), "example": {"description": "Runs nightly."}}
        },
    },
)
@blp.response(200, JobSchema)
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
    job = scope.job(current_caller(), job_id)
    data = _body()
    check_if_match(dump_job(job))
    if "queue" in data:
        _check_queue_in_project(data)
    job = jobs.update_job(job_id, data, now=utcnow(), actor=current_caller().actor)
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
    job = scope.job(current_caller(), job_id)
    check_if_match(dump_job(job))
    jobs.delete_job(job_id, now=utcnow(), actor=current_caller().actor)
    return None


@blp.post("/<int:job_id>/enable")
@authenticated(Action.OPERATE)
@blp.response(200, JobSchema)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def enable_job(job_id):
    """Enable a job; it resumes from now (nothing missed while disabled is replayed).

    Roles: operator, admin. Errors: 401, 403, 404, 409 (a one-time job that already fired).
    """
    scope.job(current_caller(), job_id)
    return jobs.enable_job(job_id, now=utcnow(), actor=current_caller().actor)


@blp.post("/<int:job_id>/disable")
@authenticated(Action.OPERATE)
@blp.response(200, JobSchema)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def disable_job(job_id):
    """Disable a job and cancel its queued runs.

    Roles: operator, admin. Errors: 401, 403, 404.
    """
    scope.job(current_caller(), job_id)
    job, _cancelled = jobs.disable_job(job_id, now=utcnow(), actor=current_caller().actor)
    return job


@blp.post("/<int:job_id>/trigger")
@authenticated(Action.OPERATE)
@idempotent
@blp.doc(parameters=[IDEMPOTENCY_HEADER])
@blp.response(201, ExecutionSchema)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def trigger_job(job_id):
    """Run the job now as a manual execution; 201 with the execution. Send an Idempotency-Key so
    that a retried request never creates a second run.

    Roles: operator, admin. Errors: 401, 403, 404, 409 (job disabled).
    """
    scope.job(current_caller(), job_id)
    execution = jobs.trigger_job(job_id, now=utcnow(), actor=current_caller().actor)
    document = execution_to_dict(execution)
    return document, 201, {"Location": url_for("api_executions.get_execution", execution_id=execution.id)}


@blp.get("/<int:job_id>/preview")
@authenticated(Action.READ)
@blp.arguments(PreviewQuery, location="query")
@blp.response(200, PreviewSchema)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def preview_job(args, job_id):
    """The job's next fire times (UTC), with DST notes.

    Roles: viewer, operator, admin. Errors: 401, 403, 404, 422.
    """
    job = scope.job(current_caller(), job_id)
    try:
        items = preview(jobs.schedule_of(job), args.get("after") or utcnow(), args["count"])
    except ScheduleError as exc:
        raise ApiError(422, str(exc), errors={"after": str(exc)}) from None
    return {
        "next_runs": [iso_z(i.utc) for i in items],
        "timezone": job.timezone,
        "notes": [i.note for i in items if i.note],
    }
