"""Who may see and do what in the web UI: every route declares the `Action` it needs.

`requires(Action.READ | OPERATE | ADMINISTER)` on each view (the one table of roles is
`app.domain.permissions`):
- with `WEBUI_AUTH=1` (the default) a request needs a signed-in user whose role in the
  organization they act in allows the action: viewer reads, operator also runs the work, admin
  also manages users, projects and queues; a site superuser may do everything. Signed in but not
  allowed: 403, and nothing changes;
- `requires(Action.READ, public=True)` (the job list, job detail and execution list) also lets
  anonymous readers in, unless `WEBUI_PUBLIC_READ=0`; they see the default organization only,
  and never an HTMX fragment;
- `public` marks the few routes anyone may use (home, sign-in, probes).
With `WEBUI_AUTH=0` nobody signs in and everything is open (a trusted network only).

`current_caller()` is who the request acts as (`app.services.caller.Caller`): the user, the
organization and project chosen in the header's switcher (kept in the session), and the client
address. Views pass it to the services, which scope every list and load by it.

A request that is refused for want of sign-in gets a redirect to the sign-in page, except an
HTMX request, which gets 401 with a small fragment holding a sign-in link: a redirect would
make HTMX swap the whole sign-in page into a dashboard panel.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from urllib.parse import urlsplit

from flask import abort, current_app, g, make_response, redirect, render_template, request, session, url_for
from flask_login import current_user

from app.domain.permissions import Action
from app.services.caller import Caller

# Session keys of the header's organization / project switcher.
ORGANIZATION_KEY = "organization_id"
PROJECT_KEY = "project_id"


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


def may(action: Action) -> bool:
    """Whether this request may perform `action` (in the organization it acts in)."""
    if not auth_enabled():
        return True
    return is_signed_in() and current_caller().may(action)


def can_operate() -> bool:
    """Whether this request may change jobs, runs, queues' pause and alerts."""
    return may(Action.OPERATE)


def can_administer() -> bool:
    """Whether this request may manage users, projects and queues."""
    return may(Action.ADMINISTER)


def current_caller() -> Caller:
    """Who this request acts as; computed once per request."""
    caller = g.get("_cronwell_caller")
    if caller is None:
        from app.services.use_cases import tenancy

        address = request.remote_addr
        chosen_org, chosen_project = session.get(ORGANIZATION_KEY), session.get(PROJECT_KEY)
        if is_signed_in():
            caller = tenancy.caller_for_user(
                current_user,
                organization_id=chosen_org if isinstance(chosen_org, int) else None,
                project_id=chosen_project if isinstance(chosen_project, int) else None,
                address=address,
            )
        elif not auth_enabled():
            # Everything is open: act as the installation's operator, narrowed to what was chosen.
            caller = Caller(
                actor="web:anonymous",
                source="web",
                superuser=True,
                organization_id=chosen_org if isinstance(chosen_org, int) else None,
                project_id=chosen_project if isinstance(chosen_project, int) else None,
                address=address,
            )
        else:
            caller = tenancy.public_caller(address=address)
        g._cronwell_caller = caller
    return caller


def many_projects_in_view() -> bool:
    """Whether this request's pages show more than one project (then lists name each row's)."""
    if "_cronwell_many_projects" not in g:
        from sqlalchemy import func, select

        from app.extensions import db
        from app.models import Project
        from app.services import scoping

        count = db.session.scalar(scoping.projects(select(func.count(Project.id)), current_caller())) or 0
        g._cronwell_many_projects = count > 1
    return bool(g._cronwell_many_projects)


def queue_url(endpoint: str, queue, **values) -> str:
    """The URL of a queue page or action; it names the queue's project (`?project=ORG/PROJECT`)
    when several projects are in view, where several queues can share the name."""
    from flask import url_for

    if many_projects_in_view():
        values["project"] = queue.project.full_name
    return url_for(endpoint, queue_name=queue.name, **values)


def creates_in() -> str | None:
    """`ORG/PROJECT` that a create form (job, queue) of this request creates in; None when the
    view spans several organizations or a project must be chosen first (then no form is offered,
    since it could only fail)."""
    if "_cronwell_creates_in" not in g:
        from sqlalchemy import func, select

        from app.extensions import db
        from app.models import Organization
        from app.services.errors import NotFound, ValidationFailed
        from app.services.use_cases import tenancy

        caller = current_caller()
        target = None
        organizations = 1
        if caller.organization_id is None and caller.project_id is None:
            organizations = db.session.scalar(select(func.count(Organization.id))) or 0
        if organizations == 1:
            try:
                target = tenancy.working_project(caller).full_name
            except (NotFound, ValidationFailed):
                target = None
        g._cronwell_creates_in = target
    return g._cronwell_creates_in


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


_REFUSALS = {
    Action.READ: "You are not a member of this organization.",
    Action.OPERATE: "Your role may view but not change anything. Ask an admin for the operator role.",
    Action.ADMINISTER: "Only an admin of the organization may do this.",
}


def requires(action: Action, *, public: bool = False) -> Callable[[Callable], Callable]:
    """The view needs `action` (see the module docstring); `public=True` also admits anonymous
    readers when WEBUI_PUBLIC_READ allows (full pages only)."""

    def decorate(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(*args, **kwargs):
            if not auth_enabled():
                return view(*args, **kwargs)
            if not is_signed_in():
                if public and action is Action.READ and can_read_public() and not is_htmx():
                    return view(*args, **kwargs)
                return refuse_anonymous()
            if not current_caller().may(action):
                abort(403, description=_REFUSALS[action])
            return view(*args, **kwargs)

        wrapped.required_action = action
        wrapped.public_read = public
        return wrapped

    return decorate


def public(view: Callable) -> Callable:
    """Anyone may use this route (home, sign-in, probes): it shows no tenant's data."""
    view.required_action = None
    return view


# The names views used before the permissions table, kept for code written against them.
signin_required = requires(Action.READ)
operator_required = requires(Action.OPERATE)
public_read = requires(Action.READ, public=True)
