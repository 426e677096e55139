"""A workflow's steps, declared once: what a job's `steps` holds and how it is checked.

Each step has a `name`, a registered `task` with its `config` (checked against the task's
schema), `after` (the names of the steps it waits for; none: a root) and, optionally, its own
`max_attempts`, `timeout_seconds` and `queue`. `load_steps` refuses a bad list with one message per
problem, each naming the step: an unknown task, a bad config, an unknown step in `after`, a cycle.
The graph rules themselves are pure (app/domain/workflow.py).
"""

from __future__ import annotations

import json
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from app.domain.workflow import GraphError, Node, check_graph
from app.tasks import TaskConfigError, UnknownTaskError, get_task, validate_config

STEP_NAME = r"^[a-z0-9][a-z0-9_-]{0,63}$"
MAX_STEPS = 100
QUEUE_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"


class StepSchema(Schema):
    """One step of a workflow."""

    class Meta:
        unknown = EXCLUDE

    name = fields.String(
        required=True,
        validate=validate.Regexp(STEP_NAME, error="must be 1-64 lower-case letters, digits, '_' or '-'"),
    )
    task = fields.String(required=True)
    config = fields.Dict(load_default=dict)
    after = fields.List(fields.String(), load_default=list)
    max_attempts = fields.Integer(strict=True, load_default=None, allow_none=True, validate=validate.Range(1, 100))
    timeout_seconds = fields.Integer(
        strict=True, load_default=None, allow_none=True, validate=validate.Range(1, 7 * 86400)
    )
    queue = fields.String(
        load_default=None, allow_none=True, validate=validate.Regexp(QUEUE_PATTERN, error="is not a queue name")
    )


_STEP = StepSchema()


def load_steps(value: Any) -> list[dict[str, Any]]:
    """A workflow's steps from a list (or its JSON text), checked; raises ValidationError with one
    message per problem, each naming the step (`step 'report': waits for unknown step 'exprot'`)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValidationError(f"must be a JSON list of steps: {exc}") from None
    if not isinstance(value, list) or not value:
        raise ValidationError("must be a non-empty list of steps")
    if len(value) > MAX_STEPS:
        raise ValidationError(f"at most {MAX_STEPS} steps, got {len(value)}")
    problems: list[str] = []
    steps: list[dict[str, Any]] = []
    for index, raw in enumerate(value):
        label = repr(raw.get("name")) if isinstance(raw, dict) and raw.get("name") else f"#{index + 1}"
        if not isinstance(raw, dict):
            problems.append(f"step {label}: must be an object")
            continue
        try:
            step = _STEP.load(raw)
        except ValidationError as exc:
            problems += [f"step {label}: {key}: {_first(message)}" for key, message in _flat(exc.messages)]
            continue
        try:
            step["task"] = get_task(step["task"]).name
            step["config"] = validate_config(step["task"], step["config"])
        except UnknownTaskError as exc:
            problems.append(f"step {label}: {exc}")
            continue
        except TaskConfigError as exc:
            problems.append(f"step {label}: config: {exc}")
            continue
        steps.append(step)
    if not problems:
        try:
            check_graph([Node(step["name"], tuple(step["after"])) for step in steps])
        except GraphError as exc:
            problems.append(str(exc))
    if problems:
        raise ValidationError(problems)
    return steps


def nodes_of(steps: list[dict[str, Any]]) -> list[Node]:
    """The graph of loaded steps."""
    return [Node(step["name"], tuple(step["after"])) for step in steps]


def _flat(messages: Any) -> list[tuple[str, Any]]:
    if isinstance(messages, dict):
        return [(str(key), value) for key, value in messages.items()]
    return [("step", messages)]


def _first(message: Any) -> str:
    while isinstance(message, (list, dict)):
        message = next(iter(message.values() if isinstance(message, dict) else message), "")
    return str(message)


class WorkflowSteps(fields.Raw):
    """A job's `steps`: a list of steps (or its JSON text), checked by `load_steps`; empty or null
    loads as None (not a workflow)."""

    kind = "json"
    default_error_messages = {"required": "is required"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_none=True, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[dict[str, Any]] | None:
        if value is None or (isinstance(value, str) and not value.strip()) or value == []:
            return None
        return load_steps(value)
