"""/api/v1/events: the event log of the caller's organization (misfires, overlap skips,
recovered leases, what operators changed), newest first."""

from __future__ import annotations

from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.conventions import paginate
from app.api.schemas import EventQuery, EventSchema, page_schema
from app.api.security import authenticated, current_caller
from app.domain.permissions import Action
from app.models import Event
from app.services.read import events as event_log
from app.services.use_cases import jobs as job_service
from app.services.use_cases import queues as queue_service

blp = Blueprint(
    "api_events", __name__, url_prefix="/api/v1/events", description="What the scheduler, workers and operators did."
)

EventPage = page_schema(EventSchema, "EventPage")


@blp.get("")
@authenticated(Action.OPERATE)
@blp.arguments(EventQuery, location="query")
@blp.response(200, EventPage, example=ex.page(ex.EVENT, "/api/v1/events"))
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def list_events(args):
    """Events, newest first; filter by kind, job, queue (name), worker, since, until.

    A job or queue the caller cannot see answers 404, like a missing one.
    Roles: operator, admin. Errors: 401, 403, 404, 422.
    """
    caller = current_caller()
    job_id = job_service.get_job(args["job"], caller).id if args.get("job") is not None else None
    queue_id = queue_service.get_queue(args["queue"], caller).id if args.get("queue") else None
    filters = event_log.EventFilters(
        kind=args.get("kind"),
        job_id=job_id,
        queue_id=queue_id,
        worker=args.get("worker"),
        since=args.get("since"),
        until=args.get("until"),
    )
    return paginate(event_log.events_query(filters, caller), Event.id, args, event_log.event_to_dict, descending=True)
