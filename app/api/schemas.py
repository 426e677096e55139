"""Request and response schemas of the API that are not a definition of their own.

Jobs come from `app.definitions` (the one job definition); the rest mirror the `--json` shapes of
`app.services.serialize` and the read models, field for field, so the CLI and the API speak one
vocabulary. Response schemas are strict about types so that the published document is a contract
a client (and Schemathesis) can check every answer against.
"""

from __future__ import annotations

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from app.api.scope import ID_MAX
from app.definitions import text_limits
from app.definitions.fields import Instant, Text, TextLength, printable
from app.domain.event_kinds import EVENT_KINDS
from app.models.alerting import CHANNEL_KINDS, RECEIVABLE_KINDS
from app.models.ids import id_in_range, is_whole_number
from app.services.use_cases.notify_routes import GROUP_MINUTES_MAX
from app.services.use_cases.queues import NAME_PATTERN as QUEUE_NAME
from app.services.use_cases.queues import NAME_RULE as QUEUE_NAME_RULE

PAGE_LIMIT_DEFAULT = 50
PAGE_LIMIT_MAX = 200


class StrictSchema(Schema):
    class Meta:
        unknown = EXCLUDE


class ProblemSchema(Schema):
    """An error (RFC 9457): `errors` maps each invalid field to its message."""

    type = fields.String(metadata={"example": "about:blank"})
    title = fields.String(metadata={"example": "Unprocessable content"})
    status = fields.Integer(metadata={"example": 422})
    detail = fields.String(metadata={"example": "The request has invalid fields: name"})
    instance = fields.String(metadata={"example": "/api/v1/jobs"})
    errors = fields.Dict(keys=fields.String(), values=fields.String(), metadata={"example": {"name": "is required"}})


# --- pagination --------------------------------------------------------------------------------


def _a_cursor(value: str) -> None:
    """A cursor is the last id of a page: a whole number that an id column can hold."""
    if id_in_range(value, ID_MAX) is None:
        raise ValidationError("is not a cursor this API gave out")


