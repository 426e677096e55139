"""cronwell-client: a Python client for a Cronwell server's REST API, sync (`Client`) and async
(`AsyncClient`), on httpx. See README.md for a quick start."""

from cronwell_client.client import AsyncClient, Client
from cronwell_client.errors import (
    Conflict,
    CronwellError,
    Forbidden,
    NotFound,
    RateLimited,
    RunTimeout,
    Unauthorized,
    ValidationFailed,
)
from cronwell_client.models import Attempt, Execution, ExecutionExplain, Job, Queue

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
    "Queue",
    "RateLimited",
    "RunTimeout",
    "Unauthorized",
    "ValidationFailed",
]
