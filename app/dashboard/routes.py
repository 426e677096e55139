"""The public home page and the dashboard, whose panels are HTMX fragments that poll.

Each panel is one partial (`templates/dashboard/_<panel>.html`) rendered by the full page and by
`/dashboard/panels/<panel>`; the partial carries its own `hx-get`/`hx-trigger`, so a refresh swaps
the panel for a fresh copy of itself.
"""

from __future__ import annotations

from datetime import datetime

from flask import Blueprint, abort, current_app, render_template

from app.clock import utcnow
from app.domain.permissions import Action
from app.services.read import dashboard
from app.web.access import current_caller, public, requires

bp = Blueprint("dashboard", __name__)

GRID_JOBS = 50
PANELS = ("summary", "queue", "upcoming", "activity", "alerts", "heartbeats", "jobs")
POLL_SECONDS = 5


def panel_context(name: str, now: datetime) -> dict:
    """The data one panel shows."""
    caller = current_caller()
    if name == "summary":
        return {"summary": dashboard.summary_counts(caller)}
    if name == "queue":
        return {"queue": dashboard.queue_depth(now, caller)}
    if name == "upcoming":
        return {"upcoming": dashboard.upcoming_runs(now, caller=caller)}
    if name == "activity":
        return {"activity": dashboard.recent_activity(caller=caller)}
    if name == "alerts":
        alerts, total = dashboard.open_alerts(caller=caller)
        return {"alerts": alerts, "alerts_total": total}
    if name == "heartbeats":
        stale = current_app.config["HEARTBEAT_STALE_SECONDS"]
        return {"heartbeats": dashboard.heartbeats(now, stale), "stale_after": stale}
    if name == "jobs":
        jobs, total = dashboard.dashboard_jobs(caller=caller)
        return {"jobs": jobs, "jobs_total": total}
    raise KeyError(name)


@bp.get("/")
@public
def home():
    """Public landing page."""
    return render_template("dashboard/home.html")


@bp.get("/dashboard/")
@requires(Action.READ)
def index():
    """The live operator dashboard."""
    now = utcnow()
    context: dict = {"poll_seconds": POLL_SECONDS, "now": now}
    for name in PANELS:
        context.update(panel_context(name, now))
    return render_template("dashboard/index.html", **context)


@bp.get("/dashboard/panels/<name>")
@requires(Action.READ)
def panel(name: str):
    """One dashboard panel, for HTMX polling."""
    if name not in PANELS:
        abort(404, description=f"There is no dashboard panel called {name!r}.")
    now = utcnow()
    return render_template(f"dashboard/_{name}.html", poll_seconds=POLL_SECONDS, now=now, **panel_context(name, now))


@bp.get("/dashboard/grid")
@requires(Action.READ)
def grid():
    """The runs grid: the first 50 jobs (or those matching ?q=) as rows, the last ?hours= (1-24,
    default 6) and the next hour as columns, each cell coloured by its occurrences' fate. An HTMX
    poll (every 10 s, paused while hidden) gets just the grid."""
    from flask import request

    from app.services.read import console_lists, runs_grid
    from app.web.access import is_htmx
    from app.web.pagination import page_number, paginate

    raw = request.args.get("hours", "")
    hours = int(raw) if raw in {str(h) for h in runs_grid.HOURS_CHOICES} else runs_grid.DEFAULT_HOURS
    search = (request.args.get("q") or "").strip()[:200].replace("\x00", "")
    page = paginate(
        console_lists.jobs_query(console_lists.JobFilters(search=search), current_caller()),
        page=page_number(),
        per_page=GRID_JOBS,
    )
    context = {
        "grid": runs_grid.build(page.items, now=utcnow(), hours=hours),
        "page": page,
        "hours": hours,
        "hour_choices": runs_grid.HOURS_CHOICES,
        "fates": runs_grid.FATE_ORDER,
        "query": {k: v for k, v in (("hours", str(hours)), ("q", search)) if v},
    }
    if is_htmx() and request.headers.get("HX-Target") == "runs-grid":
        return render_template("dashboard/_grid.html", **context)
    return render_template("dashboard/grid.html", **context)
