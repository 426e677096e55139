"""Alerts and dead letters: list, resolve one, resolve the selected ones.

Resolving from the dashboard's alerts panel is an HTMX POST; it answers with the refreshed panel.
"""

from __future__ import annotations

from collections.abc import Sequence

from flask import flash, redirect, render_template, request, url_for

from app.alerts.blueprint import bp
from app.alerts.forms import ResolveAlertsForm
from app.clock import utcnow
from app.domain.permissions import Action
from app.services.errors import NotFound, ServiceError, ValidationFailed
from app.services.read import dashboard
from app.services.use_cases import alert_mutes
from app.services.use_cases import alerts as alert_service
from app.web.access import current_actor, current_caller, is_htmx, requires
from app.web.pagination import page_number, paginate

DEAD_LETTERS_PER_PAGE = 50

LIST_LIMIT = 200


@bp.get("/")
@requires(Action.READ)
def index():
    """Open alerts (or all, with ?show=all) and the dead letters, newest first, paged (?page=)."""
    show_all = request.args.get("show") == "all"
    return render_template(
        "alerts/list.html",
        alerts=alert_service.list_alerts(include_resolved=show_all, limit=LIST_LIMIT, caller=current_caller()),
        dead_letters=paginate(
            alert_service.dead_letters_query(current_caller()), page=page_number(), per_page=DEAD_LETTERS_PER_PAGE
        ),
        show_all=show_all,
        form=ResolveAlertsForm(),
        limit=LIST_LIMIT,
    )


@bp.post("/resolve")
@requires(Action.OPERATE)
def resolve_selected():
    """Resolve every alert ticked on the list."""
    form = ResolveAlertsForm()
    ids, bad, beyond = form.selected_ids(request.form.getlist("alert_ids"))
    if bad:
        flash(f"Ignored values that are not alert ids: {', '.join(bad)}", "error")
    return _resolve(ids, missing=beyond)


@bp.post("/<id:alert_id>/resolve")
@requires(Action.OPERATE)
def resolve_one(alert_id: int):
    return _resolve([alert_id])


def _resolve(ids: list[int], missing: Sequence[str] = ()):
    try:
        if missing:  # beyond the id column: refused like any unknown id, and nothing is resolved
            raise NotFound(f"alert {', '.join(missing)} does not exist")
        changed = alert_service.resolve_alerts(ids, now=utcnow(), actor=current_actor(), caller=current_caller())
        message, category = f"{changed} alert(s) resolved.", "success"
    except ValidationFailed as exc:  # the message, not the form field it is about
        message, category = (
            "Nothing resolved: select at least one alert." if not ids else " ".join(exc.errors.values()),
            "error",
        )
    except ServiceError as exc:
        message, category = str(exc), "error"
    if is_htmx():
        alerts, total = dashboard.open_alerts(caller=current_caller())
        return render_template(
            "dashboard/_alerts.html",
            alerts=alerts,
            alerts_total=total,
            poll_seconds=5,
            message=message,
            category=category,
        )
    flash(message, category)
    target = url_for("alerts.index", show="all") if request.args.get("show") == "all" else url_for("alerts.index")
    return redirect(target, code=303)


@bp.post("/jobs/<id:job_id>/mute")
@requires(Action.OPERATE)
def mute_job(job_id: int):
    """Mute a job's alerts for `hours` (1 h, 4 h, 24 h, a week): nothing is opened or counted."""
    raw = (request.form.get("hours") or "").strip()
    try:
        hours = int(raw) if raw.isdigit() and len(raw) < 5 else -1
        until = alert_mutes.mute(job_id, hours=hours, now=utcnow(), actor=current_actor(), caller=current_caller())
    except ValidationFailed as exc:
        flash(" ".join(exc.errors.values()), "error")
    except NotFound:
        raise
    except ServiceError as exc:
        flash(str(exc), "error")
    else:
        flash(f"Alerts of job #{job_id} muted until {until.strftime('%Y-%m-%d %H:%M UTC')}.", "success")
    return redirect(url_for("jobs.detail", job_id=job_id), code=303)


@bp.post("/jobs/<id:job_id>/unmute")
@requires(Action.OPERATE)
def unmute_job(job_id: int):
    """End a job's alert mute."""
    try:
        was = alert_mutes.unmute(job_id, now=utcnow(), actor=current_actor(), caller=current_caller())
    except NotFound:
        raise
    except ServiceError as exc:
        flash(str(exc), "error")
    else:
        flash(f"Alerts of job #{job_id} " + ("unmuted." if was else "were not muted."), "success")
    return redirect(url_for("jobs.detail", job_id=job_id), code=303)
