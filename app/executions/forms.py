"""Forms on the execution pages: the list filters (GET, no token) and the action forms (POST)."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import Form, SelectChoice, SelectField, StringField  # type: ignore[attr-defined]  # new in WTForms 3.3; types-WTForms describes 3.2

from app.domain.states import ExecutionStatus, Trigger, values


class ExecutionFilterForm(Form):
    """Filters read from the query string; plain WTForms (a GET changes nothing, so no token)."""

    status = SelectField(
        "Status",
        validate_choice=False,
        choices=[SelectChoice("", "any status")]
        + [SelectChoice(s, s.replace("_", " ")) for s in values(ExecutionStatus)],
    )
    job = StringField("Job", render_kw={"placeholder": "name or ID", "spellcheck": "false"})
    queue = StringField("Queue", render_kw={"placeholder": "any queue", "spellcheck": "false"})
    task = StringField("Task", render_kw={"placeholder": "any task", "spellcheck": "false"})
    trigger = SelectField(
        "Trigger",
        validate_choice=False,
        choices=[SelectChoice("", "any trigger")] + [SelectChoice(t, t.replace("_", " ")) for t in values(Trigger)],
    )
    created_from = StringField("From (UTC)", render_kw={"placeholder": "2026-06-01 or 2026-06-01T12:00"})
    created_to = StringField("Until (UTC)", render_kw={"placeholder": "2026-06-02"})


class ExecutionActionForm(FlaskForm):
    """Retry or cancel: only the CSRF token."""
