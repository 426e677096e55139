"""/api/v1/batches: submit many runs of a job as one batch, list, inspect (with items), cancel."""

from __future__ import annotations

from flask import url_for
from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.conventions import IDEMPOTENCY_HEADER, idempotent, json_object_body, paginate
from app.api.schemas import BatchQuery, BatchStatusSchema, ExecutionSchema, page_schema
from app.api.scope import ID_MAX
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.definitions.batch import BatchSchema as BatchDefinition
from app.domain.permissions import Action
from app.extensions import db
from app.models import Batch
from app.services.errors import NotFound
from app.services.read import batches as batch_views
from app.services.serialize import execution_to_dict
from app.services.use_cases import batches

blp = Blueprint("api_batches", __name__, url_prefix="/api/v1/batches", description="Batches: many runs as one.")

BatchPage = page_schema(BatchStatusSchema, "BatchPage")


def _id(batch_id: int) -> int:
    if not 0 < batch_id <= ID_MAX:
        raise NotFound(f"batch {batch_id} does not exist")
    return batch_id


def _documents(rows: list[Batch]) -> list[dict]:
    return [batch_views.to_dict(view) for view in batch_views.views(rows)]


@blp.get("")
@authenticated(Action.READ)
@blp.arguments(BatchQuery, location="query")
@blp.response(200, BatchPage, example=ex.page(ex.BATCH, "/api/v1/batches"))
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_batches(args):
    """Batches, newest first, by cursor (of one job with `job`); status and counts per batch.

    Roles: viewer, operator, admin. Errors: 401, 403, 422.
    """
    query = batches.list_query(job_id=args.get("job"), caller=current_caller())
    page = paginate(query, Batch.id, args, lambda batch: batch, descending=True)
    page["items"] = _documents(page["items"])
    return page


@blp.post("")
@authenticated(Action.OPERATE)
@idempotent
@blp.doc(
    parameters=[IDEMPOTENCY_HEADER],
    requestBody={
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "allOf": [
                        {
                            "type": "object",
                            "required": ["job_id"],
                            "properties": {"job_id": {"type": "integer", "minimum": 1}},
                        },
                        BatchDefinition(task=None, job_config=None),
                    ]
                },
                "example": ex.BATCH_SUBMIT,
            }
        },
    },
)
@blp.response(201, BatchStatusSchema, example=ex.NEW_BATCH)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def submit_batch():
    """Submit a batch: one run of `job_id` per item (each item a config override), all checked
    before anything is stored; optionally an `on_complete` task. Send an Idempotency-Key to retry safely.

    Roles: operator, admin. Errors: 401, 403, 404 (job), 409 (job disabled), 422 (items, one message per field).
    """
    data = json_object_body()
    job_id = data.pop("job_id", None)
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        from app.api.errors import ApiError

        raise ApiError(422, "job_id must be a job's id", errors={"job_id": "must be a whole number"})
    caller = current_caller()
    if not 0 < job_id <= ID_MAX:
        raise NotFound(f"job {job_id} does not exist")
    batch = batches.submit_batch(job_id, data, now=utcnow(), actor=caller.actor, caller=caller)
    return _documents([batch])[0], 201, {"Location": url_for("api_batches.get_batch", batch_id=batch.id)}


@blp.get("/<int:batch_id>")
@authenticated(Action.READ)
@blp.response(200, BatchStatusSchema, example=ex.BATCH)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_batch(batch_id):
    """One batch: aggregate status (running, succeeded, failed, partially_failed, cancelled) and counts.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    return _documents([batches.get_batch(_id(batch_id), current_caller())])[0]


@blp.get("/<int:batch_id>/items")
@authenticated(Action.READ)
@blp.response(200, ExecutionSchema(many=True), example=ex.BATCH_ITEMS)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def list_items(batch_id):
    """The batch's runs, in submission order (without output).

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    batch = batches.get_batch(_id(batch_id), current_caller())
    return [execution_to_dict(row, include_output=False) for row in batch_views.items(batch.id)]


@blp.post("/<int:batch_id>/cancel")
@authenticated(Action.OPERATE)
@blp.response(200, BatchStatusSchema, example=ex.CANCELLED_BATCH)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def cancel_batch(batch_id):
    """Cancel what has not started; running items finish; the batch reads `cancelled`.

    Roles: operator, admin. Errors: 401, 403, 404, 409 (already finished or cancelled).
    """
    caller = current_caller()
    batch, _cancelled = batches.cancel_batch(_id(batch_id), now=utcnow(), actor=caller.actor, caller=caller)
    db.session.expire_all()
    return _documents([batches.get_batch(batch.id, caller)])[0]
