"""/api/v1/.../notify and /api/v1/channels: what a project's jobs and one job notify, and where;
a project's channels and their send test.

Routing: GET answers the routing in effect; PUT sets it (a project's default needs an admin, a
job's override an operator); DELETE drops a job's override. Channels are listed and read with
their URL masked (one with an ETag); creating, editing (PATCH, If-Match as for jobs) and deleting
one needs an admin, as on the web, and goes through the use case `flask channel add|remove` and
the pages call; the answer to a creation is the only one that carries a webhook's signing secret.
A test sends at once and answers the delivery (delivered, or retrying with the error). A channel
whose stored URL or secret cannot be decrypted is answered with `target` "(unreadable)" and
`unreadable` saying why; its test fails at once with that reason.
"""

from __future__ import annotations

from flask import current_app, url_for
from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.conventions import IF_MATCH_HEADER, check_if_match, json_object_body, with_etag
from app.api.schemas import (
    ChannelCreatedSchema,
    ChannelCreateSchema,
    ChannelEditSchema,
    ChannelSchema,
    DeliverySchema,
    JobNotifySchema,
    NotifyRouteBody,
    ProjectNotifySchema,
)
from app.api.scope import ID_MAX
from app.api.security import authenticated, current_caller
from app.clock import iso_z, utcnow
from app.domain.permissions import Action
from app.extensions import db
from app.models import AlertChannel, AlertDelivery
from app.services.engine import deliveries
from app.services.errors import NotFound
from app.services.use_cases import alert_channels, notify_routes

blp = Blueprint(
    "api_notifications",
    __name__,
    url_prefix="/api/v1",
    description="Notification routing (per project and per job) and channels.",
)


def _check(value: int, what: str) -> None:
    if not 0 < value <= ID_MAX:
        raise NotFound(f"{what} {value} does not exist")


def _version(channel: AlertChannel) -> dict:
    """What a channel's ETag covers: its document and the instant it last changed (a new URL may
    look the same masked)."""
    return {**alert_channels.channel_to_dict(channel), "updated_at": iso_z(channel.updated_at, "microseconds")}


@blp.get("/projects/<int:project_id>/notify")
@authenticated(Action.READ)
@blp.response(200, ProjectNotifySchema, example=ex.PROJECT_NOTIFY)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_project_notify(project_id):
    """What the project's jobs notify, and where (the built-in default until someone sets it).

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    _check(project_id, "project")
    return notify_routes.project_routing(caller=current_caller(), project_id=project_id)


@blp.put("/projects/<int:project_id>/notify")
@authenticated(Action.ADMINISTER)
@blp.arguments(NotifyRouteBody, example=ex.NOTIFY_BODY)
@blp.response(200, ProjectNotifySchema, example=ex.PROJECT_NOTIFY)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def set_project_notify(body, project_id):
    """Set the project's default: the events its jobs notify and the channels (null: every one).

    Roles: admin. Errors: 401, 403, 404, 422 (an unknown event or channel).
    """
    _check(project_id, "project")
    caller = current_caller()
    return notify_routes.set_project_routing(
        body, now=utcnow(), actor=caller.actor, caller=caller, project_id=project_id
    )


@blp.get("/jobs/<int:job_id>/notify")
@authenticated(Action.READ)
@blp.response(200, JobNotifySchema, example=ex.JOB_NOTIFY)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_job_notify(job_id):
    """The job's override (null: it follows its project) and the routing in effect.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    _check(job_id, "job")
    return notify_routes.job_routing(job_id, current_caller())


@blp.put("/jobs/<int:job_id>/notify")
@authenticated(Action.OPERATE)
@blp.arguments(NotifyRouteBody, example=ex.NOTIFY_BODY)
@blp.response(200, JobNotifySchema, example=ex.JOB_NOTIFY)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def set_job_notify(body, job_id):
    """Override the project's default for this job (channels null: the project's choice).

    Roles: operator, admin. Errors: 401, 403, 404, 422 (an unknown event or channel).
    """
    _check(job_id, "job")
    caller = current_caller()
    return notify_routes.set_job_routing(job_id, body, now=utcnow(), actor=caller.actor, caller=caller)


@blp.delete("/jobs/<int:job_id>/notify")
@authenticated(Action.OPERATE)
@blp.response(200, JobNotifySchema, example=ex.JOB_NOTIFY_FOLLOWING)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def drop_job_notify(job_id):
    """Drop the job's override: it notifies as its project does.

    Roles: operator, admin. Errors: 401, 403, 404.
    """
    _check(job_id, "job")
    caller = current_caller()
    return notify_routes.set_job_routing(job_id, None, now=utcnow(), actor=caller.actor, caller=caller)


