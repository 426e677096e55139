"""The job form and the action forms on the job pages.

Fields are read as text and handed to the job service, which owns validation (the CLI and the web
give the same messages); the service's per-field errors are then shown next to each field.
"""

from __future__ import annotations

import json

from flask_wtf import FlaskForm
from wtforms import BooleanField, SelectChoice, SelectField, StringField, TextAreaField
from wtforms.validators import Length

from app.domain.states import MisfirePolicy, OverlapPolicy, ScheduleType, values
from app.scheduling import ScheduleError, format_interval, parse_interval
from app.services.use_cases.jobs import DEFAULTS

SCHEDULE_INPUTS = {"interval": "every", "cron": "cron", "one_time": "run_at"}
NUMBER_FIELDS = (
    "misfire_grace_seconds",
    "max_attempts",
    "retry_backoff_seconds",
    "timeout_seconds",
    "retention_count",
    "retention_days",
    "priority",
)
TEXT_FIELDS = (
    "name",
    "description",
    "task",
    "schedule_type",
    "timezone",
    "overlap_policy",
    "misfire_policy",
    "alert_mode",
    "queue",
)
_NUMBER = {"inputmode": "numeric", "pattern": "-?[0-9]*"}
_SCHEDULE = {"class": "schedule-input", "autocomplete": "off", "spellcheck": "false"}


def _choices(enum_type) -> list[SelectChoice]:
    return [SelectChoice(value, value.replace("_", " ")) for value in values(enum_type)]


class JobForm(FlaskForm):
    name = StringField("Name", validators=[Length(max=200)])
    description = TextAreaField("Description", validators=[Length(max=2000)], render_kw={"rows": 2})
    task = SelectField("Task", choices=[])
    config = TextAreaField("Task config (JSON object)", render_kw={"rows": 4, "spellcheck": "false"})
    schedule_type = SelectField(
        "Schedule type",
        choices=_choices(ScheduleType),
        default="interval",
        render_kw={**_SCHEDULE, "data-schedule-type": ""},
    )
    every = StringField("Every", render_kw={**_SCHEDULE, "placeholder": "30s, 5m, 2h or 1d"})
    cron = StringField("Cron expression", render_kw={**_SCHEDULE, "placeholder": "0 9 * * 1-5"})
    run_at = StringField("Run at", render_kw={**_SCHEDULE, "placeholder": "2026-01-01T12:00:00Z"})
    timezone = StringField(
        "Timezone (IANA)", default="UTC", render_kw={**_SCHEDULE, "placeholder": "UTC", "list": "timezones"}
    )
    overlap_policy = SelectField("Overlap policy", choices=_choices(OverlapPolicy), default=DEFAULTS["overlap_policy"])
    misfire_policy = SelectField("Misfire policy", choices=_choices(MisfirePolicy), default=DEFAULTS["misfire_policy"])
    misfire_grace_seconds = StringField(
        "Misfire grace (seconds)", default=str(DEFAULTS["misfire_grace_seconds"]), render_kw=_NUMBER
    )
    max_attempts = StringField("Max attempts", default=str(DEFAULTS["max_attempts"]), render_kw=_NUMBER)
    retry_backoff_seconds = StringField(
        "Retry backoff (seconds)", default=str(DEFAULTS["retry_backoff_seconds"]), render_kw=_NUMBER
    )
    timeout_seconds = StringField("Timeout (seconds)", default=str(DEFAULTS["timeout_seconds"]), render_kw=_NUMBER)
    alert_mode = SelectField(
        "Alert mode",
        choices=[SelectChoice("web", "web (alert row + log)"), SelectChoice("log_only", "log only")],
        default=DEFAULTS["alert_mode"],
    )
    retention_count = StringField(
        "Keep at most N executions (0 = no limit)", default=str(DEFAULTS["retention_count"]), render_kw=_NUMBER
    )
    retention_days = StringField(
        "Keep executions for N days (0 = no limit)", default=str(DEFAULTS["retention_days"]), render_kw=_NUMBER
    )
    queue = StringField("Queue", default=DEFAULTS["queue"])
    priority = StringField("Priority (lower runs first)", default=str(DEFAULTS["priority"]), render_kw=_NUMBER)
    enabled = BooleanField("Enabled", default=True)

    def set_task_choices(self, catalog: list[dict]) -> None:
        self.task.choices = [SelectChoice(t["name"]) for t in catalog]

    def schedule_input(self):
        """The input that holds the schedule for the chosen type (where its error is shown)."""
        return self[SCHEDULE_INPUTS.get(self.schedule_type.data, "every")]

    def service_data(self) -> dict:
        """The form as the job service's input (text values; the service validates them)."""
        data = {field: (self[field].data or "").strip() for field in TEXT_FIELDS if field != "description"}
        data["description"] = self.description.data or ""
        data.update({field: (self[field].data or "").strip() for field in NUMBER_FIELDS})
        data["config"] = (self.config.data or "").strip() or "{}"
        data["timezone"] = data["timezone"] or "UTC"
        text = (self.schedule_input().data or "").strip()
        key = {"interval": "every", "cron": "expression", "one_time": "run_at"}.get(data["schedule_type"], "every")
        data["schedule"] = {key: text} if text else {}
        return data

    def attach_errors(self, errors: dict[str, str]) -> None:
        """Show the service's per-field messages next to the fields; others at the top."""
        for field, message in errors.items():
            if field == "schedule":
                self.schedule_input().errors = [*self.schedule_input().errors, message]
            elif field in self._fields and field != "csrf_token":
                self[field].errors = [*self[field].errors, message]
            else:
                self.form_errors.append(f"{field}: {message}")


def initial_values(job) -> dict:
    """A stored job's values as the form shows them."""
    data = {field: getattr(job, field) for field in TEXT_FIELDS}
    data.update({field: str(getattr(job, field)) for field in NUMBER_FIELDS})
    data["config"] = json.dumps(job.config or {}, indent=2, sort_keys=True)
    data["enabled"] = job.enabled
    schedule = job.schedule or {}
    data["every"] = _every_text(schedule.get("every")) if job.schedule_type == "interval" else ""
    data["cron"] = schedule.get("expression", "") if job.schedule_type == "cron" else ""
    data["run_at"] = schedule.get("run_at", "") if job.schedule_type == "one_time" else ""
    return data


def _every_text(value) -> str:
    try:
        return format_interval(parse_interval(value))
    except (ScheduleError, ValueError, TypeError):
        return str(value or "")


class ConfirmForm(FlaskForm):
    """A bare POST form (enable, disable, trigger, retry, cancel...): only the CSRF token."""


class DeleteJobForm(FlaskForm):
    confirm_name = StringField(
        "Type the job's name to confirm", render_kw={"autocomplete": "off", "spellcheck": "false"}
    )