class QueryNumber(fields.Integer):
    """A whole number in a query string: ASCII digits only ("٣" or "²" are digits to `int()`)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str) and not is_whole_number(value):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


def id_parameter(what: str) -> fields.Integer:
    """A query parameter naming an object by id, bounded like the ids of paths and bodies."""
    return QueryNumber(
        load_default=None,
        validate=validate.Range(1, ID_MAX, error=f"must be {what} id from {{min}} to {{max}}"),
        metadata={"description": f"Only the items of this {what.split()[-1]} (its id)."},
    )


class PageQuery(StrictSchema):
    limit = QueryNumber(
        load_default=PAGE_LIMIT_DEFAULT,
        validate=validate.Range(1, PAGE_LIMIT_MAX, error="must be between {min} and {max}"),
        metadata={"description": f"Items per page (at most {PAGE_LIMIT_MAX})."},
    )
    cursor = fields.String(
        load_default=None,
        validate=_a_cursor,
        metadata={"description": "Where the page starts: the `next` link of the previous page holds it."},
    )


def page_schema(item_schema, name: str) -> type[Schema]:
    """A page of `item_schema` objects with the link to the next page (null on the last)."""
    return type(
        name,
        (Schema,),
        {
            "items": fields.List(fields.Nested(item_schema), required=True),
            "next": fields.String(
                allow_none=True, required=True, metadata={"description": "The next page's URL, or null."}
            ),
        },
    )


class SinceUntilQuery(PageQuery):
    since = fields.AwareDateTime(
        load_default=None, metadata={"description": "Only items created at or after this instant (ISO 8601)."}
    )
    until = fields.AwareDateTime(
        load_default=None, metadata={"description": "Only items created before this instant (ISO 8601)."}
    )


# --- sign-in -----------------------------------------------------------------------------------


class LoginSchema(StrictSchema):
    username = fields.String(required=True, validate=validate.Length(1, 150), metadata={"example": "admin"})
    password = fields.String(required=True, validate=validate.Length(1, 1000), metadata={"example": "admin"})
    organization = fields.String(
        load_default=None,
        validate=validate.Length(1, 64),
        metadata={"description": "The organization to act in (default: your first one).", "example": "default"},
    )


class TokenPairSchema(Schema):
    access_token = fields.String(required=True)
    refresh_token = fields.String()
    token_type = fields.String(required=True, metadata={"example": "Bearer"})
    expires_in = fields.Integer(
        required=True, metadata={"description": "Seconds the access token lives.", "example": 900}
    )


class PasswordChangeSchema(StrictSchema):
    current_password = fields.String(required=True, validate=validate.Length(1, 1000))
    new_password = fields.String(
        required=True, validate=validate.Length(8, 1000), metadata={"example": "a-long-new-secret"}
    )


class RegisterSchema(StrictSchema):
    username = fields.String(required=True, validate=validate.Length(1, 150), metadata={"example": "carol"})
    password = fields.String(required=True, validate=validate.Length(8, 1000), metadata={"example": "carol-secret-1"})
    invitation = fields.String(
        load_default=None, validate=validate.Length(1, 2000), metadata={"description": "An admin's invitation."}
    )


# --- people, organizations, projects ------------------------------------------------------------


class MembershipSchema(Schema):
    organization = fields.String(required=True)
    role = fields.String(required=True)


class UserSchema(Schema):
    id = fields.Integer(required=True)
    username = fields.String(required=True)
    active = fields.Boolean(required=True)
    superuser = fields.Boolean(required=True)
    memberships = fields.List(fields.Nested(MembershipSchema), required=True)
    created_at = fields.String(allow_none=True)


class MeSchema(Schema):
    user = fields.Nested(UserSchema, allow_none=True, required=True)
    actor = fields.String(required=True, metadata={"example": "api:admin"})
    credential = fields.String(required=True, metadata={"description": "jwt or api_token"})
    organization = fields.String(allow_none=True, required=True)
    project = fields.String(allow_none=True, required=True)
    role = fields.String(allow_none=True, required=True)
    superuser = fields.Boolean(required=True)
    time_zone = fields.String(
        required=True,
        metadata={
            "description": "The IANA zone the web shows this user's times in (the API speaks UTC).",
            "example": "Asia/Tokyo",
        },
    )


class MeUpdateSchema(StrictSchema):
    time_zone = fields.String(required=True, validate=validate.Length(1, 64), metadata={"example": "Asia/Tokyo"})


class OrganizationSchema(Schema):
    id = fields.Integer(required=True)
    name = fields.String(required=True)
    projects = fields.Integer(metadata={"description": "How many projects it has."})
    members = fields.Integer(metadata={"description": "How many people belong to it."})
    created_at = fields.String(allow_none=True)


class ProjectSchema(Schema):
    id = fields.Integer(required=True)
    name = fields.String(required=True)
    organization = fields.String(required=True)
    full_name = fields.String(required=True, metadata={"example": "default/default"})
    description = fields.String()
    created_at = fields.String(allow_none=True)


class ProjectCreateSchema(StrictSchema):
    organization = fields.String(required=True, validate=validate.Length(1, 64), metadata={"example": "default"})
    name = fields.String(required=True, validate=validate.Length(1, 64), metadata={"example": "reports"})
    description = fields.String(load_default="", validate=TextLength(max=text_limits.PROJECT_DESCRIPTION.maximum))


class RenameSchema(StrictSchema):
    name = fields.String(required=True, validate=validate.Length(1, 64), metadata={"example": "finance"})


class DeleteQuery(StrictSchema):
    cascade = fields.Boolean(
        load_default=False,
        metadata={"description": "Also delete every job (with its history), queue and execution in it."},
    )


class DeletionSchema(Schema):
    deleted = fields.String(required=True, metadata={"description": "What was deleted."})
    projects = fields.List(fields.String(), required=True)
    jobs = fields.Integer(required=True)
    queues = fields.Integer(required=True, metadata={"description": "Queues besides each project's default one."})
    executions = fields.Integer(required=True)
    running = fields.Integer(required=True)


# --- tokens ------------------------------------------------------------------------------------


class ApiTokenSchema(Schema):
    id = fields.Integer(required=True)
    name = fields.String(required=True)
    prefix = fields.String(required=True, metadata={"description": "The secret's first characters."})
    project = fields.String(allow_none=True, required=True)
    role = fields.String(required=True)
    user = fields.String(allow_none=True, required=True)
    created_at = fields.String(allow_none=True)
    expires_at = fields.String(allow_none=True)
    last_used_at = fields.String(allow_none=True)
    revoked_at = fields.String(allow_none=True)
    revoked_by = fields.String(allow_none=True)


class NewApiTokenSchema(ApiTokenSchema):
    token = fields.String(required=True, metadata={"description": "The secret: shown this once, never again."})


class ApiTokenCreateSchema(StrictSchema):
    name = fields.String(
        required=True, validate=TextLength(1, text_limits.TOKEN_NAME.maximum), metadata={"example": "ci-deploy"}
    )
    project = fields.String(
        load_default=None,
        validate=validate.Length(1, 200),
        metadata={"description": "ORG/PROJECT (default: your working project).", "example": "default/default"},
    )
    role = fields.String(
        required=True, validate=validate.OneOf(["viewer", "operator", "admin"]), metadata={"example": "operator"}
    )
    expires_in_days = fields.Integer(strict=True, load_default=None, allow_none=True, validate=validate.Range(1, 3650))


# --- queues ------------------------------------------------------------------------------------


class QueueStatsSchema(Schema):
    pending = fields.Integer()
    scheduled_later = fields.Integer()
    retrying = fields.Integer()
    running = fields.Integer()
    succeeded_last_hour = fields.Integer()
    failed_last_hour = fields.Integer()
    oldest_pending_seconds = fields.Float(allow_none=True)
    throughput_per_minute = fields.Float(allow_none=True)
    lateness_p50_seconds = fields.Float(allow_none=True)
    lateness_p95_seconds = fields.Float(allow_none=True)


class RateWindowSchema(Schema):
    limit = fields.String(required=True, metadata={"example": "10/minute"})
    starts_in_window = fields.Integer(required=True, metadata={"description": "Starts within the last period."})
    room = fields.Integer(required=True, metadata={"description": "How many more may start now."})


class QueueSchema(Schema):
    id = fields.Integer(required=True)
    name = fields.String(required=True)
    project = fields.String(required=True)
    description = fields.String()
    concurrency_limit = fields.Integer(allow_none=True)
    rate_limit = fields.String(allow_none=True, metadata={"description": "At most N starts per period: 10/minute."})
    rate_window = fields.Nested(RateWindowSchema, allow_none=True)
    priority = fields.Integer()
    paused = fields.Boolean()
    paused_by = fields.String(allow_none=True)
    paused_at = fields.String(allow_none=True)
    paused_reason = fields.String(allow_none=True)
    created_at = fields.String(allow_none=True)
    updated_at = fields.String(allow_none=True)
    stats = fields.Nested(QueueStatsSchema, allow_none=True)


class QueueCreateSchema(StrictSchema):
    name = fields.String(
        required=True,
        validate=validate.Regexp(QUEUE_NAME.pattern, error=QUEUE_NAME_RULE),
        metadata={"example": "reports"},
    )
    description = fields.String(load_default=None, validate=TextLength(max=text_limits.QUEUE_DESCRIPTION.maximum))
    concurrency_limit = fields.Integer(
        strict=True, load_default=None, allow_none=True, validate=validate.Range(1, 100000)
    )
    rate_limit = fields.String(
        load_default=None, allow_none=True, metadata={"description": "N/second, N/minute or N/hour; null: none."}
    )
    priority = fields.Integer(strict=True, load_default=None, validate=validate.Range(-1000, 1000))


class QueueEditSchema(StrictSchema):
    description = fields.String(validate=TextLength(max=text_limits.QUEUE_DESCRIPTION.maximum))
    concurrency_limit = fields.Integer(strict=True, allow_none=True, validate=validate.Range(1, 100000))
    rate_limit = fields.String(allow_none=True, metadata={"description": "N/second, N/minute or N/hour; null: none."})
    priority = fields.Integer(strict=True, validate=validate.Range(-1000, 1000))


class PauseSchema(StrictSchema):
    reason = Text(
        load_default=None,
        validate=[TextLength(max=text_limits.PAUSE_REASON.maximum), printable],
        metadata={"example": "deploying"},
    )


# --- executions --------------------------------------------------------------------------------


class AttemptSchema(Schema):
    id = fields.Integer(required=True)
    execution_id = fields.Integer(required=True)
    number = fields.Integer(required=True)
    worker_id = fields.String(allow_none=True)
    pid = fields.Integer(allow_none=True)
    status = fields.String(required=True)
    started_at = fields.String(allow_none=True)
    finished_at = fields.String(allow_none=True)
    duration_seconds = fields.Float(allow_none=True)
    exit_code = fields.Integer(allow_none=True)
    output = fields.String(allow_none=True)
    error = fields.String(allow_none=True)


class ExecutionSchema(Schema):
    id = fields.Integer(required=True)
    job_id = fields.Integer(
        required=True, allow_none=True, metadata={"description": "The job it runs for; null for a one-off run."}
    )
    job_name = fields.String(allow_none=True, metadata={"description": 'The job\'s name; "one-off" for a one-off run.'})
    task = fields.String(allow_none=True, metadata={"description": "The task it runs."})
    one_off = fields.Boolean(metadata={"description": "A one-off run: a task run without a job."})
    project_id = fields.Integer(allow_none=True)
    timeout_seconds = fields.Integer(allow_none=True)
    config_override = fields.Dict(allow_none=True)
    batch_id = fields.Integer(allow_none=True)
    parent_id = fields.Integer(allow_none=True)
    callback_task = fields.String(allow_none=True)
    scheduled_for = fields.String(allow_none=True)
    trigger = fields.String(required=True)
    idempotency_key = fields.String(allow_none=True)
    status = fields.String(required=True, metadata={"example": "pending"})
    reason = fields.String(allow_none=True)
    attempts = fields.Integer()
    max_attempts = fields.Integer()
    queue = fields.String(allow_none=True)
    priority = fields.Integer()
    available_at = fields.String(allow_none=True)
    claimed_by = fields.String(allow_none=True)
    lease_expires_at = fields.String(allow_none=True)
    started_at = fields.String(allow_none=True)
    finished_at = fields.String(allow_none=True)
    duration_seconds = fields.Float(allow_none=True)
    exit_code = fields.Integer(allow_none=True)
    retry_of_id = fields.Integer(allow_none=True)
    cancel_requested_at = fields.String(allow_none=True)
    cancel_requested_by = fields.String(allow_none=True)
    created_at = fields.String(allow_none=True)
    updated_at = fields.String(allow_none=True)
    task_version = fields.String(
        allow_none=True, metadata={"description": "the code version of the task that ran the last attempt"}
    )
    output = fields.String(allow_none=True)
    error = fields.String(allow_none=True)
    result = fields.Raw(
        allow_none=True,
        metadata={"description": "what the task returned (any JSON value; null: nothing, or it did not succeed)"},
    )


class ExecutionExplainSchema(Schema):
    """One execution's fate: a code, a sentence and the evidence behind it."""

    execution = fields.Dict(required=True, metadata={"description": "id, job_id, job_name, task, one_off."})
    now = fields.String(required=True)
    scheduled_for = fields.String(allow_none=True)
    fate = fields.String(required=True, metadata={"example": "fired"})
    summary = fields.String(required=True)
    dst = fields.String(allow_none=True)
    execution_id = fields.Integer(allow_none=True)
    status = fields.String(allow_none=True)
    details = fields.Dict()


