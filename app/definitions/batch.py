"""Ad-hoc runs and batches: what an operator gives, declared once for the CLI, the web form and the API.

`RunSchema` is one ad-hoc run of a job: when (`in`, a duration from now, or `at`, an instant; neither:
now) and an optional `config_override` merged over the job's config. `BatchSchema` is a batch: its
`items` (a JSON list of config overrides, one run each) and an optional `on_complete` task with its
config. Both check overrides against the job's task with the same validation a job's config gets
(`app.tasks.validate_config` on the merged config), and a batch's items all-or-nothing: one bad item
refuses the whole batch, naming the items at fault. Errors stay keyed by field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load, validates_schema

from app.definitions.fields import JsonObject, OptionalTaskName, Text, TextLength, shown
from app.domain.run_times import past_run_time_problem
from app.scheduling import ScheduleError
from app.scheduling.durations import parse_interval
from app.scheduling.timezones import parse_instant
from app.tasks import TaskConfigError, UnknownTaskError, validate_config

MAX_BATCH_ITEMS = 10_000
MAX_DELAY = timedelta(days=3650)
ITEM_ERRORS_SHOWN = 5  # a refused batch names at most this many bad items


def merged_config(job_config: dict[str, Any] | None, override: dict[str, Any] | None) -> dict[str, Any]:
    """What a run's task gets: the job's config with the override's top-level keys over it."""
    return {**(job_config or {}), **(override or {})}


def check_override(task: str, job_config: dict[str, Any] | None, override: dict[str, Any] | None) -> None:
    """Refuse an override whose merged config does not fit the task (TaskConfigError)."""
    validate_config(task, merged_config(job_config, override))


