"""/api/v1/tasks: the task catalog (built-in tasks and the deployer's own), read-only."""

from __future__ import annotations

import os

from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.schemas import TaskSchema
from app.api.security import authenticated
from app.domain.permissions import Action
from app.services.errors import NotFound
from app.tasks import UnknownTaskError, get_task
from app.tasks.describe import describe_catalog, describe_task

blp = Blueprint("api_tasks", __name__, url_prefix="/api/v1/tasks", description="The task catalog.")


def _dumpable(task: dict) -> dict:
    return {**task, "async_": task["async"]}  # `async` is a Python keyword: the schema's attribute is async_


@blp.get("")
@authenticated(Action.READ)
@blp.response(200, TaskSchema(many=True), example=[ex.TASK])
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_all():
    """Every task a job can run: description, module, async, declared env, config schema, example.

    Roles: viewer, operator, admin. Errors: 401, 403.
    """
    return [_dumpable(task) for task in describe_catalog(os.environ)]


@blp.get("/<string:name>")
@authenticated(Action.READ)
@blp.response(200, TaskSchema, example=ex.TASK)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_one(name):
    """One task, by name.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    try:
        spec = get_task(name)
    except UnknownTaskError as exc:
        raise NotFound(str(exc)) from None
    return _dumpable(describe_task(spec, os.environ))
