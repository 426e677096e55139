"""/api/v1/projects: projects of the caller's organization; admins create them."""

from __future__ import annotations

from flask import url_for
from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.errors import ApiError
from app.api.schemas import ProjectCreateSchema, ProjectSchema
from app.api.scope import ID_MAX
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.domain.permissions import Action
from app.services.errors import NotFound
from app.services.use_cases import tenancy

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
