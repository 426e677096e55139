"""/api/v1/projects: projects of the caller's organization; admins create them."""

from __future__ import annotations

from flask import url_for
from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.errors import ApiError
from app.api.schemas import DeleteQuery, DeletionSchema, ProjectCreateSchema, ProjectSchema, RenameSchema
from app.api.scope import ID_MAX
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.domain.permissions import Action
from app.services.errors import NotFound
from app.services.use_cases import tenancy
from app.services.use_cases import tenancy_changes as changes

blp = Blueprint("api_projects", __name__, url_prefix="/api/v1/projects", description="Projects (named ORG/PROJECT).")


@blp.get("")
@authenticated(Action.READ)
@blp.response(200, ProjectSchema(many=True), example=[ex.PROJECT, ex.NEW_PROJECT])
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_projects():
    """Projects you may see, by organization and name.

    Roles: viewer, operator, admin. Errors: 401, 403.
    """
    return [tenancy.project_to_dict(p) for p in tenancy.list_projects(current_caller())]


@blp.post("")
@authenticated(Action.ADMINISTER)
@blp.arguments(ProjectCreateSchema, example=ex.PROJECT_CREATE)
@blp.response(201, ProjectSchema, example=ex.NEW_PROJECT)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def create_project(body):
    """Create a project (with its `default` queue) in an organization you administer.

    Roles: admin, signed in (an API token acts in its own project only). Errors: 401, 403, 404
    (organization), 422 (name taken or invalid).
    """
    caller = current_caller()
    if caller.project_id is not None:
        # It could create the project but never read or use it: a token is for its one project.
        raise ApiError(403, "an API token acts in its own project only; create projects signed in as a person")
    project = tenancy.add_project(
        body["organization"], body["name"], now=utcnow(), caller=caller, description=body["description"]
    )
    return (
        tenancy.project_to_dict(project),
        201,
        {"Location": url_for("api_projects.get_project", project_id=project.id)},
    )


@blp.get("/<int:project_id>")
@authenticated(Action.READ)
@blp.response(200, ProjectSchema, example=ex.PROJECT)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_project(project_id):
    """One project.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    if not 0 < project_id <= ID_MAX:
        raise NotFound(f"project {project_id} does not exist")
    return tenancy.project_to_dict(tenancy.get_project(project_id, current_caller()))


def _person_and_project(project_id: int):
    caller = current_caller()
    if caller.project_id is not None:
        raise ApiError(403, "an API token acts in its own project only; sign in as a person")
    if not 0 < project_id <= ID_MAX:
        raise NotFound(f"project {project_id} does not exist")
    return caller, tenancy.get_project(project_id, caller)


@blp.patch("/<int:project_id>")
@authenticated(Action.ADMINISTER)
@blp.arguments(RenameSchema, example=ex.RENAME)
@blp.response(200, ProjectSchema, example=ex.RENAMED_PROJECT)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def rename_project(body, project_id):
    """Rename a project within its organization; its id, queues, jobs and tokens stay.

    Roles: admin, signed in. Errors: 401, 403, 404, 422 (name taken or invalid).
    """
    caller, project = _person_and_project(project_id)
    renamed = changes.rename_project(project.full_name, body["name"], now=utcnow(), caller=caller)
    return tenancy.project_to_dict(renamed)


@blp.delete("/<int:project_id>")
@authenticated(Action.ADMINISTER)
@blp.arguments(DeleteQuery, location="query")
@blp.response(200, DeletionSchema, example=ex.DELETION)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def delete_project(args, project_id):
    """Delete a project with its default queue, channels and API tokens. Refused (409) while it
    holds jobs, queues besides `default` or running executions, unless `cascade=true`.

    Roles: admin, signed in. Errors: 401, 403, 404, 409.
    """
    caller, project = _person_and_project(project_id)
    name = project.full_name
    plan = changes.delete_project(name, cascade=args["cascade"], now=utcnow(), caller=caller)
    return {"deleted": f"project {name}", **plan.to_dict()}
