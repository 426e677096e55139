"""/api/v1/schedules/preview: the next fire times of a schedule that is not saved anywhere."""

from __future__ import annotations

from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.errors import ApiError
from app.api.schemas import PreviewSchema, SchedulePreviewSchema
from app.api.security import authenticated
from app.clock import iso_z, utcnow
from app.domain.permissions import Action
from app.scheduling import ScheduleError, parse_schedule, preview

blp = Blueprint(
    "api_schedules", __name__, url_prefix="/api/v1/schedules", description="Try a schedule before saving it."
)


@blp.post("/preview")
@authenticated(Action.READ)
@blp.arguments(SchedulePreviewSchema, example=ex.SCHEDULE_PREVIEW)
@blp.response(200, PreviewSchema, example=ex.SCHEDULE_PREVIEW_ANSWER)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def preview_schedule(body):
    """The next fire times (UTC) of an unsaved schedule, with DST notes; nothing is stored.

    Roles: viewer, operator, admin. Errors: 401, 403, 422 (the schedule's message on `schedule` or `timezone`).
    """
    now = utcnow()
    try:
        schedule = parse_schedule(
            body["schedule_type"], body["schedule"], body["timezone"], anchor=now.replace(microsecond=0)
        )
        items = preview(schedule, body.get("after") or now, body["count"])
    except (ScheduleError, ValueError) as exc:
        message = str(exc)
        field = "timezone" if "timezone" in message.lower() else "schedule"
        raise ApiError(422, message, errors={field: message}) from None
    return {
        "next_runs": [iso_z(item.utc) for item in items],
        "timezone": schedule.timezone,
        "notes": [item.note for item in items if item.note],
    }
