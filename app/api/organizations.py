"""/api/v1/organizations: the organizations the caller belongs to (every one for a superuser)."""

from __future__ import annotations

from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.schemas import OrganizationSchema
from app.api.security import authenticated, current_caller
from app.services.use_cases import tenancy

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
