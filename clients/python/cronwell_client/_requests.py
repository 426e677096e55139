"""Every request the clients send, built once, and every answer read once. No I/O here.

`Client` and `AsyncClient` differ only in how they send a `Call` (httpx.Client or
httpx.AsyncClient) and how they sleep between tries: each method of theirs is one function below
(which builds the Call, with the parser of its answer) and one send. The keyword names of the
requests' bodies and queries are declared here once (`RUN_FIELDS`, `TRIGGER_FIELDS`,
`EXECUTION_FILTERS`), and the client's tests check them against the published OpenAPI document.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from cronwell_client.errors import RunTimeout, error_for
from cronwell_client.models import (
    Attempt,
    Execution,
    ExecutionExplain,
    Job,
    Model,
    Output,
    Plan,
    Queue,
    QueueStats,
    Task,
)

API = "/api/v1"
# The statuses no run leaves (the server's TERMINAL, app/domain/states.py; a test compares them).
TERMINAL = frozenset({"succeeded", "failed", "timed_out", "missed", "cancelled", "dead_lettered", "expired"})
TRANSIENT_STATUSES = frozenset({502, 503, 504})
# Answers whose Retry-After says when the server takes the request again: a rate limit, an overload.
THROTTLED_STATUSES = frozenset({429, 503})
MAX_BACKOFF_SECONDS = 4.0
# A longer Retry-After is not slept through: the call raises at once (RateLimited.retry_after says
# how long), since a client silently blocked for minutes looks hung; the caller decides.
MAX_RETRY_AFTER_SECONDS = 30.0
# Methods that change nothing, so sending one twice is as good as once; any other call is sent
# again only with an Idempotency-Key (the server answers a repeated key with its first answer).
SAFE_METHODS = frozenset({"GET", "HEAD"})
# Python keyword -> the API's field (body of POST /runs, or one item of a list of runs).
RUN_FIELDS = {
    "delay": "in",
    "at": "at",
    "queue": "queue",
    "priority": "priority",
    "max_attempts": "max_attempts",
    "timeout_seconds": "timeout_seconds",
    "idempotency_key": "idempotency_key",
    "project": "project",
}
TRIGGER_FIELDS = {"delay": "in", "at": "at", "config_override": "config_override"}  # POST /jobs/{id}/trigger
EXECUTION_FILTERS = ("status", "job", "queue", "task", "one_off", "since", "until")  # GET /executions
# A queue's settings (POST /queues, besides its name; PATCH /queues/{id}).
QUEUE_FIELDS = ("description", "concurrency_limit", "rate_limit", "priority")

T = TypeVar("T")
M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class Answer:
    """A response the server sent, read: its status, headers and JSON body (or text)."""

    status: int
    headers: Mapping[str, str]
    body: Any


def body_of(answer: Answer) -> Any:
    return answer.body


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: method, path (or a full URL), query, JSON body and headers; `parse` turns its
    answer into the method's result; `retry` says it is safe to send again (a read, or a POST with
    an Idempotency-Key, which the server answers once): a Call that says so otherwise is refused."""

    method: str
    path: str
    parse: Callable[[Answer], T] = body_of
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    retry: bool = False

    def __post_init__(self) -> None:
        if self.retry and self.method not in SAFE_METHODS and "Idempotency-Key" not in self.headers:
            raise ValueError(f"{self.method} {self.path} is not safe to send again without an Idempotency-Key")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list: its items and the Call of the next page (None on the last)."""

    items: list[T]
    next: Call[Page[T]] | None


@dataclass(frozen=True)
class Server:
    """Where the server is and what every request carries (the token)."""

    base_url: str
    headers: dict[str, str]

    @classmethod
    def at(cls, base_url: str, token: str | None, user_agent: str) -> Server:
        headers = {"Accept": "application/json", "User-Agent": user_agent}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return cls(base_url.rstrip("/"), headers)

    def url(self, call: Call[Any]) -> str:
        """The call's URL: a path (ours, or a `next` link the server sent) under the base URL."""
        if call.path.startswith(("http://", "https://")):
            return call.path
        return self.base_url + call.path


# --- answers -----------------------------------------------------------------------------------


def read(status: int, headers: Mapping[str, str], content: bytes) -> Answer:
    """The answer, or the exception its problem document describes (any status from 400)."""
    body: Any = None
    if content:
        try:
            body = json.loads(content)
        except ValueError:
            body = content.decode(errors="replace")
    if status >= 400:
        raise error_for(status, body, headers)
    return Answer(status, headers, body)


