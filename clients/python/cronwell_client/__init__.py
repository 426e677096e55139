"""cronwell-client: a Python client for a Cronwell server's REST API, sync (`Client`) and async
(`AsyncClient`), on httpx. See README.md for a quick start and docs/api.md for the reference."""

from cronwell_client._version import __version__
from cronwell_client.async_client import AsyncClient
from cronwell_client.client import Client
from cronwell_client.errors import (
    Conflict,
    CronwellError,
    Forbidden,
    NotFound,
    PreconditionFailed,
    RateLimited,
    RunTimeout,
    Unauthorized,
    ValidationFailed,
)
from cronwell_client.models import (
    Attempt,
    Execution,
    ExecutionExplain,
    Job,
    Output,
    Plan,
    Queue,
    QueueStats,
    Task,
)

__all__ = [
    "AsyncClient",
    "Attempt",
    "Client",
    "Conflict",
    "CronwellError",
    "Execution",
    "ExecutionExplain",
    "Forbidden",
    "Job",
    "NotFound",
    "Output",
    "Plan",
    "PreconditionFailed",
    "Queue",
    "QueueStats",
    "RateLimited",
    "RunTimeout",
    "Task",
    "Unauthorized",
    "ValidationFailed",
    "__version__",
]
