"""Execution pages and actions: thin adapters over `app.services.use_cases.executions`."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for

from app.clock import utcnow
from app.domain.permissions import Action
from app.domain.states import CANCELLABLE, RETRYABLE, ExecutionStatus
from app.executions.forms import ExecutionActionForm, ExecutionFilterForm
from app.models import Job
from app.models.ids import id_in_range, is_whole_number, key_max
from app.services.errors import NotFound, ServiceError, ValidationFailed
from app.services.read import execution_rows
from app.services.use_cases import executions as execution_service
from app.services.use_cases import jobs as job_service
from app.services.use_cases import queues as queue_service
from app.services.use_cases import runs as run_service
from app.web.access import current_actor, current_caller, is_htmx, requires
from app.web.pagination import Page, page_number, paginate

bp = Blueprint("executions", __name__, url_prefix="/executions")

PER_PAGE = 50


@bp.get("/")
@requires(Action.READ, public=True)
def index():
    """Executions, newest first, filtered by status, job and queue, 50 per page."""
    filters = ExecutionFilterForm(request.args)
    status = (filters.status.data or "").strip() or None
    job_text = (filters.job.data or "").strip()
    queue_text = (filters.queue.data or "").strip()
    errors: list[str] = []
    job = None
    job_id = None
    queue = None
    if queue_text:
        if not queue_service.NAME_PATTERN.match(queue_text):  # no queue can have it: not looked up
            errors.append(queue_service.unknown_queue_message(queue_text[:100], current_caller()))
        else:
            try:
                queue = queue_service.get_queue(queue_text, current_caller())
            except NotFound as exc:
                errors.append(str(exc))
    if job_text:
        if not is_whole_number(job_text):  # ASCII digits only: not "²", which int() refuses
            errors.append(f"Job ID must be a whole number, got {job_text!r}.")
        elif (job_id := id_in_range(job_text, key_max(Job))) is None:
            errors.append(f"job {job_text} does not exist")  # beyond the column: no row can have it
        else:
            try:
                job = job_service.get_job(job_id, current_caller())
            except NotFound as exc:
                errors.append(str(exc))
    per_page = current_app.config.get("EXECUTIONS_PER_PAGE", PER_PAGE)
    page = Page(items=[], page=1, per_page=per_page, total=0)
    if not errors:
        try:
            page = paginate(
                execution_service.list_query(
                    status=status, job_id=job_id, queue_id=queue.id if queue else None, caller=current_caller()
                ),
                page=page_number(),
                per_page=per_page,
            )
        except ValidationFailed as exc:
            errors.extend(exc.errors.values())
    query = {k: v for k, v in (("status", status or ""), ("job", job_text), ("queue", queue_text)) if v}
    return render_template(
        "executions/list.html",
        page=page,
        times=execution_rows.row_times(page.items),
        filters=filters,
        filter_errors=errors,
        job=job,
        queue=queue,
        query=query,
    ), (400 if errors else 200)


@bp.get("/<id:execution_id>")
@requires(Action.READ)
def detail(execution_id: int):
    """Everything about one execution: attempts, output and error. While it is in flight the
    body is an HTMX fragment that refreshes itself until the execution ends."""
    execution = execution_service.get_execution(execution_id, with_attempts=True, caller=current_caller())
    context = {
        "execution": execution,
        "action_form": ExecutionActionForm(),
        "can_retry": ExecutionStatus(execution.status) in RETRYABLE,
        # Running ones too: the worker kills the task; asked once, the button goes.
        "can_cancel": ExecutionStatus(execution.status) in CANCELLABLE and execution.cancel_requested_at is None,
        "callbacks": run_service.callbacks_of(execution.id),  # what its outcome started (links both ways)
    }
    if is_htmx():
        return render_template("executions/_detail_body.html", **context)
    return render_template("executions/detail.html", **context)


@bp.post("/<id:execution_id>/retry")
@requires(Action.OPERATE)
def retry(execution_id: int):
    """Run a finished execution again, as a new execution."""
    try:
        new = execution_service.retry_execution(
            execution_id, now=utcnow(), actor=current_actor(), caller=current_caller()
        )
    except ServiceError as exc:
        flash(str(exc), "error")
        return redirect(url_for("executions.detail", execution_id=execution_id), code=303)
    flash(f"Retry queued as execution #{new.id}.", "success")
    return redirect(url_for("executions.detail", execution_id=new.id), code=303)


@bp.post("/<id:execution_id>/cancel")
@requires(Action.OPERATE)
def cancel(execution_id: int):
    """Cancel a queued execution at once, or ask a running one's worker to kill its task."""
    try:
        execution = execution_service.cancel_execution(
            execution_id, now=utcnow(), actor=current_actor(), caller=current_caller()
        )
    except ServiceError as exc:
        flash(str(exc), "error")
    else:
        if execution.status == ExecutionStatus.RUNNING:
            flash(
                f"Cancel requested: the worker running execution #{execution_id} stops its task "
                "(SIGTERM, then SIGKILL after the grace) within about a second.",
                "success",
            )
        else:
            flash(f"Execution #{execution_id} cancelled.", "success")
    return redirect(url_for("executions.detail", execution_id=execution_id), code=303)
