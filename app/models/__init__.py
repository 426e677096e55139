"""SQLAlchemy models shared by the web app, the scheduler and the worker.

Invariants live in the database (unique keys, CHECK constraints, partial indexes), not only in
Python, so that several schedulers and workers cannot break them between them.
"""

from app.models.execution import Attempt, Execution
from app.models.job import Job
from app.models.operations import Alert, DeadLetter, Event, Heartbeat, WorkerCommand
from app.models.queue import Project, Queue
from app.models.tenancy import Membership, Organization
from app.models.user import User
from app.models.web_session import WebSession

__all__ = [
    "Alert",
    "Attempt",
    "DeadLetter",
    "Event",
    "Execution",
    "Heartbeat",
    "Job",
    "Membership",
    "Organization",
    "Project",
    "Queue",
    "User",
    "WebSession",
    "WorkerCommand",
]
