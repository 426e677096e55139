"""/api/v1/alerts: open (and resolved) alerts of the caller's jobs; resolve one."""

from __future__ import annotations

from flask_smorest import Blueprint
from sqlalchemy import select

from app.api import examples as ex
from app.api import scope
from app.api.conventions import paginate
from app.api.schemas import AlertQuery, AlertSchema, page_schema
from app.api.security import authenticated, current_caller
from app.clock import utcnow
from app.domain.permissions import Action
from app.extensions import db
from app.models import Alert
from app.services import scoping
from app.services.serialize import alert_to_dict
from app.services.use_cases import alerts

blp = Blueprint("api_alerts", __name__, url_prefix="/api/v1/alerts", description="Alerts raised by failing work.")

AlertPage = page_schema(AlertSchema, "AlertPage")


@blp.get("")
@authenticated(Action.READ)
@blp.arguments(AlertQuery, location="query")
@blp.response(200, AlertPage, example=ex.page(ex.ALERT, "/api/v1/alerts"))
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_alerts(args):
    """Alerts, newest first (open ones only unless include_resolved), by cursor.

    Roles: viewer, operator, admin. Errors: 401, 403, 422.
    """
    query = scoping.alerts(select(Alert), current_caller()).order_by(Alert.id.desc())
    if not args["include_resolved"]:
        query = query.where(Alert.resolved_at.is_(None))
    if args.get("since") is not None:
        query = query.where(Alert.created_at >= args["since"])
    if args.get("until") is not None:
        query = query.where(Alert.created_at < args["until"])
    return paginate(query, Alert.id, args, alert_to_dict, descending=True)


@blp.post("/<int:alert_id>/resolve")
@authenticated(Action.OPERATE)
@blp.response(200, AlertSchema, example=ex.RESOLVED_ALERT)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def resolve_alert(alert_id):
    """Resolve an alert (resolving a resolved one changes nothing).

    Roles: operator, admin. Errors: 401, 403, 404.
    """
    caller = current_caller()
    scope.alert(caller, alert_id)
    alerts.resolve_alerts([alert_id], now=utcnow(), actor=caller.actor, caller=caller)
    return alert_to_dict(db.session.get(Alert, alert_id))
