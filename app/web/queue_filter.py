"""The `?queue=NAME` filter of the jobs and executions lists, read the same way by both.

In a view of one project a name is one queue. In "All projects" (or "All organizations") a name
is every queue of that name in view, one per project; `&project=ORG/PROJECT` (what the queue
pages link with) narrows it to that project's queue.
"""

from __future__ import annotations

from flask import request

from app.services.caller import Caller
from app.services.errors import NotFound, ValidationFailed
from app.services.use_cases import queues as queue_service


def queues_to_show(name: str, caller: Caller, errors: list[str]) -> tuple[int, ...] | None:
    """The ids of the queues `name` (and the query's `project`) filter on; None (with the reason
    in `errors`) when no queue in view matches."""
    if not queue_service.NAME_PATTERN.match(name):  # no queue can have it: not looked up
        errors.append(queue_service.unknown_queue_message(name[:100], caller))
        return None
    project = (request.args.get("project") or "").strip()[:200]
    try:
        if project:
            return (queue_service.get_queue(name, caller, project=project).id,)
        return tuple(queue.id for queue in queue_service.queues_named(name, caller))
    except (NotFound, ValidationFailed) as exc:
        errors.append(str(exc) if isinstance(exc, NotFound) else "; ".join(exc.errors.values()))
        return None
