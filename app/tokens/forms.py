"""The API token form: a name, a project, a role and an optional lifetime."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import IntegerField, SelectField, StringField
from wtforms.validators import DataRequired, Length, NumberRange, Optional

from app.services.use_cases.tokens import EXPIRES_DAYS_MAX, NAME_MAX


class CreateTokenForm(FlaskForm):
    name = StringField("Name", validators=[DataRequired("is required"), Length(max=NAME_MAX)])
    project = SelectField("Project", choices=[])
    role = SelectField("Role", choices=[("viewer", "viewer"), ("operator", "operator"), ("admin", "admin")])
    expires_in_days = IntegerField(
        "Expires after (days)",
        validators=[Optional(), NumberRange(1, EXPIRES_DAYS_MAX, f"must be between 1 and {EXPIRES_DAYS_MAX}")],
    )


class RevokeTokenForm(FlaskForm):
    """Only the CSRF token: the token to revoke is in the URL."""
