"""Loading one object for the caller: another organization's object is 404, like a missing one.

STOPGAP (issue 15 is wiring `Caller` into the use cases): the job, execution and queue use cases
do not take a caller yet, so the API checks visibility here, through the same filters
(`app.services.scoping`) the use cases will apply, before calling them.
"""

from __future__ import annotations

from sqlalchemy import select

from app.extensions import db
from app.models import Alert, Execution, Job, Queue
from app.services import scoping
from app.services.caller import Caller
from app.services.errors import NotFound

ID_MAX = 2**31 - 1  # ids are 32-bit: a larger one names nothing (and must not reach PostgreSQL)


def job(caller: Caller, job_id: int) -> Job:
    if not 0 < job_id <= ID_MAX:
        raise NotFound(f"job {job_id} does not exist")
    found = db.session.scalar(scoping.jobs(select(Job).where(Job.id == job_id), caller))
    if found is None:
        raise NotFound(f"job {job_id} does not exist")
    return found


def execution(caller: Caller, execution_id: int) -> Execution:
    if not 0 < execution_id <= ID_MAX:
        raise NotFound(f"execution {execution_id} does not exist")
    found = db.session.scalar(scoping.executions(select(Execution).where(Execution.id == execution_id), caller))
    if found is None:
        raise NotFound(f"execution {execution_id} does not exist")
    return found


def queue(caller: Caller, queue_id: int) -> Queue:
    if not 0 < queue_id <= ID_MAX:
        raise NotFound(f"queue {queue_id} does not exist")
    found = db.session.scalar(scoping.queues(select(Queue).where(Queue.id == queue_id), caller))
    if found is None:
        raise NotFound(f"queue {queue_id} does not exist")
    return found


def alert(caller: Caller, alert_id: int) -> Alert:
    if not 0 < alert_id <= ID_MAX:
        raise NotFound(f"alert {alert_id} does not exist")
    found = db.session.scalar(scoping.alerts(select(Alert).where(Alert.id == alert_id), caller))
    if found is None:
        raise NotFound(f"alert {alert_id} does not exist")
    return found
