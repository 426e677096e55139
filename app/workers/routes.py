"""Worker pages: the registry and the drain / stop / reload orders, thin adapters over
`app.services.read.workers` and `app.services.use_cases.workers`.

The page polls itself: an HTMX GET of the same URL answers with the registry fragment only.
Worker ids are free text (`flask worker run --id`), so they sit in `<path:...>`; an id no
worker has is the 404 page.
"""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for

from app.clock import utcnow
from app.domain.permissions import Action
from app.services.errors import Conflict
from app.services.read.workers import get_worker, list_workers
from app.services.use_cases import workers as worker_service
from app.web.access import current_actor, current_caller, is_htmx, requires

bp = Blueprint("workers", __name__, url_prefix="/workers")

POLL_SECONDS = 5


@bp.get("/")
@requires(Action.READ)
def index():
    """Every worker process: id, host, pid, queues, slots, state, busy or idle, what it runs."""
    now = utcnow()
    context = {"workers": list_workers(now, current_caller()), "poll_seconds": POLL_SECONDS, "now": now}
    if is_htmx():
        return render_template("workers/_table.html", **context)
    return render_template("workers/list.html", **context)


@bp.post("/<path:worker_id>/drain")
@requires(Action.OPERATE)
def drain(worker_id: str):
    """Claim nothing more, finish what runs, then exit."""
    return _order(worker_id, at_once=False)


@bp.post("/<path:worker_id>/stop")
@requires(Action.OPERATE)
def stop(worker_id: str):
    """Stop at once: running tasks are killed and retried per their jobs' policies."""
    return _order(worker_id, at_once=True)


@bp.post("/<path:worker_id>/reload")
@requires(Action.OPERATE)
def reload(worker_id: str):
    """Finish what runs, restart the fork server on the task code now on disk, go on."""
    now = utcnow()
    get_worker(worker_id, now)  # an unknown id is the 404 page
    try:
        worker_service.reload_worker(worker_id, now=now, actor=current_actor())
    except Conflict as exc:
        flash(str(exc), "error")
    else:
        flash(
            f"Worker {worker_id} was told to reload: it finishes what runs, then restarts its fork server on "
            "the new code. It acts within about a second.",
            "success",
        )
    return redirect(url_for("workers.index"), code=303)


def _order(worker_id: str, *, at_once: bool):
    now = utcnow()
    get_worker(worker_id, now)  # an unknown id is the 404 page
    try:
        worker_service.stop_worker(worker_id, now=now, actor=current_actor(), at_once=at_once)
    except Conflict as exc:
        flash(str(exc), "error")
    else:
        what = "stop now; its running tasks are killed and retried per policy" if at_once else "drain and exit"
        flash(f"Worker {worker_id} was told to {what}. It acts within about a second.", "success")
    return redirect(url_for("workers.index"), code=303)
