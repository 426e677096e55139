"""Sign-in and sign-out forms (both carry the CSRF token)."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import HiddenField, PasswordField, StringField
from wtforms.validators import DataRequired, Length


class SignInForm(FlaskForm):
    username = StringField(
        "Username",
        validators=[DataRequired(), Length(max=150)],
        render_kw={"autocomplete": "username", "autocapitalize": "none", "spellcheck": "false"},
    )
    password = PasswordField(
        "Password", validators=[DataRequired(), Length(max=1000)], render_kw={"autocomplete": "current-password"}
    )
    next = HiddenField()


class SignOutForm(FlaskForm):
    """Sign-out is a POST with a CSRF token, so another site cannot sign an operator out."""