class TriggeredSchema(ExecutionSchema):
    deduplicated = fields.Boolean(
        required=True,
        metadata={
            "description": "true when the job is unique and this is the run that already held its key "
            "(pending or running): nothing was created (200 instead of 201)."
        },
    )


class OutputSchema(Schema):
    execution_id = fields.Integer(required=True)
    status = fields.String(required=True)
    output = fields.String(required=True)
    error = fields.String(required=True)


class CancelSchema(StrictSchema):
    reason = Text(load_default=None, validate=[TextLength(max=text_limits.CANCEL_REASON.maximum), printable])


class ExecutionQuery(SinceUntilQuery):
    status = fields.String(
        load_default=None,
        validate=validate.OneOf(
            [
                "pending",
                "claimed",
                "running",
                "succeeded",
                "failed",
                "timed_out",
                "retry_scheduled",
                "dead_lettered",
                "cancelled",
                "skipped",
                "expired",
            ]
        ),
    )
    job = id_parameter("a job")
    queue = fields.String(
        load_default=None,
        validate=validate.Regexp(r"^[a-z0-9][a-z0-9_.-]{0,63}$"),
        metadata={"description": "A queue name."},
    )
    task = fields.String(
        load_default=None,
        validate=validate.Length(1, 100),
        metadata={"description": "Only executions running this task (one-off runs, callbacks and jobs' runs)."},
    )
    one_off = fields.Boolean(
        load_default=None, metadata={"description": "true: only one-off runs (no job); false: only jobs' executions."}
    )