def retry_delay(
    call: Call[Any], attempt: int, retries: int, *, status: int | None = None, headers: Mapping[str, str] | None = None
) -> float | None:
    """Seconds to wait before sending `call` again after try number `attempt` (0 first) failed,
    or None to stop there. `status` is None when the connection failed (nothing, or no answer,
    came back). A call that is not safe to send twice is never sent again. Sent again: a 429 or
    503 after the Retry-After seconds it names (raised at once past MAX_RETRY_AFTER_SECONDS), a
    429 without one and a 502/503/504 after an exponential backoff, and the 409 of a key whose
    first request still runs (it says Retry-After). Every other answer stands."""
    if not call.retry or attempt >= retries:
        return None
    backoff = min(0.25 * 2.0**attempt, MAX_BACKOFF_SECONDS)
    if status is None:
        return backoff
    header = (headers or {}).get("Retry-After")
    retry_after = _retry_after_seconds(header)
    if status in THROTTLED_STATUSES and retry_after is not None:
        return retry_after if retry_after <= MAX_RETRY_AFTER_SECONDS else None
    if status == 429 or status in TRANSIENT_STATUSES:
        return backoff
    if status == 409 and header:
        return min(retry_after, MAX_BACKOFF_SECONDS) if retry_after is not None else backoff
    return None


def _retry_after_seconds(header: str | None) -> float | None:
    """A Retry-After header's delay in seconds (the form the server sends), or None when it is
    missing or not a number of seconds (an HTTP date is read as missing: the backoff applies)."""
    if not header:
        return None
    try:
        seconds = float(header)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def poll_delay(execution: Execution, *, timeout: float, remaining: float, poll: float) -> float | None:
    """`runs.wait`'s step: None once the run has ended, else the seconds to sleep before reading it
    again; RunTimeout when no time `remaining` of the `timeout`."""
    if execution.status in TERMINAL:
        return None
    if remaining <= 0:
        raise RunTimeout(execution, timeout)
    return min(poll, remaining)


def _model(kind: type[M]) -> Callable[[Answer], M]:
    return lambda answer: kind.from_dict(answer.body, etag=answer.headers.get("ETag"))


def _models(kind: type[M], key: str | None = None) -> Callable[[Answer], list[M]]:
    return lambda answer: [kind.from_dict(item) for item in (answer.body[key] if key else answer.body)]


def _key() -> dict[str, str]:
    """A fresh Idempotency-Key: the Call keeps it, so every try of one method call sends the same."""
    return {"Idempotency-Key": uuid.uuid4().hex}


