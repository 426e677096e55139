"""/api/v1/executions: list (filters, cursor), read, attempts, output, retry, cancel."""

from __future__ import annotations

from flask import url_for
from flask_smorest import Blueprint
from sqlalchemy import select

from app.api import examples as ex
from app.api.conventions import IDEMPOTENCY_HEADER, idempotent, paginate, with_etag
from app.api.schemas import (
    AttemptSchema,
    CancelSchema,
    ExecutionExplainSchema,
    ExecutionQuery,
    ExecutionSchema,
    OutputSchema,
    page_schema,
)
from app.api.scope import ID_MAX
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.domain.permissions import Action
from app.extensions import db
from app.models import Attempt, Execution, Queue
from app.services import scoping
from app.services.errors import NotFound
from app.services.serialize import attempt_to_dict, execution_to_dict
from app.services.use_cases import executions

blp = Blueprint("api_executions", __name__, url_prefix="/api/v1/executions", description="Executions: runs of jobs.")

ExecutionPage = page_schema(ExecutionSchema, "ExecutionPage")


def _id(execution_id: int) -> int:
    """An id the database can hold (a larger one names nothing: 404, never a database error)."""
    if not 0 < execution_id <= ID_MAX:
        raise NotFound(f"execution {execution_id} does not exist")
    return execution_id


def _list_item(execution: Execution) -> dict:
    return execution_to_dict(execution, include_output=False)


@blp.get("")
@authenticated(Action.READ)
@blp.arguments(ExecutionQuery, location="query")
@blp.response(200, ExecutionPage, example=ex.page(ex.EXECUTION_LISTED, "/api/v1/executions"))
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_executions(args):
    """Executions, newest first, by cursor; filter by status, job, queue, task, one_off, since and until.

    Roles: viewer, operator, admin. Errors: 401, 403, 422 (unknown status, bad limit).
    """
    caller = current_caller()
    queue_id = None
    if args.get("queue"):
        queue_id = db.session.scalar(scoping.queues(select(Queue.id).where(Queue.name == args["queue"]), caller))
        if queue_id is None:
            return {"items": [], "next": None}
    query = executions.list_query(
        status=args.get("status"), job_id=args.get("job"), queue_id=queue_id, task=args.get("task"), caller=caller
    )
    if args.get("one_off") is not None:
        query = query.where(Execution.job_id.is_(None) if args["one_off"] else Execution.job_id.is_not(None))
    if args.get("since") is not None:
        query = query.where(Execution.created_at >= args["since"])
    if args.get("until") is not None:
        query = query.where(Execution.created_at < args["until"])
    return paginate(query, Execution.id, args, _list_item, descending=True)


@blp.get("/<int:execution_id>")
@authenticated(Action.READ)
@blp.response(200, ExecutionSchema, example=ex.EXECUTION)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_execution(execution_id):
    """One execution with its output and error.

    Roles: viewer, operator, admin. Errors: 401, 403, 404 (missing or another organization's).
    """
    document = execution_to_dict(executions.get_execution(_id(execution_id), caller=current_caller()))
    return with_etag(document, document)


@blp.get("/<int:execution_id>/attempts")
@authenticated(Action.READ)
@blp.response(200, AttemptSchema(many=True), example=ex.ATTEMPTS)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def list_attempts(execution_id):
    """The tries of one execution, first to last.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    executions.get_execution(_id(execution_id), caller=current_caller())
    rows = db.session.scalars(select(Attempt).where(Attempt.execution_id == execution_id).order_by(Attempt.number))
    return [attempt_to_dict(row) for row in rows]


@blp.get("/<int:execution_id>/output")
@authenticated(Action.READ)
@blp.response(200, OutputSchema, example=ex.OUTPUT)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_output(execution_id):
    """What the execution printed (output) and its error text.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    execution = executions.get_execution(_id(execution_id), caller=current_caller())
    return {
        "execution_id": execution.id,
        "status": execution.status,
        "output": execution.output or "",
        "error": execution.error or "",
    }


@blp.get("/<int:execution_id>/explain")
@authenticated(Action.READ)
@blp.response(200, ExecutionExplainSchema, example=ex.EXECUTION_EXPLAINED)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def explain_execution(execution_id):
    """What became of one execution and why: ran, waiting (not yet available, queue paused, no live
    worker serving its queue), expired, cancelled (by whom)... A one-off run's too.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    from app.services.read.explain import explain_execution as explain

    return explain(_id(execution_id), now=utcnow(), caller=current_caller())


@blp.post("/<int:execution_id>/retry")
@authenticated(Action.OPERATE)
@idempotent
@blp.doc(parameters=[IDEMPOTENCY_HEADER])
@blp.response(201, ExecutionSchema, example=ex.RETRIED)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def retry_execution(execution_id):
    """Run a finished (failed, timed out, dead-lettered or cancelled) execution again as a new one.

    Roles: operator, admin. Errors: 401, 403, 404, 409 (not retryable, job disabled).
    """
    caller = current_caller()
    new = executions.retry_execution(_id(execution_id), now=utcnow(), actor=caller.actor, caller=caller)
    return execution_to_dict(new), 201, {"Location": url_for("api_executions.get_execution", execution_id=new.id)}


@blp.post("/<int:execution_id>/cancel")
@authenticated(Action.OPERATE)
@blp.arguments(CancelSchema, required=False, example=ex.CANCEL)
@blp.response(200, ExecutionSchema, example=ex.CANCELLED)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def cancel_execution(body, execution_id):
    """Cancel a queued execution at once, or ask a running one's worker to stop it (within about a second).

    Roles: operator, admin. Errors: 401, 403, 404, 409 (already finished or being cancelled).
    """
    caller = current_caller()
    execution = executions.cancel_execution(
        _id(execution_id), now=utcnow(), actor=caller.actor, reason=body.get("reason"), caller=caller
    )
    return execution_to_dict(execution)
