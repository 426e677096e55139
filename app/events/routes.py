"""The events page: a thin adapter over `app.services.read.events` (admins and operators)."""

from __future__ import annotations

from flask import Blueprint, render_template, request

from app.domain.event_kinds import EVENT_KINDS
from app.domain.permissions import Action
from app.events.forms import EventFilterForm
from app.models import Event, Job
from app.models.ids import id_in_range, is_whole_number, key_max
from app.services import audit_trail
from app.services.errors import NotFound, ValidationFailed
from app.services.read import events as event_log
from app.services.use_cases import jobs as job_service
from app.services.use_cases import queues as queue_service
from app.web.access import current_caller, is_htmx, requires

bp = Blueprint("events", __name__, url_prefix="/events")

FILTER_MAX = 200
ALIASES = {"job_id": "job", "worker_id": "worker"}  # the JSON's names work in the URL too


@bp.get("/")
@requires(Action.OPERATE)
def index():
    """Events, newest first, 50 a page by cursor (`before`), filtered by kind, job, queue, worker
    and time; the filters live in the URL. An HTMX poll of the first page gets just the table."""
    caller = current_caller()
    args = request.args.copy()
    for alias, name in ALIASES.items():
        if alias in args and name not in args:
            args[name] = args[alias]
    filters = EventFilterForm(args)
    text = {name: (getattr(filters, name).data or "").strip() for name in filters._fields}
    errors: list[str] = []
    for name, value in text.items():
        if len(value) > FILTER_MAX or "\x00" in value:
            errors.append(f"{getattr(filters, name).label.text} is too long or holds a NUL character.")
            text[name] = ""
    if text["kind"] and text["kind"] not in EVENT_KINDS:
        errors.append(f"Kind {text['kind'][:60]!r} is not an event kind.")
    job = queue = None
    if text["job"]:
        if not is_whole_number(text["job"]) or id_in_range(text["job"], key_max(Job)) is None:
            errors.append(f"Job ID must be the id of a job, got {text['job'][:40]!r}.")
        else:
            try:
                job = job_service.get_job(int(text["job"]), caller)
            except NotFound as exc:
                errors.append(str(exc))
    if text["queue"]:
        if not queue_service.NAME_PATTERN.match(text["queue"]):
            errors.append(queue_service.unknown_queue_message(text["queue"][:100], caller))
        else:
            try:
                queue = queue_service.get_queue(text["queue"], caller)
            except NotFound as exc:
                errors.append(str(exc))
    since = until = None
    for name in ("since", "until"):
        if text[name]:
            try:
                value = audit_trail.parse_instant(text[name], name.capitalize())
            except ValidationFailed as exc:
                errors.append(str(exc))
            else:
                since, until = (value, until) if name == "since" else (since, value)
    cursor_text = request.args.get("before", "")
    cursor = int(cursor_text) if is_whole_number(cursor_text) and id_in_range(cursor_text, key_max(Event)) else None
    page = event_log.EventPage([], None)
    if not errors:
        wanted = event_log.EventFilters(
            kind=text["kind"] or None,
            job_id=job.id if job else None,
            queue_id=queue.id if queue else None,
            worker=text["worker"] or None,
            since=since,
            until=until,
        )
        page = event_log.event_page(wanted, caller, cursor=cursor)
    query = {name: value for name, value in text.items() if value}
    context = {
        "page": page,
        "cursor": cursor,
        "filters": filters,
        "filter_errors": errors,
        "query": query,
        "kinds": EVENT_KINDS,
        "worker_of": event_log.worker_of,
        "job": job,
    }
    if is_htmx() and request.headers.get("HX-Target") == "events-list":
        return render_template("events/_list.html", **context)
    return render_template("events/list.html", **context), (400 if errors else 200)
