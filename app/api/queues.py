"""/api/v1/queues: list, create, read, edit, delete, pause, resume, stats."""

from __future__ import annotations

from flask import url_for
from flask_smorest import Blueprint
from sqlalchemy import select

from app.api import examples as ex
from app.api import scope
from app.api.conventions import IF_MATCH_HEADER, check_if_match, json_object_body, paginate, with_etag
from app.api.schemas import (
    PageQuery,
    PauseSchema,
    QueueCreateSchema,
    QueueEditSchema,
    QueueSchema,
    QueueStatsSchema,
    page_schema,
)
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.domain.permissions import Action
from app.models import Queue
from app.services import scoping
from app.services.read.queue_stats import queue_stats, queue_to_dict
from app.services.use_cases import queues

blp = Blueprint("api_queues", __name__, url_prefix="/api/v1/queues", description="Queues: where jobs wait for workers.")

QueuePage = page_schema(QueueSchema, "QueuePage")


def _document(queue: Queue, *, with_stats: bool = True, stats=None) -> dict:
    if stats is None and with_stats:
        stats = queue_stats(utcnow(), [queue]).get(queue.id)
    document = queue_to_dict(queue, stats)
    project = getattr(queue, "project", None)
    if project is not None:
        document["project"] = project.full_name
    return document


@blp.get("")
@authenticated(Action.READ)
@blp.arguments(PageQuery, location="query")
@blp.response(200, QueuePage, example=ex.page(ex.QUEUE, "/api/v1/queues"))
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_queues(args):
    """Queues of the caller's organization (or token's project) with live statistics.

    Roles: viewer, operator, admin. Errors: 401, 403, 422.
    """
    query = scoping.queues(select(Queue), current_caller()).order_by(Queue.id)
    page = paginate(query, Queue.id, args, lambda queue: queue, descending=False)
    stats = queue_stats(utcnow(), page["items"]) if page["items"] else {}  # one read for the whole page
    page["items"] = [_document(queue, stats=stats.get(queue.id)) for queue in page["items"]]
    return page


@blp.post("")
@authenticated(Action.ADMINISTER)
@blp.arguments(QueueCreateSchema, example=ex.QUEUE_CREATE)
@blp.response(201, QueueSchema, example=ex.QUEUE)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def create_queue(body):
    """Create a queue in the caller's project.

    Roles: admin. Errors: 401, 403, 422 (bad name, duplicate, limits).
    """
    caller = current_caller()
    queue = queues.add_queue(body, now=utcnow(), actor=caller.actor, caller=caller)
    return _document(queue), 201, {"Location": url_for("api_queues.get_queue", queue_id=queue.id)}


@blp.get("/<int:queue_id>")
@authenticated(Action.READ)
@blp.response(200, QueueSchema, example=ex.QUEUE)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_queue(queue_id):
    """One queue with its statistics (ETag of its settings).

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    queue = scope.queue(current_caller(), queue_id)
    return with_etag(_document(queue), _document(queue, with_stats=False))


@blp.patch("/<int:queue_id>")
@authenticated(Action.ADMINISTER)
@blp.doc(parameters=[IF_MATCH_HEADER])
@blp.arguments(QueueEditSchema, example=ex.QUEUE_EDIT)
@blp.response(200, QueueSchema, example=ex.EDITED_QUEUE)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(412, response="PRECONDITION_FAILED")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def edit_queue(body, queue_id):
    """Change a queue's description, concurrency limit (null: none) or default priority.

    Roles: admin. Errors: 401, 403, 404, 412 (stale If-Match), 422.
    """
    caller = current_caller()
    queue = scope.queue(caller, queue_id)
    raw = json_object_body()
    check_if_match(_document(queue, with_stats=False))
    data = dict(body)
    if "rate_limit" in raw and raw["rate_limit"] is None:
        data["rate_limit"] = "none"
    if "concurrency_limit" in raw and raw["concurrency_limit"] is None:
        data.pop("concurrency_limit", None)
        data["no_limit"] = True
    queue = queues.edit_queue(queue.name, data, now=utcnow(), actor=caller.actor, caller=caller)
    return with_etag(_document(queue), _document(queue, with_stats=False))


@blp.delete("/<int:queue_id>")
@authenticated(Action.ADMINISTER)
@blp.response(204)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def delete_queue(queue_id):
    """Delete an empty queue (no jobs, not `default`).

    Roles: admin. Errors: 401, 403, 404, 409 (jobs use it, or it is the default queue).
    """
    caller = current_caller()
    queue = scope.queue(caller, queue_id)
    queues.delete_queue(queue.name, now=utcnow(), actor=caller.actor, caller=caller)
    return None


@blp.post("/<int:queue_id>/pause")
@authenticated(Action.OPERATE)
@blp.arguments(PauseSchema, required=False, example=ex.PAUSE)
@blp.response(200, QueueSchema, example=ex.PAUSED_QUEUE)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def pause_queue(body, queue_id):
    """Pause a queue: nothing new starts from it; running work finishes.

    Roles: operator, admin. Errors: 401, 403, 404, 422 (reason too long).
    """
    caller = current_caller()
    queue = scope.queue(caller, queue_id)
    queue = queues.pause_queue(queue.name, now=utcnow(), actor=caller.actor, reason=body.get("reason"), caller=caller)
    return _document(queue)


@blp.post("/<int:queue_id>/resume")
@authenticated(Action.OPERATE)
@blp.response(200, QueueSchema, example=ex.QUEUE)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def resume_queue(queue_id):
    """Resume a paused queue.

    Roles: operator, admin. Errors: 401, 403, 404.
    """
    caller = current_caller()
    queue = scope.queue(caller, queue_id)
    queue = queues.resume_queue(queue.name, now=utcnow(), actor=caller.actor, caller=caller)
    return _document(queue)


@blp.get("/<int:queue_id>/stats")
@authenticated(Action.READ)
@blp.response(200, QueueStatsSchema, example=ex.QUEUE_STATS)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_queue_stats(queue_id):
    """Live statistics of one queue: pending, scheduled later, retrying, running, finished in the
    last hour, oldest pending age, throughput per minute, fire lateness p50/p95.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    queue = scope.queue(current_caller(), queue_id)
    stats = queue_stats(utcnow(), [queue]).get(queue.id)
    return stats.as_dict() if stats is not None else {}
