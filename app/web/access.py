"""Who may see and do what in the web UI.

With `WEBUI_AUTH=1` (the default):
- every mutating action, the dashboard, the health page, alerts, execution detail (output and
  error) and every HTMX fragment need a signed-in user (`signin_required`);
- mutating actions also need the `admin` or `operator` role: a `viewer` may look but not touch
  (`operator_required`);
- the job list, job detail and execution list are public (`public_read`) unless
  `WEBUI_PUBLIC_READ=0`, in which case they need sign-in too.
With `WEBUI_AUTH=0` nobody signs in and everything is open (a trusted network only).

A request that is refused for want of sign-in gets a redirect to the sign-in page, except an
HTMX request, which gets 401 with a small fragment holding a sign-in link: a redirect would
make HTMX swap the whole sign-in page into a dashboard panel.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from urllib.parse import urlsplit

from flask import abort, current_app, make_response, redirect, render_template, request, url_for
from flask_login import current_user

OPERATOR_ROLES = frozenset({"admin", "operator"})


def auth_enabled() -> bool:
    return bool(current_app.config.get("WEBUI_AUTH", True))


def is_signed_in() -> bool:
    return bool(current_user and current_user.is_authenticated)


def can_view_private() -> bool:
    """Whether this request may see what needs sign-in (output, alerts, detail pages)."""
    return not auth_enabled() or is_signed_in()


def can_read_public() -> bool:
    """Whether this request may see the job list, job detail and execution list."""
    return can_view_private() or bool(current_app.config.get("WEBUI_PUBLIC_READ", True))


def can_operate() -> bool:
    """Whether this request may change anything."""
    if not auth_enabled():
        return True
    return is_signed_in() and current_user.role in OPERATOR_ROLES


def current_actor() -> str:
    """The name recorded in the audit trail for changes made by this request."""
    if is_signed_in():
        return f"web:{current_user.username}"
    return "web:anonymous"


def is_htmx() -> bool:
    return request.headers.get("HX-Request") == "true"


def safe_next(target: str | None) -> str | None:
    """Return `target` if it is a path on this site, else None (no open redirects).

    Only absolute paths are accepted: no scheme, no host, no protocol-relative `//host` and no
    backslashes (browsers read `/\\host` as `//host`).
    """
    if not target or not isinstance(target, str) or len(target) > 2000:
        return None
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return None
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in target):
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return None
    return target


def _next_for_this_request() -> str:
    """Where to come back to after signing in: this page, or for a fragment the page holding it."""
    if is_htmx():
        current = safe_next(_path_of(request.headers.get("HX-Current-URL", "")))
        if current:
            return current
    if request.method == "GET":
        return request.full_path.rstrip("?")
    # A refused POST cannot be replayed by a redirect: come back to the page that sent it.
    return safe_next(_path_of(request.referrer or "")) or url_for("dashboard.index")


def _path_of(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.netloc and parts.netloc != request.host:
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")


def refuse_anonymous():
    """The response for a request that needs sign-in and has none."""
    login_url = url_for("auth.login", next=_next_for_this_request())
    if is_htmx():
        response = make_response(render_template("auth/_signin_required.html", login_url=login_url), 401)
        response.headers["HX-Reswap"] = "outerHTML"
        return response
    return redirect(login_url)


def signin_required(view: Callable) -> Callable:
    """Sign-in needed (when WEBUI_AUTH is on)."""

    @wraps(view)
    def wrapped(*args, **kwargs):
        if not can_view_private():
            return refuse_anonymous()
        return view(*args, **kwargs)

    return wrapped


def operator_required(view: Callable) -> Callable:
    """Sign-in as an admin or operator needed (when WEBUI_AUTH is on)."""

    @wraps(view)
    def wrapped(*args, **kwargs):
        if not can_view_private():
            return refuse_anonymous()
        if not can_operate():
            abort(403, description="Your role may view but not change anything. Ask an admin for the operator role.")
        return view(*args, **kwargs)

    return wrapped


def public_read(view: Callable) -> Callable:
    """Public unless WEBUI_PUBLIC_READ=0; HTMX fragments are never public."""

    @wraps(view)
    def wrapped(*args, **kwargs):
        if not can_read_public() or (is_htmx() and not can_view_private()):
            return refuse_anonymous()
        return view(*args, **kwargs)

    return wrapped
