"""Job pages and actions: thin adapters over `app.services.use_cases.jobs` and `app.services.read.dashboard`."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import available_timezones

from flask import Blueprint, flash, redirect, render_template, request, url_for

from app.clock import utcnow
from app.domain.jitter import jitter_offset
from app.domain.permissions import Action
from app.jobs.forms import BackfillForm, ConfirmForm, DeleteJobForm, JobForm, initial_values
from app.jobs.run_forms import BatchForm, RunForm
from app.scheduling import SCHEDULE_INPUTS, ScheduleError, parse_schedule, preview, schedule_value_from_options
from app.scheduling.lint import lint_schedule
from app.scheduling.timezones import parse_instant, resolve_timezone
from app.services.errors import ServiceError, ValidationFailed
from app.services.read import dashboard, execution_rows
from app.services.read import explain as explain_read
from app.services.use_cases import alert_mutes, executions, notify_routes
from app.services.use_cases import backfill as backfill_service
from app.services.use_cases import batches as batch_service
from app.services.use_cases import jobs as job_service
from app.services.use_cases import runs as run_service
from app.web.access import can_view_private, current_actor, current_caller, requires
from app.web.pagination import page_number, paginate

bp = Blueprint("jobs", __name__, url_prefix="/jobs")

JOBS_PER_PAGE = 50
EXECUTIONS_PER_PAGE = 30


@lru_cache(maxsize=1)
def timezone_names() -> tuple[str, ...]:
    return tuple(sorted(available_timezones()))


def _see_job(job_id: int, status: int = 303):
    return redirect(url_for("jobs.detail", job_id=job_id), code=status)


@bp.get("/")
@requires(Action.READ, public=True)
def index():
    """Jobs, 50 per page: search, filters in the URL, last run and outcome (app/jobs/list_view.py)."""
    from app.jobs.list_view import jobs_list_page

    return jobs_list_page()


@bp.get("/<id:job_id>")
@requires(Action.READ, public=True)
def detail(job_id: int):
    """Metadata, stats, next runs, charts and recent executions (30 per page)."""
    return _detail_page(job_service.get_job(job_id, current_caller()))


def _detail_page(job, *, run_form: RunForm | None = None, batch_form: BatchForm | None = None, status: int = 200):
    """The job page; `run_form` / `batch_form` carry a refused submission's values and errors."""
    now = utcnow()
    runs = paginate(executions.list_query(job_id=job.id), page=page_number(), per_page=EXECUTIONS_PER_PAGE)
    return render_template(
        "jobs/detail.html",
        job=job,
        stats=dashboard.job_stats(job.id),
        upcoming=dashboard.job_upcoming(job, now),
        runs=runs,
        run_times=execution_rows.row_times(runs.items),
        alerts_muted_until=alert_mutes.muted_until(job.id, now),
        schedule_text=_describe(job),
        action_form=ConfirmForm(),
        now=now,
        jitter=jitter_offset(job.id, job.jitter_seconds),
        lint=job_service.lint_job(job, now=now),
        run_form=run_form or RunForm(formdata=None),
        batch_form=batch_form or BatchForm(formdata=None),
        catalog=dashboard.task_catalog(),
        # What the job notifies, and where: for people of its organization, not the public page.
        notify=notify_routes.job_routing(job.id, current_caller()) if can_view_private() else None,
        notify_channels=notify_routes.channel_names(job.project_id) if can_view_private() else [],
    ), status


def _describe(job) -> str:
    try:
        return job_service.schedule_of(job).describe()
    except (ScheduleError, ValueError) as exc:
        return f"unreadable schedule: {exc}"


def _form_page(form: JobForm, *, job=None, status: int = 200):
    return render_template(
        "jobs/form.html",
        form=form,
        job=job,
        catalog=dashboard.task_catalog(),
        timezones=timezone_names(),
        schedule_inputs=SCHEDULE_INPUTS,
    ), status


@bp.route("/new", methods=["GET", "POST"])
@requires(Action.OPERATE)
def create():
    """The new-job form; errors are shown next to their fields."""
    form = JobForm()
    form.set_task_choices(dashboard.task_catalog())
    if request.method == "GET":
        return _form_page(form)
    if not form.validate_on_submit():
        return _form_page(form, status=400)
    now = utcnow()
    try:
        job = job_service.create_job(form.service_data(), now=now, actor=current_actor(), caller=current_caller())
    except ValidationFailed as exc:
        form.attach_errors(exc.errors)
        return _form_page(form, status=400)
    except ServiceError as exc:
        form.form_errors.append(str(exc))
        return _form_page(form, status=409)
    flash(f"Job {job.name!r} created; next run {_when(job.next_run_at)}.", "success")
    _flash_lint(job, now)
    return _see_job(job.id)


