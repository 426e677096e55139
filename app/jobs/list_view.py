"""The jobs list: search, filters in the URL, last run / last outcome / 24 h success rate, 50 per
page. A thin adapter over `app.services.read.console_lists`; `jobs.index` renders it."""

from __future__ import annotations

from flask import render_template, request

from app.clock import utcnow
from app.jobs.list_forms import JobFilterForm
from app.services.read import console_lists, dashboard
from app.web.access import current_caller, is_htmx
from app.web.pagination import Page, page_number, paginate
from app.web.queue_filter import queues_to_show

JOBS_PER_PAGE = 50
SEARCH_MAX = 200


def jobs_list_page():
    """The page (or, for an HTMX poll, just its table) for the filters in the query string."""
    caller = current_caller()
    form = JobFilterForm(request.args)
    task_names = [t["name"] for t in dashboard.task_catalog()]
    form.set_choices(console_lists.queue_names(caller), task_names)
    errors: list[str] = []
    search = (form.q.data or "").strip()[:SEARCH_MAX].replace("\x00", "")
    enabled = {"yes": True, "no": False}.get(form.enabled.data or "")
    queue_ids = queues_to_show(form.queue.data, caller, errors) if form.queue.data else None
    task = (form.task.data or "")[:100]
    if task and task not in task_names:
        errors.append(f"no task is called {task!r}")
    outcome = form.outcome.data or ""
    if outcome and outcome not in console_lists.OUTCOMES:
        errors.append(f"last outcome must be one of {', '.join(console_lists.OUTCOMES)}")
        outcome = ""
    sort = request.args.get("sort", "")
    if sort and sort not in console_lists.JOB_SORTS:
        errors.append(f"sort must be one of {', '.join(console_lists.JOB_SORTS)}, got {sort[:40]!r}")
        sort = ""
    descending = request.args.get("dir") == "desc"
    filters = console_lists.JobFilters(search, enabled, queue_ids, task, outcome, sort, descending)
    page = Page(items=[], page=1, per_page=JOBS_PER_PAGE, total=0)
    if not errors:
        page = paginate(console_lists.job_list_query(filters, caller), page=page_number(), per_page=JOBS_PER_PAGE)
    now = utcnow()
    query = {
        k: v
        for k, v in (
            ("q", search),
            ("enabled", form.enabled.data or ""),
            ("queue", form.queue.data or ""),
            ("project", (request.args.get("project") or "")[:200] if form.queue.data else ""),
            ("task", task),
            ("outcome", outcome),
            ("sort", sort),
            ("dir", "desc" if sort and descending else ""),
        )
        if v
    }
    context = {
        "page": page,
        "job_rows": console_lists.job_rows(page.items, now),
        "filters": form,
        "filter_errors": errors,
        "query": query,
        "filtered": bool(set(query) - {"sort", "dir"}),
        "now": now,
    }
    if is_htmx() and request.headers.get("HX-Target") == "jobs-list":
        return render_template("jobs/_list.html", **context)
    return render_template("jobs/list.html", **context), (400 if errors else 200)
