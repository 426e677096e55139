"""/tasks: every registered task with its description, module, declared env, rendered config
schema and an example config; /tasks/<name> is one of them. A thin adapter over
app.tasks.describe, which `flask task` and the API read too."""

from __future__ import annotations

import os

from flask import Blueprint, abort, render_template

from app.domain.permissions import Action
from app.tasks import UnknownTaskError, get_task
from app.tasks.describe import describe_catalog, describe_task
from app.web.access import requires

bp = Blueprint("tasks", __name__, url_prefix="/tasks")


@bp.get("/")
@requires(Action.READ)
def index():
    """The whole catalog."""
    return render_template("tasks/list.html", tasks=describe_catalog(os.environ), area="tasks")


@bp.get("/<task_name>")
@requires(Action.READ)
def detail(task_name: str):
    """One task (the 404 page for a name that is not registered)."""
    try:
        spec = get_task(task_name)
    except UnknownTaskError:
        abort(404)
    return render_template("tasks/detail.html", task=describe_task(spec, os.environ), area="tasks")
