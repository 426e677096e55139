"""The alert channel form: a webhook, Slack or Teams URL or an email address, and the alert kinds
it receives."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import SelectField, StringField
from wtforms.fields.choices import SelectChoice  # type: ignore[attr-defined]  # new in WTForms 3.3; types-WTForms describes 3.2

from app.models.alerting import CHANNEL_KINDS, RECEIVABLE_KINDS


class ChannelForm(FlaskForm):
    """Values go to the alert_channels use case as text; it owns validation."""

    name = StringField("Name", render_kw={"maxlength": 100}, description="A name unique within the project.")
    kind = SelectField("Kind", choices=[SelectChoice(kind) for kind in CHANNEL_KINDS])
    target = StringField(
        "URL or email address",
        render_kw={"maxlength": 500, "placeholder": "https://hooks.example.com/cronwell"},
        description=(
            "Webhooks get a JSON POST signed with X-Cronwell-Signature (HMAC-SHA256); Slack and Teams "
            "an incoming-webhook message. A URL is shown in full only now: afterwards it is masked."
        ),
    )
    kinds = StringField(
        "Alert kinds",
        render_kw={"placeholder": "all"},
        description=f"Comma-separated; empty: every kind ({', '.join(RECEIVABLE_KINDS)}).",
    )
    secret = StringField(
        "Signing secret", render_kw={"autocomplete": "off"}, description="Webhooks only; empty: a generated one."
    )

    def service_data(self) -> dict:
        return {
            "name": self.name.data or "",
            "kind": self.kind.data or "",
            "target": self.target.data or "",
            "kinds": self.kinds.data or "",
            "secret": (self.secret.data or "").strip() or None,
        }
