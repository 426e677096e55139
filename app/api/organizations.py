"""/api/v1/organizations: the organizations the caller belongs to (every one for a superuser)."""

from __future__ import annotations

from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.errors import ApiError
from app.api.schemas import DeleteQuery, DeletionSchema, OrganizationSchema, RenameSchema
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.domain.permissions import Action
from app.services.use_cases import tenancy
from app.services.use_cases import tenancy_changes as changes

blp = Blueprint("api_organizations", __name__, url_prefix="/api/v1/organizations", description="Organizations.")


@blp.get("")
@authenticated(None)
@blp.response(200, OrganizationSchema(many=True), example=[ex.ORGANIZATION])
@blp.alt_response(401, response="UNAUTHORIZED")
def list_organizations():
    """The organizations you belong to (an API token: its project's), by name.

    Roles: any credential. Errors: 401.
    """
    return [tenancy.organization_to_dict(org) for org in tenancy.list_organizations(current_caller())]


@blp.get("/<string:name>")
@authenticated(None)
@blp.response(200, OrganizationSchema, example=ex.ORGANIZATION)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(404, response="NOT_FOUND")
def get_organization(name):
    """One organization by name (404 unless you belong to it).

    Roles: any member. Errors: 401, 404.
    """
    return tenancy.organization_to_dict(tenancy.get_organization(name, current_caller()))


def _person():
    """The caller, refused when it is an API token: those act in their one project only."""
    caller = current_caller()
    if caller.project_id is not None:
        raise ApiError(403, "an API token acts in its own project only; sign in as a person")
    return caller


@blp.patch("/<string:name>")
@authenticated(Action.ADMINISTER)
@blp.arguments(RenameSchema, example=ex.RENAME)
@blp.response(200, OrganizationSchema, example=ex.RENAMED_ORGANIZATION)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def rename_organization(body, name):
    """Rename an organization; its id, projects, members and jobs stay (every `ORG/PROJECT`
    changes with it).

    Roles: admin of the organization, signed in. Errors: 401, 403, 404, 422 (name taken or invalid).
    """
    return tenancy.organization_to_dict(changes.rename_organization(name, body["name"], now=utcnow(), caller=_person()))


@blp.delete("/<string:name>")
@authenticated(Action.ADMINISTER)
@blp.arguments(DeleteQuery, location="query")
@blp.response(200, DeletionSchema, example={**ex.DELETION, "deleted": "organization 'acme'"})
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(409, response="CONFLICT")
def delete_organization(args, name):
    """Delete an organization with its projects and memberships. Refused (409) while any of its
    projects holds jobs, queues besides `default` or running executions, unless `cascade=true`.
    The default organization is never deleted.

    Roles: admin of the organization, signed in. Errors: 401, 403, 404, 409.
    """
    plan = changes.delete_organization(name, cascade=args["cascade"], now=utcnow(), caller=_person())
    return {"deleted": f"organization {name!r}", **plan.to_dict()}
