"""/api/v1/workers: the worker registry; stop (drain) a worker."""

from __future__ import annotations

from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.schemas import WorkerSchema, WorkerStopSchema
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.domain.permissions import Action
from app.services.read.workers import get_worker, list_workers, worker_to_dict
from app.services.use_cases import workers

blp = Blueprint("api_workers", __name__, url_prefix="/api/v1/workers", description="Worker processes.")


@blp.get("")
@authenticated(Action.READ)
@blp.response(200, WorkerSchema(many=True), example=[ex.WORKER])
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_all():
    """Every worker with a heartbeat: state, queues, slots, busy/idle and what it runs.

    Roles: viewer, operator, admin. Errors: 401, 403.
    """
    return [worker_to_dict(view) for view in list_workers(utcnow(), current_caller())]


@blp.get("/<string:worker_id>")
@authenticated(Action.READ)
@blp.response(200, WorkerSchema, example=ex.WORKER)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_one(worker_id):
    """One worker.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    return worker_to_dict(get_worker(worker_id, utcnow(), current_caller()))


@blp.post("/<string:worker_id>/stop")
@authenticated(Action.OPERATE)
@blp.arguments(WorkerStopSchema, required=False, example=ex.WORKER_STOP)
@blp.response(200, WorkerSchema, example=ex.DRAINING_WORKER)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def stop(body, worker_id):
    """Drain a worker (finish running tasks, claim nothing more), or with `now` stop it at once.

    Roles: operator, admin. Errors: 401, 403, 404, 409 (already stopped, stale or draining).
    """
    caller = current_caller()
    get_worker(worker_id, utcnow(), caller)
    workers.stop_worker(worker_id, now=utcnow(), actor=caller.actor, at_once=body["now"])
    return worker_to_dict(get_worker(worker_id, utcnow(), caller))
