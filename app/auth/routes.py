"""Sign in (rate limited, session rotated and recorded server-side, same-site `next=` only) and sign
out (POST only; ends the server-side session, so an old copy of the cookie opens nothing, and
writes an audit row)."""

from __future__ import annotations

import logging

from flask import Blueprint, current_app, flash, redirect, render_template, request, session, url_for
from flask_login import login_user, logout_user

from app.auth.forms import SignInForm, SignOutForm
from app.clock import utcnow
from app.services.use_cases import sessions, users
from app.web.access import auth_enabled, current_caller, is_signed_in, public, safe_next
from app.web.ratelimit import register_login_attempt

bp = Blueprint("auth", __name__, url_prefix="/auth")
log = logging.getLogger("cronwell.web")


@bp.route("/login", methods=["GET", "POST"])
@public
def login():
    """Show the sign-in form; on POST check the credentials and land on `next` or the dashboard."""
    target = safe_next(request.values.get("next")) or url_for("dashboard.index")
    if not auth_enabled() or is_signed_in():
        return redirect(target)
    form = SignInForm()
    status = 200
    if request.method == "POST":
        if form.validate_on_submit():
            throttle = register_login_attempt(form.username.data)
            if not throttle.allowed:
                form.form_errors.append("Too many sign-in attempts. Wait a few minutes and try again.")
                body = render_template("auth/login.html", form=form, next=target)
                return body, 429, {"Retry-After": str(throttle.retry_after_seconds)}
            user = users.authenticate(form.username.data, form.password.data)
            if user is not None:
                # A fresh session on sign-in: nothing from before (a planted session id, an old
                # CSRF token) carries over into the authenticated one.
                session.clear()
                session[sessions.COOKIE_KEY] = sessions.start_session(user.id, now=utcnow())
                login_user(user)
                log.info("signed in", extra={"event": "signed_in", "username": user.username})
                return redirect(target)
            log.info("sign-in failed", extra={"event": "sign_in_failed"})
            form.form_errors.append("Wrong username or password.")
        status = 400
    form.next.data = target
    return render_template("auth/login.html", form=form, next=target), status


@bp.post("/logout")
@public
def logout():
    """Sign out (POST only: a GET here is 405, so a link or image cannot sign anyone out)."""
    form = SignOutForm()
    if not form.validate_on_submit():  # CSRF is checked before this; this only guards odd bodies
        return redirect(url_for("dashboard.home"))
    # Ended on the server too: a copy of this cookie opens nothing from now on.
    sessions.end_session(session.get(sessions.COOKIE_KEY), now=utcnow(), who=current_caller())
    logout_user()
    session.clear()
    if current_app.config.get("WEBUI_AUTH", True):
        flash("You are signed out.", "info")
    return redirect(url_for("dashboard.home"))
