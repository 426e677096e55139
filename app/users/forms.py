"""The user forms: create a user, change a role, set a password, and the header's switcher.

Values go to the users use case, which owns validation (the CLI and the web give the same
messages); its per-field errors are shown next to each control.
"""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import PasswordField, SelectField, StringField

from app.domain.states import Role, values

ROLE_CHOICES = [(role, role) for role in values(Role)]
ROLE_HELP = (
    "viewer: reads everything; operator: also runs jobs, retries, cancels, pauses queues; admin: also users and queues."
)


class _Errors:
    def attach_errors(self, errors: dict[str, str]) -> None:
        """Show the use case's per-field messages next to the fields; others at the top."""
        for field, message in errors.items():
            if field in self._fields and field != "csrf_token":
                self[field].errors = [*self[field].errors, message]
            else:
                self.form_errors.append(f"{field}: {message}")


class NewUserForm(_Errors, FlaskForm):
    username = StringField("Username", render_kw={"autocomplete": "off", "maxlength": 150})
    password = PasswordField(
        "Password", render_kw={"autocomplete": "new-password"}, description="At least 8 characters; tell it to them."
    )
    role = SelectField("Role", choices=ROLE_CHOICES, default=Role.VIEWER.value, description=ROLE_HELP)


class RoleForm(_Errors, FlaskForm):
    role = SelectField("Role", choices=ROLE_CHOICES, description=ROLE_HELP)


class PasswordForm(_Errors, FlaskForm):
    password = PasswordField(
        "New password", render_kw={"autocomplete": "new-password"}, description="At least 8 characters."
    )


class SwitchForm(FlaskForm):
    """The header's switcher: which organization (and project) the pages show."""

    organization_id = SelectField("Organization", coerce=str, validate_choice=False)
    project_id = SelectField("Project", coerce=str, validate_choice=False)
    # The one-click choice: "ORG_ID" (all its projects), "ORG_ID:PROJECT_ID", or "" (a superuser's all).
    context = SelectField("Show", coerce=str, validate_choice=False)