@blp.get("/channels")
@authenticated(Action.READ)
@blp.response(200, ChannelSchema(many=True), example=[ex.CHANNEL])
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_channels():
    """The channels of the projects you may see (URLs masked), with grouping and quiet window.

    Roles: viewer, operator, admin. Errors: 401, 403.
    """
    return [alert_channels.channel_to_dict(c) for c in alert_channels.list_channels(current_caller())]


@blp.post("/channels")
@authenticated(Action.ADMINISTER)
@blp.arguments(ChannelCreateSchema, example=ex.CHANNEL_CREATE)
@blp.response(201, ChannelCreatedSchema, example=ex.CHANNEL_CREATED)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def create_channel(body):
    """Create a channel in `project` (default: the caller's). Its URL is stored encrypted and
    answered masked, here as everywhere; a webhook's signing secret (generated unless given) is in
    this answer and never again.

    Roles: admin. Errors: 401, 403, 404 (project), 422 (per field: name taken, kind, URL or address,
    alert kinds, grouping, quiet window, time zone).
    """
    caller = current_caller()
    data = {key: value for key, value in body.items() if key != "project"}
    channel = alert_channels.add_channel(
        data, now=utcnow(), actor=caller.actor, project=body.get("project"), caller=caller
    )
    document = {**alert_channels.channel_to_dict(channel), "secret": channel.secret}
    location = url_for("api_notifications.get_channel", channel_id=channel.id)
    return document, 201, {"Location": location}


@blp.get("/channels/<int:channel_id>")
@authenticated(Action.READ)
@blp.response(200, ChannelSchema, example=ex.CHANNEL)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def get_channel(channel_id):
    """One channel (URL masked), with an ETag.

    Roles: viewer, operator, admin. Errors: 401, 403, 404.
    """
    _check(channel_id, "alert channel")
    channel = alert_channels.get_channel(channel_id, current_caller())
    return with_etag(alert_channels.channel_to_dict(channel), _version(channel))


@blp.patch("/channels/<int:channel_id>")
@authenticated(Action.ADMINISTER)
@blp.doc(
    parameters=[IF_MATCH_HEADER],
    requestBody={
        "required": True,
        "content": {"application/json": {"schema": ChannelEditSchema, "example": ex.CHANNEL_EDIT}},
    },
)
@blp.response(200, ChannelSchema, example=ex.EDITED_CHANNEL)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(412, response="PRECONDITION_FAILED")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def edit_channel(channel_id):
    """Change some fields of a channel; with If-Match, a channel changed meanwhile answers 412.

    Any of name, target (URL, env:NAME or address), secret (a webhook's), kinds, enabled,
    group_minutes, quiet and quiet_timezone; the others stay. The answer carries the new ETag and
    the URL masked. A stale If-Match or any refused field changes nothing; without If-Match the
    edit is unconditional. Setting the target (and a webhook's secret) again is how a channel whose
    stored values cannot be decrypted is repaired.

    Roles: admin. Errors: 401, 403, 404, 412 (stale If-Match), 422 (per field: name taken, URL or
    address, secret, alert kinds, enabled, grouping, quiet window, time zone, or a field that cannot
    change such as kind or project; nothing changes).
    """
    _check(channel_id, "alert channel")
    caller = current_caller()
    alert_channels.get_channel(channel_id, caller)  # a channel the caller cannot see is 404 before the body
    data = json_object_body()
    channel = alert_channels.change_channel(
        channel_id,
        data,
        now=utcnow(),
        actor=caller.actor,
        caller=caller,
        precondition=lambda current: check_if_match(_version(current)),
    )
    return with_etag(alert_channels.channel_to_dict(channel), _version(channel))


@blp.delete("/channels/<int:channel_id>")
@authenticated(Action.ADMINISTER)
@blp.response(204)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def delete_channel(channel_id):
    """Delete a channel with its delivery log (routes that named it stop naming it).

    Roles: admin. Errors: 401, 403, 404.
    """
    _check(channel_id, "alert channel")
    caller = current_caller()
    alert_channels.delete_channel(channel_id, now=utcnow(), actor=caller.actor, caller=caller)
    return None


@blp.post("/channels/<int:channel_id>/test")
@authenticated(Action.OPERATE)
@blp.response(200, DeliverySchema, example=ex.TEST_DELIVERY)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
def test_channel(channel_id):
    """Send a test message now and answer its delivery: delivered, or retrying with the error
    (a failed test is retried like any delivery).

    Roles: operator, admin. Errors: 401, 403, 404.
    """
    _check(channel_id, "alert channel")
    caller = current_caller()
    now = utcnow()
    delivery = alert_channels.send_test(channel_id, now=now, actor=caller.actor, caller=caller)
    deliveries.send_now(db.engine, delivery.id, now=now, settings=current_app.config)
    db.session.rollback()  # the send was recorded on another connection
    sent = db.session.get(AlertDelivery, delivery.id)
    if sent is None:  # its channel was deleted meanwhile
        raise NotFound(f"alert channel {channel_id} does not exist")
    return alert_channels.delivery_to_dict(sent)