# --- alerts, workers, audit, schedules ------------------------------------------------------------


class AlertSchema(Schema):
    id = fields.Integer(required=True)
    job_id = fields.Integer(allow_none=True)
    job_name = fields.String(allow_none=True)
    execution_id = fields.Integer(allow_none=True)
    kind = fields.String(required=True)
    message = fields.String(required=True)
    created_at = fields.String(allow_none=True)
    resolved_at = fields.String(allow_none=True)
    resolved_by = fields.String(allow_none=True)


NOTIFY_EVENTS = ["failure", "dead_letter", "overdue", "recovery", "success"]


class NotifyRouteSchema(Schema):
    events = fields.List(fields.String(validate=validate.OneOf(NOTIFY_EVENTS)), required=True)
    channels = fields.List(
        fields.String(),
        allow_none=True,
        required=True,
        metadata={"description": "Channel names; null: every channel of the project (a job: its project's)."},
    )
    source = fields.String(required=True, validate=validate.OneOf(["job", "project", "default"]))


class NotifyRouteBody(StrictSchema):
    events = fields.List(
        fields.String(validate=validate.Length(max=20)),
        required=True,
        validate=validate.Length(max=5),
        metadata={"description": f"Some of {', '.join(NOTIFY_EVENTS)} (empty: notify nothing)."},
    )
    channels = fields.List(
        fields.String(validate=validate.Length(max=100)),
        allow_none=True,
        load_default=None,
        validate=validate.Length(max=100),
        metadata={"description": "Channel names of the project; null or absent: every channel."},
    )


