"""Queue pages and actions: thin adapters over `app.services.use_cases.queues` and
`app.services.read.queue_stats`.

The list and a queue's page poll their statistics: an HTMX GET of the same URL answers with the
statistics fragment only (`_table.html`, `_stats.html`), which the full page includes, so there
is one copy of the markup. Forms sit outside the polled fragments, so a refresh never wipes what
an operator is typing.
"""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for

from app.clock import utcnow
from app.domain.permissions import Action
from app.queues.forms import NEW_QUEUE, ConfirmForm, PauseForm, QueueForm, initial_values
from app.services.errors import ServiceError, ValidationFailed
from app.services.read.queue_stats import queue_stats, rate_window
from app.services.use_cases import queues as queue_service
from app.web.access import current_actor, current_caller, is_htmx, queue_url, requires

bp = Blueprint("queues", __name__, url_prefix="/queues")

POLL_SECONDS = 5


def _see_queue(queue):
    return redirect(_queue_url(queue), code=303)


def _queue_url(queue) -> str:
    return queue_url("queues.detail", queue)


class SeveralQueues(Exception):
    """The URL names a queue that several projects in view have, and no project."""


def _the_queue(name: str):
    """The queue of the URL: `name` in the query's `project` (ORG/PROJECT), else the one queue of
    that name in view (SeveralQueues when there are more)."""
    project = (request.args.get("project") or "").strip()[:200] or None
    caller = current_caller()
    if project is not None or caller.project_id is not None:
        return queue_service.get_queue(name, caller, project=project)
    found = queue_service.queues_named(name, caller)
    if len(found) > 1:
        raise SeveralQueues(name)
    return found[0]


@bp.errorhandler(SeveralQueues)
def _list_of_same_named(error: SeveralQueues):
    """A name several projects have, with no project: the list of those queues, to pick one."""
    return redirect(url_for("queues.index", name=str(error)), code=303)


@bp.get("/")
@requires(Action.READ)
def index():
    """Every queue with its live statistics; the create form for operators."""
    now = utcnow()
    caller = current_caller()
    every = queue_service.list_queues(caller)
    named = (request.args.get("name") or "").strip()[:100]
    queues = [q for q in every if q.name == named] if named else every
    context = {
        "queues": queues,
        "named": named,
        "stats": queue_stats(now, queues),
        "poll_seconds": POLL_SECONDS,
        "now": now,
    }
    if is_htmx():
        return render_template("queues/_table.html", **context)
    return render_template("queues/list.html", form=QueueForm(formdata=None, data=NEW_QUEUE), **context)


@bp.get("/<queue:queue_name>")
@requires(Action.READ)
def detail(queue_name: str):
    """One queue: settings, live statistics, pause or resume, and the edit form. A name that
    several projects in view have, with no project named, is the list of those queues."""
    queue = _the_queue(queue_name)
    if is_htmx():
        return render_template("queues/_stats.html", **_stats_context(queue))
    return _detail_page(queue)


def _stats_context(queue) -> dict:
    now = utcnow()
    return {
        "queue": queue,
        "stats": queue_stats(now, [queue]).get(queue.id),
        "rate": rate_window(queue.rate_limit, queue.rate_starts, now),
        "poll_seconds": POLL_SECONDS,
    }


def _detail_page(queue, *, pause_form: PauseForm | None = None, edit_form: QueueForm | None = None, status=200):
    return render_template(
        "queues/detail.html",
        pause_form=pause_form or PauseForm(formdata=None),
        edit_form=edit_form or QueueForm(formdata=None, data=initial_values(queue)),
        action_form=ConfirmForm(),
        **_stats_context(queue),
    ), status


@bp.route("/new", methods=["GET", "POST"])
@requires(Action.ADMINISTER)
def create():
    """The new-queue form; errors are shown next to their fields."""
    if request.method == "GET":
        return render_template("queues/new.html", form=QueueForm(formdata=None, data=NEW_QUEUE))
    form = QueueForm()
    try:
        queue = queue_service.add_queue(
            form.service_data(creating=True), now=utcnow(), actor=current_actor(), caller=current_caller()
        )
    except ValidationFailed as exc:
        form.attach_errors(exc.errors)
        return render_template("queues/new.html", form=form), 400
    except ServiceError as exc:
        form.form_errors.append(str(exc))
        return render_template("queues/new.html", form=form), 409
    flash(f"Queue {queue.name!r} created.", "success")
    return _see_queue(queue)


@bp.route("/<queue:queue_name>/edit", methods=["GET", "POST"])
@requires(Action.ADMINISTER)
def edit(queue_name: str):
    """Change the concurrency limit (empty = none), the priority and the description."""
    queue = _the_queue(queue_name)
    if request.method == "GET":
        return _detail_page(queue)
    form = QueueForm()
    try:
        queue = queue_service.edit_queue(
            queue.name,
            form.service_data(creating=False),
            now=utcnow(),
            actor=current_actor(),
            caller=current_caller().in_project(queue.project_id),
        )
    except ValidationFailed as exc:
        form.attach_errors(exc.errors)
        return _detail_page(queue, edit_form=form, status=400)
    except ServiceError as exc:
        form.form_errors.append(str(exc))
        return _detail_page(queue, edit_form=form, status=409)
    flash(f"Queue {queue.name!r} saved.", "success")
    return _see_queue(queue)


@bp.post("/<queue:queue_name>/pause")
@requires(Action.OPERATE)
def pause(queue_name: str):
    """Stop new claims from the queue; running work finishes."""
    queue = _the_queue(queue_name)
    form = PauseForm()
    try:
        queue = queue_service.pause_queue(
            queue.name,
            now=utcnow(),
            actor=current_actor(),
            reason=form.reason.data or None,
            caller=current_caller().in_project(queue.project_id),
        )
    except ValidationFailed as exc:
        form.reason.errors = [*form.reason.errors, *exc.errors.values()]
        return _detail_page(queue, pause_form=form, status=400)
    except ServiceError as exc:
        flash(str(exc), "error")
        return _see_queue(queue)
    flash(f"Queue {queue.name!r} paused: running work finishes, nothing new starts until it is resumed.", "success")
    return _see_queue(queue)


@bp.post("/<queue:queue_name>/resume")
@requires(Action.OPERATE)
def resume(queue_name: str):
    queue = _the_queue(queue_name)  # an unknown name is the 404 page, as on every queue URL
    try:
        queue = queue_service.resume_queue(
            queue.name, now=utcnow(), actor=current_actor(), caller=current_caller().in_project(queue.project_id)
        )
        flash(f"Queue {queue.name!r} resumed; workers were woken.", "success")
    except ServiceError as exc:
        flash(str(exc), "error")
    return _see_queue(queue)


@bp.post("/<queue:queue_name>/delete")
@requires(Action.ADMINISTER)
def delete(queue_name: str):
    """Delete a queue no job uses and nothing unfinished waits in (never `default`); otherwise say why not."""
    queue = _the_queue(queue_name)
    try:
        queue_service.delete_queue(
            queue.name, now=utcnow(), actor=current_actor(), caller=current_caller().in_project(queue.project_id)
        )
    except ServiceError as exc:
        flash(str(exc), "error")
        return _see_queue(queue)
    flash(f"Queue {queue_name!r} deleted.", "success")
    return redirect(url_for("queues.index"), code=303)
