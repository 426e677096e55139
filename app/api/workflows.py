"""/api/v1 workflow runs: a workflow job's runs, one run with its steps, cancel, retry from a step."""

from __future__ import annotations

from flask import url_for
from flask_smorest import Blueprint
from marshmallow import Schema, fields

from app.api import examples as ex
from app.api.conventions import paginate
from app.api.schemas import PageQuery, StrictSchema, page_schema
from app.api.scope import ID_MAX
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.domain.permissions import Action
from app.models import WorkflowRun
from app.services.errors import NotFound
from app.services.read import workflows as workflow_read
from app.services.use_cases import workflows

blp = Blueprint(
    "api_workflows",
    __name__,
    url_prefix="/api/v1",
    description="Workflow runs: a workflow job's occurrences, step by step.",
)


class WorkflowStepSchema(Schema):
    name = fields.String(required=True, metadata={"example": "export"})
    task = fields.String(required=True, metadata={"example": "http_request"})
    after = fields.List(fields.String(), required=True, metadata={"description": "The steps it waits for."})
    status = fields.String(
        required=True,
        metadata={
            "description": "waiting, upstream_failed, cancelled, or its execution's status",
            "example": "succeeded",
        },
    )
    execution_id = fields.Integer(allow_none=True, required=True)
    kept_from_run = fields.Integer(
        allow_none=True, required=True, metadata={"description": "A retry took it over from this run (not rerun)."}
    )
    attempts = fields.Integer(required=True)
    started_at = fields.String(allow_none=True, required=True)
    finished_at = fields.String(allow_none=True, required=True)
    duration_ms = fields.Integer(allow_none=True, required=True)
    result = fields.Raw(allow_none=True, required=True, metadata={"description": "What its task returned."})
    depth = fields.Integer(required=True, metadata={"description": "Its column in the graph (0: a root)."})
    explain = fields.String(required=True, metadata={"example": "waiting for `export`"})


class WorkflowRunSchema(Schema):
    id = fields.Integer(required=True, metadata={"description": "The run's id: its occurrence's execution id."})
    job_id = fields.Integer(required=True)
    job = fields.String(required=True)
    status = fields.String(required=True, metadata={"example": "running"})
    trigger = fields.String(required=True)
    scheduled_for = fields.String(required=True)
    started_at = fields.String(allow_none=True, required=True)
    finished_at = fields.String(allow_none=True, required=True)
    cancel_requested_by = fields.String(allow_none=True, required=True)
    retry_of = fields.Integer(allow_none=True, required=True)
    retry_from = fields.String(allow_none=True, required=True)
    error = fields.String(required=True)
    counts = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True)
    steps = fields.List(fields.Nested(WorkflowStepSchema), required=True)


class WorkflowRunSummarySchema(Schema):
    id = fields.Integer(required=True)
    job_id = fields.Integer(required=True)
    status = fields.String(required=True)
    trigger = fields.String(required=True)
    scheduled_for = fields.String(required=True)
    started_at = fields.String(allow_none=True, required=True)
    finished_at = fields.String(allow_none=True, required=True)
    steps = fields.Integer(required=True)
    started_steps = fields.Integer(required=True)
    upstream_failed = fields.Integer(required=True)
    retry_of = fields.Integer(allow_none=True, required=True)


class RetryBody(StrictSchema):
    from_ = fields.String(
        data_key="from", load_default=None, metadata={"description": "Also rerun this step and everything after it."}
    )


class CancelBody(StrictSchema):
    reason = fields.String(load_default=None)


WorkflowRunPage = page_schema(WorkflowRunSummarySchema, "WorkflowRunPage")


def _id(run_id: int) -> int:
    if not 0 < run_id <= ID_MAX:
        raise NotFound(f"workflow run {run_id} does not exist")
    return run_id


def _view(run: WorkflowRun) -> dict:
    return workflow_read.run_view(run, workflows.step_executions(run))


@blp.get("/jobs/<int:job_id>/workflow-runs")
@authenticated(Action.READ)
@blp.arguments(PageQuery, location="query")
@blp.response(200, WorkflowRunPage, example=ex.page(ex.WORKFLOW_RUN_SUMMARY, "/api/v1/jobs/12/workflow-runs"))
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def list_runs(args, job_id):
    """A workflow job's runs, newest first, by cursor.

    Roles: viewer, operator, admin. Errors: 401, 403, 404 (job), 422.
    """
    if not 0 < job_id <= ID_MAX:
        raise NotFound(f"job {job_id} does not exist")
    query = workflows.list_query(job_id, caller=current_caller())
    return paginate(query, WorkflowRun.id, args, workflow_read.run_summary, descending=True)


@blp.get("/workflow-runs/<int:run_id>")
@authenticated(Action.READ)
@blp.response(200, WorkflowRunSchema, example=ex.WORKFLOW_RUN)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_run(run_id):
    """One workflow run: its status and each step's status, timing, result and explanation.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    return _view(workflows.get_run(_id(run_id), caller=current_caller()))


@blp.post("/workflow-runs/<int:run_id>/retry")
@authenticated(Action.OPERATE)
@blp.arguments(RetryBody, example=ex.WORKFLOW_RETRY)
@blp.response(201, WorkflowRunSchema, example=ex.WORKFLOW_RETRIED)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def retry_run(body, run_id):
    """Resume a failed or cancelled run as a new run: steps that did not succeed run again (with
    `from`, that step and its downstream too); the steps that succeeded are taken over.

    Roles: operator, admin. Errors: 401, 403, 404, 409 (not failed or cancelled), 422 (`from`).
    """
    caller = current_caller()
    run = workflows.retry_run(_id(run_id), now=utcnow(), actor=caller.actor, from_step=body.get("from_"), caller=caller)
    return _view(run), 201, {"Location": url_for("api_workflows.get_run", run_id=run.id)}


@blp.post("/workflow-runs/<int:run_id>/cancel")
@authenticated(Action.OPERATE)
@blp.arguments(CancelBody, example=ex.WORKFLOW_CANCEL)
@blp.response(200, WorkflowRunSchema, example=ex.WORKFLOW_CANCELLED)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def cancel_run(body, run_id):
    """Cancel a running run: steps not started never run, running ones are stopped.

    Roles: operator, admin. Errors: 401, 403, 404, 409 (not running).
    """
    caller = current_caller()
    return _view(
        workflows.cancel_run(_id(run_id), now=utcnow(), actor=caller.actor, reason=body.get("reason"), caller=caller)
    )
