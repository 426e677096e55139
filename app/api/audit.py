"""/api/v1/audit-events: the append-only audit log of the caller's organization."""

from __future__ import annotations

from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.conventions import paginate
from app.api.schemas import AuditEventSchema, AuditQuery, page_schema
from app.api.security import authenticated, current_caller
from app.domain.permissions import Action
from app.models import AuditEvent
from app.services import audit_trail

blp = Blueprint("api_audit", __name__, url_prefix="/api/v1/audit-events", description="Who changed what, when.")

AuditPage = page_schema(AuditEventSchema, "AuditEventPage")


@blp.get("")
@authenticated(Action.READ)
@blp.arguments(AuditQuery, location="query")
@blp.response(200, AuditPage, example=ex.page(ex.AUDIT_EVENT, "/api/v1/audit-events"))
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_events(args):
    """Audit events, newest first; filter by actor, object kind, action, job, since, until.

    Roles: viewer, operator, admin. Errors: 401, 403, 422.
    """
    query = audit_trail.list_query(
        actor=args.get("actor"),
        object_kind=args.get("object_kind"),
        action=args.get("action"),
        job_id=args.get("job"),
        since=args.get("since"),
        until=args.get("until"),
        caller=current_caller(),
    )
    return paginate(query, AuditEvent.id, args, audit_trail.to_dict, descending=True)
