"""Batch pages and the cancel action: thin adapters over `app.services.use_cases.batches` and the
read model `app.services.read.batches`. While a batch runs, its page and the list refresh their
body (HTMX GET of the same URL answers with the fragment the page includes)."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for

from app.clock import utcnow
from app.domain.permissions import Action
from app.jobs.forms import ConfirmForm
from app.services.errors import ServiceError
from app.services.read import batches as batch_read
from app.services.use_cases import batches as batch_service
from app.services.use_cases import jobs as job_service
from app.web.access import current_actor, current_caller, is_htmx, requires
from app.web.pagination import page_number, paginate

bp = Blueprint("batches", __name__, url_prefix="/batches")

BATCHES_PER_PAGE = 50
ITEMS_PER_PAGE = 50


def _job_filter() -> int | None:
    """?job=ID narrows the list; anything but a whole number is ignored (no error page)."""
    raw = (request.args.get("job") or "").strip()
    return int(raw) if raw.isdigit() and len(raw) < 10 else None


@bp.get("/")
@requires(Action.READ)
def index():
    """Batches, newest first, with their status and counts per status."""
    job_id = _job_filter()
    job = job_service.get_job(job_id, current_caller()) if job_id is not None else None
    page = paginate(
        batch_service.list_query(job_id=job_id, caller=current_caller()), page=page_number(), per_page=BATCHES_PER_PAGE
    )
    context = {"page": page, "views": batch_read.views(page.items), "job": job}
    if is_htmx():
        return render_template("batches/_table.html", **context)
    return render_template("batches/list.html", **context)


@bp.get("/<id:batch_id>")
@requires(Action.READ)
def detail(batch_id: int):
    """One batch: status, counts, its on-complete run, and its items (50 per page)."""
    batch = batch_service.get_batch(batch_id, current_caller())
    items = paginate(batch_read.items_query(batch.id), page=page_number(), per_page=ITEMS_PER_PAGE)
    context = {
        "view": batch_read.view(batch),
        "items": items,
        "action_form": ConfirmForm(),
    }
    if is_htmx():
        return render_template("batches/_body.html", **context)
    return render_template("batches/detail.html", **context)


@bp.post("/<id:batch_id>/cancel")
@requires(Action.OPERATE)
def cancel(batch_id: int):
    """Cancel a batch: items not started yet are cancelled; running ones finish."""
    form = ConfirmForm()
    if not form.validate_on_submit():
        flash("The form expired; please try again.", "error")
    else:
        try:
            _, cancelled = batch_service.cancel_batch(
                batch_id, now=utcnow(), actor=current_actor(), caller=current_caller()
            )
            flash(f"Batch #{batch_id} cancelled; {cancelled} item(s) that had not started were cancelled.", "success")
        except ServiceError as exc:
            from app.extensions import db

            db.session.rollback()
            flash(str(exc), "error")
    return redirect(url_for("batches.detail", batch_id=batch_id), code=303)
