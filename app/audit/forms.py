"""The audit page's filters, read from the query string (a GET changes nothing, so no token)."""

from __future__ import annotations

from wtforms import Form, SelectChoice, SelectField, StringField  # type: ignore[attr-defined]  # new in WTForms 3.3; types-WTForms describes 3.2


class AuditFilterForm(Form):
    actor = StringField("Actor", render_kw={"placeholder": "e.g. web:alice or cli", "spellcheck": "false"})
    kind = SelectField("Object kind", validate_choice=False, choices=[SelectChoice("", "any kind")])
    object = StringField("Object ID", render_kw={"placeholder": "any object", "spellcheck": "false"})
    job = StringField("Job ID", render_kw={"inputmode": "numeric", "pattern": "[0-9]*", "placeholder": "any job"})
    action = SelectField("Action", validate_choice=False, choices=[SelectChoice("", "any action")])
    since = StringField("Since (UTC)", render_kw={"placeholder": "2026-06-01 or 2026-06-01T12:00Z"})
    until = StringField("Until (UTC)", render_kw={"placeholder": "2026-06-02"})

    def offer(self, kinds: list[str], actions: list[str]) -> None:
        """Fill the choices with what the log holds (and keep a chosen value that it does not)."""
        for field, found in ((self.kind, kinds), (self.action, actions)):
            chosen = (field.data or "").strip()
            names = sorted(set(found) | ({chosen} if chosen else set()))
            field.choices = [field.choices[0], *(SelectChoice(name, name.replace("_", " ")) for name in names)]
