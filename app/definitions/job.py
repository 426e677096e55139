"""The job definition: every field of a job, declared once.

`JobSchema` loads what an operator gives (the CLI, the web form, later the API) for a create (every
required field, defaults for the rest) or, with `partial=True` and the stored values as `current`,
for an edit (only the fields given). Field errors stay keyed by field, so the web shows each next
to its input and the CLI prints them on one line. `dump_job` is the JSON shape of a job (the column
names, instants as ISO 8601 UTC with `Z`).

Adding a job field: a column on the model, a migration, one declaration below (and a template line
in `templates/jobs/form.html` if the form shows it). See docs/architecture.md.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load, pre_load, validate, validates_schema

from app.clock import iso_z, utcnow
from app.definitions import text_limits
from app.definitions.fields import (
    Choice,
    Flag,
    Fraction,
    Instant,
    JsonObject,
    OptionalInstant,
    OptionalTaskName,
    OptionalText,
    OptionalWholeNumber,
    RateLimitText,
    ScheduleValue,
    TaskName,
    Text,
    TextLength,
    WholeNumber,
    printable,
    shown,
)
from app.definitions.workflow import WorkflowSteps
from app.domain import run_limits
from app.domain.retry import RetryKind
from app.domain.states import AlertMode, Isolation, MisfirePolicy, OverlapPolicy, ScheduleType
from app.scheduling import Schedule, ScheduleError, parse_schedule
from app.scheduling.timezones import resolve_timezone
from app.tasks import TaskConfigError, UnknownTaskError, validate_config

NAME_MAX = text_limits.JOB_NAME.maximum
DESCRIPTION_MAX = text_limits.JOB_DESCRIPTION.maximum
QUEUE_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
DAY = 86400
# Fields checked together: the schedule value against its type and zone, the config against its task.
SCHEDULE_FIELDS = frozenset({"schedule_type", "schedule", "timezone"})
TASK_FIELDS = frozenset({"task", "config"})
# Callbacks: each task field with its config field (the config is checked against that task).
CALLBACK_FIELDS = (("on_success", "on_success_config"), ("on_failure", "on_failure_config"))

# HTML attributes of the controls the live schedule preview reads.
_SCHEDULE_ATTRS = {"class": "schedule-input", "autocomplete": "off", "spellcheck": "false"}


class JobSchema(Schema):
    """A job's fields. Construct with `now` (the interval anchor of a new schedule; default the
    clock) and, for an edit, `current` (the stored values the given ones are checked against)."""

    class Meta:
        unknown = EXCLUDE

    id = fields.Integer(dump_only=True, metadata={"description": "The job's id."})
    name = Text(
        required=True,
        validate=[TextLength(1, NAME_MAX), printable],
        metadata=shown(
            "Name",
            "A unique name for the job.",
            cli="argument",
            cli_edit_help="New unique name.",
            metavar="TEXT",
            form_attrs={"maxlength": NAME_MAX},
            form_help="",
        ),
    )
    description = Text(
        strip=False,
        load_default="",
        validate=TextLength(max=DESCRIPTION_MAX),
        metadata=shown(
            "Description",
            "What the job is for, in a sentence or two.",
            metavar="TEXT",
            form_widget="textarea",
            form_attrs={"rows": 2, "maxlength": DESCRIPTION_MAX},
            form_help="",
        ),
    )
    task = TaskName(
        required=True,
        metadata=shown(
            "Task",
            "The registered task the job runs (see `flask job catalog`).",
            cli="argument",
            cli_edit_help="Another registered task; the config is checked against it.",
            metavar="TASK",
            form_widget="select",
            form_help="",
        ),
    )
    config = JsonObject(
        "config",
        load_default=dict,
        metadata=shown(
            "Task config (JSON object)",
            "Task config as a JSON object, checked against the task's schema (see `flask job catalog`).",
            metavar="JSON",
            form_widget="textarea",
            form_attrs={"rows": 4, "spellcheck": "false"},
            form_help='A JSON object checked against the task\'s schema, e.g. {"seconds": 2}. Leave empty for {}.',
        ),
    )
    schedule_type = Choice(
        ScheduleType,
        required=True,
        metadata=shown(
            "Schedule type",
            "How the job is scheduled: one_time, interval or cron.",
            cli="argument",
            cli_edit_help="New schedule type; give the new schedule with it.",
            metavar="{one_time|interval|cron}",
            form_default="interval",
            form_attrs={**_SCHEDULE_ATTRS, "data-schedule-type": ""},
            form_help="",
        ),
    )
    schedule = ScheduleValue(
        "schedule",
        required=True,
        metadata=shown(
            "Schedule",
            'The schedule value for its type: {"every": "30s"}, {"expression": "0 9 * * 1-5"} or '
            '{"run_at": "2026-01-01T12:00:00Z"}.',
            cli_help='Schedule as JSON, e.g. \'{"every": "30s"}\' (instead of --every/--cron/--run-at).',
            metavar="JSON",
            form_attrs=_SCHEDULE_ATTRS,
            # The form and the CLI also take the value as the text of its type's input (SCHEDULE_INPUTS).
            inputs={
                "every": {
                    "label": "Every",
                    "metavar": "DURATION",
                    "cli_help": "interval: 30s, 5m, 2h, 1d, 2w, 1h30m.",
                    "form_help": "Interval schedules: a number and a unit (s, m, h, d, w); runs are anchored, "
                    "so they never drift.",
                    "placeholder": "30s, 5m, 2h or 1d",
                },
                "cron": {
                    "label": "Cron expression",
                    "metavar": "EXPR",
                    "cli_help": "cron: 5-field expression or @hourly/@daily/..., in --timezone.",
                    "form_help": "Five fields (minute hour day month weekday) or @hourly, @daily, @weekly, "
                    "@monthly, @yearly.",
                    "placeholder": "0 9 * * 1-5",
                },
                "run_at": {
                    "label": "Run at",
                    "metavar": "ISO",
                    "cli_help": "one_time: when to run; no offset means --timezone local time.",
                    "form_help": "ISO 8601; without an offset the time is local to the timezone above.",
                    "placeholder": "2026-01-01T12:00:00Z",
                },
            },
        ),
    )
    timezone = Text(
        load_default="UTC",
        blank_default=True,
        validate=TextLength(max=64),
        metadata=shown(
            "Timezone (IANA)",
            "IANA zone the schedule runs in (default UTC).",
            metavar="TZ",
            form_attrs={**_SCHEDULE_ATTRS, "placeholder": "UTC", "list": "timezones"},
            form_help="Cron and local run_at times are read in this zone.",
        ),
    )
    enabled = Flag(
        load_default=True,
        # The CLI has its own flags: `job add --disabled`, `job edit --enabled|--disabled`.
        metadata=shown("Enabled", "Whether the job is scheduled.", cli=False, form_help=""),
    )
    next_run_at = Instant(
        dump_only=True, allow_none=True, metadata={"description": "The next occurrence (UTC); null when there is none."}
    )
    overlap_policy = Choice(
        OverlapPolicy,
        load_default="skip",
        metadata=shown(
            "Overlap policy",
            "When a run is still active: skip (default), queue, allow.",
            form_help="skip: miss a run while one is active; queue: run it after; allow: run concurrently.",
        ),
    )
    misfire_policy = Choice(
        MisfirePolicy,
        load_default="coalesce",
        metadata=shown(
            "Misfire policy",
            "Runs missed beyond the grace: coalesce (default), catch_up, skip.",
            form_help="For runs missed by more than the grace period.",
        ),
    )
    misfire_grace_seconds = WholeNumber(
        0,
        7 * DAY,
        load_default=60,
        metadata=shown("Misfire grace (seconds)", "How late a run may start and still count as on time."),
    )
    max_attempts = WholeNumber(
        1, 100, load_default=3, metadata=shown("Max attempts", "Tries of one run before it is dead-lettered.")
    )
    retry_backoff_seconds = WholeNumber(
        0,
        7 * DAY,
        load_default=10,
        metadata=shown(
            "Retry backoff (seconds)",
            "Base delay of a retry; --retry-kind says how it grows per attempt.",
            form_help="fixed: every retry waits this; linear: backoff × n; exponential: backoff × 2^(n-1).",
        ),
    )
    retry_kind = Choice(
        RetryKind,
        load_default="exponential",
        metadata=shown(
            "Retry kind",
            "How the retry delay grows: fixed, linear or exponential (default).",
            form_help="fixed: the backoff each time; linear: backoff × attempt; exponential: backoff × 2^(attempt-1).",
        ),
    )
    retry_max_delay_seconds = OptionalWholeNumber(
        1,
        365 * DAY,
        metadata=shown(
            "Longest retry delay (seconds)",
            "Cap on one retry's delay, jitter included; none (default): no cap.",
            form_help="Empty: no cap.",
        ),
    )
    retry_jitter = Fraction(
        load_default=0.0,
        metadata=shown(
            "Retry jitter (0-1)",
            "Spread each retry delay by up to this fraction either way (0.2: ±20%), so failures do not retry together.",
            metavar="FRACTION",
        ),
    )
    timeout_seconds = OptionalWholeNumber(
        1,
        DAY,
        load_default=30,
        metadata=shown(
            "Timeout (seconds)",
            "Hard timeout of one attempt; none: no limit (the worker renews its lease while the task runs).",
            cli_help="Hard timeout of one attempt in seconds, or 'none' for no limit "
            "(default DEFAULT_JOB_TIMEOUT_SECONDS).",
            form_help="Empty: no limit; the task runs until it ends.",
            # The live preview reads it too: schedule lint warns when runs fire closer than this.
            form_attrs={"class": "schedule-input"},
        ),
    )
    alert_mode = Choice(
        AlertMode,
        load_default="web",
        metadata=shown(
            "Alert mode",
            "web (default) or log_only.",
            choice_labels={"web": "web (alert row + log)", "log_only": "log only"},
        ),
    )
    isolation = Choice(
        Isolation,
        load_default="process",
        metadata=shown(
            "Isolation",
            "process (default): a fresh process per attempt; pool: a reused pool process, faster, "
            "for trusted tasks that leave no state behind (docs/job-policies.md).",
            choice_labels={"process": "process (fresh per attempt)", "pool": "pool (reused process)"},
            form_help="pool is faster but tasks share a process: state, leaks and memory carry over.",
        ),
    )
    retention_count = WholeNumber(
        0,
        10_000_000,
        load_default=500,
        metadata=shown("Keep at most N executions (0 = no limit)", "Executions kept (0: no limit)."),
    )
    retention_days = WholeNumber(
        0,
        36500,
        load_default=30,
        metadata=shown("Keep executions for N days (0 = no limit)", "Days of history kept (0: no limit)."),
    )
    queue = Text(
        load_default="default",
        validate=validate.Regexp(
            QUEUE_PATTERN, error="must be 1-64 characters: lower-case letters, digits, '_', '-', '.'"
        ),
        metadata=shown("Queue", "Worker queue (default 'default').", metavar="NAME"),
    )
    # The queue's project, never set on its own: a job cannot sit in another project's queue.
    project_id = fields.Integer(
        dump_only=True, metadata={"description": "The id of the job's project (its queue's); names are unique in it."}
    )
    priority = WholeNumber(
        -1000,
        1000,
        load_default=0,
        metadata=shown("Priority (lower runs first)", "Lower runs first (default 0)."),
    )
    # Run limits (app/domain/run_limits.py): when one is reached the job disables itself, saying why.
    start_at = OptionalInstant(
        metadata=shown(
            "Start at",
            "No run before this instant (ISO 8601; no offset: the job's timezone); none: from now.",
            metavar="ISO",
            form_help="Empty: from now. An interval schedule given with it counts its runs from this instant.",
            form_attrs={"placeholder": "2026-01-01T09:00:00Z"},
        ),
    )
    end_at = OptionalInstant(
        metadata=shown(
            "End at",
            "No run after this instant; the job then disables itself; none: no end.",
            metavar="ISO",
            form_help="Empty: no end.",
            form_attrs={"placeholder": "2026-12-31T18:00:00Z"},
        ),
    )
    max_runs = OptionalWholeNumber(
        1,
        1_000_000_000,
        metadata=shown(
            "Run at most N times",
            "Scheduled runs to create before the job disables itself; none: forever.",
            form_help="Empty: forever. Counts scheduled runs created (not missed ones, manual runs or retries).",
        ),
    )
    runs_created = fields.Integer(
        dump_only=True, metadata={"description": "Scheduled runs created so far (what max_runs counts)."}
    )
    disabled_reason = fields.String(
        dump_only=True,
        allow_none=True,
        metadata={"description": "Why the system disabled the job (a run limit reached, auto-pause); null otherwise."},
    )
    # Result and queued TTLs (app/domain/run_limits.py: result_expired; the retention pass applies them).
    success_ttl_seconds = WholeNumber(
        -1,
        3650 * DAY,
        load_default=-1,
        metadata=shown(
            "Keep succeeded runs for N seconds",
            "How long a succeeded run is kept after it finished: -1 forever (default), 0 until the next "
            "retention pass, n seconds.",
            form_help="-1: as long as the retention limits allow; 0: removed at the next retention pass.",
        ),
    )
    failure_ttl_seconds = WholeNumber(
        -1,
        3650 * DAY,
        load_default=-1,
        metadata=shown(
            "Keep failed runs for N seconds",
            "The same for runs that did not succeed (dead-lettered ones stay until resolved).",
            form_help="-1: as long as the retention limits allow; 0: removed at the next retention pass.",
        ),
    )
    queued_ttl_seconds = OptionalWholeNumber(
        1,
        365 * DAY,
        metadata=shown(
            "Expire if not started within (seconds)",
            "A run not started this long after it became available ends `expired` instead of running late; "
            "none (default): it waits.",
            form_help="Empty: a run waits for a worker as long as it takes.",
        ),
    )
    on_success = OptionalTaskName(
        metadata=shown(
            "On success: run task",
            "A registered task run as its own execution (trigger callback) when a run succeeds; empty: none.",
            metavar="TASK",
            form_help="Runs once per successful run, with the run's outcome in its config under `parent`. "
            "Leave empty for none.",
            form_attrs={"placeholder": "none", "list": "task-names", "autocomplete": "off"},
        ),
    )
    on_success_config = JsonObject(
        "on_success_config",
        load_default=dict,
        metadata=shown(
            "On success: task config (JSON object)",
            "The on-success task's config, checked against its schema.",
            metavar="JSON",
            form_widget="textarea",
            form_attrs={"rows": 2, "spellcheck": "false"},
        ),
    )
    on_failure = OptionalTaskName(
        metadata=shown(
            "On failure: run task",
            "A registered task run as its own execution (trigger callback) when a run fails for good "
            "(after its last attempt); empty: none.",
            metavar="TASK",
            form_help="Runs once when a run has failed or timed out for the last time (not per attempt), with "
            "the run's outcome in its config under `parent`. Leave empty for none.",
            form_attrs={"placeholder": "none", "list": "task-names", "autocomplete": "off"},
        ),
    )
    on_failure_config = JsonObject(
        "on_failure_config",
        load_default=dict,
        metadata=shown(
            "On failure: task config (JSON object)",
            "The on-failure task's config, checked against its schema.",
            metavar="JSON",
            form_widget="textarea",
            form_attrs={"rows": 2, "spellcheck": "false"},
        ),
    )
    # Operator insight (docs/insight.md): 0 turns each off.
    jitter_seconds = WholeNumber(
        0,
        3600,
        load_default=0,
        metadata=shown(
            "Jitter (seconds)",
            "Spread runs: each starts up to this many seconds after its time, by a fixed offset from the job id.",
            form_help="0: no jitter. The offset is the same for every run of the job, so runs stay evenly spaced.",
        ),
    )
    pause_after_failures = WholeNumber(
        0,
        1000,
        load_default=0,
        metadata=shown(
            "Auto-pause after N failed runs (0 = never)",
            "Disable the job after this many consecutive failed runs, with the reason and an alert (0: never).",
        ),
    )
    expect_success_within_seconds = WholeNumber(
        0,
        366 * DAY,
        load_default=0,
        metadata=shown(
            "Expect a success within (seconds, 0 = off)",
            "Dead-man's switch: an overdue alert when no run succeeded within this many seconds (0: off).",
        ),
    )
    alert_after_failures = WholeNumber(
        0,
        1000,
        load_default=0,
        metadata=shown(
            "Alert after N failed runs (0 = never)",
            "A consecutive_failures alert after this many failed runs in a row (0: never).",
        ),
    )
    # Throughput controls: uniqueness and a rate limit (docs/job-policies.md).
    unique = Flag(
        load_default=False,
        metadata=shown(
            "Unique",
            "While a run of this job's unique key is pending or running, a trigger (or a scheduled "
            "occurrence) returns that run instead of adding one, reported as deduplicated.",
            metavar="true|false",
            form_help="Never two waiting or running runs of this job (or of its unique key).",
        ),
    )
    unique_key = OptionalText(
        validate=[TextLength(max=150), printable],
        metadata=shown(
            "Unique key",
            "The key unique runs hold (jobs of one project naming the same key share it); empty: the job itself.",
            metavar="KEY",
            form_attrs={"placeholder": "the job itself"},
        ),
    )
    rate_limit = RateLimitText(
        validate=TextLength(max=32),
        metadata=shown(
            "Rate limit",
            "At most N starts per period across all workers: N/second, N/minute or N/hour (e.g. 10/minute); "
            "empty: no limit. A run beyond it waits, it does not fail.",
            metavar="N/PERIOD",
            form_attrs={"placeholder": "no limit", "autocomplete": "off"},
        ),
    )
    steps = WorkflowSteps(
        metadata=shown(
            "Workflow steps (JSON list)",
            "A workflow's steps: each with name, task, config, after (the steps it waits for), and optionally "
            "max_attempts, timeout_seconds and queue. Checked at once: cycles, unknown steps, unknown tasks and "
            "bad configs are refused naming the step. Each occurrence then runs the steps (a step starts once "
            "every step it waits for succeeded) instead of the job's own task.",
            metavar="FILE",
            cli_file=True,
            form_widget="textarea",
            form_attrs={"rows": 4, "spellcheck": "false"},
        ),
    )
    rate_starts = fields.List(
        fields.Float(),
        dump_only=True,
        allow_none=True,
        metadata={
            "description": "The last starts the rate limit counts (epoch seconds, newest first), kept by the claim."
        },
    )
    managed_by = fields.String(
        dump_only=True,
        allow_none=True,
        metadata={
            "description": "The job file (or API source) that owns the job, e.g. `file:jobs/nightly.yaml`; "
            "null for a job made by hand. Edits elsewhere are allowed and show as drift in the next plan."
        },
    )
    created_at = Instant(dump_only=True)
    updated_at = Instant(dump_only=True)

    def __init__(
        self,
        *,
        now: datetime | None = None,
        current: dict[str, Any] | None = None,
        defaults: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.now = now
        self.current = dict(current or {})
        # Global defaults from the settings (SETTING_DEFAULTS) replace the declared ones.
        for name, value in (defaults or {}).items():
            self.load_fields[name].load_default = value

    # --- loading ----------------------------------------------------------------------------

    @pre_load
    def _drop_unset(self, data: Any, *, partial: Any, **kwargs: Any) -> Any:
        """A None value is an option or input that was not given; on create an empty required
        field is missing (`is required`)."""
        if not isinstance(data, dict):
            return data
        return {key: value for key, value in data.items() if not _unset(self, key, value, partial)}

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def _check_together(self, data: dict[str, Any], original: Any, *, partial: Any, **kwargs: Any) -> None:
        """The cross-field rules: a config fits its task; a schedule value fits its type and zone."""
        given = (
            {k for k, v in original.items() if not _unset(self, k, v, partial)} if isinstance(original, dict) else set()
        )
        failed = {key for key in given if key in self.load_fields and key not in data}
        merged = {**self.current, **data}
        errors: dict[str, str] = {}
        if TASK_FIELDS & data.keys() and "task" in merged and not TASK_FIELDS & failed:
            try:
                validate_config(merged["task"], merged.get("config") or {})
            except (TaskConfigError, UnknownTaskError) as exc:
                errors["config"] = str(exc)
        for task_key, config_key in CALLBACK_FIELDS:
            if {task_key, config_key} & data.keys() and not {task_key, config_key} & failed:
                callback_task = merged.get(task_key)
                if callback_task:
                    try:
                        validate_config(callback_task, merged.get(config_key) or {})
                    except (TaskConfigError, UnknownTaskError) as exc:
                        errors[config_key] = str(exc)
                elif data.get(config_key):
                    errors[config_key] = f"a config needs a task: give {task_key} too"
        if (
            partial
            and "schedule_type" in data
            and "schedule" not in given
            and data["schedule_type"] != self.current.get("schedule_type")
        ):
            errors["schedule"] = "changing the schedule type needs a new schedule value"
        elif SCHEDULE_FIELDS & data.keys() and "schedule_type" in merged and not SCHEDULE_FIELDS & failed:
            try:
                self._schedule(merged)
            except (ValueError, ScheduleError) as exc:
                message = str(exc)
                errors["timezone" if "unknown timezone" in message.lower() else "schedule"] = message
        if {"start_at", "end_at", "schedule", "schedule_type"} & data.keys() and not {"start_at", "end_at"} & failed:
            zone = merged.get("timezone") or "UTC"
            start_at, end_at = _aware(merged.get("start_at"), zone), _aware(merged.get("end_at"), zone)
            problem = run_limits.window_problem(start_at, end_at)
            if problem is None and merged.get("schedule_type") == "one_time" and "schedule" not in errors:
                try:
                    run_at = self._schedule(merged).next_after(datetime.min.replace(tzinfo=UTC))
                except (ValueError, ScheduleError):
                    run_at = None
                problem = run_limits.window_problem(start_at, end_at, one_time_at=run_at)
            if problem is not None:
                errors[problem[0]] = problem[1]
        if "unique_key" in data and merged.get("unique_key") and not merged.get("unique"):
            errors["unique_key"] = "a unique key needs unique: true"
        if errors:
            raise ValidationError(errors)

    @post_load
    def _instants_in_zone(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """start_at / end_at given without an offset are local times of the job's timezone."""
        zone = {**self.current, **data}.get("timezone") or "UTC"
        for key in ("start_at", "end_at"):
            if data.get(key) is not None:
                data[key] = _aware(data[key], zone)
        return data

    @post_load
    def _normalise_schedule(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """A schedule given (or its type or zone changed) is stored in its normal form: an
        interval's phase is fixed by its `start_at`."""
        if SCHEDULE_FIELDS & data.keys() and "schedule_type" in self.current.keys() | data.keys():
            merged = {**self.current, **data}
            data["schedule"] = self._schedule(merged).to_json()
            data["timezone"] = merged.get("timezone") or "UTC"
        return data

    def _schedule(self, merged: dict[str, Any]) -> Schedule:
        now = self.now or utcnow()
        value = merged.get("schedule") or {}
        if merged["schedule_type"] == "interval" and isinstance(value, dict) and "start_at" not in value:
            # An interval given with the job's start_at counts its runs from that instant.
            start_at = _aware(merged.get("start_at"), merged.get("timezone") or "UTC")
            if start_at is not None:
                value = {**value, "start_at": iso_z(start_at)}
        return parse_schedule(
            merged["schedule_type"],
            value,
            merged.get("timezone") or "UTC",
            anchor=now.replace(microsecond=0),
        )


def _aware(value: datetime | None, zone: str) -> datetime | None:
    """An instant in UTC; a naive one is read as a local time of `zone` (an unknown zone: UTC,
    the timezone field reports it)."""
    if value is None or value.tzinfo is not None:
        return value.astimezone(UTC) if value is not None else None
    try:
        tz: tzinfo = resolve_timezone(zone)
    except (ValueError, ScheduleError):
        tz = UTC
    return value.replace(tzinfo=tz).astimezone(UTC)


def _unset(schema: JobSchema, key: str, value: Any, partial: Any) -> bool:
    field = schema.load_fields.get(key)
    if value is None:
        # JSON null is a value for the fields that may be none (no timeout, no max_runs, ...): an
        # API client clears them with it. The CLI and the form never send None for a value.
        return not getattr(field, "optional", False)
    # An empty mapping is a value: an empty schedule gets its type's message ("needs 'every'").
    return not partial and field is not None and field.required and not value and not isinstance(value, dict)


# The names an operator may set, in declaration order (what an edit compares with the stored job).
# Fields whose value names a row the job refers to by key: people and scripts give the queue's
# name, the jobs table holds its id (the use case resolves one to the other).
REFERENCES: dict[str, str] = {"queue": "queue_id"}

EDITABLE: tuple[str, ...] = tuple(name for name, field in JobSchema().load_fields.items() if name != "enabled")

_DUMPER = JobSchema()

# Fields whose default is a setting (config.py), not the declared value: {field: setting}.
SETTING_DEFAULTS: dict[str, str] = {
    "timeout_seconds": "DEFAULT_JOB_TIMEOUT_SECONDS",
    "success_ttl_seconds": "DEFAULT_SUCCESS_TTL_SECONDS",
    "failure_ttl_seconds": "DEFAULT_FAILURE_TTL_SECONDS",
    "queued_ttl_seconds": "DEFAULT_QUEUED_TTL_SECONDS",
}


def defaults_from(config: Any) -> dict[str, Any]:
    """The job defaults the settings give (`app.config`); a setting that is absent keeps the
    declared default."""
    return {field: config[setting] for field, setting in SETTING_DEFAULTS.items() if setting in config}


def load_job(
    data: dict[str, Any],
    *,
    now: datetime,
    current: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Validate a create (`current` None: required fields and defaults, `defaults` from the
    settings) or an edit (`current`: the stored values; only the given fields are returned).
    Raises marshmallow's ValidationError."""
    loaded: dict[str, Any] = JobSchema(now=now, current=current, defaults=defaults).load(
        data, partial=current is not None
    )
    return loaded


def dump_job(job: Any) -> dict[str, Any]:
    """The JSON shape of a job: every stored field."""
    dumped: dict[str, Any] = _DUMPER.dump(job)
    return dumped


def field_messages(error: ValidationError) -> dict[str, str]:
    """One message per field (the first), from marshmallow's lists of messages."""
    messages = error.messages if isinstance(error.messages, dict) else {"_schema": error.messages}
    return {field: _first(message) for field, message in messages.items()}


def _first(message: Any) -> str:
    while isinstance(message, list | tuple) and message:
        message = message[0]
    if isinstance(message, dict):
        return "; ".join(f"{key}: {_first(value)}" for key, value in message.items())
    return str(message)
