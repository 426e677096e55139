"""Notification routing pages: a project's default (admins), a job's override (operators, from
the job's page), and a channel's grouping and quiet window (admins, on the channel's page).

Routes on the alerts blueprint (imported by app/alerts/routes.py). The forms are checkboxes of
the known events and the project's channels; what the use case refuses is shown on the page.
"""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for

from app.alerts.blueprint import bp
from app.clock import utcnow
from app.domain.notify_routing import EVENTS
from app.domain.permissions import Action
from app.services.errors import ServiceError, ValidationFailed
from app.services.use_cases import alert_channels, notify_routes, tenancy
from app.web.access import current_actor, current_caller, requires


def _route_form() -> dict:
    """The events and channels ticked on a routing form ("every channel" unless some are)."""
    channels = request.form.getlist("channels")
    every = request.form.get("every_channel") == "1" or not channels
    return {"events": request.form.getlist("events"), "channels": None if every else channels}


def _project_from_request():
    raw = (request.values.get("project_id") or "").strip()
    caller = current_caller()
    if raw.isdigit() and len(raw) < 10:
        return tenancy.get_project(int(raw), caller)
    return tenancy.working_project(caller)


@bp.get("/routing")
@requires(Action.READ)
def routing():
    """The project's default routing: which events its jobs notify, and to which channels."""
    return _routing_page(_project_from_request())


def _routing_page(project, errors: dict[str, str] | None = None, status: int = 200):
    caller = current_caller()
    return render_template(
        "alerts/routing.html",
        project=project,
        projects=tenancy.list_projects(caller),
        route=notify_routes.project_routing(caller=caller, project_id=project.id),
        channel_names=notify_routes.channel_names(project.id),
        events=EVENTS,
        errors=errors or {},
    ), status


@bp.post("/routing/save")
@requires(Action.ADMINISTER)
def save_routing():
    """Save the project's default routing; what is refused is shown on the page."""
    project = _project_from_request()
    try:
        notify_routes.set_project_routing(
            _route_form(), now=utcnow(), actor=current_actor(), caller=current_caller(), project_id=project.id
        )
    except ValidationFailed as exc:
        return _routing_page(project, exc.errors, 400)
    except ServiceError as exc:
        return _routing_page(project, {"form": str(exc)}, 403)
    flash(f"Notification routing of {project.full_name} saved.", "success")
    return redirect(url_for("alerts.routing", project_id=project.id), code=303)


@bp.post("/jobs/<id:job_id>/notify")
@requires(Action.OPERATE)
def job_notify(job_id: int):
    """Set the job's override, or (follow=1) drop it; back to the job's page."""
    caller = current_caller()
    data = None if request.form.get("follow") == "1" else _route_form()
    try:
        notify_routes.set_job_routing(job_id, data, now=utcnow(), actor=current_actor(), caller=caller)
    except ValidationFailed as exc:
        flash("Notifications not changed: " + " ".join(f"{k}: {v}" for k, v in exc.errors.items()), "error")
    except ServiceError as exc:
        flash(str(exc), "error")
    else:
        flash("This job follows its project's notifications." if data is None else "Notifications saved.", "success")
    return redirect(url_for("jobs.detail", job_id=job_id) + "#notify", code=303)


@bp.post("/channels/<id:channel_id>/settings")
@requires(Action.ADMINISTER)
def channel_settings(channel_id: int):
    """Change a channel's grouping and quiet window; errors are shown beside the fields."""
    caller = current_caller()
    data = {
        "group_minutes": request.form.get("group_minutes", ""),
        "quiet": request.form.get("quiet", "") or "off",
        "quiet_timezone": request.form.get("quiet_timezone", ""),
    }
    try:
        alert_channels.update_channel(channel_id, data, now=utcnow(), actor=current_actor(), caller=caller)
    except ValidationFailed as exc:
        channel = alert_channels.get_channel(channel_id, caller)
        return render_template(
            "alerts/channel.html",
            channel=channel,
            deliveries=alert_channels.delivery_log(channel_id=channel.id, limit=100, caller=caller),
            settings_errors=exc.errors,
            settings_values=data,
        ), 400
    flash("Channel settings saved.", "success")
    return redirect(url_for("alerts.channel_detail", channel_id=channel_id), code=303)