@bp.route("/<id:job_id>/edit", methods=["GET", "POST"])
@requires(Action.OPERATE)
def edit(job_id: int):
    """Edit a job. Only fields the operator changed are sent, so an untouched interval keeps its
    phase and an untouched schedule keeps its next run."""
    job = job_service.get_job(job_id, current_caller())
    initial = initial_values(job)
    form = JobForm(data=initial) if request.method == "GET" else JobForm()
    form.set_task_choices(dashboard.task_catalog())
    if request.method == "GET":
        return _form_page(form, job=job)
    if not form.validate_on_submit():
        return _form_page(form, job=job, status=400)
    changes = form.changes(initial)
    if not changes:
        flash("Nothing changed.", "info")
        return _see_job(job.id)
    now = utcnow()
    try:
        job = job_service.update_job(job.id, changes, now=now, actor=current_actor(), caller=current_caller())
    except ValidationFailed as exc:
        form.attach_errors(exc.errors)
        return _form_page(form, job=job, status=400)
    except ServiceError as exc:
        form.form_errors.append(str(exc))
        return _form_page(form, job=job, status=409)
    flash(f"Job {job.name!r} saved ({', '.join(sorted(changes))}).", "success")
    _flash_lint(job, now)
    return _see_job(job.id)


@bp.get("/preview")
@requires(Action.READ)
def schedule_preview():
    """HTMX fragment: the next five fire times of the schedule being typed, or why it is invalid."""
    args = request.args
    schedule_type = args.get("schedule_type", "interval")
    option = SCHEDULE_INPUTS[schedule_type].option if schedule_type in SCHEDULE_INPUTS else None
    text = (args.get(option or "", "") or "").strip()
    zone = (args.get("timezone") or "UTC").strip() or "UTC"
    now = utcnow()
    items, error, warnings, hint = [], None, [], None
    if option is None:
        error = f"unknown schedule type {schedule_type!r}; use one_time, interval or cron"
    elif not text:  # nothing typed yet is not an error: say what to type
        hint = {
            "interval": "Type an interval such as 30s, 5m or 1h.",
            "cron": "Type a cron expression such as 0 9 * * 1-5.",
            "one_time": "Type a date and time such as 2026-01-01T12:00:00Z.",
        }[schedule_type]
    else:
        try:
            value = schedule_value_from_options(schedule_type, **{option: text})
            schedule = parse_schedule(schedule_type, value, zone, anchor=now.replace(microsecond=0))
            items = preview(schedule, now, 5)
            warnings = lint_schedule(schedule, now=now, timeout_seconds=_whole(args.get("timeout_seconds")))
            if not items:
                error = "This schedule has no future fire times."
        except (ScheduleError, ValueError) as exc:
            error = str(exc)
    return render_template("jobs/_preview.html", items=items, error=error, zone=zone, warnings=warnings, hint=hint)