class ProjectNotifySchema(NotifyRouteSchema):
    project = fields.String(required=True)
    project_id = fields.Integer(required=True)


class JobNotifySchema(Schema):
    job_id = fields.Integer(required=True)
    job = fields.String(required=True)
    override = fields.Nested(NotifyRouteSchema, allow_none=True, required=True)
    effective = fields.Nested(NotifyRouteSchema, required=True)


class ChannelSchema(Schema):
    id = fields.Integer(required=True)
    project_id = fields.Integer(required=True)
    name = fields.String(required=True)
    kind = fields.String(required=True)
    target = fields.String(required=True, metadata={"description": "A URL masked; an email address as it is."})
    kinds = fields.List(fields.String(), required=True)
    enabled = fields.Boolean(required=True)
    group_minutes = fields.Integer(required=True)
    quiet = fields.String(allow_none=True, required=True, metadata={"example": "22:00-07:00"})
    quiet_timezone = fields.String(required=True)
    created_at = fields.String(required=True)
    unreadable = fields.String(
        allow_none=True,
        required=True,
        metadata={
            "description": "Null, or why the stored URL (an email channel's address) or signing secret cannot be "
            "decrypted and what to do; `target` is then `(unreadable)` and every send to the channel fails."
        },
    )


class ChannelCreatedSchema(ChannelSchema):
    secret = fields.String(
        allow_none=True,
        required=True,
        metadata={"description": "A webhook's signing secret (generated unless given): in this answer only."},
    )


