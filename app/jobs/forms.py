"""The job form, generated from the job definition, and the action forms on the job pages.

The form has one control per definition field marked `form` (the schedule as one text input per
schedule type). Values are read as text and handed to the job service, whose schema owns
validation (the CLI and the web give the same messages); the per-field errors are then shown next
to each control.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from flask import current_app
from flask_wtf import FlaskForm
from marshmallow import fields, missing
from wtforms import BooleanField, SelectChoice, SelectField, StringField, TextAreaField

from app.clock import iso_z
from app.definitions import JobSchema
from app.definitions.backfill import MAX_BACKFILL, BackfillSchema
from app.definitions.job import SETTING_DEFAULTS
from app.domain.states import OverlapPolicy, values
from app.scheduling import SCHEDULE_INPUTS, ScheduleError, format_interval, parse_interval

_NUMBER = {"inputmode": "numeric", "pattern": "-?[0-9]*"}
_DEFINITION = JobSchema()


def form_fields() -> list[tuple[str, fields.Field]]:
    """The definition's fields the form shows, in declaration order."""
    return [(name, field) for name, field in _DEFINITION.load_fields.items() if field.metadata.get("form")]


def _default(field: fields.Field, name: str | None = None) -> Any:
    if name in SETTING_DEFAULTS:
        # The global default is a setting (DEFAULT_JOB_TIMEOUT_SECONDS, ...), read per request.
        setting = SETTING_DEFAULTS[name]
        return lambda: _text(current_app.config.get(setting, field.load_default))
    value = field.metadata.get("form_default", field.load_default)
    if value is missing:
        return None
    return value() if callable(value) else value


def _text(value: Any) -> str:
    """A stored value as the form's text: none is an empty field, an instant is ISO 8601 UTC."""
    if value is None or value is missing:
        return ""
    if isinstance(value, datetime):
        return iso_z(value)
    return str(value)


def _help(field: fields.Field) -> str:
    return field.metadata.get("form_help", field.metadata.get("description", ""))


def _control(field: fields.Field, name: str | None = None):
    """The WTForms field for one definition field (not the schedule: see `_schedule_controls`)."""
    meta = field.metadata
    label, attrs, help_text = meta["label"], dict(meta.get("form_attrs", {})), _help(field)
    default = _default(field, name)
    if field.kind == "flag":
        return BooleanField(label, default=default, description=help_text)
    if field.kind in ("choice", "task"):
        labels = meta.get("choice_labels", {})
        choices = [SelectChoice(v, labels.get(v, v.replace("_", " "))) for v in getattr(field, "choices", ())]
        return SelectField(label, choices=choices, default=default, render_kw=attrs or None, description=help_text)
    if field.kind == "number":
        default = default if callable(default) else _text(default)
        return StringField(label, default=default, render_kw={**_NUMBER, **attrs}, description=help_text)
    if field.kind == "json":
        default = None  # the form shows an empty box for `{}`
    elif field.kind == "fraction":
        default = _text(default)  # "0.0", not the float (which reads as an empty field)
    widget = TextAreaField if meta.get("form_widget") == "textarea" else StringField
    return widget(label, default=default, render_kw=attrs or None, description=help_text)


def _schedule_controls(field: fields.Field) -> dict:
    """One text input per schedule type, named after its option (`every`, `cron`, `run_at`)."""
    controls = {}
    for schedule_input in SCHEDULE_INPUTS.values():
        shown = field.metadata["inputs"][schedule_input.option]
        controls[schedule_input.option] = StringField(
            shown["label"],
            render_kw={**field.metadata.get("form_attrs", {}), "placeholder": shown["placeholder"]},
            description=shown["form_help"],
        )
    return controls