def _whole(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and len(text) < 7 else None


def _flash_lint(job, now: datetime) -> None:
    """Schedule lint after a save: warnings, never errors."""
    for warning in job_service.lint_job(job, now=now):
        flash(f"Warning: {warning.message}", "warning")


@bp.post("/<id:job_id>/enable")
@requires(Action.OPERATE)
def enable(job_id: int):
    try:
        job = job_service.enable_job(job_id, now=utcnow(), actor=current_actor(), caller=current_caller())
        flash(f"Job {job.name!r} enabled; next run {_when(job.next_run_at)}.", "success")
    except ServiceError as exc:
        flash(str(exc), "error")
    return _see_job(job_id)


@bp.post("/<id:job_id>/disable")
@requires(Action.OPERATE)
def disable(job_id: int):
    try:
        job, cancelled = job_service.disable_job(job_id, now=utcnow(), actor=current_actor(), caller=current_caller())
        flash(
            f"Job {job.name!r} disabled; {cancelled} queued execution(s) cancelled. "
            "Runs already in progress finish on their own.",
            "success",
        )
    except ServiceError as exc:
        flash(str(exc), "error")
    return _see_job(job_id)


@bp.post("/<id:job_id>/trigger")
@requires(Action.OPERATE)
def trigger(job_id: int):
    """Run now, after a delay or at an instant, with an optional config override (the "Run now /
    Run later" form; the bare "Run now" button posts it empty). Refusals show beside the fields."""
    form = RunForm()
    if not form.validate_on_submit():
        flash("The form expired; please try again.", "error")
        return _see_job(job_id)
    now = utcnow()
    try:
        execution = run_service.trigger_run(
            job_id, form.service_data(), now=now, actor=current_actor(), caller=current_caller()
        )
    except ValidationFailed as exc:
        db_rollback()
        form.attach_errors(exc.errors)
        return _detail_page(job_service.get_job(job_id, current_caller()), run_form=form, status=400)
    except ServiceError as exc:
        db_rollback()
        flash(str(exc), "error")
        return _see_job(job_id)
    if execution.deduplicated:
        flash(f"Deduplicated: this job is unique and execution #{execution.id} is already {execution.status}.", "info")
    elif execution.available_at > now:
        flash(
            f"Execution #{execution.id} scheduled for {_when(execution.available_at)}; cancel it from its page.",
            "success",
        )
    else:
        flash(f"Execution #{execution.id} queued; it runs when a worker is free.", "success")
    return _see_job(job_id)


@bp.post("/<id:job_id>/batches")
@requires(Action.OPERATE)
def submit_batch(job_id: int):
    """Submit a batch of this job; refused items (all-or-nothing) show beside the field."""
    form = BatchForm()
    if not form.validate_on_submit():
        flash("The form expired; please try again.", "error")
        return _see_job(job_id)
    try:
        batch = batch_service.submit_batch(
            job_id, form.service_data(), now=utcnow(), actor=current_actor(), caller=current_caller()
        )
    except ValidationFailed as exc:
        db_rollback()
        form.attach_errors(exc.errors)
        return _detail_page(job_service.get_job(job_id, current_caller()), batch_form=form, status=400)
    except ServiceError as exc:
        db_rollback()
        flash(str(exc), "error")
        return _see_job(job_id)
    flash(f"Batch #{batch.id} submitted: {batch.item_count} item(s).", "success")
    return redirect(url_for("batches.detail", batch_id=batch.id), code=303)


@bp.route("/<id:job_id>/delete", methods=["GET", "POST"])
@requires(Action.OPERATE)
def delete(job_id: int):
    """Ask for the job's name, then delete the job and its history."""
    job = job_service.get_job(job_id, current_caller())
    form = DeleteJobForm()
    if request.method == "POST" and form.validate_on_submit():
        if (form.confirm_name.data or "").strip() != job.name:
            form.confirm_name.errors = ["The name does not match; nothing was deleted."]
            return render_template("jobs/delete.html", job=job, form=form), 400
        name = job.name
        try:
            job_service.delete_job(job_id, now=utcnow(), actor=current_actor(), caller=current_caller())
        except ServiceError as exc:
            flash(str(exc), "error")
            return _see_job(job_id)
        flash(f"Job {name!r} and its history were deleted.", "success")
        return redirect(url_for("jobs.index"), code=303)
    return render_template("jobs/delete.html", job=job, form=form), (400 if request.method == "POST" else 200)


def db_rollback() -> None:
    """A refused write leaves the session's transaction (SQLite: the write lock) to roll back."""
    from app.extensions import db

    db.session.rollback()


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "none (no future occurrence)"


@bp.get("/<id:job_id>/explain")
@requires(Action.READ)
def explain(job_id: int):
    """Why did (or didn't) it run: the fates of the occurrences at an instant or in a window
    (default: the last 24 hours). A fragment for the job page's panel, or a page of its own."""
    job = job_service.get_job(job_id, current_caller())
    now = utcnow()
    args = {key: (request.args.get(key) or "").strip() for key in ("at", "from", "to")}
    error, document = None, None
    try:
        zone = resolve_timezone(job.timezone)
        instants = {key: parse_instant(text, zone, key) if text else None for key, text in args.items()}
        if instants["at"] is None and instants["from"] is None and instants["to"] is None:
            instants["from"], instants["to"] = now - timedelta(days=1), now
        document = explain_read.explain_job(
            job.id,
            now=now,
            at=instants["at"],
            start=instants["from"],
            end=instants["to"] if instants["at"] is None else None,
            caller=current_caller(),
        )
    except ValidationFailed as exc:
        error = "; ".join(exc.errors.values()) if getattr(exc, "errors", None) else str(exc)
    except (ScheduleError, ValueError) as exc:
        error = str(exc)
    template = "jobs/_explain.html" if request.headers.get("HX-Request") else "jobs/explain.html"
    return render_template(template, job=job, document=document, error=error, args=args), (400 if error else 200)


@bp.route("/<id:job_id>/backfill", methods=["GET", "POST"])
@requires(Action.OPERATE)
def backfill(job_id: int):
    """Backfill form: a dry-run list of what would be created, then the real run (trigger backfill)."""
    job = job_service.get_job(job_id, current_caller())
    form = BackfillForm()
    plan, status = None, 200
    if request.method == "POST" and form.validate_on_submit():
        run = request.form.get("action") == "run"
        try:
            plan = backfill_service.backfill_from_input(
                job.id,
                {
                    "from": form.start.data or "",
                    "to": form.end.data or "",
                    "max": form.max_runs.data or None,
                    "overlap": form.overlap.data or None,
                    "dry_run": not run,
                },
                now=utcnow(),
                actor=current_actor(),
                caller=current_caller(),
            )
        except ValidationFailed as exc:
            aliases = {"from": "start", "to": "end", "max": "max_runs"}
            for key, message in exc.errors.items():
                target = getattr(form, aliases.get(key, key), None)
                if target is not None and hasattr(target, "errors"):
                    target.errors = [message]
                else:
                    form.form_errors.append(message)
            plan, status = None, 400
        except ServiceError as exc:
            form.form_errors.append(str(exc))
            plan, status = None, 409
        else:
            if run:
                flash(
                    f"Backfill of {job.name!r}: {plan.created} run(s) created"
                    + (" (capped: run it again for the rest)." if plan.capped else "."),
                    "success",
                )
                return _see_job(job.id)
    elif request.method == "POST":
        status = 400
    return render_template("jobs/backfill.html", job=job, form=form, plan=plan), status