class ChannelCreateSchema(StrictSchema):
    """A new channel. Fields are typed here; their values are checked by the same use case as
    `flask channel add` and the web form, whose messages a 422 answers field by field."""

    name = fields.String(required=True, metadata={"example": "ops-slack", "description": "Unique in its project."})
    kind = fields.String(required=True, metadata={"enum": list(CHANNEL_KINDS), "example": "slack"})
    target = fields.String(
        required=True,
        metadata={
            "description": "The webhook, Slack or Teams URL (or env:NAME: the delivering process's variable "
            "NAME holds it), or the address of an email channel. Stored encrypted, shown masked.",
            "example": "https://hooks.slack.com/services/T0/B0/XXXX",
        },
    )
    secret = fields.String(
        load_default=None, allow_none=True, metadata={"description": "A webhook's signing secret (default: generated)."}
    )
    kinds = fields.List(
        fields.String(metadata={"enum": list(RECEIVABLE_KINDS)}),
        load_default=list,
        metadata={"description": "The alert kinds and notices it receives (empty: every one)."},
    )
    group_minutes = fields.Integer(
        strict=True,
        load_default=None,
        validate=validate.Range(0, GROUP_MINUTES_MAX),
        metadata={"description": "One message per job and event per N minutes (default 10; 0: every one)."},
    )
    quiet = fields.String(
        load_default=None, allow_none=True, metadata={"example": "22:00-07:00", "description": "Held in this window."}
    )
    quiet_timezone = fields.String(load_default=None, allow_none=True, metadata={"example": "Europe/Paris"})
    project = fields.String(
        load_default=None,
        metadata={"description": "ORG/PROJECT (default: the caller's project).", "example": "default/default"},
    )


class ChannelEditSchema(Schema):
    """Some fields of a channel (any subset; the others stay). Documents the PATCH body: the values
    are checked by the channels use case, field by field (a 422 names each field refused, and
    fields that cannot change, such as `kind` or `project`, are refused by name)."""

    name = fields.String(metadata={"example": "ops-slack", "description": "Unique in its project (a rename)."})
    target = fields.String(
        metadata={
            "description": "A new URL (or env:NAME), or an email channel's new address; stored encrypted, shown "
            "masked. Sending it again replaces a stored URL that cannot be decrypted.",
            "example": "https://hooks.slack.com/services/T0/B0/YYYY",
        }
    )
    secret = fields.String(
        metadata={"description": "A webhook's new signing secret (1-200 characters; never answered)."}
    )
    kinds = fields.List(
        fields.String(metadata={"enum": list(RECEIVABLE_KINDS)}),
        metadata={"description": "The alert kinds and notices it receives (empty: every one)."},
    )
    enabled = fields.Boolean(
        metadata={"description": "false: no alert or notice is queued for it until enabled again (tests still go)."}
    )
    group_minutes = fields.Integer(
        validate=validate.Range(0, GROUP_MINUTES_MAX),
        metadata={"description": "One message per job and event per N minutes (0: every one)."},
    )
    quiet = fields.String(
        allow_none=True, metadata={"example": "22:00-07:00", "description": "Held in this window; off or null: none."}
    )
    quiet_timezone = fields.String(
        allow_none=True, metadata={"example": "Europe/Paris", "description": "The quiet window's zone (null: UTC)."}
    )


