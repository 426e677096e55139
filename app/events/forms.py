"""The events page's filters, read from the query string (a GET changes nothing, so no token)."""

from __future__ import annotations

from wtforms import Form, SelectChoice, SelectField, StringField  # type: ignore[attr-defined]  # new in WTForms 3.3; types-WTForms describes 3.2

from app.domain.event_kinds import EVENT_KINDS


class EventFilterForm(Form):
    kind = SelectField(
        "Kind",
        validate_choice=False,
        choices=[SelectChoice("", "any kind"), *(SelectChoice(k, k.replace("_", " ")) for k in sorted(EVENT_KINDS))],
    )
    job = StringField("Job ID", render_kw={"inputmode": "numeric", "pattern": "[0-9]*", "placeholder": "any job"})
    queue = StringField("Queue", render_kw={"placeholder": "any queue", "spellcheck": "false"})
    worker = StringField("Worker", render_kw={"placeholder": "any worker", "spellcheck": "false"})
    since = StringField("Since", render_kw={"placeholder": "2026-06-01 or 2026-06-01T12:00Z"})
    until = StringField("Until", render_kw={"placeholder": "2026-06-02"})