class JobForm(FlaskForm):
    """Create or edit a job; its controls are added below from the job definition."""

    def set_task_choices(self, catalog: list[dict]) -> None:
        # No task is pre-selected on a new job (the first in the catalog was `always_fail`).
        placeholder = [] if self.task.data else [SelectChoice("", "choose a task")]
        self.task.choices = placeholder + [SelectChoice(t["name"]) for t in catalog]

    def schedule_input(self):
        """The input that holds the schedule for the chosen type (where its error is shown)."""
        schedule_input = SCHEDULE_INPUTS.get(self.schedule_type.data, SCHEDULE_INPUTS["interval"])
        return self[schedule_input.option]

    def service_data(self) -> dict:
        """The form as the job service's input (text values; the service validates them)."""
        data: dict[str, Any] = {}
        for name, field in form_fields():
            if field.kind == "schedule":
                continue
            if field.kind == "flag":
                data[name] = bool(self[name].data)
                continue
            text = self[name].data or ""
            text = text.strip() if getattr(field, "strip", True) else text
            if not text and getattr(field, "blank_default", False):
                text = field.load_default
            data[name] = text
        text = (self.schedule_input().data or "").strip()
        key = SCHEDULE_INPUTS.get(data["schedule_type"], SCHEDULE_INPUTS["interval"]).key
        data["schedule"] = {key: text} if text else {}
        return data

    def changes(self, initial: dict) -> dict:
        """The service input for the fields whose submitted value differs from the stored one
        (`initial`, as `initial_values` gives it). An untouched schedule is not sent, so an
        interval keeps its phase and its next run."""
        submitted = self.service_data()
        changes: dict[str, Any] = {}
        for name, field in form_fields():
            if field.kind == "schedule":
                continue
            before = initial[name]
            if field.kind == "flag":
                differs = submitted[name] != bool(before)
            elif field.kind == "json":
                differs = _json_or_text(submitted[name]) != _json_or_text(before)
            else:
                before = "" if before is None else str(before)
                differs = submitted[name] != (before.strip() if getattr(field, "strip", True) else before)
            if differs:
                changes[name] = submitted[name]
        schedule_input = self.schedule_input()
        if (
            submitted["schedule_type"] != initial["schedule_type"]
            or (schedule_input.data or "").strip() != (initial[schedule_input.name] or "").strip()
        ):
            changes["schedule_type"] = submitted["schedule_type"]
            changes["schedule"] = submitted["schedule"]
        return changes

    def attach_errors(self, errors: dict[str, str]) -> None:
        """Show the service's per-field messages next to the fields; others at the top."""
        for field, message in errors.items():
            if field == "schedule":
                self.schedule_input().errors = [*self.schedule_input().errors, message]
            elif field in self._fields and field != "csrf_token":
                self[field].errors = [*self[field].errors, message]
            else:
                self.form_errors.append(f"{field}: {message}")


for _name, _field in form_fields():
    for _control_name, _unbound in (
        _schedule_controls(_field) if _field.kind == "schedule" else {_name: _control(_field, _name)}
    ).items():
        setattr(JobForm, _control_name, _unbound)


def initial_values(job) -> dict:
    """A stored job's values as the form shows them."""
    data: dict[str, Any] = {}
    for name, field in form_fields():
        value = getattr(job, name)
        if field.kind == "schedule":
            for schedule_type, schedule_input in SCHEDULE_INPUTS.items():
                text = (value or {}).get(schedule_input.key, "") if job.schedule_type == schedule_type else ""
                data[schedule_input.option] = _every_text(text) if schedule_type == "interval" and text else text
        elif field.kind == "json":
            data[name] = json.dumps(value or {}, indent=2, sort_keys=True)
        elif field.kind in ("number", "instant", "fraction"):
            data[name] = _text(value)
        elif field.kind == "flag":
            data[name] = bool(value)
        else:
            data[name] = value
    return data


def _every_text(value) -> str:
    try:
        return format_interval(parse_interval(value))
    except (ScheduleError, ValueError, TypeError):
        return str(value or "")


def _json_or_text(text: str):
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text


class ConfirmForm(FlaskForm):
    """A bare POST form (enable, disable, trigger, retry, cancel...): only the CSRF token."""


class DeleteJobForm(FlaskForm):
    confirm_name = StringField(
        "Type the job's name to confirm", render_kw={"autocomplete": "off", "spellcheck": "false"}
    )


_BACKFILL = BackfillSchema(now=None)  # only its field declarations are read


def _backfill_label(name: str) -> str:
    return str(_BACKFILL.fields[name].metadata["label"])


def _backfill_help(name: str) -> str:
    return str(_BACKFILL.fields[name].metadata["description"])


class BackfillForm(FlaskForm):
    """Backfill a past window: the dry-run list first (`preview`), then `run` creates it. Labels,
    help and every rule come from the backfill definition (app/definitions/backfill.py)."""

    start = StringField(_backfill_label("start"), description=_backfill_help("start"))
    end = StringField(_backfill_label("end"), description=_backfill_help("end"))
    max_runs = StringField(
        _backfill_label("max_runs"),
        description=_backfill_help("max_runs"),
        render_kw={"inputmode": "numeric", "pattern": "[0-9]*", "placeholder": str(MAX_BACKFILL)},
    )
    overlap = SelectField(
        _backfill_label("overlap"),
        description=_backfill_help("overlap"),
        choices=[SelectChoice("", "the job's")] + [SelectChoice(v) for v in values(OverlapPolicy)],
    )
