"""A one-off run: a task run now or later without a job, declared once for the CLI (`flask task
run`) and the API (`POST /api/v1/runs`).

Its fields are the job definition's own where a job has them (task, config, queue, priority,
max_attempts, timeout_seconds: the same types, limits and messages, copied from `JobSchema`) and
an ad-hoc run's timing (`in` or `at`, from `RunSchema`), plus `idempotency_key` (a second run
with the same key in the same project is the first one) and `project` (`ORG/PROJECT`). The
config is checked against the task's schema as a job's is. `MAX_RUNS_PER_REQUEST` bounds a list
of runs created at once.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, missing, post_load, validates_schema

from app.definitions.batch import RunSchema
from app.definitions.fields import Text, TextLength, printable, shown
from app.definitions.job import JobSchema
from app.tasks import TaskConfigError, UnknownTaskError, validate_config

MAX_RUNS_PER_REQUEST = 1000
IDEMPOTENCY_KEY_MAX = 150  # stored as `run:<project id>:<key>` in the 200-character column


def _job_field(name: str, *, optional: bool = False) -> Any:
    """The job definition's declaration of `name` (a copy: a field belongs to one schema);
    `optional` drops its default (the use case decides it, e.g. the queue's priority)."""
    field = copy.deepcopy(JobSchema._declared_fields[name])
    if optional:
        field.load_default = missing
        field.required = False
    return field


def _run_field(name: str) -> Any:
    return copy.deepcopy(RunSchema._declared_fields[name])


class OneOffRunSchema(Schema):
    """One one-off run. Construct with `now`. Loads to the run's fields, with `available_at`
    (None: now) in place of `in` / `at`."""

    class Meta:
        unknown = EXCLUDE

    task = _job_field("task")
    config = _job_field("config")
    run_in = _run_field("run_in")
    run_at = _run_field("run_at")
    queue = _job_field("queue")
    priority = _job_field("priority", optional=True)
    max_attempts = _job_field("max_attempts")
    timeout_seconds = _job_field("timeout_seconds", optional=True)
    idempotency_key = Text(
        allow_none=True,
        validate=[TextLength(min=1, max=IDEMPOTENCY_KEY_MAX), printable],
        metadata=shown(
            "Idempotency key",
            "A second run with this key in the same project is not created: the first one is returned.",
            metavar="KEY",
        ),
    )
    project = Text(
        allow_none=True,
        validate=TextLength(max=200),
        metadata=shown("Project", "ORG/PROJECT the run belongs to (default: the caller's project).", metavar="ORG/P"),
    )

    def __init__(self, *, now: datetime | None, **kwargs: Any) -> None:  # None: only to describe it
        super().__init__(**kwargs)
        self.now = now

    @validates_schema
    def _check(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors: dict[str, str] = {}
        timing = {key: data[name] for key, name in (("in", "run_in"), ("at", "run_at")) if data.get(name)}
        if timing:
            if self.now is None:
                raise ValueError("a run's timing is read against `now`")
            try:
                RunSchema(now=self.now, task=data.get("task") or "", job_config=None).load(timing)
            except ValidationError as exc:
                errors.update({key: str(_first(message)) for key, message in _messages(exc).items()})
        if data.get("task"):
            try:
                validate_config(data["task"], data.get("config") or {})
            except (TaskConfigError, UnknownTaskError) as exc:
                errors["config"] = str(exc)
        if errors:
            raise ValidationError(errors)

    @post_load
    def _resolve(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        timing = {key: data.pop(name) for key, name in (("in", "run_in"), ("at", "run_at")) if data.get(name)}
        data.pop("run_in", None)
        data.pop("run_at", None)
        data["available_at"] = None
        if timing and self.now is not None:
            data["available_at"] = RunSchema(now=self.now, task=data["task"], job_config=None).load(timing)[
                "available_at"
            ]
        data.setdefault("config", {})
        return data


def _messages(error: ValidationError) -> dict[str, Any]:
    return error.messages if isinstance(error.messages, dict) else {"_schema": error.messages}


def _first(message: Any) -> Any:
    while isinstance(message, list | tuple) and message:
        message = message[0]
    return message


def load_one_off(data: dict[str, Any], *, now: datetime) -> dict[str, Any]:
    """A one-off run's fields: task, config, available_at (None: now), queue, max_attempts, and
    when given priority, timeout_seconds (None: no limit), idempotency_key, project. Raises
    marshmallow's ValidationError keyed by field (the API's names: `in`, `at`, ...)."""
    if not isinstance(data, dict):
        raise ValidationError({"_schema": ["a run must be a JSON object"]})
    # As given: null is refused where the field may not be null (the published schema's rule),
    # and for the timeout it means no limit.
    loaded: dict[str, Any] = OneOffRunSchema(now=now).load(data)
    return loaded