def _query(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _body(names: Mapping[str, str], values: Mapping[str, Any]) -> dict[str, Any]:
    return {names[name]: value for name, value in values.items() if value is not None}


def _id(value: int | Model) -> int:
    """An object's id, from the id itself or the model read earlier."""
    if isinstance(value, Model):
        identifier = getattr(value, "id", None)
        if not isinstance(identifier, int):
            raise ValueError(f"{type(value).__name__} without an id")
        return identifier
    return value


def page(path: str, params: Mapping[str, Any], kind: type[M]) -> Call[Page[M]]:
    """GET one page of a list; its parser builds the Call of the next page from the `next` link."""

    def parse(answer: Answer) -> Page[M]:
        items = [kind.from_dict(item) for item in answer.body["items"]]
        following = answer.body.get("next")
        return Page(items, Call("GET", following, parse, retry=True) if following else None)

    return Call("GET", path, parse, params={name: _query(value) for name, value in params.items()}, retry=True)


# --- runs and executions -----------------------------------------------------------------------


def create_run(task: str, config: Mapping[str, Any] | None, **options: Any) -> Call[Execution]:
    """POST /runs with an Idempotency-Key, so a call sent again after a dropped connection is the
    same request: the server replays its first answer and never creates a second run."""
    body = {"task": task, "config": dict(config or {}), **_body(RUN_FIELDS, options)}
    return Call("POST", f"{API}/runs", _model(Execution), json=body, headers=_key(), retry=True)


def create_runs(runs: list[Mapping[str, Any]]) -> Call[list[Execution]]:
    """POST /runs with a list (the API's field names: task, config, in, ...), one transaction."""
    return Call(
        "POST", f"{API}/runs", _models(Execution, "items"), json=[dict(r) for r in runs], headers=_key(), retry=True
    )


def get_execution(execution_id: int) -> Call[Execution]:
    return Call("GET", f"{API}/executions/{execution_id}", _model(Execution), retry=True)


def explain_execution(execution_id: int) -> Call[ExecutionExplain]:
    return Call("GET", f"{API}/executions/{execution_id}/explain", _model(ExecutionExplain), retry=True)


def execution_output(execution_id: int) -> Call[Output]:
    return Call("GET", f"{API}/executions/{execution_id}/output", _model(Output), retry=True)


def execution_attempts(execution_id: int) -> Call[list[Attempt]]:
    return Call("GET", f"{API}/executions/{execution_id}/attempts", _models(Attempt), retry=True)


def list_executions(limit: int, **filters: Any) -> Call[Page[Execution]]:
    params = {name: value for name, value in filters.items() if value is not None}
    unknown = set(params) - set(EXECUTION_FILTERS)
    if unknown:
        raise TypeError(f"unknown filters: {', '.join(sorted(unknown))}")
    return page(f"{API}/executions", {**params, "limit": limit}, Execution)


# --- jobs --------------------------------------------------------------------------------------


def list_jobs(limit: int) -> Call[Page[Job]]:
    return page(f"{API}/jobs", {"limit": limit}, Job)


def get_job(job: int | Job) -> Call[Job]:
    return Call("GET", f"{API}/jobs/{_id(job)}", _model(Job), retry=True)


def create_job(fields: Mapping[str, Any]) -> Call[Job]:
    return Call("POST", f"{API}/jobs", _model(Job), json=dict(fields), headers=_key(), retry=True)


def _if_match(value: int | Model, if_match: str | None) -> dict[str, str]:
    """If-Match: the one given, else the ETag of the object passed (as read): a stale edit is a 412."""
    etag = if_match if if_match is not None else (value.etag if isinstance(value, Model) else None)
    return {"If-Match": etag} if etag else {}


def update_job(job: int | Job, fields: Mapping[str, Any], if_match: str | None) -> Call[Job]:
    headers = _if_match(job, if_match)
    return Call("PATCH", f"{API}/jobs/{_id(job)}", _model(Job), json=dict(fields), headers=headers)


def delete_job(job: int | Job, if_match: str | None) -> Call[None]:
    return Call("DELETE", f"{API}/jobs/{_id(job)}", lambda answer: None, headers=_if_match(job, if_match))


def trigger_job(job: int | Job, **options: Any) -> Call[Execution]:
    body = _body(TRIGGER_FIELDS, options)
    path = f"{API}/jobs/{_id(job)}/trigger"
    return Call("POST", path, _model(Execution), json=body or None, headers=_key(), retry=True)


def enable_job(job: int | Job) -> Call[Job]:
    return Call("POST", f"{API}/jobs/{_id(job)}/enable", _model(Job))


def disable_job(job: int | Job) -> Call[Job]:
    return Call("POST", f"{API}/jobs/{_id(job)}/disable", _model(Job))


# --- queues ------------------------------------------------------------------------------------


def _queue_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(QUEUE_FIELDS)
    if unknown:
        raise TypeError(f"unknown queue fields: {', '.join(sorted(unknown))} (known: {', '.join(QUEUE_FIELDS)})")
    return dict(fields)


def list_queues(limit: int) -> Call[Page[Queue]]:
    return page(f"{API}/queues", {"limit": limit}, Queue)


def get_queue(queue: int | Queue) -> Call[Queue]:
    return Call("GET", f"{API}/queues/{_id(queue)}", _model(Queue), retry=True)


def create_queue(name: str, fields: Mapping[str, Any]) -> Call[Queue]:
    """POST /queues: not sent again (the server takes no Idempotency-Key for it)."""
    settings = {key: value for key, value in _queue_fields(fields).items() if value is not None}
    return Call("POST", f"{API}/queues", _model(Queue), json={"name": name, **settings})


def update_queue(queue: int | Queue, fields: Mapping[str, Any], if_match: str | None) -> Call[Queue]:
    """PATCH /queues/{id}: the fields given, None included (a concurrency or rate limit of None
    removes it); If-Match as for jobs."""
    body = _queue_fields(fields)
    return Call("PATCH", f"{API}/queues/{_id(queue)}", _model(Queue), json=body, headers=_if_match(queue, if_match))


def delete_queue(queue: int | Queue) -> Call[None]:
    return Call("DELETE", f"{API}/queues/{_id(queue)}", lambda answer: None)


def pause_queue(queue: int | Queue, reason: str | None) -> Call[Queue]:
    body = {"reason": reason} if reason is not None else None
    return Call("POST", f"{API}/queues/{_id(queue)}/pause", _model(Queue), json=body)


def resume_queue(queue: int | Queue) -> Call[Queue]:
    return Call("POST", f"{API}/queues/{_id(queue)}/resume", _model(Queue))


def queue_stats(queue: int | Queue) -> Call[QueueStats]:
    return Call("GET", f"{API}/queues/{_id(queue)}/stats", _model(QueueStats), retry=True)


# --- job files and tasks -----------------------------------------------------------------------


def apply(document: Mapping[str, Any], *, dry_run: bool, prune: bool, project: str | None) -> Call[Plan]:
    """POST /projects/{org}/{project}/apply: the plan of a job file document (applied unless dry_run)."""
    name = project or document.get("project")
    if not name or "/" not in str(name):
        raise ValueError("name the project as ORG/PROJECT (the document's `project` or project=...)")
    org, _, proj = str(name).partition("/")
    body = {**document, "dry_run": dry_run, "prune": prune}
    return Call("POST", f"{API}/projects/{quote(org, safe='')}/{quote(proj, safe='')}/apply", _model(Plan), json=body)


def list_tasks() -> Call[list[Task]]:
    return Call("GET", f"{API}/tasks", _models(Task), retry=True)


def get_task(name: str) -> Call[Task]:
    return Call("GET", f"{API}/tasks/{quote(name, safe='')}", _model(Task), retry=True)
