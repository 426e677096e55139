"""The workflow run page (its graph drawn as SVG on the server, no script needed) and its cancel
and retry actions: thin adapters over `app.services.use_cases.workflows`. While the run goes on,
its body refreshes itself (HTMX GET of the same URL answers with the fragment)."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for

from app.clock import utcnow
from app.domain.permissions import Action
from app.extensions import db
from app.jobs.forms import ConfirmForm
from app.services.errors import ServiceError
from app.services.read import workflows as workflow_read
from app.services.use_cases import workflows as workflow_service
from app.web.access import current_actor, current_caller, is_htmx, requires

bp = Blueprint("workflows", __name__, url_prefix="/workflow-runs")


@bp.get("/<id:run_id>")
@requires(Action.READ)
def detail(run_id: int):
    """One workflow run: the graph of its steps, coloured by status, and the steps' table."""
    run = workflow_service.get_run(run_id, caller=current_caller())
    view = workflow_read.run_view(run, workflow_service.step_executions(run))
    context = {"view": view, "graph": workflow_read.graph_layout(view["steps"]), "action_form": ConfirmForm()}
    if is_htmx():
        return render_template("workflows/_body.html", **context)
    return render_template("workflows/detail.html", **context)


@bp.post("/<id:run_id>/cancel")
@requires(Action.OPERATE)
def cancel(run_id: int):
    if _confirmed():
        try:
            workflow_service.cancel_run(run_id, now=utcnow(), actor=current_actor(), caller=current_caller())
            flash(f"Workflow run #{run_id} cancelled.", "success")
        except ServiceError as exc:
            db.session.rollback()
            flash(str(exc), "error")
    return redirect(url_for("workflows.detail", run_id=run_id), code=303)


@bp.post("/<id:run_id>/retry")
@requires(Action.OPERATE)
def retry(run_id: int):
    from_step = (request.form.get("from") or "").strip() or None
    if _confirmed():
        try:
            new = workflow_service.retry_run(
                run_id, now=utcnow(), actor=current_actor(), from_step=from_step, caller=current_caller()
            )
            flash(
                f"Workflow run #{new.id} resumes #{run_id}" + (f" from {from_step}" if from_step else "") + ".",
                "success",
            )
            return redirect(url_for("workflows.detail", run_id=new.id), code=303)
        except ServiceError as exc:
            db.session.rollback()
            flash(str(exc), "error")
    return redirect(url_for("workflows.detail", run_id=run_id), code=303)


def _confirmed() -> bool:
    """The action's form is ours and fresh (CSRF)."""
    if ConfirmForm().validate_on_submit():
        return True
    flash("The form expired; please try again.", "error")
    return False