class RunSchema(Schema):
    """One ad-hoc run. Construct with `now`, `task` and `job_config` (the job it runs)."""

    class Meta:
        unknown = EXCLUDE

    config_override = JsonObject(
        "config override",
        allow_none=True,
        metadata=shown(
            "Config override (JSON object)",
            "Keys merged over the job's config for this run only, checked against the task's schema.",
            metavar="JSON",
            form_widget="textarea",
        ),
    )
    run_in = Text(
        data_key="in",
        allow_none=True,
        validate=TextLength(max=64),
        metadata=shown("Run in", "Start after this delay (30s, 5m, 2h, 1d).", metavar="DURATION"),
    )
    run_at = Text(
        data_key="at",
        allow_none=True,
        validate=TextLength(max=64),
        metadata=shown("Run at", "Start at this instant (ISO 8601; no offset means UTC).", metavar="ISO"),
    )

    def __init__(
        self, *, now: datetime, task: str, job_config: dict[str, Any] | None, grace_seconds: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.now, self.task, self.job_config, self.grace_seconds = now, task, job_config, grace_seconds

    @validates_schema
    def _check(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors: dict[str, str] = {}
        if data.get("run_in") and data.get("run_at"):
            errors["at"] = "give a delay (in) or an instant (at), not both"
        elif data.get("run_in"):
            try:
                delay = parse_interval(data["run_in"])
            except (ScheduleError, ValueError) as exc:
                errors["in"] = str(exc)
            else:
                if delay > MAX_DELAY:
                    errors["in"] = "must be at most 3650 days"
        elif data.get("run_at"):
            try:
                at = parse_instant(data["run_at"], UTC, "at")
            except (ScheduleError, ValueError) as exc:
                errors["at"] = str(exc)
            else:
                if at > self.now + MAX_DELAY:
                    errors["at"] = "must be within 3650 days from now"
                elif problem := past_run_time_problem(at, now=self.now, grace_seconds=self.grace_seconds):
                    errors["at"] = problem
        if data.get("config_override"):
            try:
                check_override(self.task, self.job_config, data["config_override"])
            except (TaskConfigError, UnknownTaskError) as exc:
                errors["config_override"] = str(exc)
        if errors:
            raise ValidationError(errors)

    @post_load
    def _resolve(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """{"available_at": when it may start (None: now), "config_override": dict or None}. An
        instant up to the job's misfire grace ago means now (an earlier one was refused)."""
        available_at = None
        if data.get("run_in"):
            available_at = self.now + parse_interval(data["run_in"])
        elif data.get("run_at"):
            available_at = max(self.now, parse_instant(data["run_at"], UTC, "at"))
        return {"available_at": available_at, "config_override": data.get("config_override") or None}


class ItemList(fields.Field[list[dict[str, Any]]]):
    """A JSON list of JSON objects, given as a list or as JSON text."""

    kind = "json"
    default_error_messages = {"required": "is required"}

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        if isinstance(value, bytes | str):
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            if not text.strip():
                raise ValidationError("must be a JSON list of config overrides (objects), got nothing")
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValidationError(f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        if not isinstance(value, list):
            raise ValidationError(f"must be a JSON list of config overrides (objects), got {type(value).__name__}")
        if not value:
            raise ValidationError("must hold at least one item")
        if len(value) > MAX_BATCH_ITEMS:
            raise ValidationError(f"must hold at most {MAX_BATCH_ITEMS} items (got {len(value)})")
        return value


class BatchSchema(Schema):
    """A batch of one job. Construct with `task` and `job_config` (the job it runs)."""

    class Meta:
        unknown = EXCLUDE

    items = ItemList(
        required=True,
        metadata=shown(
            "Items (JSON list)",
            'A JSON list of config overrides, one run of the job each, e.g. [{"message": "a"}, {}].',
            metavar="FILE|-",
            form_widget="textarea",
        ),
    )
    on_complete = OptionalTaskName(
        metadata=shown(
            "On complete: run task",
            "A registered task run once every item has ended, with the batch's outcome under `parent`.",
            metavar="TASK",
        ),
    )
    on_complete_config = JsonObject(
        "on_complete_config",
        load_default=dict,
        metadata=shown("On complete: task config (JSON object)", "The on-complete task's config.", metavar="JSON"),
    )

    def __init__(self, *, task: str, job_config: dict[str, Any] | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task, self.job_config = task, job_config

    @validates_schema(skip_on_field_errors=False)
    def _check(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors: dict[str, str] = {}
        bad: list[str] = []
        count = 0
        for index, item in enumerate(data.get("items") or (), start=1):
            problem = _item_problem(self.task, self.job_config, item)
            if problem:
                count += 1
                if len(bad) < ITEM_ERRORS_SHOWN:
                    bad.append(f"item {index}: {problem}")
        if bad:
            more = f" (and {count - len(bad)} more)" if count > len(bad) else ""
            errors["items"] = f"{count} of {len(data['items'])} items refused, nothing stored: " + "; ".join(bad) + more
        if data.get("on_complete"):
            try:
                validate_config(data["on_complete"], data.get("on_complete_config") or {})
            except (TaskConfigError, UnknownTaskError) as exc:
                errors["on_complete_config"] = str(exc)
        elif data.get("on_complete_config"):
            errors["on_complete_config"] = "a config needs a task: give on_complete too"
        if errors:
            raise ValidationError(errors)


def _item_problem(task: str, job_config: dict[str, Any] | None, item: Any) -> str | None:
    if not isinstance(item, dict):
        return f"must be a JSON object, got {type(item).__name__}"
    try:
        JsonObject("config override").deserialize(item)
        check_override(task, job_config, item)
    except ValidationError as exc:
        return "; ".join(map(str, exc.messages)) if isinstance(exc.messages, list) else str(exc.messages)
    except (TaskConfigError, UnknownTaskError) as exc:
        return str(exc)
    return None


def load_run(
    data: dict[str, Any], *, now: datetime, task: str, job_config: dict[str, Any] | None, grace_seconds: int = 0
) -> dict[str, Any]:
    """An ad-hoc run's {"available_at", "config_override"}; raises marshmallow's ValidationError.
    An `at` more than `grace_seconds` (the job's misfire grace) in the past is refused."""
    loaded: dict[str, Any] = RunSchema(now=now, task=task, job_config=job_config, grace_seconds=grace_seconds).load(
        {key: value for key, value in data.items() if value is not None and value != ""}
    )
    return loaded


def load_batch(data: dict[str, Any], *, task: str, job_config: dict[str, Any] | None) -> dict[str, Any]:
    """A batch's {"items", "on_complete", "on_complete_config"}; raises marshmallow's ValidationError."""
    loaded: dict[str, Any] = BatchSchema(task=task, job_config=job_config).load(
        {key: value for key, value in data.items() if value is not None}
    )
    return loaded
