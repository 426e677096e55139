"""Your settings page: the time zone every page shows your times in. A thin adapter over
`app.services.use_cases.preferences`."""

from __future__ import annotations

from zoneinfo import available_timezones

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from wtforms import StringField

from app.clock import utcnow
from app.domain.permissions import Action
from app.services.errors import ValidationFailed
from app.services.use_cases.preferences import set_time_zone
from app.web.access import current_caller, requires

bp = Blueprint("settings", __name__, url_prefix="/settings")


class SettingsForm(FlaskForm):
    time_zone = StringField(
        "Time zone",
        description="An IANA name such as Asia/Tokyo, Europe/Paris or UTC. Every page shows times in it, with the zone named and UTC on hover.",
        render_kw={"list": "time-zones", "spellcheck": "false", "autocomplete": "off"},
    )


def _page(form: SettingsForm, status: int = 200):
    return render_template("users/settings.html", form=form, zones=sorted(available_timezones()), now=utcnow()), status


@bp.route("/", methods=["GET", "POST"])
@requires(Action.READ)
def index():
    """Your settings; a POST saves your time zone (an unknown one is shown beside the field, 400)."""
    if request.method == "GET":
        return _page(SettingsForm(formdata=None, time_zone=getattr(current_user, "time_zone", "UTC")))
    form = SettingsForm()
    if not form.validate_on_submit():
        return _page(form, 400)
    if not current_user.is_authenticated:  # sign-in turned off (WEBUI_AUTH=0): nobody to save for
        form.time_zone.errors = [*form.time_zone.errors, "sign in to keep settings"]
        return _page(form, 400)
    try:
        set_time_zone(current_user.username, (form.time_zone.data or "").strip(), now=utcnow(), caller=current_caller())
    except ValidationFailed as exc:
        form.time_zone.errors = [*form.time_zone.errors, exc.errors.get("time_zone", str(exc))]
        return _page(form, 400)
    flash(f"Times are now shown in {current_user.time_zone}.", "success")
    return redirect(url_for("settings.index"), code=303)
