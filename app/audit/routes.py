"""The audit log page: a thin adapter over `app.services.audit_trail`.

Read-only by design: the blueprint has no POST route, and no route anywhere edits the log.
"""

from __future__ import annotations

from flask import Blueprint, render_template, request

from app.audit.forms import AuditFilterForm
from app.domain.permissions import Action
from app.models import Job
from app.models.ids import id_in_range, is_whole_number, key_max
from app.services import audit_trail
from app.services.errors import ValidationFailed
from app.web.access import current_caller, requires
from app.web.pagination import Page, page_number, paginate

bp = Blueprint("audit", __name__, url_prefix="/audit")

PER_PAGE = 50
FILTER_MAX = 200  # longer than any actor, object id or action can be
ALIASES = {"object_kind": "kind", "object_id": "object", "job_id": "job"}


def remember_client_address() -> None:
    """Changes made while serving this request record the client's address (an app-wide hook,
    registered by app.web.register_web)."""
    audit_trail.client_address.set(request.remote_addr)


def forget_client_address(_exc=None) -> None:
    audit_trail.client_address.set(None)


@bp.get("/")
@requires(Action.READ)
def index():
    """Audit events, newest first, filtered by actor, object, job, action and time, 50 per page."""
    args = request.args.copy()
    for alias, name in ALIASES.items():  # the API's and the JSON's names work in the URL too
        if alias in args and name not in args:
            args[name] = args[alias]
    filters = AuditFilterForm(args)
    text = {name: (getattr(filters, name).data or "").strip() for name in filters._fields}
    errors: list[str] = []
    for name, value in text.items():
        if len(value) > FILTER_MAX or "\x00" in value:
            errors.append(f"{getattr(filters, name).label.text} is too long or holds a NUL character.")
            text[name] = ""
    job_id = None
    if text["job"]:
        if not is_whole_number(text["job"]):
            errors.append(f"Job ID must be a whole number, got {text['job']!r}.")
        elif (job_id := id_in_range(text["job"], key_max(Job))) is None:
            errors.append(f"Job ID {text['job']} is out of range.")
    since = until = None
    for name in ("since", "until"):
        if text[name]:
            try:
                value = audit_trail.parse_instant(text[name], name)
            except ValidationFailed as exc:
                errors.append(str(exc))
            else:
                since, until = (value, until) if name == "since" else (since, value)
    page = Page(items=[], page=1, per_page=PER_PAGE, total=0)
    if not errors:
        query = audit_trail.list_query(
            actor=text["actor"] or None,
            object_kind=text["kind"] or None,
            object_id=text["object"] or None,
            job_id=job_id,
            action=text["action"] or None,
            since=since,
            until=until,
            caller=current_caller(),
        )
        page = paginate(query, page=page_number(), per_page=PER_PAGE)
    known = audit_trail.known_values()
    filters.offer(known["object_kinds"], known["actions"])
    query_args = {name: value for name, value in text.items() if value}
    return render_template("audit/list.html", page=page, filters=filters, filter_errors=errors, query=query_args), (
        400 if errors else 200
    )
