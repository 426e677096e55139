"""/api/v1/runs: one-off runs, a task run now or later without a job; one, or a list of up to
1,000 created in one transaction (app/services/use_cases/one_off_runs.py)."""

from __future__ import annotations

import json

from flask import make_response, request, url_for
from flask_smorest import Blueprint
from marshmallow import Schema, fields

from app.api import examples as ex
from app.api.conventions import IDEMPOTENCY_HEADER, idempotent
from app.api.errors import ApiError
from app.api.schemas import ExecutionSchema
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.definitions.one_off import MAX_RUNS_PER_REQUEST, OneOffRunSchema
from app.domain.permissions import Action
from app.services.serialize import execution_to_dict
from app.services.use_cases import one_off_runs

blp = Blueprint("api_runs", __name__, url_prefix="/api/v1/runs", description="One-off runs: a task run without a job.")


class RunListSchema(Schema):
    """The runs a list request asked for, in its order, and how many it created."""

    items = fields.List(fields.Nested(ExecutionSchema), required=True)
    created = fields.Integer(
        required=True, metadata={"description": "Runs created (the rest named an existing run's idempotency_key)."}
    )


_RUN = OneOffRunSchema(now=None)
_REQUEST = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "anyOf": [
                    _RUN,
                    {"type": "array", "items": _RUN, "minItems": 1, "maxItems": MAX_RUNS_PER_REQUEST},
                ]
            },
            "example": ex.ONE_OFF_RUN,
        }
    },
}
_CREATED = {
    "description": "Created: the run (a list of runs: `items` and `created`).",
    "content": {
        "application/json": {
            "schema": {"anyOf": [ExecutionSchema, RunListSchema]},
            "example": ex.ONE_OFF_CREATED,
        }
    },
}


_EXISTING = {
    "description": "The run this project already has with the request's `idempotency_key` (not created again).",
    "content": {"application/json": {"schema": ExecutionSchema, "example": ex.ONE_OFF_CREATED}},
}


def _json(document: dict, status: int, location: str | None = None):
    response = make_response(json.dumps(document), status)
    response.mimetype = "application/json"
    if location:
        response.headers["Location"] = location
    return response


@blp.post("")
@authenticated(Action.OPERATE)
@idempotent
@blp.doc(parameters=[IDEMPOTENCY_HEADER], requestBody=_REQUEST, responses={"201": _CREATED, "200": _EXISTING})
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def create_runs():
    """Run a task now or later without a job: `task`, `config`, `in` or `at`, `queue`,
    `priority`, `max_attempts`, `timeout_seconds`, `idempotency_key`, `project` (ORG/PROJECT).

    A list of up to 1,000 runs is created in one transaction: one bad run creates none, its
    index in each field's name (`[3].config`). The run is an execution with `job_id` null; follow
    it at `/api/v1/executions/{id}`. Send an Idempotency-Key header to retry safely.

    Roles: operator, admin. Errors: 401, 403, 404 (project), 422 (fields, one message per field).
    """
    body = request.get_json(silent=True)
    caller = current_caller()
    now = utcnow()
    if isinstance(body, list):
        runs = one_off_runs.create_runs(body, now=now, actor=caller.actor, caller=caller)
        items = [execution_to_dict(run.execution, include_output=False) for run in runs]
        return _json({"items": items, "created": sum(1 for run in runs if run.created)}, 201)
    if not isinstance(body, dict):
        raise ApiError(
            422, "the body must be a run (a JSON object) or a list of runs", errors={"_schema": "must be a JSON object"}
        )
    run = one_off_runs.create_run(body, now=now, actor=caller.actor, caller=caller)
    location = url_for("api_executions.get_execution", execution_id=run.execution.id)
    return _json(execution_to_dict(run.execution), 201 if run.created else 200, location)
