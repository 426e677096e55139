"""Bulk actions: the lists post the ticked ids here; the first POST answers with a confirmation
that says exactly how many rows will change (and which will not, and why), the second one
(`confirm=1`) acts, one audited change per row. CSRF on both; operators only."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_wtf import FlaskForm

from app.clock import utcnow
from app.domain.permissions import Action
from app.models import Execution, Job
from app.models.ids import id_in_range, key_max
from app.services.errors import ValidationFailed
from app.services.use_cases import bulk
from app.web.access import current_actor, current_caller, requires, safe_next

bp = Blueprint("bulk", __name__)

_MODELS = {"executions": Execution, "jobs": Job}
_LISTS = {"executions": "executions.index", "jobs": "jobs.index"}


def _ids(kind: str) -> list[int]:
    largest = key_max(_MODELS[kind])
    values = request.form.getlist("ids")[: bulk.MAX_ROWS + 1]
    return [i for i in (id_in_range((v or "").strip(), largest) for v in values) if i is not None]


def _bulk(kind: str):
    back = safe_next(request.form.get("back")) or url_for(_LISTS[kind])
    if not FlaskForm().validate_on_submit():  # CSRF is checked before this; this guards odd bodies
        return redirect(back, code=303)
    action = (request.form.get("action") or "").strip()
    caller = current_caller()
    try:
        plan = bulk.plan(kind, action, _ids(kind), caller)
    except ValidationFailed as exc:
        flash(" ".join(exc.errors.values()), "error")
        return redirect(back, code=303)
    if request.form.get("confirm") != "1":
        return render_template("bulk/confirm.html", plan=plan, kind=kind, back=back)
    if not plan.change:
        flash(f"Nothing to {plan.verb}: none of the selected {kind} can be changed.", "info")
        return redirect(back, code=303)
    result = bulk.apply(plan, now=utcnow(), actor=current_actor(), caller=caller)
    past = bulk.ACTIONS[(kind, action)][1]
    noun = kind[:-1] if len(result.done) == 1 else kind
    flash(f"{len(result.done)} {noun} {past}: " + ", ".join(f"#{i}" for i in result.done) + ".", "success")
    for row_id, why in result.refused:
        flash(f"#{row_id} not {past}: {why}", "error")
    return redirect(back, code=303)


@bp.post("/executions/bulk")
@requires(Action.OPERATE)
def executions_bulk():
    """Retry or cancel the ticked executions (confirm first)."""
    return _bulk("executions")


@bp.post("/jobs/bulk")
@requires(Action.OPERATE)
def jobs_bulk():
    """Enable or disable the ticked jobs (confirm first)."""
    return _bulk("jobs")
