"""Alert channel pages: list and create channels, a channel's delivery log, send test, delete.

Routes on the alerts blueprint (app/alerts/blueprint.py; app/alerts/routes.py imports this module): reading needs a signed-in
user, a test message an operator, creating and deleting a channel an admin.
"""

from __future__ import annotations

from flask import current_app, flash, redirect, render_template, request, url_for

from app.alerts.blueprint import bp
from app.alerts.channel_forms import ChannelForm
from app.clock import utcnow
from app.domain.permissions import Action
from app.extensions import db
from app.models import AlertDelivery
from app.services.engine import deliveries
from app.services.errors import ServiceError, ValidationFailed
from app.services.use_cases import alert_channels
from app.web.access import current_actor, current_caller, requires

LOG_LIMIT = 100


@bp.get("/channels")
@requires(Action.READ)
def channels():
    """Every channel of the caller's projects and the latest deliveries."""
    caller = current_caller()
    listed = alert_channels.list_channels(caller)
    return render_template(
        "alerts/channels.html",
        channels=listed,
        deliveries=alert_channels.delivery_log(limit=LOG_LIMIT, caller=caller),
        names={channel.id: channel.name for channel in listed},
    )


@bp.route("/channels/new", methods=["GET", "POST"])
@requires(Action.ADMINISTER)
def create_channel():
    """The new-channel form; errors are shown next to their fields."""
    form = ChannelForm()
    if request.method == "GET":
        return render_template("alerts/channel_form.html", form=form)
    if not form.validate_on_submit():
        return render_template("alerts/channel_form.html", form=form), 400
    try:
        channel = alert_channels.add_channel(
            form.service_data(), now=utcnow(), actor=current_actor(), caller=current_caller()
        )
    except ValidationFailed as exc:
        for key, message in exc.errors.items():
            field = getattr(form, key, None)
            if field is not None and hasattr(field, "errors"):
                field.errors = [message]
            else:
                form.form_errors.append(message)
        return render_template("alerts/channel_form.html", form=form), 400
    except ServiceError as exc:
        form.form_errors.append(str(exc))
        return render_template("alerts/channel_form.html", form=form), 409
    message = f"Channel {channel.name!r} created."
    if channel.kind == "webhook":
        message += f" Its signing secret (shown once): {channel.secret}"
    flash(message, "success")
    return redirect(url_for("alerts.channel_detail", channel_id=channel.id), code=303)


@bp.route("/channels/<id:channel_id>/edit", methods=["GET", "POST"])
@requires(Action.ADMINISTER)
def edit_channel(channel_id: int):
    """Change a channel's name, target (empty: unchanged), alert kinds and secret (empty: unchanged)."""
    channel = alert_channels.get_channel(channel_id, current_caller())
    if request.method == "GET":
        form = ChannelForm(
            formdata=None, data={"name": channel.name, "kind": channel.kind, "kinds": ", ".join(channel.kinds or [])}
        )
        return render_template(
            "alerts/channel_form.html", form=form, channel=channel, shown_target=alert_channels.shown_target(channel)
        )
    form = ChannelForm()
    try:
        channel = alert_channels.edit_channel(
            channel.id, form.service_data(), now=utcnow(), actor=current_actor(), caller=current_caller()
        )
    except ValidationFailed as exc:
        for key, message in exc.errors.items():
            field = getattr(form, key, None)
            if field is not None and hasattr(field, "errors"):
                field.errors = [message]
            else:
                form.form_errors.append(message)
        return render_template(
            "alerts/channel_form.html", form=form, channel=channel, shown_target=alert_channels.shown_target(channel)
        ), 400
    flash(f"Channel {channel.name!r} saved.", "success")
    return redirect(url_for("alerts.channel_detail", channel_id=channel.id), code=303)


@bp.get("/channels/<id:channel_id>")
@requires(Action.READ)
def channel_detail(channel_id: int):
    """One channel with its delivery log."""
    caller = current_caller()
    channel = alert_channels.get_channel(channel_id, caller)
    return render_template(
        "alerts/channel.html",
        channel=channel,
        deliveries=alert_channels.delivery_log(channel_id=channel.id, limit=LOG_LIMIT, caller=caller),
    )


@bp.post("/channels/<id:channel_id>/test")
@requires(Action.OPERATE)
def test_channel(channel_id: int):
    """Send test: send a test message now and show the result (a failed one is retried like
    any delivery, and stays in the log below)."""
    now = utcnow()
    try:
        delivery = alert_channels.send_test(channel_id, now=now, actor=current_actor(), caller=current_caller())
    except ServiceError as exc:
        flash(str(exc), "error")
        return redirect(url_for("alerts.channel_detail", channel_id=channel_id), code=303)
    deliveries.send_now(db.engine, delivery.id, now=now, settings=current_app.config)
    db.session.rollback()  # the send was recorded on another connection
    sent = db.session.get(AlertDelivery, delivery.id)
    if sent is not None and sent.status == "delivered":
        flash(f"Test message delivered (delivery #{sent.id}, answer {sent.response_status}).", "success")
    elif sent is not None:
        reason = sent.last_error or f"answer {sent.response_status}"
        later = "it will be retried" if sent.status == "pending" else "it will not be retried"
        flash(f"Test message not delivered (delivery #{sent.id}): {reason}; {later}.", "error")
    return redirect(url_for("alerts.channel_detail", channel_id=channel_id), code=303)


@bp.post("/channels/<id:channel_id>/delete")
@requires(Action.ADMINISTER)
def delete_channel(channel_id: int):
    try:
        alert_channels.delete_channel(channel_id, now=utcnow(), actor=current_actor(), caller=current_caller())
        flash("Channel deleted.", "success")
    except ServiceError as exc:
        flash(str(exc), "error")
        return redirect(url_for("alerts.channel_detail", channel_id=channel_id), code=303)
    return redirect(url_for("alerts.channels"), code=303)
