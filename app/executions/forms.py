"""Forms on the execution pages: the list filters (GET, no token) and the action forms (POST)."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import Form, SelectChoice, SelectField, StringField

from app.domain.states import ExecutionStatus, values


class ExecutionFilterForm(Form):
    """Filters read from the query string; plain WTForms (a GET changes nothing, so no token)."""

    status = SelectField(
        "Status",
        validate_choice=False,
        choices=[SelectChoice("", "any status")]
        + [SelectChoice(s, s.replace("_", " ")) for s in values(ExecutionStatus)],
    )
    job = StringField("Job ID", render_kw={"inputmode": "numeric", "pattern": "[0-9]*", "placeholder": "any job"})
    queue = StringField("Queue", render_kw={"placeholder": "any queue", "spellcheck": "false"})


class ExecutionActionForm(FlaskForm):
    """Retry or cancel: only the CSRF token."""
