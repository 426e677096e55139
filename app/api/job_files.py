"""Jobs as code over the API: the job file's JSON Schema and a project's plan / apply.

`POST /api/v1/projects/{org}/{project}/apply` takes a job file as JSON (`jobs`, optional `queues`
and `project`) plus `dry_run`, `prune` and `source` (the owner its jobs get, default `api`). A
viewer may dry-run; applying needs an operator (and an admin when declared queues change).
"""

from __future__ import annotations

from flask import jsonify
from flask_smorest import Blueprint
from marshmallow import INCLUDE, Schema, fields

from app.api import examples as ex
from app.api.conventions import json_object_body
from app.api.errors import ApiError
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.definitions.job_file import document_schema
from app.domain.permissions import Action
from app.services.use_cases import job_files
from app.tasks import all_tasks

blp = Blueprint("api_job_files", __name__, url_prefix="/api/v1", description="Jobs as code: job files, plan and apply.")

CONTROL_KEYS = ("dry_run", "prune", "source")
DEFAULT_SOURCE = "api"


class ApplyRequestSchema(Schema):
    """A job file as JSON, with what to do with it."""

    project = fields.String(metadata={"description": "ORG/PROJECT; when given it must be the URL's project."})
    queues = fields.List(fields.Dict(), metadata={"description": "Queues to create or bring in line."})
    jobs = fields.List(
        fields.Dict(),
        required=True,
        metadata={"description": "The project's jobs, with the job definition's fields (see GET /api/v1/jobs/schema)."},
    )
    dry_run = fields.Boolean(load_default=False, metadata={"description": "Plan only; change nothing."})
    prune = fields.Boolean(
        load_default=False, metadata={"description": "Delete the jobs this source owns that the document leaves out."}
    )
    source = fields.String(
        load_default=DEFAULT_SOURCE,
        metadata={"description": "The owner the jobs get (`managed_by`); prune deletes only this source's jobs."},
    )


class PlanSchema(Schema):
    """What an apply did (or, on a dry run, would do)."""

    project = fields.String()
    dry_run = fields.Boolean()
    prune = fields.Boolean()
    changed = fields.Boolean(
        metadata={"description": "Whether anything was (or would be) created, updated or deleted."}
    )
    created = fields.List(fields.Dict())
    updated = fields.List(fields.Dict(), metadata={"description": "Each with `changes`: {field: {before, after}}."})
    unchanged = fields.List(fields.Dict())
    deleted = fields.List(fields.Dict())
    adopted = fields.List(fields.Dict(), metadata={"description": "Unchanged jobs whose owner became this source."})
    queues = fields.Dict()


class JsonSchemaDocument(Schema):
    """A JSON Schema (draft 2020-12) of a job file: `$schema`, `title`, `type`, `required` and
    `properties` (`project`, `queues`, `jobs`, whose items hold every job field)."""

    class Meta:
        unknown = INCLUDE  # its keywords are JSON Schema's, not fields of ours


@blp.get("/jobs/schema")
@authenticated(Action.READ)
@blp.response(200, JsonSchemaDocument, example=ex.JOB_FILE_SCHEMA)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def job_file_schema():
    """The JSON Schema of a job file (YAML, TOML or JSON), generated from the job definition.

    Roles: viewer, operator, admin. Errors: 401, 403.
    """
    # Answered as generated: a schema's own keywords are not fields to filter through a dump.
    return jsonify(document_schema([task.name for task in all_tasks()]))


@blp.post("/projects/<string:org>/<string:project>/apply")
@authenticated(Action.READ)
@blp.doc(
    requestBody={"required": True, "content": {"application/json": {"schema": ApplyRequestSchema, "example": ex.APPLY}}}
)
@blp.response(200, PlanSchema, example=ex.PLAN)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def apply_project(org, project):
    """Make the project's jobs what the document says, in one transaction: create, update field by
    field and, with `prune`, delete this source's jobs it leaves out. Any invalid job refuses the
    whole document (422, one message per `jobs[i].field`). `dry_run` answers the plan and changes
    nothing.

    Roles: viewer (dry run), operator (apply), admin (when declared queues change). Errors: 401,
    403, 404 (project), 422.
    """
    body = json_object_body()
    errors = {}
    for key in ("dry_run", "prune"):
        if key in body and not isinstance(body[key], bool):
            errors[key] = "must be true or false"
    source = body.get("source", DEFAULT_SOURCE)
    if not isinstance(source, str) or not source.strip():
        errors["source"] = "must be a non-empty string"
    if errors:
        raise ApiError(422, "The request has invalid fields: " + ", ".join(sorted(errors)), errors=errors)
    document = {key: value for key, value in body.items() if key not in CONTROL_KEYS}
    caller = current_caller()
    return job_files.apply_job_files(
        [job_files.Source(label="", managed_by=source.strip(), document=document)],
        now=utcnow(),
        actor=caller.actor,
        caller=caller,
        project_name=f"{org}/{project}",
        dry_run=body.get("dry_run", False),
        prune=body.get("prune", False),
    )