class DeliverySchema(Schema):
    id = fields.Integer(required=True)
    channel_id = fields.Integer(required=True)
    alert_id = fields.Integer(allow_none=True, required=True)
    kind = fields.String(required=True)
    grouped = fields.Integer(required=True)
    status = fields.String(required=True, validate=validate.OneOf(["pending", "delivered", "failed"]))
    attempts = fields.Integer(required=True)
    response_status = fields.Integer(allow_none=True, required=True)
    last_error = fields.String(allow_none=True, required=True)
    next_attempt_at = fields.String(allow_none=True, required=True)
    created_at = fields.String(required=True)
    delivered_at = fields.String(allow_none=True, required=True)


class AlertQuery(SinceUntilQuery):
    include_resolved = fields.Boolean(load_default=False)


class PreviewQuery(StrictSchema):
    count = QueryNumber(load_default=5, validate=validate.Range(1, 100))
    after = fields.AwareDateTime(load_default=None, metadata={"description": "Start after this instant (default now)."})


class PreviewSchema(Schema):
    next_runs = fields.List(fields.String(), required=True, metadata={"example": ["2026-06-01T12:05:00Z"]})
    timezone = fields.String(required=True)
    notes = fields.List(fields.String())


class SchedulePreviewSchema(StrictSchema):
    schedule_type = fields.String(
        required=True, validate=validate.OneOf(["one_time", "interval", "cron"]), metadata={"example": "cron"}
    )
    schedule = fields.Dict(required=True, metadata={"example": {"expression": "0 9 * * 1-5"}})
    timezone = fields.String(load_default="UTC", validate=validate.Length(1, 64), metadata={"example": "Europe/Paris"})
    count = fields.Integer(strict=True, load_default=5, validate=validate.Range(1, 100))
    after = fields.AwareDateTime(load_default=None)


class WorkerExecutionSchema(Schema):
    id = fields.Integer(required=True)
    job_id = fields.Integer(allow_none=True)
    job_name = fields.String(allow_none=True)
    attempt = fields.Integer(allow_none=True)
    started_at = fields.String(allow_none=True)


class LostExecutionSchema(Schema):
    id = fields.Integer(required=True)
    job_id = fields.Integer(allow_none=True)
    job_name = fields.String(allow_none=True)
    status = fields.String(required=True, metadata={"description": "Its status now."})
    recovered = fields.Boolean(required=True, metadata={"description": "Lease recovery has settled it."})
    lease_expires_at = fields.String(allow_none=True)


class WorkerSchema(Schema):
    id = fields.String(required=True)
    host = fields.String(allow_none=True)
    pid = fields.Integer(allow_none=True)
    state = fields.String(required=True, metadata={"description": "running, draining, stopped or stale"})
    status = fields.String(metadata={"description": "alive, stopped or lost (the words of `flask health` and /readyz)"})
    busy = fields.Integer(allow_none=True)
    idle = fields.Integer(allow_none=True)
    slots = fields.Integer(allow_none=True)
    queues = fields.List(fields.String())
    started_at = fields.String(allow_none=True)
    last_seen = fields.String(allow_none=True)
    age_seconds = fields.Float(allow_none=True)
    pending_command = fields.String(allow_none=True)
    executions = fields.List(fields.Nested(WorkerExecutionSchema))
    lost = fields.List(
        fields.Nested(LostExecutionSchema),
        metadata={"description": "A stale or stopped worker's runs: waiting for lease recovery, or recovered."},
    )


class WorkerStopSchema(StrictSchema):
    now = fields.Boolean(load_default=False, metadata={"description": "Kill running tasks instead of draining."})


class AuditEventSchema(Schema):
    id = fields.Integer(required=True)
    created_at = fields.String(allow_none=True)
    actor = fields.String(allow_none=True)
    source = fields.String(allow_none=True)
    object_kind = fields.String(allow_none=True)
    object_id = fields.String(allow_none=True)
    object_label = fields.String(allow_none=True)
    action = fields.String(allow_none=True)
    changes = fields.Dict(allow_none=True)
    address = fields.String(allow_none=True)
    job_id = fields.Integer(allow_none=True)
    project_id = fields.Integer(allow_none=True)
    organization_id = fields.Integer(allow_none=True)


