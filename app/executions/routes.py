"""Execution pages and actions: thin adapters over `app.services.use_cases.executions`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for

from app.clock import utcnow
from app.domain.permissions import Action
from app.domain.states import CANCELLABLE, RETRYABLE, ExecutionStatus, Trigger, values
from app.executions.forms import ExecutionActionForm, ExecutionFilterForm
from app.models import Job
from app.models.ids import id_in_range, is_whole_number, key_max
from app.services.errors import NotFound, ServiceError
from app.services.read import console_lists, execution_rows, execution_sorts
from app.services.use_cases import executions as execution_service
from app.services.use_cases import jobs as job_service
from app.services.use_cases import runs as run_service
from app.web.access import current_actor, current_caller, is_htmx, requires
from app.web.pagination import Page, page_number, paginate
from app.web.queue_filter import queues_to_show

bp = Blueprint("executions", __name__, url_prefix="/executions")

PER_PAGE = 50


@bp.get("/")
@requires(Action.READ, public=True)
def index():
    """Executions, newest first, 50 per page, filtered by status, job (id or name), queue, trigger
    and creation date; the filters live in the URL. `sort` (started, finished, status, job) and
    `dir` (asc, desc) order it otherwise, paged by `after`/`before` cursors (an unknown sort is
    said inline and the default order shown). An HTMX request for the list gets just the list."""
    caller = current_caller()
    filters = ExecutionFilterForm(request.args)
    status = (filters.status.data or "").strip() or None
    job_text = (filters.job.data or "").strip()[:200].replace("\x00", "")
    task_text = (filters.task.data or "").strip()[:100].replace("\x00", "")
    queue_text = (filters.queue.data or "").strip()
    trigger = (filters.trigger.data or "").strip() or None
    errors: list[str] = []
    job = None
    job_ids: tuple[int, ...] | None = None
    matched_jobs: list = []
    queue_ids = queues_to_show(queue_text, caller, errors) if queue_text else None
    queue = queue_text if queue_ids else None
    if job_text:
        if is_whole_number(job_text):  # ASCII digits only: not "²", which int() refuses
            if (job_id := id_in_range(job_text, key_max(Job))) is None:
                errors.append(f"job {job_text} does not exist")  # beyond the column: no row can have it
            else:
                try:
                    job = job_service.get_job(job_id, caller)
                    job_ids = (job.id,)
                except NotFound as exc:
                    errors.append(str(exc))
        else:  # a name: the job of that name, else every job whose name contains it
            matched_jobs = console_lists.jobs_named(job_text, caller)
            if not matched_jobs:
                errors.append(f"no job is named {job_text!r} or has it in its name")
            elif len(matched_jobs) == 1:
                job = matched_jobs[0]
            job_ids = tuple(j.id for j in matched_jobs)
    if trigger and trigger not in values(Trigger):
        errors.append(f"trigger must be one of {', '.join(values(Trigger))}, got {trigger[:40]!r}")
    created_from = _instant(filters.created_from.data, "From", errors)
    created_to = _instant(filters.created_to.data, "Until", errors, end_of_day=True)
    if created_from and created_to and created_to <= created_from:
        errors.append("Until must be after From.")
    if status is not None and status not in values(ExecutionStatus):
        errors.append(f"status must be one of {', '.join(values(ExecutionStatus))}, got {status[:40]!r}")
    per_page = current_app.config.get("EXECUTIONS_PER_PAGE", PER_PAGE)
    sort, descending, sort_notice = _sort()
    page = Page(items=[], page=1, per_page=per_page, total=0)
    sorted_page = None
    if not errors:
        wanted = console_lists.ExecutionFilters(
            status, job_ids, queue_ids, trigger, task_text or None, created_from, created_to
        )
        listed = console_lists.executions_query(wanted, caller)
        if sort is None:
            page = paginate(listed, page=page_number(), per_page=per_page)
        else:
            sorted_page, sort_notice = _sorted_page(listed, sort, descending, per_page, sort_notice)
            page = Page(items=sorted_page.items, page=1, per_page=per_page, total=0)
    pairs = (
        ("status", status or ""),
        ("job", job_text),
        ("queue", queue_text),
        ("task", task_text),
        ("project", (request.args.get("project") or "")[:200] if queue_text else ""),
        ("trigger", trigger or ""),
        ("created_from", (filters.created_from.data or "").strip()),
        ("created_to", (filters.created_to.data or "").strip()),
        ("sort", sort.key if sort else ""),
        ("dir", ("desc" if descending else "asc") if sort else ""),
    )
    query = {k: v for k, v in pairs if v}
    context = {
        "page": page,
        "times": execution_rows.row_times(page.items),
        "filters": filters,
        "filter_errors": errors,
        "job": job,
        "matched_jobs": matched_jobs,
        "queue": queue,
        "query": query,
        "sorts": execution_sorts.SORTS,
        "sorted_page": sorted_page,
        "sort_notice": sort_notice,
        # Where the list's poll reloads: the page shown, not the first one.
        "position": {k: request.args[k][:200] for k in ("after", "before") if sorted_page and request.args.get(k)},
    }
    if is_htmx() and request.headers.get("HX-Target") == "executions-list":
        return render_template("executions/_list.html", **context)
    return render_template("executions/list.html", **context), (400 if errors else 200)


def _sort() -> tuple[execution_sorts.Sort | None, bool, str | None]:
    """The list's order from `sort` and `dir`: (None, ...) for the default, newest first. An
    unknown sort is not an error: the default order is shown with a note saying why."""
    key = (request.args.get("sort") or "").strip()
    direction = (request.args.get("dir") or "").strip()
    if not key:
        return None, True, None
    sort = execution_sorts.SORTS.get(key)
    if sort is None:
        known = ", ".join(execution_sorts.SORTS)
        return None, True, f"Cannot sort by {key[:40]!r} (sort by {known}); showing the newest first."
    if direction not in ("", "asc", "desc"):
        return sort, True, f"dir must be asc or desc, got {direction[:40]!r}; showing {sort.label.lower()} descending."
    return sort, direction != "asc", None


def _sorted_page(listed, sort, descending: bool, per_page: int, notice: str | None):
    """One keyset page of `listed` in `sort`; a cursor that is not one of ours shows the first
    page and says so."""
    after_text, before_text = request.args.get("after"), request.args.get("before")
    after, before = execution_sorts.decode(sort, after_text), execution_sorts.decode(sort, before_text)
    if (after_text and after is None) or (before_text and before is None):
        notice = "That page link is not valid for this order; showing the first page."
    page = execution_sorts.keyset_page(listed, sort, descending=descending, after=after, before=before, limit=per_page)
    return page, notice


def _instant(text: str | None, label: str, errors: list[str], *, end_of_day: bool = False):
    """A UTC instant from a date (`2026-06-01`) or date-time typed into a filter; None when empty.
    A bare date as the end of a range means the end of that day."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text[:40].replace("Z", "+00:00"))
    except ValueError:
        errors.append(f"{label} must be a date like 2026-06-01 or a time like 2026-06-01T12:00, got {text[:40]!r}")
        return None
    try:
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        if end_of_day and len(text) <= 10:
            moment += timedelta(days=1)
        return moment.astimezone(UTC)
    except OverflowError:  # the last day of year 9999, or an offset that leaves the calendar
        errors.append(f"{label} is out of range: {text[:40]!r}")
        return None


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
        "waiting": _why_waiting(execution),
    }
    if is_htmx():
        return render_template("executions/_detail_body.html", **context)
    return render_template("executions/detail.html", **context)


def _why_waiting(execution) -> dict | None:
    """Explain's answer for a run that is due but not started (its queue is paused, no live
    worker serves its queue or offers its task, ...); None for any other run."""
    now = utcnow()
    if execution.status != ExecutionStatus.PENDING.value or execution.available_at > now:
        return None
    from app.services.read.explain import explain_execution

    return explain_execution(execution.id, now=now, caller=current_caller())


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
