"""Loading a queue or an alert by id for the caller: another organization's is 404, like a missing one.

Jobs, executions and batches are loaded by their use cases, which take the caller. The queue use
cases are keyed by name and the alerts use case has no single-alert read, so the API resolves these
ids here, through the same filters (`app.services.scoping`) the use cases apply.
"""

from __future__ import annotations

from sqlalchemy import select

from app.extensions import db
from app.models import Alert, Job, Queue
from app.models.ids import key_max
from app.services import scoping
from app.services.caller import Caller
from app.services.errors import NotFound

# Every key is the same integer column type as a job's: a larger id names nothing (and must not
# reach PostgreSQL, which refuses it as "integer out of range"). Path, query and body ids share it.
ID_MAX = key_max(Job)


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