class AuditQuery(SinceUntilQuery):
    actor = fields.String(load_default=None, validate=validate.Length(1, 200))
    object_kind = fields.String(load_default=None, validate=validate.Length(1, 32))
    action = fields.String(load_default=None, validate=validate.Length(1, 32))
    job = id_parameter("a job")


class EventQuery(SinceUntilQuery):
    kind = fields.String(
        load_default=None,
        validate=validate.OneOf(sorted(EVENT_KINDS), error="is not an event kind"),
        metadata={"description": "Only events of this kind (see the events page for what each means)."},
    )
    job = fields.Integer(load_default=None, validate=validate.Range(1, 2**31 - 1))
    queue = fields.String(
        load_default=None, validate=validate.Length(1, 100), metadata={"description": "A queue's name."}
    )
    worker = fields.String(
        load_default=None,
        validate=validate.Length(1, 200),
        metadata={"description": "Only events naming this worker id (lease recovery, cancels)."},
    )


class EventSchema(Schema):
    id = fields.Integer(required=True)
    kind = fields.String(required=True)
    created_at = fields.String(required=True)
    actor = fields.String(allow_none=True)
    job_id = fields.Integer(allow_none=True)
    execution_id = fields.Integer(allow_none=True)
    worker_id = fields.String(allow_none=True)
    payload = fields.Dict()
    explanation = fields.String(metadata={"description": "What this kind of event means."})


class InvitationCreateSchema(StrictSchema):
    role = fields.String(required=True, validate=validate.OneOf(["viewer", "operator", "admin"]))


class InvitationSchema(Schema):
    invitation = fields.String(required=True)
    role = fields.String(required=True)
    expires_at = fields.String(required=True)


class BatchStatusSchema(Schema):
    id = fields.Integer(required=True)
    job_id = fields.Integer(allow_none=True)
    job_name = fields.String(allow_none=True)
    status = fields.String(
        required=True, metadata={"description": "running, succeeded, failed, partially_failed or cancelled"}
    )
    items = fields.Integer(required=True)
    counts = fields.Dict(keys=fields.String(), values=fields.Integer())
    on_complete = fields.String(allow_none=True)
    on_complete_config = fields.Dict(allow_none=True)
    callback_execution_id = fields.Integer(allow_none=True)
    created_by = fields.String(allow_none=True)
    created_at = fields.String(allow_none=True)
    cancelled_at = fields.String(allow_none=True)
    cancelled_by = fields.String(allow_none=True)
    completed_at = fields.String(allow_none=True)


class BatchQuery(PageQuery):
    job = id_parameter("a job")


class LintWarningSchema(Schema):
    code = fields.String(required=True, metadata={"example": "uneven_step"})
    field = fields.String(required=True, metadata={"example": "schedule"})
    message = fields.String(required=True)


class ExplainQuery(StrictSchema):
    at = fields.AwareDateTime(load_default=None, metadata={"description": "An instant (ISO 8601)."})
    from_ = fields.AwareDateTime(data_key="from", load_default=None, metadata={"description": "A window's start."})
    to = fields.AwareDateTime(load_default=None, metadata={"description": "A window's end."})


class MessageSchema(Schema):
    detail = fields.String(required=True)


__all__ = ["Instant"]


class TaskEnvSchema(Schema):
    name = fields.String(required=True, metadata={"description": "a variable the task declares"})
    set = fields.Boolean(required=True, metadata={"description": "whether it is set where the API runs"})


class TaskSchema(Schema):
    name = fields.String(required=True)
    description = fields.String(required=True)
    module = fields.String(required=True, metadata={"description": "the Python module that defines it"})
    builtin = fields.Boolean(required=True)
    async_ = fields.Boolean(required=True, data_key="async", metadata={"description": "an `async def` task"})
    env = fields.List(fields.Nested(TaskEnvSchema), required=True)
    schema = fields.Dict(required=True, metadata={"description": "the JSON Schema of its config"})
    example = fields.Dict(required=True, metadata={"description": "an example config"})
    version = fields.String(required=True, metadata={"description": "its code version"})
