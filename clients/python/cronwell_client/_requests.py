"""What the sync and async clients share: building each request and reading each answer, so the
two differ only in how they send (httpx.Client or httpx.AsyncClient)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from cronwell_client.errors import error_for

TERMINAL = frozenset({"succeeded", "failed", "timed_out", "missed", "cancelled", "dead_lettered", "expired"})
RETRIED_STATUSES = frozenset({409, 502, 503, 504})  # 409: the same key's first request still runs


@dataclass(frozen=True)
class Call:
    """One request: method, path (under /api/v1), query, JSON body and headers."""

    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    retry: bool = False  # safe to send again (it carries an Idempotency-Key, or it reads)


def read(response: Any) -> Any:
    """The answer's JSON, or the exception its problem document describes."""
    body: Any
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = response.text
    if response.status_code >= 400:
        raise error_for(response.status_code, body, response.headers)
    return body


def run_call(
    task: str,
    config: dict[str, Any] | None,
    *,
    delay: str | None,
    at: str | None,
    queue: str | None,
    priority: int | None,
    max_attempts: int | None,
    timeout_seconds: int | None,
    idempotency_key: str | None,
    project: str | None,
) -> Call:
    """POST /runs with an Idempotency-Key, so a call sent again after a dropped connection is the
    same request: the server replays its first answer and never creates a second run."""
    body: dict[str, Any] = {"task": task, "config": config or {}}
    for name, value in (
        ("in", delay),
        ("at", at),
        ("queue", queue),
        ("priority", priority),
        ("max_attempts", max_attempts),
        ("timeout_seconds", timeout_seconds),
        ("idempotency_key", idempotency_key),
        ("project", project),
    ):
        if value is not None:
            body[name] = value
    return Call("POST", "/runs", json=body, headers={"Idempotency-Key": uuid.uuid4().hex}, retry=True)


def many_call(runs: list[dict[str, Any]]) -> Call:
    return Call("POST", "/runs", json=list(runs), headers={"Idempotency-Key": uuid.uuid4().hex}, retry=True)


def apply_call(document: dict[str, Any], *, dry_run: bool, prune: bool, project: str | None) -> Call:
    name = project or document.get("project")
    if not name or "/" not in str(name):
        raise ValueError("name the project as ORG/PROJECT (the document's `project` or project=...)")
    org, _, proj = str(name).partition("/")
    body = {**document, "dry_run": dry_run, "prune": prune}
    return Call("POST", f"/projects/{quote(org, safe='')}/{quote(proj, safe='')}/apply", json=body)


def list_params(**filters: Any) -> dict[str, Any]:
    params = {}
    for name, value in filters.items():
        if value is None:
            continue
        params[name] = ("true" if value else "false") if isinstance(value, bool) else value
    return params
