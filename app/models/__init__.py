"""SQLAlchemy models shared by the web app, the scheduler and the worker.

Invariants live in the database (unique keys, CHECK constraints, partial indexes), not only in
Python, so that several schedulers and workers cannot break them between them.
"""

from app.models.alert_mute import AlertMute
from app.models.alerting import AlertChannel, AlertDelivery
from app.models.api import ApiToken, IdempotencyKey, RevokedToken
from app.models.audit import AuditEvent
from app.models.batch import Batch
from app.models.execution import Attempt, Execution
from app.models.job import Job
from app.models.notifications import JobNotifyState, Notice, NoticeCursor, NotificationRoute
from app.models.operations import Alert, DeadLetter, Event, Heartbeat, WorkerCommand
from app.models.queue import Project, Queue
from app.models.tenancy import Membership, Organization
from app.models.user import User
from app.models.web_session import WebSession
from app.models.workflow import WorkflowRun

__all__ = [
    "Alert",
    "AlertChannel",
    "AlertMute",
    "AlertDelivery",
    "ApiToken",
    "Attempt",
    "AuditEvent",
    "Batch",
    "DeadLetter",
    "Event",
    "Execution",
    "Heartbeat",
    "IdempotencyKey",
    "Job",
    "JobNotifyState",
    "Membership",
    "Notice",
    "NoticeCursor",
    "NotificationRoute",
    "Organization",
    "Project",
    "Queue",
    "RevokedToken",
    "User",
    "WebSession",
    "WorkflowRun",
    "WorkerCommand",
]
